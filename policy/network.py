"""Every pod the program runs is isolated by a NetworkPolicy of its own namespace (the CIS controls held:
policy/cis.yaml), and what a set of NetworkPolicies admits, as Kubernetes defines it.

A pod is isolated for ingress once a NetworkPolicy of its namespace selects it with Ingress among its
policyTypes (or none given); it then accepts what any such policy admits, and nothing else
(kubernetes/website a799505 content/en/docs/concepts/services-networking/network-policies.md). The program's
pods are those of its pod templates (Pods, Deployments, Jobs, JobSets, LeaderWorkerSets, ...), with the labels
the template gives them and those their controller adds; the pods of Helm releases (the controllers, the
endpoint picker) are their charts' and are not seen here.

Senders are judged as GKE Dataplane V2 (Cilium) sees them: a pod by its namespace and labels, anything else by
its address. An ipBlock never matches a pod of the cluster (cilium/cilium 012a3bf
Documentation/security/policy/language.rst, "IP/CIDR based": CIDR rules do not apply where both ends are
managed by Cilium), and the pod's own node is always admitted (network-policies.md above), so neither is a
sender here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.workloads.slice_checks.objects import JOBSET_NAME_LABEL
from policy.resources import Resource, Violation, kubernetes_objects, list_of, mapping_of, walk

NETWORK_POLICY = ("networking.k8s.io", "NetworkPolicy")
# The label the API server gives every namespace, its name (kubernetes/api d1ba325 core/v1/well_known_labels.go).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# The labels the JobSet controller adds to every pod: its JobSet's and its replicated job's names
# (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go, labelAndAnnotateObject).
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass(frozen=True)
class Pod:
    """What a NetworkPolicy sees of a pod: its namespace, labels and named container ports."""

    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, int] = field(default_factory=dict)  # container port name -> number


@dataclass(frozen=True)
class Sender:
    """Who opens a connection: a pod of the cluster, or an address outside it."""

    pod: Pod | None = None
    address: str = ""

    def __post_init__(self) -> None:
        if (self.pod is None) == (not self.address):
            raise ValueError("a sender is a pod or an address")


# A matchExpressions operator: whether (key, values) holds of the labels.
OPERATORS: dict[str, Callable[[str, Sequence[str], Mapping[str, str]], bool]] = {
    "In": lambda key, values, labels: key in labels and labels[key] in values,
    "NotIn": lambda key, values, labels: key not in labels or labels[key] not in values,
    "Exists": lambda key, _values, labels: key in labels,
    "DoesNotExist": lambda key, _values, labels: key not in labels,
}


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector against labels: every matchLabels pair and every matchExpressions term holds. An empty
    selector selects everything."""
    selector = selector or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        if term["operator"] not in OPERATORS:
            raise ValueError(f"unknown selector operator {term['operator']!r}")
        if not OPERATORS[term["operator"]](term["key"], term.get("values") or [], labels):
            return False
    return True


def policy_namespace(policy: Mapping[str, Any]) -> str:
    return str((policy.get("metadata") or {}).get("namespace") or "default")


def isolates(policy: Mapping[str, Any], pod: Pod) -> bool:
    """The policy selects the pod for ingress: Ingress among its policyTypes (or none given: Ingress implied), same
    namespace, its podSelector matches."""
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    ingress = not types or "Ingress" in types
    return ingress and policy_namespace(policy) == pod.namespace and selects(spec.get("podSelector"), pod.labels)


def peer_admits(peer: Mapping[str, Any], namespace: str, sender: Sender) -> bool:
    """One entry of a rule's ``from`` (of a policy in ``namespace``) admits the sender."""
    if "ipBlock" in peer:
        if sender.pod is not None:
            return False
        block = peer["ipBlock"]
        address = ipaddress.ip_address(sender.address)
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(cidr) for cidr in block.get("except") or [])
    if sender.pod is None:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {NAMESPACE_NAME_LABEL: sender.pod.namespace}):
            return False
    elif sender.pod.namespace != namespace:
        return False
    return selects(peer.get("podSelector"), sender.pod.labels)


def port_admits(ports: Sequence[Mapping[str, Any]] | None, pod: Pod, port: int, protocol: str = "TCP") -> bool:
    """A rule's ``ports`` admit ``port``/``protocol`` on the pod: none listed admits every port; a named port is
    the pod's container port of that name; endPort makes a range."""
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        value = entry.get("port")
        if value is None:
            return True
        number = pod.ports.get(value) if isinstance(value, str) else int(value)
        if number is not None and number <= port <= int(entry.get("endPort", number)):
            return True
    return False


