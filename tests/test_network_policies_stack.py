"""Who may connect to what, in every committed stack as the program registers it: each sender a workload depends
on reaches the port it uses, and nothing else gets in (CIS GKE Benchmark v1.9.0 4.3.2).

The senders are written here as upstream runs them, each with its source, not read off the policies under test:
Google's health checkers and the Gateway's proxies by their addresses, GKE's Prometheus collectors, the endpoint
picker and the workloads' own pods by their namespaces and labels. The policies are judged by policy/network.py,
as Dataplane V2 judges them.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

import pytest

from components import stack as stack_config
from components.workloads.serving.objects import endpoint_picker_labels
from harness.gke_network import Sender, admits
from policy.network import Pod, pod_templates, selects
from tests.conftest import FIXTURE_STACK_NAMES, run_stack, stack_values
from tools.render import kubernetes_objects

STACKS = FIXTURE_STACK_NAMES
SERVING_STACKS = [s for s in STACKS if stack_config.load(stack_values(s)).serving is not None]

# Google's health checkers (cloud.google.com/load-balancing/docs/firewall-rules: 35.191.0.0/16 and 130.211.0.0/22).
HEALTH_CHECKERS = ("35.191.200.7", "130.211.3.250")
# GKE's managed Prometheus collector, as GoogleCloudPlatform/prometheus-engine 2ffde4e manifests/operator.yaml runs it.
COLLECTOR = Pod("gmp-system", {"app.kubernetes.io/name": "collector", "app": "managed-prometheus-collector"})
# The endpoint picker's ports (llm-d-router v0.10.0 config/charts/routerlib: values.yaml extProcPort 9002,
# templates/_deployment.yaml grpc-health 9003 and metrics 9090), which router-values.yaml leaves to the chart.
EXT_PROC, PICKER_HEALTH, PICKER_METRICS = 9002, 9003, 9090
SOMEWHERE_ELSE = "203.0.113.77"  # TEST-NET-3: no range of any stack


@functools.cache
def _rendered(stack: str) -> tuple[dict[str, Any], ...]:
    return tuple(kubernetes_objects(run_stack(stack=stack).registrations))


def objects(stack: str) -> list[dict[str, Any]]:
    return list(_rendered(stack))


def policies(stack: str) -> list[dict[str, Any]]:
    return [o for o in objects(stack) if o["kind"] == "NetworkPolicy"]


def pods(stack: str) -> list[Pod]:
    """What the program's pod templates run: one Pod per template (the slice controller chart's included)."""
    return [t.pod for o in objects(stack) for t in pod_templates(o["kind"], o, o["metadata"]["name"])]


def pods_selected(stack: str, namespace: str, selector: dict[str, Any]) -> list[Pod]:
    found = [p for p in pods(stack) if p.namespace == namespace and selects(selector, p.labels)]
    assert found, f"{stack}: nothing in {namespace} matches {selector}"
    return found


def address_in(cidr: str) -> str:
    network = ipaddress.ip_network(cidr)
    return str(network[min(5, network.num_addresses - 1)])


def config(stack: str) -> stack_config.Stack:
    return stack_config.load(stack_values(stack))


def accepts(stack: str, pod: Pod, sender: Sender, port: int) -> bool:
    return admits(policies(stack), pod, sender, port)


# --- Every namespace with pods -------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_namespace_denies_ingress_by_default(stack: str) -> None:
    """A default deny in each namespace the program makes for its workloads; the slice controller's namespace
    keeps its chart's own policy (the manager's ports only)."""
    made = stack_config.workload_namespaces(config(stack).config)
    assert made
    denies = {
        p["metadata"]["namespace"]
        for p in policies(stack)
        if p["spec"]["podSelector"] == {} and p["spec"]["policyTypes"] == ["Ingress"] and not p["spec"].get("ingress")
    }
    assert denies == set(made)
    stranger = Sender(address=SOMEWHERE_ELSE)
    for pod in pods(stack):
        if pod.namespace in made:
            assert not accepts(stack, pod, stranger, 8000), pod


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_admits_every_address_or_an_unnamed_sender(stack: str) -> None:
    """In the workload namespaces (the slice controller chart's policy admits the API server's webhook calls from
    anywhere: tests/test_slice_controller_chart.py)."""
    made = stack_config.workload_namespaces(config(stack).config)
    for policy in (p for p in policies(stack) if p["metadata"]["namespace"] in made):
        for rule in policy["spec"].get("ingress") or []:
            assert rule.get("from"), f"{policy['metadata']['name']}: a rule without senders admits every one"
            for peer in rule["from"]:
                if "ipBlock" in peer:
                    assert ipaddress.ip_network(peer["ipBlock"]["cidr"]).prefixlen > 0, policy["metadata"]["name"]


# --- The senders of each workload ----------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_podmonitoring_port_is_admitted_from_the_collectors(stack: str) -> None:
    """Of the namespaces the program isolates (Kueue's PodMonitoring scrapes its chart's pods, whose namespace has
    no policy of the program's)."""
    made = stack_config.workload_namespaces(config(stack).config)
    monitorings = [o for o in objects(stack) if o["kind"] == "PodMonitoring" and o["metadata"]["namespace"] in made]
    for monitoring in monitorings:
        for pod in pods_selected(stack, monitoring["metadata"]["namespace"], monitoring["spec"]["selector"]):
            for endpoint in monitoring["spec"]["endpoints"]:
                port = endpoint["port"]
                number = pod.ports[port] if isinstance(port, str) else port
                assert accepts(stack, pod, Sender(pod=COLLECTOR), number), (monitoring["metadata"]["name"], pod)
    assert bool(monitorings) is (stack in SERVING_STACKS)  # the vLLM scrapes of the dashboards


@pytest.mark.parametrize("stack", SERVING_STACKS)
def test_the_gateway_and_its_health_checks_reach_the_pool_on_its_target_port(stack: str) -> None:
    built = config(stack)
    assert built.serving is not None
    namespace = built.config.serving.namespace
    values = built.serving.router_values
    (target,) = values["router"]["modelServers"]["targetPorts"]
    port = target["number"]
    proxy = address_in(built.config.network.proxy_only_cidr)
    leaders = pods_selected(stack, namespace, {"matchLabels": values["router"]["modelServers"]["matchLabels"]})
    assert {p.labels["llm-d.ai/role"] for p in leaders} == {"prefill", "decode"}
    for pod in leaders:
        for address in (proxy, *HEALTH_CHECKERS):
            assert accepts(stack, pod, Sender(address=address), port), (address, pod)
        assert not accepts(stack, pod, Sender(address=SOMEWHERE_ELSE), port)
        assert not accepts(stack, pod, Sender(address=proxy), 9100)  # the load balancer reaches the pool's port only


@pytest.mark.parametrize("stack", SERVING_STACKS)
def test_the_load_balancer_and_the_collectors_reach_the_endpoint_picker(stack: str) -> None:
    built = config(stack)
    picker = Pod(built.config.serving.namespace, endpoint_picker_labels())
    proxy = address_in(built.config.network.proxy_only_cidr)
    assert accepts(stack, picker, Sender(address=proxy), EXT_PROC)
    assert all(accepts(stack, picker, Sender(address=a), PICKER_HEALTH) for a in HEALTH_CHECKERS)
    assert accepts(stack, picker, Sender(pod=COLLECTOR), PICKER_METRICS)
    assert not accepts(stack, picker, Sender(address=SOMEWHERE_ELSE), EXT_PROC)
    assert not accepts(stack, picker, Sender(address=proxy), PICKER_METRICS)


@pytest.mark.parametrize("stack", SERVING_STACKS)
def test_the_model_servers_reach_each_other_on_any_port_and_the_picker_reads_their_metrics(stack: str) -> None:
    """Ray (6379 and the ports each host picks), the KV transfer (9100, 9600), the P/D sidecar to prefill (8000)."""
    built = config(stack)
    assert built.serving is not None
    namespace = built.config.serving.namespace
    servers = pods_selected(stack, namespace, {"matchExpressions": [{"key": "llm-d.ai/role", "operator": "Exists"}]})
    assert len(servers) == 4  # leader and worker of prefill and decode
    picker = Pod(namespace, endpoint_picker_labels())
    (target,) = built.serving.router_values["router"]["modelServers"]["targetPorts"]
    port = target["number"]
    for receiver in servers:
        for sender in servers:
            assert all(accepts(stack, receiver, Sender(pod=sender), p) for p in (6379, 8000, 9100, 9600, 10002, 19999))
        assert accepts(stack, receiver, Sender(pod=picker), port)
        assert not accepts(stack, receiver, Sender(pod=picker), 9100)
        # another namespace's pod that looks like a model server is no model server
        lookalike = Pod("default", dict(servers[0].labels))
        assert not accepts(stack, receiver, Sender(pod=lookalike), 9100)


@pytest.mark.parametrize("stack", SERVING_STACKS)
def test_the_jobs_that_only_call_out_accept_nothing(stack: str) -> None:
    """The weights-staging Job, and the benchmark Job `make bench` runs in the serving namespace."""
    namespace = config(stack).config.serving.namespace
    staging = pods_selected(stack, namespace, {"matchLabels": {"app.kubernetes.io/component": "weights-staging"}})
    benchmark = Pod(namespace, {"app.kubernetes.io/name": "serving-benchmark"})
    servers = pods_selected(stack, namespace, {"matchExpressions": [{"key": "llm-d.ai/role", "operator": "Exists"}]})
    for pod in (*staging, benchmark):
        for sender in (Sender(pod=servers[0]), Sender(pod=COLLECTOR), *(Sender(address=a) for a in HEALTH_CHECKERS)):
            assert not accepts(stack, pod, sender, 8000), (pod, sender)


@pytest.mark.parametrize("stack", [s for s in STACKS if config(s).checks is not None])
def test_the_hosts_of_a_slice_check_reach_each_other_and_nothing_else_reaches_them(stack: str) -> None:
    built = config(stack)
    assert built.checks is not None
    names = [j["metadata"]["name"] for j in built.checks.jobsets]
    by_check = {
        name: pods_selected(
            stack,
            built.checks.jobsets[0]["metadata"]["namespace"],
            {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": name}},
        )
        for name in names
    }
    for name, (pod,) in by_check.items():
        assert all(accepts(stack, pod, Sender(pod=pod), p) for p in (8476, 8471, 12345))  # the JAX coordinator, libtpu
        for other, (other_pod,) in by_check.items():
            if other != name:
                assert not accepts(stack, pod, Sender(pod=other_pod), 8476)
        assert not accepts(stack, pod, Sender(pod=COLLECTOR), 8476)


SAXML = [s for s in STACKS if config(s).saxml is not None]


@pytest.mark.parametrize("stack", SAXML)
def test_the_saxml_servers_reach_each_other_on_their_ports(stack: str) -> None:
    built = config(stack)
    assert built.saxml is not None
    namespace = built.config.saxml.namespace

    def one(deployment_or_jobset: dict[str, Any]) -> Pod:
        (template,) = pod_templates(deployment_or_jobset["kind"], deployment_or_jobset, "")
        return template.pod

    admin, model, http = (
        one(o) for o in (built.saxml.admin_deployment, built.saxml.model_server_jobset, built.saxml.http_deployment)
    )
    assert admin.namespace == model.namespace == http.namespace == namespace
    admin_port, model_port = admin.ports["admin"], model.ports["model"]
    for client in (model, http):  # they join the cell, and look up a model's servers
        assert accepts(stack, admin, Sender(pod=client), admin_port)
    for client in (admin, http):  # it loads models on them, and sends them requests
        assert accepts(stack, model, Sender(pod=client), model_port)
    assert all(accepts(stack, model, Sender(pod=model), p) for p in (model_port, model.ports["tpu-runtime"], 12345))
    assert not accepts(stack, admin, Sender(pod=admin), model_port)  # no server of the cell gets more than it uses
    assert not accepts(stack, http, Sender(pod=model), admin_port)
    assert not accepts(stack, admin, Sender(pod=Pod(namespace, {})), admin_port)


@pytest.mark.parametrize("stack", SAXML)
@pytest.mark.parametrize("cluster_clients", [True, False])
def test_the_sax_http_server_admits_exactly_what_its_load_balancer_admits(stack: str, cluster_clients: bool) -> None:
    overrides = {"saxml.http.clusterClients": cluster_clients, "saxml.http.sourceRanges": ["192.0.2.0/24"]}
    run = run_stack(overrides, stack=stack)
    rendered = kubernetes_objects(run.registrations)
    (service,) = [o for o in rendered if o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer"]
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == "sax-http"]
    (template,) = pod_templates("Deployment", deployment, "sax-http")
    server = template.pod
    port = server.ports[service["spec"]["ports"][0]["targetPort"]]
    found = [o for o in rendered if o["kind"] == "NetworkPolicy"]
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # the client's address reaches the pod
    for cidr in service["spec"]["loadBalancerSourceRanges"]:
        assert admits(found, server, Sender(address=address_in(cidr)), port), cidr
    assert not admits(found, server, Sender(address=SOMEWHERE_ELSE), port)
    assert not admits(found, server, Sender(address=address_in("192.0.2.0/24")), port + 1)
    in_cluster = Sender(pod=Pod("default", {"app": "sax-client"}))
    assert admits(found, server, in_cluster, port) is cluster_clients
