"""The harness's model of the metrics the stack's producers export: each series by name, its kind and its labels, as
each producer writes it at the version the stack runs, and the GKE system metrics Cloud Monitoring writes.

Written apart from the program (components/operations/metric_catalog.py, the series the stack reads and keeps) on
purpose, as harness/gcp_model.py is: the dashboards' and alerts' queries, and the program's keep list, are held
against this model, not against themselves (tests/test_operations_dashboards.py). It lists the series the stack reads,
not every series a producer exports. Sources:

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
  ``kubernetes.io/`` prefix; and the internal Application Load Balancer's ``request_count``
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
    COUNTER,
    EPP,
    GAUGE,
    HISTOGRAM,
    HISTOGRAM_SUFFIXES,
    KUEUE,
    VLLM,
)


@dataclass(frozen=True)
class ExportedSeries:
    name: str  # as exposed, counters with their _total
    kind: str  # COUNTER, GAUGE or HISTOGRAM
    producer: str  # VLLM, EPP or KUEUE: who exports it
    labels: tuple[str, ...]


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
EXPORTED_SERIES = {
    m.name: m
    for m in (
        ExportedSeries("vllm:num_requests_running", GAUGE, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:num_requests_waiting", GAUGE, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:kv_cache_usage_perc", GAUGE, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:num_preemptions_total", COUNTER, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:prompt_tokens_total", COUNTER, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:generation_tokens_total", COUNTER, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:request_success_total", COUNTER, VLLM, (*_VLLM_LABELS, "finished_reason")),
        ExportedSeries("vllm:time_to_first_token_seconds", HISTOGRAM, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:inter_token_latency_seconds", HISTOGRAM, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:request_time_per_output_token_seconds", HISTOGRAM, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:e2e_request_latency_seconds", HISTOGRAM, VLLM, _VLLM_LABELS),
        ExportedSeries("vllm:request_queue_time_seconds", HISTOGRAM, VLLM, _VLLM_LABELS),
        ExportedSeries("llm_d_epp_request_total", COUNTER, EPP, _EPP_REQUEST),
        ExportedSeries("llm_d_epp_request_error_total", COUNTER, EPP, (*_EPP_REQUEST, "error_code")),
        ExportedSeries("llm_d_epp_request_duration_seconds", HISTOGRAM, EPP, _EPP_REQUEST),
        ExportedSeries(
            "llm_d_epp_scheduler_attempts_total",
            COUNTER,
            EPP,
            ("status", "target_model_name", "endpoint_name", "namespace", "port"),
        ),
        ExportedSeries("llm_d_epp_scheduler_e2e_duration_seconds", HISTOGRAM, EPP, ()),
        ExportedSeries(
            "llm_d_epp_disagg_decision_total",
            COUNTER,
            EPP,
            ("plugin_name", "plugin_type", "model_name", "decision_type"),
        ),
        ExportedSeries("llm_d_epp_ready_endpoints", GAUGE, EPP, ("name",)),
        ExportedSeries("llm_d_epp_average_queue_size", GAUGE, EPP, ("name",)),
        ExportedSeries("llm_d_epp_average_kv_cache_utilization", GAUGE, EPP, ("name",)),
        ExportedSeries("kueue_pending_workloads", GAUGE, KUEUE, ("cluster_queue", "status", "replica_role")),
        ExportedSeries("kueue_admitted_active_workloads", GAUGE, KUEUE, _KUEUE_QUEUE),
        ExportedSeries("kueue_reserving_active_workloads", GAUGE, KUEUE, _KUEUE_QUEUE),
        ExportedSeries(
            "kueue_admission_wait_time_seconds", HISTOGRAM, KUEUE, ("cluster_queue", "priority_class", "replica_role")
        ),
        ExportedSeries(
            "kueue_evicted_workloads_total",
            COUNTER,
            KUEUE,
            ("cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"),
        ),
        ExportedSeries(
            "kueue_preempted_workloads_total", COUNTER, KUEUE, ("preempting_cluster_queue", "reason", "replica_role")
        ),
        ExportedSeries("kueue_cluster_queue_resource_usage", GAUGE, KUEUE, _KUEUE_RESOURCE),
        ExportedSeries("kueue_cluster_queue_nominal_quota", GAUGE, KUEUE, _KUEUE_RESOURCE),
        ExportedSeries("kueue_cluster_queue_status", GAUGE, KUEUE, ("cluster_queue", "status", "replica_role")),
    )
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
    )
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


def exported_series(series: str) -> ExportedSeries | None:
    """The exported series a PromQL series name reads (a histogram through its _bucket, _sum or _count)."""
    if series in EXPORTED_SERIES:
        return EXPORTED_SERIES[series]
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        if base != series and base in EXPORTED_SERIES and EXPORTED_SERIES[base].kind == HISTOGRAM:
            return EXPORTED_SERIES[base]
    return None
