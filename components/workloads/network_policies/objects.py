"""The default of each workload namespace: its default-deny-ingress NetworkPolicy (CIS GKE 4.3.2), pure Python.

The policies that admit each workload's senders are the workloads' own (network-policies.yaml beside each concern's
manifests, built by its objects.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from components import manifests

DEFAULT_DENY_FILE = "network-policies/default-deny-ingress.yaml"


@dataclass(frozen=True)
class NamespaceDefaultsObjects:
    default_deny: dict[str, dict[str, Any]]  # workload namespace -> its default-deny-ingress NetworkPolicy


def namespace_defaults_objects(namespaces: Iterable[str]) -> NamespaceDefaultsObjects:
    """One default-deny-ingress policy per workload namespace, each namespace once."""
    return NamespaceDefaultsObjects({namespace: default_deny_ingress(namespace) for namespace in namespaces})


def default_deny_ingress(namespace: str) -> dict[str, Any]:
    """The NetworkPolicy that selects every pod of ``namespace`` and admits nothing: what no other policy of the
    namespace admits is dropped."""
    return manifests.load_document(DEFAULT_DENY_FILE, namespace)
