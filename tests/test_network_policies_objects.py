"""The default of each workload namespace: a NetworkPolicy that selects every pod and admits nothing."""

from __future__ import annotations

from components.manifests import load_document
from components.workloads.network_policies.objects import (
    DEFAULT_DENY_FILE,
    default_deny_ingress,
    namespace_defaults_objects,
)
from harness.gke_network import Sender, admits
from policy.network import Pod
from tests.crd_schemas import core_errors


def test_the_default_deny_selects_every_pod_of_its_namespace_and_admits_nothing():
    policy = default_deny_ingress("work")
    assert policy["metadata"]["namespace"] == "work"
    assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    anyone = Pod("work", {"any": "label"})
    assert not admits([policy], anyone, Sender(pod=Pod("work", {})), 80)
    assert not admits([policy], anyone, Sender(address="10.0.0.1"), 80)
    assert admits([policy], Pod("elsewhere", {}), Sender(address="10.0.0.1"), 80)
    assert core_errors(policy) == []


def test_one_default_deny_per_namespace_and_the_base_as_it_is():
    namespaces = ["a", "b"]
    built = namespace_defaults_objects(namespaces)
    assert list(built.default_deny) == namespaces
    assert all(policy["metadata"]["namespace"] == name for name, policy in built.default_deny.items())
    assert default_deny_ingress("default") == load_document(DEFAULT_DENY_FILE)
