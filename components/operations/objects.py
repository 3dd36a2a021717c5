"""The alert policies and the Kueue metrics scrape, as plain data (no Pulumi imports).

Each policy is a dict of `gcp.monitoring.AlertPolicy` arguments (pulumi-gcp's snake_case names).
The signals, and why each is measured the way it is:

- **TPU node not Ready**: GKE's system metric `kubernetes.io/node/status_condition` (a bool per
  node, condition and status) counted where condition Ready is not True, so a node whose kubelet
  stopped reporting (status Unknown) counts too; the TPU pools are picked by the node's
  `cloud.google.com/gke-nodepool` label, which Cloud Monitoring keeps as node metadata.
- **Kueue workload pending**: Kueue 0.17 exports no age of a pending workload, only how many are
  pending per ClusterQueue (`kueue_pending_workloads`, scraped through the PodMonitoring of
  manifests/operations/kueue-metrics.yaml); the alert fires when the queue has held one pending
  the whole threshold. `replica_role="leader"`: with two Kueue replicas only the leader counts.
- **Gateway 5xx**: the regional internal load balancer's `request_count` with response code class
  500 over all of its requests, for the URL map GKE made for the Gateway (from the Gateway's
  `networking.gke.io/url-maps` annotation once it is programmed).
- **Model-server restarts**: `kubernetes.io/container/restart_count` of the vLLM containers.
  LeaderWorkerSets recreate a whole group when one of its containers restarts, so this counts
  the restarts GKE sees before the group is replaced: a floor, not an exact count.
- **Slice health**: GKE's (beta) `kubernetes.io/accelerator/slice/state` (one series per slice and
  state, 1 while the slice is in it) away from ACTIVE, and `kubernetes.io/accelerator/partition/state`
  UNHEALTHY, DEGRADED or INCOMPLETE on the stack's pools (TPU7x dynamic slicing); on every stack,
  GKE's `kubernetes.io/node_pool/multi_host/available` false for a multi-host TPU pool (a cube, or a
  static slice such as the Saxml stack's 4x8 pools): some node of it is not available, with the reason
  in `unavailability_reason`. All from Cloud Monitoring's "GKE system metrics" list.

Every policy's documentation carries its runbook (docs/runbooks/<key>.md: what it means, the first
three commands, how to recover), with the names of this stack set for its commands, and links it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import manifests
from components.operations import dashboard_objects, metric_catalog
from components.operations.config import AlertsInput, DashboardsInput
from components.operations.dashboard_objects import Dashboard

KUEUE_METRICS_FILE = "operations/kueue-metrics.yaml"
URL_MAPS_ANNOTATION = "networking.gke.io/url-maps"
# Without the annotation (a Gateway not programmed yet), every Gateway load balancer GKE makes.
GKE_GATEWAY_URL_MAPS = 'monitoring.regex.full_match("gkegw1-.*")'
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SEVERITY_PAGE = "CRITICAL"
SEVERITY_WARN = "WARNING"
AUTO_CLOSE = "1800s"
RESTART_WINDOW = "600s"
RATIO_WINDOW = "300s"
RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
RUNBOOKS_IN_REPOSITORY = "docs/runbooks"


def kueue_metrics_objects(namespace: str) -> list[dict[str, Any]]:
    """The scraper identity, its token, the collector's read grant and the PodMonitoring, in Kueue's namespace,
    keeping the Kueue series the alerts and dashboards read."""
    objects = manifests.load_documents(KUEUE_METRICS_FILE)
    for obj in objects:
        if "namespace" in obj["metadata"]:
            obj["metadata"]["namespace"] = namespace
        for subject in obj.get("subjects", []):
            if subject["namespace"] != "gmp-system":
                subject["namespace"] = namespace
        if obj["kind"] == "PodMonitoring":
            for endpoint in obj["spec"]["endpoints"]:
                (keep,) = endpoint["metricRelabeling"]
                keep["regex"] = metric_catalog.keep_regex(metric_catalog.KUEUE)
    return objects


def runbook(key: str) -> str:
    """The runbook of an alert, as written in docs/runbooks/<key>.md."""
    return (RUNBOOKS / f"{key}.md").read_text()


def runbook_link(key: str, spec: AlertsInput) -> str:
    path = f"{RUNBOOKS_IN_REPOSITORY}/{key}.md"
    return f"{spec.runbook_base_url}/{key}.md" if spec.runbook_base_url else f"`{path}` in the deployment's repository"


def _names(spec: AlertsInput) -> str:
    """The shell variables the runbooks' commands use, set to this stack's names."""
    names = {
        "CLUSTER": spec.cluster_name,
        "PROJECT": spec.project,
        "TPU_POOLS": ",".join(spec.tpu_pool_names),
        "KUEUE_NS": spec.kueue_namespace or "",
        "CLUSTER_QUEUE": spec.cluster_queue or "",
        "SERVING_NS": spec.serving_namespace or "",
    }
    return " ".join(f"{name}={value}" for name, value in names.items() if value)


def url_map_name(annotations: dict[str, str] | None) -> str | None:
    """The URL map GKE made for a Gateway, from its annotation (a path or a comma list of paths)."""
    value = (annotations or {}).get(URL_MAPS_ANNOTATION, "")
    first = value.split(",")[0].strip()
    return first.rsplit("/", 1)[-1] or None


def _one_of(names: list[str]) -> str:
    """A filter matching any of ``names``: node-pool and container names (lowercase, digits, hyphens),
    which need no escaping in a regular expression or in a filter's string literal."""
    for name in names:
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a pool or container name")
    return f'monitoring.regex.full_match("{"|".join(names)}")'


