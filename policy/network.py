"""Every pod the program runs is isolated by a NetworkPolicy of its own namespace (the CIS controls held:
policy/cis.yaml).

A pod is isolated for ingress once a NetworkPolicy of its namespace selects it with Ingress among its
policyTypes (or none given); it then accepts what any such policy admits, and nothing else
(kubernetes/website a799505 content/en/docs/concepts/services-networking/network-policies.md). The program's
pods are those of its pod templates (Pods, Deployments, Jobs, JobSets, LeaderWorkerSets, ...), with the labels
the template gives them and those their controller adds; the pods of Helm releases (the controllers, the
endpoint picker) are their charts' and are not seen here. What the policies then admit, sender by sender, is the
harness's model (harness/gke_network.py), on this module's selection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.config_base import walk
from components.workloads.slice_checks.objects import JOBSET_NAME_LABEL
from policy.resources import Resource, Violation, kubernetes_objects, list_of, mapping_of

NETWORK_POLICY = ("networking.k8s.io", "NetworkPolicy")
# The labels the JobSet controller adds to every pod: its JobSet's and its replicated job's names
# (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go, labelAndAnnotateObject).
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass(frozen=True)
class Pod:
    """What a NetworkPolicy sees of a pod: its namespace, labels and named container ports."""

    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, int] = field(default_factory=dict)  # container port name -> number


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
    values = dict(walk(body))  # path -> the value there
    for path, value in values.items():
        if not path or not isinstance(value, Mapping) or not isinstance(value.get("containers"), Sequence):
            continue
        # A pod spec; its template is the mapping that holds it as "spec" (the object itself for a Pod).
        template = values[path[:-1]]
        labels = dict(mapping_of(template, "metadata.labels", owner=label))
        if kind == "JobSet" and path[:2] == ("spec", "replicatedJobs"):
            replicated = values[path[:3]]
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