def rule_admits(rule: Mapping[str, Any], namespace: str, pod: Pod, sender: Sender, port: int, protocol: str) -> bool:
    """One ingress rule: its ``from`` (none: every sender) and its ``ports`` both admit the connection."""
    peers = rule.get("from")
    if peers and not any(peer_admits(peer, namespace, sender) for peer in peers):
        return False
    return port_admits(rule.get("ports"), pod, port, protocol)


def admits(policies: Sequence[Mapping[str, Any]], pod: Pod, sender: Sender, port: int, protocol: str = "TCP") -> bool:
    """Whether the pod accepts the connection: not isolated, or some ingress rule of a policy isolating it admits
    it. Policies are additive: their order never matters."""
    isolating = [p for p in policies if isolates(p, pod)]
    if not isolating:
        return True
    return any(
        rule_admits(rule, policy_namespace(policy), pod, sender, port, protocol)
        for policy in isolating
        for rule in (policy.get("spec") or {}).get("ingress") or []
    )


@dataclass(frozen=True)
class PodTemplate:
    """The pods of one template of an object: where it is, and what a NetworkPolicy sees of them."""

    label: str  # how a message names it
    pod: Pod
    urn: str = ""
    # On the node's network (spec.hostNetwork): Kubernetes leaves NetworkPolicy undefined for such pods, and
    # Cilium (Dataplane V2) treats their traffic as the node's, which no policy selects (kubernetes/website a799505
    # content/en/docs/concepts/services-networking/network-policies.md, "NetworkPolicy and hostNetwork pods").
    host_network: bool = False


def pod_templates(kind: str, body: Mapping[str, Any], label: str, urn: str = "") -> Iterator[PodTemplate]:
    """Every pod template of an object, at any depth, with its labels (and those the JobSet controller adds to a
    JobSet's pods) and its named container ports."""
    metadata = mapping_of(body, "metadata", owner=label)
    namespace = str(metadata.get("namespace") or "default")
    for path, value in walk(body):
        if not path or not isinstance(value, Mapping) or not isinstance(value.get("containers"), Sequence):
            continue
        # A pod spec; its template is the mapping that holds it as "spec" (the object itself for a Pod).
        template = _at(body, path[:-1])
        labels = dict(mapping_of(template, "metadata.labels", owner=label))
        if kind == "JobSet" and path[:2] == ("spec", "replicatedJobs"):
            replicated = _at(body, path[:3])
            labels |= {JOBSET_NAME_LABEL: str(metadata.get("name", "")), REPLICATED_JOB_NAME_LABEL: replicated["name"]}
        ports = {
            str(port["name"]): int(port["containerPort"])
            for key in ("containers", "initContainers")
            for container in list_of(value, key, owner=label)
            for port in list_of(container, "ports", owner=label)
            if "name" in port
        }
        yield PodTemplate(
            f"{label} {'.'.join(path[:-1]) or '(the pod)'}",
            Pod(namespace, labels, ports),
            urn,
            host_network=value.get("hostNetwork") is True,
        )


def _at(body: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = body
    for part in path:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def program_pod_templates(resources: Sequence[Resource]) -> list[PodTemplate]:
    """Every pod template of the Kubernetes objects the resources declare (not of Helm releases)."""
    return [
        template
        for resource in resources
        for obj in kubernetes_objects(resource.type, resource.name, resource.props)
        if (obj.api_group, obj.kind) != NETWORK_POLICY
        for template in pod_templates(obj.kind, obj.body, obj.label, resource.urn)
    ]


def unisolated_pod_violations(resources: Sequence[Resource]) -> list[Violation]:
    """Each pod template whose pods no NetworkPolicy of their namespace isolates for ingress (pods on the node's
    network aside: no NetworkPolicy applies to them)."""
    objects = (obj for r in resources for obj in kubernetes_objects(r.type, r.name, r.props))
    policies = [obj.body for obj in objects if (obj.api_group, obj.kind) == NETWORK_POLICY]
    return [
        Violation(
            f"{template.label}: its pods in namespace {template.pod.namespace} accept connections from anywhere: "
            "no NetworkPolicy of that namespace selects them for ingress (CIS GKE 4.3.2); give the namespace a "
            "default-deny-ingress policy and admit their senders",
            template.urn,
        )
        for template in program_pod_templates(resources)
        if not template.host_network and not any(isolates(policy, template.pod) for policy in policies)
    ]
