"""The rules of operating a stack: the TPU upgrade policy of a serving stack and the protections
of a production stack, each refused under the key that fixes it before any resource exists."""

import pytest

from components.config_base import ConfigError
from components.stack import load
from tests.conftest import assert_bad_input, run_stack, stack_values, with_overrides
from tests.test_gcp_existing_cluster import LAB

NO_WINDOW = {"cluster.maintenanceWindow": None}

ALERTS_ON = {"alerts.enabled": True, "alerts.emails": ["oncall@example.com"]}

OPERATIONS_BAD_INPUTS = [
    pytest.param(
        {"alerts.enabled": False}, "prod", "alerts.enabled", "is false on a production stack", id="prod-no-alerts"
    ),
    pytest.param({"alerts.emails": []}, "prod", "alerts.emails", "no one is notified", id="alerts-to-no-one"),
    pytest.param(
        {"alerts.emails": ["oncall"]}, "prod", "alerts.emails[0]", "'oncall' is not an email address", id="bad-email"
    ),
    pytest.param(
        {"alerts.notificationChannels": ["pagerduty"]},
        "prod",
        "alerts.notificationChannels[0]",
        "is not a notification channel name",
        id="bad-channel",
    ),
    pytest.param(
        {"alerts.nodeNotReadyMinutes": 2}, "prod", "alerts.nodeNotReadyMinutes", "outside 5-1440", id="node-2min"
    ),
    pytest.param({"alerts.pendingMinutes": 0}, "prod", "alerts.pendingMinutes", "outside 5-10080", id="pending-0"),
    pytest.param({"alerts.gatewayErrorRatio": 1.5}, "prod", "alerts.gatewayErrorRatio", "not a share", id="ratio"),
    pytest.param({"alerts.modelServerRestarts": 0}, "prod", "alerts.modelServerRestarts", "page always", id="restarts"),
    pytest.param(
        {"alerts.sliceUnhealthyMinutes": 5},
        "prod",
        "alerts.sliceUnhealthyMinutes",
        "below the slice controller's activation timeout",
        id="slice-5min",
    ),
    pytest.param(
        {"alerts.runbookBaseUrl": "docs/runbooks"},
        "prod",
        "alerts.runbookBaseUrl",
        "not an https:// URL",
        id="runbooks",
    ),
    pytest.param(
        {**LAB, **ALERTS_ON}, "dev", "alerts.enabled", "a cluster made elsewhere", id="alerts-on-existing-cluster"
    ),
    pytest.param(
        NO_WINDOW, "dev", "cluster.maintenanceWindow", "is not set on a stack that serves", id="vllm-no-window"
    ),
    pytest.param(
        NO_WINDOW, "saxml", "cluster.maintenanceWindow", "is not set on a stack that serves", id="sax-no-window"
    ),
    pytest.param(
        {"cluster.deletionProtection": False},
        "prod",
        "cluster.deletionProtection",
        "is false on a production stack",
        id="prod-unprotected-cluster",
    ),
    pytest.param(
        {"tpu.protectPools": False}, "prod", "tpu.protectPools", "is false on a production stack", id="prod-pools"
    ),
    pytest.param(
        {"serving.enabled": False, "cluster.maintenanceWindow": None, "cluster.maintenanceExclusions": []},
        "prod",
        "cluster.maintenanceWindow",
        "is not set on a production stack",
        id="prod-no-window",
    ),
    pytest.param(
        {"cluster.systemPool.nodesPerZone": 1},
        "prod",
        "cluster.systemPool.nodesPerZone",
        "1 on a production stack",
        id="prod-one-system-node",
    ),
    pytest.param(
        {"platform.kueueController.replicas": 1},
        "prod",
        "platform.kueueController.replicas",
        "its fail-closed webhooks refuse every workload create",
        id="prod-one-kueue",
    ),
    pytest.param(
        {"platform.sliceController.replicas": 1},
        "prod",
        "platform.sliceController.replicas",
        "1 on a production stack",
        id="prod-one-slice-controller",
    ),
]


@pytest.mark.parametrize("override, stack, key, fragment", OPERATIONS_BAD_INPUTS)
def test_bad_operations_input_names_its_key_and_registers_nothing(override, stack, key, fragment):
    assert_bad_input(override, key, fragment, stack=stack)


def test_every_protection_off_is_listed_at_once():
    raw = with_overrides(stack_values("dev"), {"production": True, "platform.sliceController.replicas": 1})
    with pytest.raises(ConfigError) as raised:
        load(raw)
    keys = {p.key for p in raised.value.problems}
    assert {
        "cluster.deletionProtection",
        "tpu.protectPools",
        "cluster.systemPool.nodesPerZone",
        "platform.sliceController.replicas",
    } <= keys, raised.value


def test_a_stack_that_serves_nothing_needs_no_window():
    run = run_stack({**NO_WINDOW, "serving.enabled": False})
    assert "maintenancePolicy" not in run.one("gcp:container/cluster:Cluster", "gke-cluster").inputs


def test_a_cluster_made_elsewhere_keeps_its_own_maintenance_policy():
    run = run_stack({**LAB, **NO_WINDOW}, secrets=("cluster",))
    assert not [r for r in run.registrations if r.type.startswith("gcp:")]


def test_the_prod_stack_has_every_protection_on():
    run = run_stack(stack="prod")
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("deletionProtection") is True
    assert cluster.input("maintenancePolicy.recurringWindow.recurrence") == "FREQ=WEEKLY;BYDAY=SA,SU"
    (freeze,) = cluster.input("maintenancePolicy.maintenanceExclusions")
    assert freeze["exclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES"}
    pools = [r for r in run.of_type("gcp:container/nodePool:NodePool") if r.name != "system-pool"]
    assert len(pools) == 2 and all(pool.protect for pool in pools)
    assert run.one("gcp:container/nodePool:NodePool", "system-pool").input("nodeCount") == 2
