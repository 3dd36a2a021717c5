"""The alert policies and the Kueue metrics scrape as data: what each policy measures, for which
resources, with which thresholds; every policy's runbook; and every scrape object valid against its
pinned schema. Built from the tests' own stacks, their alerts on."""

from __future__ import annotations

import re
import typing
from typing import Any

import pytest

from components.operations import objects as alerting
from components.stack import StackConfig
from components.workloads.serving.config import GatewayClass
from harness import monitoring_model as world
from tests.conftest import run_stack, stack_config
from tests.crd_schemas import HALVES, strict_errors

# An alert is made only with its runbook (the program reads docs/runbooks/<key>.md into it), so the runbooks name them.
RUNBOOK_KEYS = sorted(path.stem for path in alerting.RUNBOOKS.glob("*.md"))
ALERTS_ON = {"alerts": {"enabled": True, "emails": ["oncall@example.com"]}}


@pytest.fixture(scope="module")
def dev() -> StackConfig:
    """The dev stack (dynamic slicing, its own Kueue, serving), with alerts."""
    return stack_config("dev", ALERTS_ON)


@pytest.fixture(scope="module")
def saxml() -> StackConfig:
    """The saxml stack (static 4x8 slices of two v5e pools, no dynamic slicing, no serving), with alerts."""
    return stack_config("saxml", ALERTS_ON)


def monitoring(config: StackConfig, alerts: dict[str, Any] | None = None, **blocks: Any) -> alerting.MonitoringObjects:
    """What the operations layer builds of ``config``, its alerts block updated by ``alerts`` and the blocks named
    in ``blocks`` replaced."""
    c = config.model_copy(update={**blocks, "alerts": config.alerts.model_copy(update=alerts or {})})
    objects = alerting.monitoring_objects(
        c.project, c.alerts, c.dashboards, c.cluster, c.tpu, c.platform, c.queues, c.serving, c.saxml
    )
    assert objects is not None
    return objects


def alerting_of(config: StackConfig, alerts: dict[str, Any] | None = None, **blocks: Any) -> list[dict[str, Any]]:
    made = monitoring(config, alerts, **blocks).alerts
    assert made is not None
    return made


def policies(config: StackConfig, alerts: dict[str, Any] | None = None, **blocks: Any) -> dict[str, dict[str, Any]]:
    """Every policy, the Gateway's (of any GKE Gateway) included, by key."""
    return by_key(alerting_of(config, alerts, **blocks))


def with_pools(config: StackConfig, *names: str) -> dict[str, Any]:
    """The tpu block with one pool named each of ``names`` (each like its first), for ``monitoring``'s ``blocks``."""
    pools = [config.tpu.pools[0].model_copy(update={"name": name}) for name in names]
    return {"tpu": config.tpu.model_copy(update={"pools": pools})}