def _policy(
    key: str, title: str, severity: str, condition: dict[str, Any], what_to_do: str, spec: AlertsInput
) -> dict[str, Any]:
    return {
        "key": key,
        "display_name": f"{spec.cluster_name}: {title}",
        "combiner": "OR",
        "severity": severity,
        "conditions": [{"display_name": title, **condition}],
        "documentation": {
            "content": f"{what_to_do}\n\nRunbook: {runbook_link(key, spec)}. This stack's names for its commands: "
            f"`{_names(spec)}`\n\n{runbook(key)}",
            "mime_type": "text/markdown",
        },
        "alert_strategy": {"auto_close": AUTO_CLOSE},
        "user_labels": {"cluster": spec.cluster_name, "signal": key},
    }


def tpu_node_not_ready(spec: AlertsInput) -> dict[str, Any]:
    filter_ = " AND ".join(
        [
            'metric.type="kubernetes.io/node/status_condition"',
            'resource.type="k8s_node"',
            f'resource.labels.cluster_name="{spec.cluster_name}"',
            'metric.labels.condition="Ready"',
            'metric.labels.status!="True"',
            f'metadata.user_labels."cloud.google.com/gke-nodepool"={_one_of(spec.tpu_pool_names)}',
        ]
    )
    condition = {
        "condition_threshold": {
            "filter": filter_,
            "aggregations": [
                {
                    "alignment_period": "60s",
                    "per_series_aligner": "ALIGN_COUNT_TRUE",
                    "cross_series_reducer": "REDUCE_SUM",
                    "group_by_fields": ["resource.labels.node_name"],
                }
            ],
            "comparison": "COMPARISON_GT",
            "threshold_value": 0,
            "duration": f"{spec.node_not_ready_minutes * 60}s",
            # A node auto-repair deletes loses its series: that is not an incident of its own.
            "evaluation_missing_data": "EVALUATION_MISSING_DATA_INACTIVE",
        }
    }
    return _policy(
        "tpu-node-not-ready",
        "TPU node not Ready",
        SEVERITY_PAGE,
        condition,
        f"A node of a TPU pool ({', '.join(spec.tpu_pool_names)}) has not been Ready for "
        f"{spec.node_not_ready_minutes} minutes: every slice on its cube is down. `kubectl get nodes -l "
        "cloud.google.com/gke-tpu-accelerator` and `kubectl get slices -A`; GKE auto-repair recreates it.",
        spec,
    )


def kueue_pending(spec: AlertsInput) -> dict[str, Any]:
    assert spec.kueue_namespace is not None and spec.cluster_queue is not None
    query = (
        f'sum by (cluster_queue) (kueue_pending_workloads{{cluster="{spec.cluster_name}", '
        f'namespace="{spec.kueue_namespace}", cluster_queue="{spec.cluster_queue}", replica_role="leader"}}) > 0'
    )
    condition = {
        "condition_prometheus_query_language": {
            "query": query,
            "duration": f"{spec.pending_minutes * 60}s",
            "evaluation_interval": "60s",
            # The series exist only once Kueue has been scraped: the policy is made before that.
            "disable_metric_validation": True,
        }
    }
    return _policy(
        "kueue-pending",
        "Kueue workload pending",
        SEVERITY_WARN,
        condition,
        f"ClusterQueue {spec.cluster_queue} has held a pending workload for {spec.pending_minutes} minutes. "
        "`kubectl get workloads -A` and `kubectl describe` the pending one: its conditions say whether it waits "
        "for quota, a free sub-slice, or the slice controller.",
        spec,
    )


