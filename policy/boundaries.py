"""Namespaces as administrative boundaries: the program keeps its objects in the namespaces it makes for each
concern, never in a namespace Kubernetes or GKE keeps for itself (the CIS controls held: policy/cis.yaml).

Who may act in a namespace is granted per namespace (RoleBindings, Pod Security labels, NetworkPolicies); an object
the program put in `kube-system` would share the boundary of the cluster's own controllers, one in `default` that
of whatever else lands there unnamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.resources import HELM_RELEASE_TYPES, get, kubernetes_objects, mapping_of

# Kubernetes' own namespaces (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces, "Initial
# namespaces") and the prefixes GKE keeps for its components (gke-managed-*, gke-gmp-system and gmp-system for
# Managed Service for Prometheus, gke-connect).
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
RESERVED_PREFIXES = ("kube-", "gke-", "gmp-")


def namespace_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """Every namespaced object a resource declares (itself, each object of a ConfigGroup) and every Helm release
    lives in a namespace of the program's own."""
    found: list[tuple[str, str]] = []
    if resource_type in HELM_RELEASE_TYPES:
        found.append((f"Helm release {name}", str(get(props, "namespace", "", owner=name) or "")))
    for obj in kubernetes_objects(resource_type, name, props):
        namespace = mapping_of(obj.body, "metadata", owner=name).get("namespace")
        if isinstance(namespace, str):
            found.append((f"{obj.kind} {obj.label}", namespace))
    return [
        f"{what} is in namespace {namespace!r}, which Kubernetes or GKE keeps for itself: put it in the namespace "
        "of its concern, which the program makes (CIS GKE 4.6.1)"
        for what, namespace in found
        if namespace in RESERVED_NAMESPACES or namespace.startswith(RESERVED_PREFIXES)
    ]