def by_key(policies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {policy["key"]: policy for policy in policies}


def threshold(policy: dict[str, Any]) -> dict[str, Any]:
    (condition,) = policy["conditions"]
    found: dict[str, Any] = condition["condition_threshold"]
    return found


def test_when_everything_runs_every_runbook_s_alert_is_made_and_no_other(dev):
    assert sorted(policies(dev)) == RUNBOOK_KEYS


def test_without_kueue_serving_or_dynamic_slicing_only_the_node_and_pool_policies_are_made(dev, saxml):
    assert [p["key"] for p in alerting_of(saxml)] == ["tpu-node-not-ready", "tpu-pool-unavailable"]
    no_boards = {"dashboards": dev.dashboards.model_copy(update={"enabled": False})}
    without_kueue = dev.platform.model_copy(update={"install": False})
    assert monitoring(dev, platform=without_kueue, **no_boards).kueue_metrics is None
    objects = monitoring(dev, **no_boards)
    assert objects.kueue_metrics is not None, "the pending alert reads Kueue's scrape"
    assert objects.model_server_metrics is None and objects.dashboards == []


def promql(policy: dict[str, Any]) -> str:
    (condition,) = policy["conditions"]
    query: str = condition["condition_prometheus_query_language"]["query"]
    return query


def test_a_slice_away_from_active_pages_after_the_slice_controllers_own_recovery(dev):
    policy = policies(dev, {"slice_unhealthy_minutes": 12})["tpu-slice-unhealthy"]
    query = promql(policy)
    assert "kubernetes_io:accelerator_slice_state{" in query
    for matcher in ('monitored_resource="k8s_entity"', f'cluster_name="{dev.cluster.name}"', 'state!="ACTIVE"'):
        assert matcher in query
    assert query.endswith(" > 0"), "a state's series is 1 while the slice is in it, 0 otherwise"
    (condition,) = policy["conditions"]
    assert condition["condition_prometheus_query_language"]["duration"] == "720s"
    assert policy["severity"] == "CRITICAL"


def test_an_unhealthy_partition_of_the_stacks_pools_pages(dev):
    query = promql(policies(dev, **with_pools(dev, "tpu7-pool-1", "p2"))["tpu-partition-unhealthy"])
    assert "kubernetes_io:accelerator_partition_state{" in query
    assert 'node_pool_name=~"tpu7-pool-1|p2"' in query
    assert 'state=~"UNHEALTHY|DEGRADED|INCOMPLETE"' in query, "HEALTHY and UNSET are not incidents"


def test_a_multi_host_pool_not_available_pages_on_every_stack(saxml):
    made = policies(saxml)
    assert "tpu-slice-unhealthy" not in made and "tpu-partition-unhealthy" not in made
    query = promql(made["tpu-pool-unavailable"])
    assert query.startswith("min by (node_pool_name) (kubernetes_io:node_pool_multi_host_available{")
    pools = "|".join(pool.name for pool in saxml.tpu.pools)
    assert f'node_pool_name=~"{pools}"' in query and query.endswith(") == 0"), "the saxml stack's pools"


def test_the_node_policy_speaks_of_cubes_and_slice_objects_only_with_dynamic_slicing(dev, saxml):
    """A v5e stack has no cubes and no Slice objects to list: its slice is its pool's."""
    on_saxml = policies(saxml)["tpu-node-not-ready"]["documentation"]["content"]
    assert "its TPU slice is down (a multi-host slice: the whole pool)" in on_saxml
    assert "cube" not in on_saxml.split("\n")[0] and "get slices" not in on_saxml.split("\n")[0]
    assert "every slice on its cube is down" in policies(dev)["tpu-node-not-ready"]["documentation"]["content"]


def test_every_policy_carries_its_runbook_with_the_stacks_names_and_links_it(dev):
    for policy in policies(dev).values():
        content = policy["documentation"]["content"]
        assert alerting.runbook(policy["key"]) in content
        assert f"docs/runbooks/{policy['key']}.md" in content
        assert f"CLUSTER={dev.cluster.name}" in content and f"SERVING_NS={dev.serving.namespace}" in content
    linked = policies(dev, {"runbook_base_url": "https://example.com/r/"})["gateway-5xx"]
    assert "Runbook: https://example.com/r/gateway-5xx.md" in linked["documentation"]["content"]


@pytest.mark.parametrize("key", RUNBOOK_KEYS)
def test_every_runbook_says_what_it_means_the_first_three_commands_and_how_to_recover(key):
    text = alerting.runbook(key)
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections == ["What it means", "First three commands", "How to recover"]
    commands = text.split("## First three commands", 1)[1].split("## How to recover", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", commands, re.S)
    assert len(block.strip().splitlines()) == 3
    assert f"(`{key}`)" in text.splitlines()[0]


def test_the_node_policy_counts_not_ready_nodes_of_the_tpu_pools_only(dev):
    condition = threshold(policies(dev, **with_pools(dev, "tpu7-pool-1", "pool-2"))["tpu-node-not-ready"])
    clauses = condition["filter"].split(" AND ")
    assert 'metric.type="kubernetes.io/node/status_condition"' in clauses
    assert f'resource.labels.cluster_name="{dev.cluster.name}"' in clauses
    assert 'metric.labels.condition="Ready"' in clauses
    assert 'metric.labels.status!="True"' in clauses, "Unknown (a silent kubelet) counts as not Ready"
    (pools,) = [c for c in clauses if "gke-nodepool" in c]
    assert pools.endswith('monitoring.regex.full_match("tpu7-pool-1|pool-2")')
    assert condition["duration"] == "600s"
    assert (condition["comparison"], condition["threshold_value"]) == ("COMPARISON_GT", 0)


def test_thresholds_come_from_the_block(dev):
    made = policies(dev, {"node_not_ready_minutes": 7, "pending_minutes": 45, "model_server_restarts": 5})
    assert threshold(made["tpu-node-not-ready"])["duration"] == "420s"
    (pending,) = made["kueue-pending"]["conditions"]
    assert pending["condition_prometheus_query_language"]["duration"] == "2700s"
    assert threshold(made["model-server-restarts"])["threshold_value"] == 5
    ratio = dev.alerts.model_copy(update={"gateway_error_ratio": 0.2})
    assert threshold(policies(dev, {"gateway_error_ratio": 0.2})["gateway-5xx"])["threshold_value"] == 0.2
    (condition,) = alerting.gateway_conditions(ratio, "gke-l7-rilb", "um")
    assert condition["condition_threshold"]["threshold_value"] == 0.2


def test_the_pending_policy_reads_the_leaders_gauge_of_the_stacks_cluster_queue(dev):
    queues = dev.queues.model_copy(update={"cluster_queue_name": "tpu-cq"})
    (condition,) = policies(dev, queues=queues)["kueue-pending"]["conditions"]
    promql = condition["condition_prometheus_query_language"]
    assert re.fullmatch(r"sum by \(cluster_queue\) \(kueue_pending_workloads\{.*\}\) > 0", promql["query"])
    for selector in ('cluster_queue="tpu-cq"', 'replica_role="leader"', f'namespace="{dev.platform.kueue.namespace}"'):
        assert selector in promql["query"]
    assert promql["disable_metric_validation"] is True, "made before Kueue's first scrape"


def test_the_gateway_policy_is_a_5xx_share_of_the_gateways_own_url_map(dev):
    url_map = "gkegw1-abcd-llm-d-pd-disagg-llm-d-infer-0123456789ab"
    condition = threshold({"conditions": alerting.gateway_conditions(dev.alerts, "gke-l7-rilb", url_map)})
    assert condition["filter"] == condition["denominator_filter"] + " AND metric.labels.response_code_class=500"
    assert 'resource.labels.url_map_name="gkegw1-abcd-llm-d-pd-disagg-llm-d-infer-0123456789ab"' in condition["filter"]
    assert condition["aggregations"] == condition["denominator_aggregations"]
    assert condition["evaluation_missing_data"] == "EVALUATION_MISSING_DATA_INACTIVE", "no traffic is no incident"
    fallback = threshold(policies(dev)["gateway-5xx"])
    assert "gkegw1-" in fallback["filter"]
    assert fallback == threshold({"conditions": alerting.gateway_conditions(dev.alerts, "gke-l7-rilb", None)})


@pytest.mark.parametrize("gateway_class", typing.get_args(GatewayClass))
def test_the_gateway_policy_reads_what_its_classs_load_balancer_reports(gateway_class):
    """An external regional Gateway's requests are not the internal load balancer's metric: a policy reading that
    would never fire. Each class's condition names a metric of the model on a resource it is written against."""
    run = run_stack({"serving.gateway.className": gateway_class}, stack="prod")
    (policy,) = [p for p in run.of_type("gcp:monitoring/alertPolicy:AlertPolicy") if p.name == "alert-gateway-5xx"]
    (condition,) = policy.input("conditions")
    clauses = condition["conditionThreshold"]["denominatorFilter"].split(" AND ")
    (metric,) = [c.split("=", 1)[1].strip('"') for c in clauses if c.startswith("metric.type=")]
    (resource,) = [c.split("=", 1)[1].strip('"') for c in clauses if c.startswith("resource.type=")]
    assert resource == world.GATEWAY_CLASS_RESOURCES[gateway_class]
    assert resource in world.SYSTEM_METRICS[metric].resources
    assert "response_code_class" in world.SYSTEM_METRICS[metric].labels


@pytest.mark.parametrize(
    ("annotations", "url_map"),
    [
        ({alerting.URL_MAPS_ANNOTATION: "/projects/12/regions/us-central1/urlMaps/gkegw1-x"}, "gkegw1-x"),
        ({alerting.URL_MAPS_ANNOTATION: "/projects/12/regions/r/urlMaps/a, /projects/12/regions/r/urlMaps/b"}, "a"),
        ({}, None),
        (None, None),
    ],
)
def test_the_url_map_is_read_off_the_gateway(annotations, url_map):
    assert alerting.url_map_name(annotations) == url_map


def test_restarts_count_the_vllm_containers_of_the_serving_namespace(dev):
    condition = threshold(policies(dev)["model-server-restarts"])
    assert f'resource.labels.namespace_name="{dev.serving.namespace}"' in condition["filter"]
    assert 'monitoring.regex.full_match("vllm-leader|vllm-worker")' in condition["filter"]
    (aggregation,) = condition["aggregations"]
    assert (aggregation["per_series_aligner"], aggregation["alignment_period"]) == ("ALIGN_DELTA", "600s")


def test_every_policy_says_what_to_do_and_names_its_cluster(dev):
    for policy in policies(dev).values():
        assert policy["display_name"].startswith(f"{dev.cluster.name}: ")
        assert policy["severity"] in ("CRITICAL", "WARNING")
        assert "kubectl" in policy["documentation"]["content"]
        assert policy["user_labels"] == {"cluster": dev.cluster.name, "signal": policy["key"]}


@pytest.mark.parametrize("half", HALVES)
def test_the_kueue_scrape_objects_are_valid_and_in_kueues_namespace(half):
    objects = alerting.kueue_metrics_objects("kueue-ops")
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ClusterRoleBinding", "PodMonitoring", "Role", "RoleBinding", "Secret", "ServiceAccount"]
    for obj in objects:
        assert strict_errors(obj, half) == []
        if obj["kind"] != "ClusterRoleBinding":
            assert obj["metadata"]["namespace"] == "kueue-ops"
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kueue-metrics-scraper", "namespace": "kueue-ops"}
    ]
    (collector,) = [o for o in objects if o["kind"] == "RoleBinding"]
    assert collector["subjects"] == [{"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}]
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitoring"]
    (endpoint,) = monitor["spec"]["endpoints"]
    (token,) = [o for o in objects if o["kind"] == "Secret"]
    assert endpoint["authorization"]["credentials"]["secret"]["name"] == token["metadata"]["name"]
    assert endpoint["port"] == "metrics" and endpoint["scheme"] == "https"
    (keep,) = endpoint["metricRelabeling"]
    assert re.fullmatch(keep["regex"], "kueue_pending_workloads")
    assert re.fullmatch(keep["regex"], "kueue_cluster_queue_nominal_quota")
    assert not re.fullmatch(keep["regex"], "kueue_build_info"), "only what is read is ingested"


def test_a_name_that_would_need_escaping_is_refused(dev):
    with pytest.raises(ValueError, match="is not a pool"):
        alerting_of(dev, **with_pools(dev, 'pool"1', "pool-2"))
