"""What a set of NetworkPolicies admits, as Kubernetes defines it and Dataplane V2 judges a sender (the harness's
model, harness/gke_network.py), and which pods of an object a policy must isolate (policy/network.py). Each case is written from the API's definition
(kubernetes/website a799505 content/en/docs/concepts/services-networking/network-policies.md), not read off the
program's policies."""

from __future__ import annotations

from typing import Any

import pytest

from harness.gke_network import Sender, admits, port_admits
from policy.network import Pod, isolates, pod_templates, selects, unisolated_pod_violations
from policy.resources import Resource

WEB = Pod("apps", {"app": "web", "tier": "front"}, {"http": 8080})
CLIENT = Pod("apps", {"app": "client"})
OTHER_NAMESPACE_CLIENT = Pod("tools", {"app": "client"})


def policy(namespace: str = "apps", selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"podSelector": selector if selector is not None else {"matchLabels": {"app": "web"}}, **spec},
    }


DENY_ALL = policy(selector={}, policyTypes=["Ingress"])


@pytest.mark.parametrize(
    "selector, selected",
    [
        ({}, True),
        (None, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ],
)
def test_label_selectors(selector: dict[str, Any] | None, selected: bool) -> None:
    assert selects(selector, WEB.labels) is selected


def test_an_unknown_selector_operator_is_an_error_not_a_match() -> None:
    with pytest.raises(ValueError, match="Gt"):
        selects({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"})


def test_a_pod_no_policy_selects_accepts_everything_and_a_selected_one_only_what_is_admitted() -> None:
    assert admits([], WEB, Sender(address="198.51.100.1"), 8080)
    assert admits([policy(namespace="tools")], WEB, Sender(address="198.51.100.1"), 8080)  # another namespace's
    assert not admits([DENY_ALL], WEB, Sender(pod=CLIENT), 8080)
    allow = policy(ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}])
    assert admits([DENY_ALL, allow], WEB, Sender(pod=CLIENT), 8080)  # additive: the order never matters
    assert admits([allow, DENY_ALL], WEB, Sender(pod=CLIENT), 8080)


@pytest.mark.parametrize(
    "policy_types, isolated",
    [(None, True), (["Ingress"], True), (["Ingress", "Egress"], True), (["Egress"], False)],
)
def test_only_an_ingress_policy_isolates_for_ingress(policy_types: list[str] | None, isolated: bool) -> None:
    spec = {"policyTypes": policy_types} if policy_types else {}
    assert isolates(policy(**spec), WEB) is isolated


@pytest.mark.parametrize(
    "peer, sender, admitted",
    [
        # a podSelector alone: pods of the policy's own namespace
        ({"podSelector": {"matchLabels": {"app": "client"}}}, Sender(pod=CLIENT), True),
        ({"podSelector": {"matchLabels": {"app": "client"}}}, Sender(pod=OTHER_NAMESPACE_CLIENT), False),
        # a namespaceSelector: every pod of the namespaces it selects, by the name label the API server sets
        ({"namespaceSelector": {}}, Sender(pod=OTHER_NAMESPACE_CLIENT), True),
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}}}, Sender(pod=CLIENT), False),
        (
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}},
                "podSelector": {"matchLabels": {"app": "other"}},
            },
            Sender(pod=OTHER_NAMESPACE_CLIENT),
            False,
        ),
        # an ipBlock: addresses outside the cluster, never a pod (Dataplane V2 knows a pod by its identity)
        ({"ipBlock": {"cidr": "10.0.0.0/8"}}, Sender(address="10.1.2.3"), True),
        ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}, Sender(address="10.1.2.3"), False),
        ({"ipBlock": {"cidr": "10.0.0.0/8"}}, Sender(address="11.1.2.3"), False),
        ({"ipBlock": {"cidr": "0.0.0.0/0"}}, Sender(pod=CLIENT), False),
        ({"podSelector": {}}, Sender(address="10.1.2.3"), False),
    ],
)
def test_who_a_peer_admits(peer: dict[str, Any], sender: Sender, admitted: bool) -> None:
    rule = policy(ingress=[{"from": [peer]}])
    assert admits([rule], WEB, sender, 8080) is admitted


def test_a_rule_without_senders_admits_every_one() -> None:
    rule = policy(ingress=[{"ports": [{"port": 8080}]}])
    assert admits([rule], WEB, Sender(address="203.0.113.9"), 8080)
    assert admits([rule], WEB, Sender(pod=OTHER_NAMESPACE_CLIENT), 8080)
    assert not admits([rule], WEB, Sender(address="203.0.113.9"), 9090)


