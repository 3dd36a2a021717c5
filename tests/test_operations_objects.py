"""The alert policies and the Kueue metrics scrape as data: what each policy measures, for which
resources, with which thresholds; every policy's runbook; and every scrape object valid against its
pinned schema."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from components.operations import objects as alerting
from components.operations.config import AlertsConfig, AlertsInput, alerts_input
from components.stack import StackConfig
from tests.crd_schemas import HALVES, strict_errors


def spec(**overrides: Any) -> AlertsInput:
    config = StackConfig(project="my-tpu-project")
    base = alerts_input(
        AlertsConfig(enabled=True, emails=["oncall@example.com"]),
        config.project,
        config.cluster,
        config.tpu,
        kueue_namespace="kueue-system",
        cluster_queue="cq",
        serving_namespace="llm-d-pd-disaggregation",
        model_server_containers=["vllm-leader", "vllm-worker"],
    )
    return dataclasses.replace(base, **overrides)


def by_key(policies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {policy["key"]: policy for policy in policies}


def threshold(policy: dict[str, Any]) -> dict[str, Any]:
    (condition,) = policy["conditions"]
    found: dict[str, Any] = condition["condition_threshold"]
    return found


def test_every_signal_has_a_policy_when_everything_runs():
    assert sorted(by_key(alerting.alert_policies(spec()))) == [
        "kueue-pending",
        "model-server-restarts",
        "tpu-node-not-ready",
        "tpu-partition-unhealthy",
        "tpu-pool-unavailable",
        "tpu-slice-unhealthy",
    ]
    assert alerting.gateway_errors(spec(), "um")["key"] == "gateway-5xx"
    assert sorted([*by_key(alerting.alert_policies(spec())), "gateway-5xx"]) == sorted(alerting.ALERT_KEYS)


def test_without_kueue_serving_or_dynamic_slicing_only_the_node_and_pool_policies_are_made():
    policies = alerting.alert_policies(
        spec(kueue_namespace=None, cluster_queue=None, serving_namespace=None, dynamic_slicing=False)
    )
    assert [p["key"] for p in policies] == ["tpu-node-not-ready", "tpu-pool-unavailable"]
    objects = alerting.monitoring_objects("my-tpu-project", spec(kueue_namespace=None), None, kueue_namespace=None)
    assert objects.kueue_metrics is None
    objects = alerting.monitoring_objects("my-tpu-project", spec(), None, kueue_namespace="kueue-system")
    assert objects.kueue_metrics is not None, "the pending alert reads Kueue's scrape"
    assert objects.model_server_metrics is None and objects.dashboards == []


def promql(policy: dict[str, Any]) -> str:
    (condition,) = policy["conditions"]
    query: str = condition["condition_prometheus_query_language"]["query"]
    return query


def test_a_slice_away_from_active_pages_after_the_slice_controllers_own_recovery():
    policy = by_key(alerting.alert_policies(spec(slice_unhealthy_minutes=12)))["tpu-slice-unhealthy"]
    query = promql(policy)
    assert "kubernetes_io:accelerator_slice_state{" in query
    for matcher in ('monitored_resource="k8s_entity"', 'cluster_name="qwen-serving-cluster"', 'state!="ACTIVE"'):
        assert matcher in query
    assert query.endswith(" > 0"), "a state's series is 1 while the slice is in it, 0 otherwise"
    (condition,) = policy["conditions"]
    assert condition["condition_prometheus_query_language"]["duration"] == "720s"
    assert policy["severity"] == "CRITICAL"


def test_an_unhealthy_partition_of_the_stacks_pools_pages():
    query = promql(
        by_key(alerting.alert_policies(spec(tpu_pool_names=["tpu7-pool-1", "p2"])))["tpu-partition-unhealthy"]
    )
    assert "kubernetes_io:accelerator_partition_state{" in query
    assert 'node_pool_name=~"tpu7-pool-1|p2"' in query
    assert 'state=~"UNHEALTHY|DEGRADED|INCOMPLETE"' in query, "HEALTHY and UNSET are not incidents"


def test_a_multi_host_pool_not_available_pages_on_every_stack():
    policies = by_key(alerting.alert_policies(spec(dynamic_slicing=False, tpu_pool_names=["tpu1", "tpu2"])))
    assert "tpu-slice-unhealthy" not in policies and "tpu-partition-unhealthy" not in policies
    query = promql(policies["tpu-pool-unavailable"])
    assert query.startswith("min by (node_pool_name) (kubernetes_io:node_pool_multi_host_available{")
    assert 'node_pool_name=~"tpu1|tpu2"' in query and query.endswith(") == 0")


def test_every_policy_carries_its_runbook_with_the_stacks_names_and_links_it():
    for policy in [*alerting.alert_policies(spec()), alerting.gateway_errors(spec(), "um")]:
        content = policy["documentation"]["content"]
        assert alerting.runbook(policy["key"]) in content
        assert f"docs/runbooks/{policy['key']}.md" in content
        assert "CLUSTER=qwen-serving-cluster" in content and "SERVING_NS=llm-d-pd-disaggregation" in content
    linked = alerting.gateway_errors(spec(runbook_base_url="https://example.com/r"), "um")
    assert "Runbook: https://example.com/r/gateway-5xx.md" in linked["documentation"]["content"]


@pytest.mark.parametrize("key", alerting.ALERT_KEYS)
def test_every_runbook_says_what_it_means_the_first_three_commands_and_how_to_recover(key):
    text = alerting.runbook(key)
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections == ["What it means", "First three commands", "How to recover"]
    commands = text.split("## First three commands", 1)[1].split("## How to recover", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", commands, re.S)
    assert len(block.strip().splitlines()) == 3
    assert f"(`{key}`)" in text.splitlines()[0]


def test_every_runbook_file_belongs_to_an_alert():
    assert sorted(path.stem for path in alerting.RUNBOOKS.glob("*.md")) == sorted(alerting.ALERT_KEYS)


def test_the_node_policy_counts_not_ready_nodes_of_the_tpu_pools_only():
    condition = threshold(
        by_key(alerting.alert_policies(spec(tpu_pool_names=["tpu7-pool-1", "pool-2"])))["tpu-node-not-ready"]
    )
    clauses = condition["filter"].split(" AND ")
    assert 'metric.type="kubernetes.io/node/status_condition"' in clauses
    assert 'resource.labels.cluster_name="qwen-serving-cluster"' in clauses
    assert 'metric.labels.condition="Ready"' in clauses
    assert 'metric.labels.status!="True"' in clauses, "Unknown (a silent kubelet) counts as not Ready"
    (pools,) = [c for c in clauses if "gke-nodepool" in c]
    assert pools.endswith('monitoring.regex.full_match("tpu7-pool-1|pool-2")')
    assert condition["duration"] == "600s"
    assert (condition["comparison"], condition["threshold_value"]) == ("COMPARISON_GT", 0)


def test_thresholds_come_from_the_block():
    policies = by_key(
        alerting.alert_policies(spec(node_not_ready_minutes=7, pending_minutes=45, model_server_restarts=5))
    )
    assert threshold(policies["tpu-node-not-ready"])["duration"] == "420s"
    (pending,) = policies["kueue-pending"]["conditions"]
    assert pending["condition_prometheus_query_language"]["duration"] == "2700s"
    assert threshold(policies["model-server-restarts"])["threshold_value"] == 5
    assert threshold(alerting.gateway_errors(spec(gateway_error_ratio=0.2), "um"))["threshold_value"] == 0.2


def test_the_pending_policy_reads_the_leaders_gauge_of_the_stacks_cluster_queue():
    (condition,) = by_key(alerting.alert_policies(spec(cluster_queue="tpu-cq")))["kueue-pending"]["conditions"]
    promql = condition["condition_prometheus_query_language"]
    assert re.fullmatch(r"sum by \(cluster_queue\) \(kueue_pending_workloads\{.*\}\) > 0", promql["query"])
    for selector in ('cluster_queue="tpu-cq"', 'replica_role="leader"', 'namespace="kueue-system"'):
        assert selector in promql["query"]
    assert promql["disable_metric_validation"] is True, "made before Kueue's first scrape"


def test_the_gateway_policy_is_a_5xx_share_of_the_gateways_own_url_map():
    condition = threshold(alerting.gateway_errors(spec(), "gkegw1-abcd-llm-d-pd-disagg-llm-d-infer-0123456789ab"))
    assert condition["filter"] == condition["denominator_filter"] + " AND metric.labels.response_code_class=500"
    assert 'resource.labels.url_map_name="gkegw1-abcd-llm-d-pd-disagg-llm-d-infer-0123456789ab"' in condition["filter"]
    assert condition["aggregations"] == condition["denominator_aggregations"]
    assert condition["evaluation_missing_data"] == "EVALUATION_MISSING_DATA_INACTIVE", "no traffic is no incident"
    fallback = threshold(alerting.gateway_errors(spec(), None))
    assert "gkegw1-" in fallback["filter"]


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


def test_restarts_count_the_vllm_containers_of_the_serving_namespace():
    condition = threshold(by_key(alerting.alert_policies(spec()))["model-server-restarts"])
    assert 'resource.labels.namespace_name="llm-d-pd-disaggregation"' in condition["filter"]
    assert 'monitoring.regex.full_match("vllm-leader|vllm-worker")' in condition["filter"]
    (aggregation,) = condition["aggregations"]
    assert (aggregation["per_series_aligner"], aggregation["alignment_period"]) == ("ALIGN_DELTA", "600s")


def test_every_policy_says_what_to_do_and_names_its_cluster():
    for policy in [*alerting.alert_policies(spec()), alerting.gateway_errors(spec(), "um")]:
        assert policy["display_name"].startswith("qwen-serving-cluster: ")
        assert policy["severity"] in ("CRITICAL", "WARNING")
        assert "kubectl" in policy["documentation"]["content"]
        assert policy["user_labels"] == {"cluster": "qwen-serving-cluster", "signal": policy["key"]}


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


def test_a_name_that_would_need_escaping_is_refused():
    with pytest.raises(ValueError, match="is not a pool"):
        alerting.alert_policies(spec(tpu_pool_names=['pool"1']))
