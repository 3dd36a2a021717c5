"""The harness's model of the metrics the stack reads, as the world writes them: which producer exports each
Prometheus series of the program's list (components/operations/metric_catalog.py: its name, kind and the scrape that
keeps it) and the labels it carries, at the version the stack runs; and the GKE system metrics Cloud Monitoring
writes. The program reads none of this; the tests hold its list and every dashboard and alert query against it
(tests/test_operations_dashboards.py). Sources:

- **vLLM** (the model servers): ``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``. The serving image
  ``vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26`` is tpu-inference ``18ed615`` built on vLLM
  ``5b39b268f506150dbab38f6f6c04b7c843e37c07`` (tpu-inference ``.buildkite/scripts/publish_nightly_image.sh`` names its
  tags ``nightly-<date>-<tpu-inference sha>-<vllm sha>``, and ``.buildkite/vllm_lkg.version`` at ``18ed615`` is that
  vLLM commit). The metric names below are the same in the ``vllm-tpu`` 0.19.0, 0.20.0 and 0.21.0 wheels (PyPI), which
  bracket that commit of 2026-04-29: ``vllm:kv_cache_usage_perc`` (the ``gpu_cache_usage_perc`` alias is gone),
  ``vllm:inter_token_latency_seconds`` and ``vllm:request_time_per_output_token_seconds``
  (``time_per_output_token_seconds`` is gone). Labels ``model_name`` and ``engine``. vLLM serves them at ``/metrics`` on
  its API port.
- **The llm-d router's endpoint picker** (EPP): llm-d/llm-d-router v0.10.0 ``pkg/epp/metrics/llm_d_router_metrics.go``
  (subsystem ``llm_d_epp``) and ``pkg/epp/framework/plugins/scheduling/profilehandler/disagg/metrics.go``
  (``disagg_decision_total``); ``docs/metrics.md`` of that tag lists them. Served on port ``metrics`` (9090) behind a
  bearer token; the chart's own PodMonitoring scrapes it (``config/charts/routerlib/templates/_gke.yaml``).
- **Kueue** 0.17.8: ``pkg/metrics/metrics.go`` (subsystem ``kueue``). The ClusterQueue quota and usage series exist only
  with ``metrics.enableClusterQueueResources`` in the Configuration (``apis/config/v1beta2/configuration_types.go``;
  ``pkg/controller/core/core.go``), which ``manifests/kueue/controller-config.yaml`` sets.
- **GKE system metrics**: Cloud Monitoring's list "GKE system metrics"
  (https://docs.cloud.google.com/monitoring/api/metrics_kubernetes, the list generated 2026-04-10), the
  ``kubernetes.io/`` prefix; and the regional internal and external Application Load Balancers' ``request_count``
  (https://docs.cloud.google.com/monitoring/api/metrics_gcp, ``loadbalancing.googleapis.com``).

Managed Service for Prometheus stores a scraped series as ``prometheus.googleapis.com/<name>/<kind>`` and answers PromQL
with the Prometheus name; a system metric is queried in PromQL as its type with the first ``/`` made ``:`` and every
other ``/`` and ``.`` made ``_`` (Cloud Monitoring, "Mapping Cloud Monitoring metrics to PromQL"), with
``monitored_resource`` naming the resource type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.operations.metric_catalog import (
    EPP,
    HISTOGRAM,
    HISTOGRAM_SUFFIXES,
    KUEUE,
    PROMETHEUS_METRICS,
    VLLM,
    PrometheusMetric,
)


@dataclass(frozen=True)
class SystemMetric:
    type: str  # the Cloud Monitoring metric type
    resources: tuple[str, ...]  # monitored resource types
    labels: tuple[str, ...]  # metric labels
    launch_stage: str

    @property
    def promql_name(self) -> str:
        domain, _, path = self.type.partition("/")
        return re.sub(r"[./]", "_", domain) + ":" + re.sub(r"[./]", "_", path)


_VLLM_LABELS = ("model_name", "engine")
_EPP_REQUEST = ("model_name", "target_model_name", "fairness_id", "priority")
_KUEUE_QUEUE = ("cluster_queue", "replica_role")
_KUEUE_RESOURCE = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
# What each producer exports of the series the stack reads, with each series' own labels (counters with their _total;
# a histogram's, which its _bucket, _sum and _count carry).
EXPORTS: dict[str, dict[str, tuple[str, ...]]] = {
    VLLM: {
        "vllm:num_requests_running": _VLLM_LABELS,
        "vllm:num_requests_waiting": _VLLM_LABELS,
        "vllm:kv_cache_usage_perc": _VLLM_LABELS,
        "vllm:num_preemptions_total": _VLLM_LABELS,
        "vllm:prompt_tokens_total": _VLLM_LABELS,
        "vllm:generation_tokens_total": _VLLM_LABELS,
        "vllm:request_success_total": (*_VLLM_LABELS, "finished_reason"),
        "vllm:time_to_first_token_seconds": _VLLM_LABELS,
        "vllm:inter_token_latency_seconds": _VLLM_LABELS,
        "vllm:request_time_per_output_token_seconds": _VLLM_LABELS,
        "vllm:e2e_request_latency_seconds": _VLLM_LABELS,
        "vllm:request_queue_time_seconds": _VLLM_LABELS,
    },
    EPP: {
        "llm_d_epp_request_total": _EPP_REQUEST,
        "llm_d_epp_request_error_total": (*_EPP_REQUEST, "error_code"),
        "llm_d_epp_request_duration_seconds": _EPP_REQUEST,
        "llm_d_epp_scheduler_attempts_total": ("status", "target_model_name", "endpoint_name", "namespace", "port"),
        "llm_d_epp_scheduler_e2e_duration_seconds": (),
        "llm_d_epp_disagg_decision_total": ("plugin_name", "plugin_type", "model_name", "decision_type"),
        "llm_d_epp_ready_endpoints": ("name",),
        "llm_d_epp_average_queue_size": ("name",),
        "llm_d_epp_average_kv_cache_utilization": ("name",),
    },
    KUEUE: {
        "kueue_pending_workloads": ("cluster_queue", "status", "replica_role"),
        "kueue_admitted_active_workloads": _KUEUE_QUEUE,
        "kueue_reserving_active_workloads": _KUEUE_QUEUE,
        "kueue_admission_wait_time_seconds": ("cluster_queue", "priority_class", "replica_role"),
        "kueue_evicted_workloads_total": (
            "cluster_queue",
            "reason",
            "underlying_cause",
            "priority_class",
            "replica_role",
        ),
        "kueue_preempted_workloads_total": ("preempting_cluster_queue", "reason", "replica_role"),
        "kueue_cluster_queue_resource_usage": _KUEUE_RESOURCE,
        "kueue_cluster_queue_nominal_quota": _KUEUE_RESOURCE,
        "kueue_cluster_queue_status": ("cluster_queue", "status", "replica_role"),
    },
}


_ACCELERATOR = ("make", "accelerator_id", "model")
_NODE, _CONTAINER, _NODE_POOL = ("k8s_node",), ("k8s_container",), ("k8s_node_pool",)
SYSTEM_METRICS = {
    m.type: m
    for m in (
        SystemMetric("kubernetes.io/node/status_condition", _NODE, ("status", "condition"), "GA"),
        SystemMetric("kubernetes.io/node/accelerator/duty_cycle", _NODE, _ACCELERATOR, "GA"),
        SystemMetric("kubernetes.io/node/accelerator/memory_used", _NODE, _ACCELERATOR, "GA"),
        SystemMetric("kubernetes.io/node/accelerator/memory_total", _NODE, _ACCELERATOR, "GA"),
        SystemMetric(
            "kubernetes.io/node/accelerator/tensorcore_utilization", _NODE, (*_ACCELERATOR, "tpu_topology"), "GA"
        ),
        SystemMetric("kubernetes.io/container/accelerator/duty_cycle", _CONTAINER, _ACCELERATOR, "GA"),
        SystemMetric("kubernetes.io/container/accelerator/memory_used", _CONTAINER, _ACCELERATOR, "GA"),
        SystemMetric("kubernetes.io/container/accelerator/memory_total", _CONTAINER, _ACCELERATOR, "GA"),
        SystemMetric("kubernetes.io/container/restart_count", _CONTAINER, (), "GA"),
        SystemMetric("kubernetes.io/container/cpu/core_usage_time", _CONTAINER, (), "GA"),
        SystemMetric("kubernetes.io/container/memory/used_bytes", _CONTAINER, ("memory_type",), "GA"),
        SystemMetric(
            "kubernetes.io/accelerator/slice/state",
            ("k8s_entity",),
            ("state", "accelerator_type", "slice_topology", "block_id"),
            "BETA",
        ),
        SystemMetric(
            "kubernetes.io/accelerator/partition/state",
            _NODE_POOL,
            ("state", "accelerator_type", "partition_topology", "partition_id", "slice_id", "block_id"),
            "BETA",
        ),
        SystemMetric("kubernetes.io/node_pool/multi_host/available", _NODE_POOL, ("unavailability_reason",), "GA"),
        SystemMetric(
            "loadbalancing.googleapis.com/https/internal/request_count",
            ("internal_http_lb_rule",),
            ("protocol", "response_code", "response_code_class", "proxy_continent"),
            "GA",
        ),
        SystemMetric(
            "loadbalancing.googleapis.com/https/external/regional/request_count",
            ("http_external_regional_lb_rule",),
            ("protocol", "response_code", "response_code_class", "cache_result", "client_country"),
            "GA",
        ),
    )
}
# The monitored resource of the load balancer GKE makes for a Gateway of each class (GKE's "GatewayClass capabilities":
# gke-l7-rilb is a regional internal Application Load Balancer, gke-l7-regional-external-managed a regional external
# one; Cloud Monitoring's metrics list writes their requests against these resources).
GATEWAY_CLASS_RESOURCES = {
    "gke-l7-rilb": "internal_http_lb_rule",
    "gke-l7-regional-external-managed": "http_external_regional_lb_rule",
}
SYSTEM_METRICS_BY_PROMQL_NAME = {m.promql_name: m for m in SYSTEM_METRICS.values()}

# The labels of each monitored resource a system metric is written against (Cloud Monitoring, "Monitored
# resource types"; GoogleCloudPlatform/gke-mcp pkg/tools/monitoring/schemas/ lists k8s_entity, k8s_node and
# k8s_node_pool with these). Only the resources a PromQL query here reads. In PromQL they are plain labels, next to
# the metric's own and `monitored_resource`.
_CLUSTER = ("project_id", "location", "cluster_name")
RESOURCE_LABELS = {
    "k8s_container": (*_CLUSTER, "namespace_name", "pod_name", "container_name"),
    "k8s_node": (*_CLUSTER, "node_name"),
    "k8s_node_pool": (*_CLUSTER, "node_pool_name"),
    "k8s_entity": (*_CLUSTER, "entity_type", "entity_namespace", "entity_name", "entity_uid"),
}
# The labels Managed Service for Prometheus sets on every scraped series: the protected target labels and
# the PodMonitoring's default metadata (prometheus-engine v0.17.2, the PodMonitoring CRD's targetLabels).
_PROTECTED_LABELS = ("project_id", "location", "cluster", "namespace", "job", "instance")
TARGET_LABELS = (*_PROTECTED_LABELS, "container", "pod", "top_level_controller_name", "top_level_controller_type")


def read_series(series: str) -> PrometheusMetric | None:
    """The program's entry of the series a PromQL series name reads (a histogram through its _bucket, _sum or
    _count), or None for a series the stack does not keep."""
    if series in PROMETHEUS_METRICS:
        return PROMETHEUS_METRICS[series]
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        if base != series and base in PROMETHEUS_METRICS and PROMETHEUS_METRICS[base].kind == HISTOGRAM:
            return PROMETHEUS_METRICS[base]
    return None
