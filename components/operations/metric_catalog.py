"""The Prometheus series the stack's dashboards and alert policies read, and which producer's scrape keeps each.

Pure data (no Pulumi). Each PodMonitoring keeps only the series here of its producer (``keep_regex``): the rest
would be ingested and billed for nothing. Where each name comes from (the producer at the version the stack runs),
the labels each series carries and the GKE system metrics the queries read are the harness's model,
harness/monitoring_model.py, which the tests hold every query and this list against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

# Who collects a Prometheus metric: the PodMonitoring (by name) that scrapes its producer.
VLLM, EPP, KUEUE = "vllm", "epp", "kueue"


@dataclass(frozen=True)
class PrometheusMetric:
    name: str  # as exposed, counters with their _total
    kind: str
    producer: str  # VLLM, EPP or KUEUE


PROMETHEUS_METRICS = {
    m.name: m
    for m in (
        PrometheusMetric("vllm:num_requests_running", GAUGE, VLLM),
        PrometheusMetric("vllm:num_requests_waiting", GAUGE, VLLM),
        PrometheusMetric("vllm:kv_cache_usage_perc", GAUGE, VLLM),
        PrometheusMetric("vllm:num_preemptions_total", COUNTER, VLLM),
        PrometheusMetric("vllm:prompt_tokens_total", COUNTER, VLLM),
        PrometheusMetric("vllm:generation_tokens_total", COUNTER, VLLM),
        PrometheusMetric("vllm:request_success_total", COUNTER, VLLM),
        PrometheusMetric("vllm:time_to_first_token_seconds", HISTOGRAM, VLLM),
        PrometheusMetric("vllm:inter_token_latency_seconds", HISTOGRAM, VLLM),
        PrometheusMetric("vllm:request_time_per_output_token_seconds", HISTOGRAM, VLLM),
        PrometheusMetric("vllm:e2e_request_latency_seconds", HISTOGRAM, VLLM),
        PrometheusMetric("vllm:request_queue_time_seconds", HISTOGRAM, VLLM),
        PrometheusMetric("llm_d_epp_request_total", COUNTER, EPP),
        PrometheusMetric("llm_d_epp_request_error_total", COUNTER, EPP),
        PrometheusMetric("llm_d_epp_request_duration_seconds", HISTOGRAM, EPP),
        PrometheusMetric("llm_d_epp_scheduler_attempts_total", COUNTER, EPP),
        PrometheusMetric("llm_d_epp_scheduler_e2e_duration_seconds", HISTOGRAM, EPP),
        PrometheusMetric("llm_d_epp_disagg_decision_total", COUNTER, EPP),
        PrometheusMetric("llm_d_epp_ready_endpoints", GAUGE, EPP),
        PrometheusMetric("llm_d_epp_average_queue_size", GAUGE, EPP),
        PrometheusMetric("llm_d_epp_average_kv_cache_utilization", GAUGE, EPP),
        PrometheusMetric("kueue_pending_workloads", GAUGE, KUEUE),
        PrometheusMetric("kueue_admitted_active_workloads", GAUGE, KUEUE),
        PrometheusMetric("kueue_reserving_active_workloads", GAUGE, KUEUE),
        PrometheusMetric("kueue_admission_wait_time_seconds", HISTOGRAM, KUEUE),
        PrometheusMetric("kueue_evicted_workloads_total", COUNTER, KUEUE),
        PrometheusMetric("kueue_preempted_workloads_total", COUNTER, KUEUE),
        PrometheusMetric("kueue_cluster_queue_resource_usage", GAUGE, KUEUE),
        PrometheusMetric("kueue_cluster_queue_nominal_quota", GAUGE, KUEUE),
        PrometheusMetric("kueue_cluster_queue_status", GAUGE, KUEUE),
    )
}

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def keep_regex(producer: str) -> str:
    """A metricRelabeling ``keep`` regex (RE2, anchored by Prometheus) of the series the stack reads of a producer:
    the rest would be ingested and billed for nothing."""
    histogram = f"({'|'.join(HISTOGRAM_SUFFIXES)})?"
    names = sorted(name for name, metric in PROMETHEUS_METRICS.items() if metric.producer == producer)
    return "|".join(
        re.escape(name) + (histogram if PROMETHEUS_METRICS[name].kind == HISTOGRAM else "") for name in names
    )
