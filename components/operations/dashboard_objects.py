"""The Cloud Monitoring dashboards and the metric scrapes they read, as plain data (no Pulumi imports).

Each dashboard is a real Dashboard resource under ``manifests/operations/dashboards/`` (the JSON
``gcloud monitoring dashboards create --config-from-file`` takes), written for the dev stack's names.
Every chart is one PromQL query (``timeSeriesQuery.prometheusQuery``); this module overlays only what
varies between stacks: the display name's cluster, and the values of the label matchers that name the
cluster, a namespace or the ClusterQueue. A matcher's label decides what it names, so no query text is
templated: ``cluster``/``cluster_name`` take the cluster; ``namespace`` the namespace of the scrape the
series comes from (Kueue's for ``kueue_*``, the serving namespace otherwise); ``namespace_name`` (GKE's
container metrics) the workload's namespace; ``cluster_queue`` and ``preempting_cluster_queue`` the
ClusterQueue. components/operations/metric_catalog.py says where every metric comes from.

A tile at the grid's left edge or top leaves its ``xPos`` or ``yPos`` out rather than writing 0: the API answers in
proto3 JSON, which omits a zero, and the provider's diff of ``dashboardJson`` ignores only keys the API adds, so a
written 0 would show a change at every preview (tests/test_operations_dashboards.py says where).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from components import manifests
from components.config_base import walk
from components.gcp.config import ClusterConfig
from components.operations import metric_catalog
from components.workloads.serving.config import DECODE, PREFILL
from components.workloads.serving.objects import ROLE_LABEL

DASHBOARDS_DIR = "operations/dashboards"
MODEL_SERVER_METRICS_FILE = "operations/model-server-metrics.yaml"
# The dev stack's names the bases are written with (Pulumi.dev.yaml and the defaults).
BASE_CLUSTER = "qwen-serving-cluster"
BASE_SAXML_CLUSTER = "saxml"
QUERY_KEY = "prometheusQuery"  # a chart's PromQL (TimeSeriesQuery.prometheus_query)
# One matcher: label="value" (PromQL string literals here never hold a quote).
MATCHER = re.compile(r'(?P<label>\b[a-z_]+)(?P<op>=~|!=|!~|=)"(?P<value>[^"]*)"')
SELECTOR = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<matchers>[^{}]*)\}")


@dataclass(frozen=True)
class Dashboard:
    key: str  # the file under manifests/operations/dashboards/, and the stack output's key
    body: dict[str, Any]  # the Dashboard resource, camelCase as the API and gcloud take it


def load_dashboard(key: str) -> dict[str, Any]:
    return manifests.load_document(f"{DASHBOARDS_DIR}/{key}.json")


def _query_holders(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every mapping of a dashboard that holds a PromQL query (``prometheusQuery``), in the order of its tiles."""
    return [value for _, value in walk(body) if isinstance(value, dict) and QUERY_KEY in value]


def queries(body: dict[str, Any]) -> list[str]:
    """Every PromQL query of a dashboard, in the order of its tiles."""
    return [holder[QUERY_KEY] for holder in _query_holders(body)]


def _overlay_query(query: str, values: dict[str, str], kueue_namespace: str | None) -> str:
    def selector(match: re.Match[str]) -> str:
        name = match.group("name")
        namespace = kueue_namespace if name.startswith("kueue_") else values.get("namespace")

        def matcher(m: re.Match[str]) -> str:
            label, op = m.group("label"), m.group("op")
            value = namespace if label == "namespace" else values.get(label)
            if value is None or op != "=":
                return m.group(0)
            return f'{label}{op}"{value}"'

        return f"{name}{{{MATCHER.sub(matcher, match.group('matchers'))}}}"

    return SELECTOR.sub(selector, query)


def dashboards(cluster: ClusterConfig, namespaces: dict[str, str | None], cluster_queue: str | None) -> list[Dashboard]:
    """The dashboards of a stack, in the order of ``namespaces`` (the stack output's): each dashboard's key -> the
    namespace of the series it reads, None where that part is not the stack's; the kueue dashboard's, Kueue's own, is
    that of the Kueue series on every dashboard."""
    values = {"cluster": cluster.name, "cluster_name": cluster.name}
    if cluster_queue is not None:
        values["cluster_queue"] = values["preempting_cluster_queue"] = cluster_queue
    boards = []
    for key, namespace in namespaces.items():
        if namespace is None:
            continue
        body = load_dashboard(key)
        for holder in _query_holders(body):
            holder[QUERY_KEY] = _overlay_query(
                holder[QUERY_KEY], {**values, "namespace": namespace, "namespace_name": namespace}, namespaces["kueue"]
            )
        base_cluster = BASE_SAXML_CLUSTER if key == "saxml" else BASE_CLUSTER
        body["displayName"] = body["displayName"].replace(base_cluster, cluster.name, 1)
        boards.append(Dashboard(key=key, body=body))
    return boards


def model_server_metrics_objects(namespace: str) -> list[dict[str, Any]]:
    """One PodMonitoring per role, keeping only the vLLM series the dashboards read (each selects its role's leaders
    by the base's guide and role labels, the LeaderWorkerSet bases' own)."""
    objects = manifests.load_documents(MODEL_SERVER_METRICS_FILE, namespace)
    roles = {obj["spec"]["selector"]["matchLabels"][ROLE_LABEL]: obj for obj in objects}
    assert set(roles) == {PREFILL, DECODE}, "one PodMonitoring per role"
    for obj in objects:
        for endpoint in obj["spec"]["endpoints"]:
            (keep,) = endpoint["metricRelabeling"]
            keep["regex"] = metric_catalog.keep_regex(metric_catalog.VLLM)
    return objects