@pytest.mark.parametrize(
    "ports, port, protocol, admitted",
    [
        (None, 1, "TCP", True),
        ([{"port": 8080}], 8080, "TCP", True),  # TCP unless said otherwise
        ([{"port": 8080}], 8080, "UDP", False),
        ([{"port": 8080, "protocol": "UDP"}], 8080, "UDP", True),
        ([{"port": "http"}], 8080, "TCP", True),  # a name: the destination pod's container port
        ([{"port": "metrics"}], 8080, "TCP", False),  # a name the pod does not have admits nothing
        ([{"port": 8000, "endPort": 8100}], 8080, "TCP", True),
        ([{"port": 8000, "endPort": 8050}], 8080, "TCP", False),
        ([{"protocol": "TCP"}], 12345, "TCP", True),  # no port: every port of the protocol
    ],
)
def test_which_ports_a_rule_admits(
    ports: list[dict[str, Any]] | None, port: int, protocol: str, admitted: bool
) -> None:
    assert port_admits(ports, WEB, port, protocol) is admitted


def test_a_sender_is_a_pod_or_an_address() -> None:
    with pytest.raises(ValueError, match="a pod or an address"):
        Sender()
    with pytest.raises(ValueError, match="a pod or an address"):
        Sender(pod=CLIENT, address="10.0.0.1")


# --- The pods of an object ------------------------------------------------------------------------


def test_the_pod_templates_of_a_jobset_carry_the_labels_its_controller_adds() -> None:
    jobset = {
        "metadata": {"name": "check", "namespace": "work"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "template": {
                        "spec": {
                            "template": {
                                "metadata": {"labels": {"own": "label"}},
                                "spec": {
                                    "containers": [{"name": "c", "ports": [{"name": "coord", "containerPort": 8476}]}]
                                },
                            }
                        }
                    },
                }
            ]
        },
    }
    (template,) = pod_templates("JobSet", jobset, "JobSet check")
    assert template.pod == Pod(
        "work",
        {
            "own": "label",
            "jobset.sigs.k8s.io/jobset-name": "check",
            "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        },
        {"coord": 8476},
    )
    assert template.label == "JobSet check spec.replicatedJobs.0.template.spec.template"


def test_a_leaderworkerset_has_a_template_per_role_and_a_pod_is_its_own() -> None:
    lws = {
        "metadata": {"name": "s", "namespace": "n"},
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {"metadata": {"labels": {"role": "leader"}}, "spec": {"containers": []}},
                "workerTemplate": {"metadata": {"labels": {"role": "worker"}}, "spec": {"containers": []}},
            }
        },
    }
    assert [t.pod.labels for t in pod_templates("LeaderWorkerSet", lws, "s")] == [
        {"role": "leader"},
        {"role": "worker"},
    ]
    pod = {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"containers": []}}
    (template,) = pod_templates("Pod", pod, "p")
    assert template.pod == Pod("default", {"a": "b"})


def _resource(kind: str, body: dict[str, Any]) -> Resource:
    group = {"Deployment": "apps/v1", "NetworkPolicy": "networking.k8s.io/v1"}[kind]
    return Resource(f"kubernetes:{group}:{kind}", body["metadata"]["name"], body, urn=f"urn:{body['metadata']['name']}")


WEB_DEPLOYMENT = {
    "metadata": {"name": "web", "namespace": "apps"},
    "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}},
}


@pytest.mark.parametrize(
    "policies, isolated",
    [
        ([], False),
        ([DENY_ALL], True),
        ([policy()], True),  # any policy that selects the pods for ingress, without a rule
        ([policy(selector={"matchLabels": {"app": "db"}})], False),
        ([policy(namespace="tools", selector={})], False),  # a policy isolates the pods of its own namespace only
        ([policy(selector={}, policyTypes=["Egress"])], False),
    ],
)
def test_the_rule_wants_every_pod_isolated_in_its_namespace(policies: list[dict[str, Any]], isolated: bool) -> None:
    resources = [_resource("Deployment", WEB_DEPLOYMENT)]
    resources += [
        _resource("NetworkPolicy", {**p, "metadata": {**p["metadata"], "name": f"p{i}"}})
        for i, p in enumerate(policies)
    ]
    violations = unisolated_pod_violations(resources)
    assert (violations == []) is isolated
    if not isolated:
        (violation,) = violations
        assert violation.urn == "urn:web" and "web spec.template" in violation.message and "4.3.2" in violation.message


@pytest.mark.parametrize("host_network, flagged", [(True, False), (False, True), (None, True)])
def test_a_pod_on_the_nodes_network_is_not_asked_for_a_policy_none_would_apply_to(host_network, flagged) -> None:
    """NetworkPolicy is undefined for hostNetwork pods (Dataplane V2 treats their traffic as the node's): the rule asks
    a policy of every other pod, and of a pod that sets hostNetwork false or not at all."""
    spec = {"containers": [{"name": "c"}]} | ({} if host_network is None else {"hostNetwork": host_network})
    agent = {**WEB_DEPLOYMENT, "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}
    assert bool(unisolated_pod_violations([_resource("Deployment", agent)])) is flagged