def model_server_restarts(spec: AlertsInput) -> dict[str, Any]:
    assert spec.serving_namespace is not None
    filter_ = " AND ".join(
        [
            'metric.type="kubernetes.io/container/restart_count"',
            'resource.type="k8s_container"',
            f'resource.labels.cluster_name="{spec.cluster_name}"',
            f'resource.labels.namespace_name="{spec.serving_namespace}"',
            f"resource.labels.container_name={_one_of(spec.model_server_containers)}",
        ]
    )
    condition = {
        "condition_threshold": {
            "filter": filter_,
            "aggregations": [
                {
                    "alignment_period": RESTART_WINDOW,
                    "per_series_aligner": "ALIGN_DELTA",
                    "cross_series_reducer": "REDUCE_SUM",
                    "group_by_fields": ["resource.labels.container_name"],
                }
            ],
            "comparison": "COMPARISON_GT",
            "threshold_value": spec.model_server_restarts,
            "duration": "0s",
        }
    }
    return _policy(
        "model-server-restarts",
        "Model-server restarts",
        SEVERITY_PAGE,
        condition,
        f"vLLM containers restarted more than {spec.model_server_restarts} times in 10 minutes; each restart "
        f"recreates its group, which reloads the weights. `kubectl -n {spec.serving_namespace} get pods` and the "
        "previous container's log (`kubectl logs --previous`).",
        spec,
    )


def gateway_errors(spec: AlertsInput, url_map: str | None) -> dict[str, Any]:
    """The Gateway's 5xx share; ``url_map`` from the Gateway's annotation (None: any GKE Gateway's)."""
    assert spec.serving_namespace is not None
    url_maps = f'"{url_map}"' if url_map else GKE_GATEWAY_URL_MAPS
    requests = " AND ".join(
        [
            'metric.type="loadbalancing.googleapis.com/https/internal/request_count"',
            'resource.type="internal_http_lb_rule"',
            f"resource.labels.url_map_name={url_maps}",
        ]
    )
    per_url_map = [
        {
            "alignment_period": RATIO_WINDOW,
            "per_series_aligner": "ALIGN_RATE",
            "cross_series_reducer": "REDUCE_SUM",
            "group_by_fields": ["resource.labels.url_map_name"],
        }
    ]
    condition = {
        "condition_threshold": {
            "filter": f"{requests} AND metric.labels.response_code_class=500",
            "aggregations": per_url_map,
            "denominator_filter": requests,
            "denominator_aggregations": per_url_map,
            "comparison": "COMPARISON_GT",
            "threshold_value": spec.gateway_error_ratio,
            "duration": RATIO_WINDOW,
            "evaluation_missing_data": "EVALUATION_MISSING_DATA_INACTIVE",  # no traffic, no incident
        }
    }
    return _policy(
        "gateway-5xx",
        "Serving Gateway 5xx",
        SEVERITY_PAGE,
        condition,
        f"More than {spec.gateway_error_ratio:.0%} of the serving Gateway's requests failed with 5xx for 5 minutes. "
        "Check the router (endpoint picker) and the model servers: `make verify`, then "
        f"`kubectl -n {spec.serving_namespace} get pods`.",
        spec,
    )


def _promql_condition(query: str, minutes: int) -> dict[str, Any]:
    return {
        "condition_prometheus_query_language": {
            "query": query,
            "duration": f"{minutes * 60}s",
            "evaluation_interval": "60s",
            # GKE writes these series only once a slice, partition or multi-host pool exists.
            "disable_metric_validation": True,
        }
    }


def tpu_slice_unhealthy(spec: AlertsInput) -> dict[str, Any]:
    query = (
        "max by (entity_namespace, entity_name, state) (kubernetes_io:accelerator_slice_state"
        f'{{monitored_resource="k8s_entity", cluster_name="{spec.cluster_name}", state!="ACTIVE"}}) > 0'
    )
    return _policy(
        "tpu-slice-unhealthy",
        "TPU slice not ACTIVE",
        SEVERITY_PAGE,
        _promql_condition(query, spec.slice_unhealthy_minutes),
        f"A TPU slice has been in a state other than ACTIVE (ACTIVATING, FAILED, INCOMPLETE, ...) for "
        f"{spec.slice_unhealthy_minutes} minutes, longer than the slice controller takes to give up on it and "
        "place its workload again: the workload on it is down or waiting.",
        spec,
    )


def tpu_partition_unhealthy(spec: AlertsInput) -> dict[str, Any]:
    query = (
        "max by (node_pool_name, partition_topology, partition_id, state) (kubernetes_io:accelerator_partition_state"
        f'{{monitored_resource="k8s_node_pool", cluster_name="{spec.cluster_name}", '
        f'node_pool_name=~"{_alternatives(spec.tpu_pool_names)}", state=~"UNHEALTHY|DEGRADED|INCOMPLETE"}}) > 0'
    )
    return _policy(
        "tpu-partition-unhealthy",
        "TPU partition not HEALTHY",
        SEVERITY_PAGE,
        _promql_condition(query, spec.slice_unhealthy_minutes),
        f"A partition of a TPU pool ({', '.join(spec.tpu_pool_names)}) has been UNHEALTHY, DEGRADED or INCOMPLETE "
        f"for {spec.slice_unhealthy_minutes} minutes: no new slice of that shape forms on it, and a slice on it "
        "fails.",
        spec,
    )


def tpu_pool_unavailable(spec: AlertsInput) -> dict[str, Any]:
    query = (
        "min by (node_pool_name) (kubernetes_io:node_pool_multi_host_available"
        f'{{monitored_resource="k8s_node_pool", cluster_name="{spec.cluster_name}", '
        f'node_pool_name=~"{_alternatives(spec.tpu_pool_names)}"}}) == 0'
    )
    return _policy(
        "tpu-pool-unavailable",
        "Multi-host TPU pool unavailable",
        SEVERITY_PAGE,
        _promql_condition(query, spec.slice_unhealthy_minutes),
        f"A multi-host TPU pool ({', '.join(spec.tpu_pool_names)}) has not had every node available for "
        f"{spec.slice_unhealthy_minutes} minutes: GKE says why in `unavailability_reason` (maintenance, reboot, "
        "unhealthy host, ...), and every slice on the pool is down.",
        spec,
    )


def _alternatives(names: list[str]) -> str:
    """A PromQL regex matching any of ``names`` (pool names: lowercase, digits, hyphens, no escaping needed)."""
    for name in names:
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a pool name")
    return "|".join(names)


def alert_policies(spec: AlertsInput) -> list[dict[str, Any]]:
    """Every policy but the Gateway's, whose URL map is known only once the Gateway is programmed."""
    policies = [tpu_node_not_ready(spec), tpu_pool_unavailable(spec)]
    if spec.dynamic_slicing:
        policies += [tpu_slice_unhealthy(spec), tpu_partition_unhealthy(spec)]
    if spec.kueue_namespace is not None and spec.cluster_queue is not None:
        policies.append(kueue_pending(spec))
    if spec.serving_namespace is not None:
        policies.append(model_server_restarts(spec))
    return policies


ALERT_KEYS = (
    "tpu-node-not-ready",
    "tpu-pool-unavailable",
    "tpu-slice-unhealthy",
    "tpu-partition-unhealthy",
    "kueue-pending",
    "model-server-restarts",
    "gateway-5xx",
)


@dataclass(frozen=True)
class AlertingObjects:
    """Every alert policy, built once per run from an AlertsInput."""

    spec: AlertsInput  # the Gateway's policy is built from it once the URL map is known
    policies: list[dict[str, Any]]


def alerting_objects(spec: AlertsInput) -> AlertingObjects:
    return AlertingObjects(spec=spec, policies=alert_policies(spec))


@dataclass(frozen=True)
class MonitoringObjects:
    """What the operations layer makes: alert policies, dashboards, and the scrapes both read."""

    project: str
    alerts: AlertingObjects | None  # None: alerts.enabled is false
    dashboards: list[Dashboard]  # empty: dashboards.enabled is false
    kueue_metrics: list[dict[str, Any]] | None  # None: Kueue is not this stack's, or nothing reads it
    model_server_metrics: list[dict[str, Any]] | None  # None: no serving, or no dashboard reads it


def monitoring_objects(
    project: str, alerts: AlertsInput | None, dashboards: DashboardsInput | None, kueue_namespace: str | None
) -> MonitoringObjects:
    """``kueue_namespace``: where the stack's Kueue runs, None when Kueue is not this stack's to scrape."""
    boards = dashboard_objects.dashboards(dashboards) if dashboards is not None else []
    reads_kueue = (alerts is not None and alerts.cluster_queue is not None) or any(
        board.key == "kueue" for board in boards
    )
    serving = dashboards.serving_namespace if dashboards is not None else None
    return MonitoringObjects(
        project=project,
        alerts=alerting_objects(alerts) if alerts is not None else None,
        dashboards=boards,
        kueue_metrics=kueue_metrics_objects(kueue_namespace) if kueue_namespace and reads_kueue else None,
        model_server_metrics=(
            dashboard_objects.model_server_metrics_objects(serving, dashboards.serving_guide)
            if dashboards is not None and serving is not None
            else None
        ),
    )
