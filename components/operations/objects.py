"""The alert policies and the Kueue metrics scrape, as plain data (no Pulumi imports).

Each policy is a dict of `gcp.monitoring.AlertPolicy` arguments (pulumi-gcp's snake_case names). The signals, and why
each is measured the way it is:

- **TPU node not Ready**: GKE's system metric `kubernetes.io/node/status_condition` (a bool per node, condition and
  status) counted where condition Ready is not True, so a node whose kubelet stopped reporting (status Unknown) counts
  too; the TPU pools are picked by the node's `cloud.google.com/gke-nodepool` label, which Cloud Monitoring keeps as
  node metadata.
- **Kueue workload pending**: Kueue 0.17 exports no age of a pending workload, only how many are pending per
  ClusterQueue (`kueue_pending_workloads`, scraped through the PodMonitoring of
  manifests/operations/kueue-metrics.yaml); the alert fires when the queue has held one pending the whole threshold.
  `replica_role="leader"`: with two Kueue replicas only the leader counts.
- **Gateway 5xx**: the Gateway's regional load balancer's `request_count` (internal or external, by its class) with
  response code class 500 over all of its requests, for the URL map GKE made for the Gateway (from the Gateway's
  `networking.gke.io/url-maps` annotation once it is programmed).
- **Model-server restarts**: `kubernetes.io/container/restart_count` of the vLLM containers. LeaderWorkerSets recreate a
  whole group when one of its containers restarts, so this counts the restarts GKE sees before the group is replaced: a
  floor, not an exact count.
- **Slice health**: GKE's (beta) `kubernetes.io/accelerator/slice/state` (one series per slice and state, 1 while the
  slice is in it) away from ACTIVE, and `kubernetes.io/accelerator/partition/state` UNHEALTHY, DEGRADED or INCOMPLETE on
  the stack's pools (TPU7x dynamic slicing); on every stack, GKE's `kubernetes.io/node_pool/multi_host/available` false
  for a multi-host TPU pool (a cube, or a static slice such as the Saxml stack's 4x8 pools): some node of it is not
  available, with the reason in `unavailability_reason`. All from Cloud Monitoring's "GKE system metrics" list.

Every policy's documentation carries its runbook (docs/runbooks/<key>.md: what it means, the first three commands, how
to recover), with the names of this stack set for its commands, and links it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from components import manifests
from components.gcp.config import ClusterConfig, TpuConfig
from components.operations import dashboard_objects, metric_catalog
from components.operations.config import AlertsConfig, DashboardsConfig
from components.operations.dashboard_objects import Dashboard
from components.platform.config import PlatformConfig, QueuesConfig, release_namespaces
from components.workloads.saxml.config import SaxmlConfig
from components.workloads.serving.config import GATEWAY_REQUESTS, GatewayClass, ServingConfig
from components.workloads.serving.objects import LEADER_CONTAINER, WORKER_CONTAINER

URL_MAPS_ANNOTATION = "networking.gke.io/url-maps"
# Without the annotation (a Gateway not programmed yet), every Gateway load balancer GKE makes.
GKE_GATEWAY_URL_MAPS = 'monitoring.regex.full_match("gkegw1-.*")'
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
GATEWAY_KEY = "gateway-5xx"
GATEWAY_TITLE = "Serving Gateway 5xx"
PAGE, WARN = "CRITICAL", "WARNING"
RATIO_WINDOW = "300s"
RUNBOOKS_IN_REPOSITORY = "docs/runbooks"
RUNBOOKS = Path(__file__).resolve().parents[2] / RUNBOOKS_IN_REPOSITORY
# What Cloud Monitoring takes of an alert policy (googleapis/googleapis@f8291d2b google/monitoring/v3/alert.proto): a
# threshold's filter and denominator filter of at most 2048 Unicode characters; documentation content of at most 8,192
# characters and 10,240 bytes of UTF-8. The TPU policies name every TPU pool in both.
FILTER_MAX = 2048
CONTENT_MAX, CONTENT_MAX_BYTES = 8192, 10240


def kueue_metrics_objects(namespace: str) -> list[dict[str, Any]]:
    """The scraper identity, its token, the collector's read grant and the PodMonitoring, in Kueue's namespace,
    keeping the Kueue series the alerts and dashboards read."""
    objects = manifests.load_documents("operations/kueue-metrics.yaml")
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


def url_map_name(annotations: dict[str, str] | None) -> str | None:
    """The URL map GKE made for a Gateway, from its annotation (a path or a comma list of paths)."""
    first = (annotations or {}).get(URL_MAPS_ANNOTATION, "").split(",")[0].strip()
    return first.rsplit("/", 1)[-1] or None


def _alternatives(names: list[str]) -> str:
    """A regular expression matching any of ``names``: node-pool and container names (lowercase, digits, hyphens),
    which need no escaping in a regular expression, a filter's string literal or PromQL's."""
    for name in names:
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a pool or container name")
    return "|".join(names)


def _one_of(names: list[str]) -> str:
    """A filter matching any of ``names``."""
    return f'monitoring.regex.full_match("{_alternatives(names)}")'


class Signal(NamedTuple):
    """What a policy measures and what to do when it fires; ``_policy`` adds what every policy carries."""

    key: str
    title: str
    severity: str
    condition: dict[str, Any]
    what_to_do: str


def _policy(signal: Signal, alerts: AlertsConfig, cluster: ClusterConfig, names: str) -> dict[str, Any]:
    """``names``: the shell variables the runbooks' commands use, set to this stack's names."""
    key = signal.key
    base = alerts.runbook_base_url.rstrip("/")
    link = f"{base}/{key}.md" if base else f"`{RUNBOOKS_IN_REPOSITORY}/{key}.md` in the deployment's repository"
    return {
        "key": key,
        "display_name": f"{cluster.name}: {signal.title}",
        "combiner": "OR",
        "severity": signal.severity,
        "conditions": [{"display_name": signal.title, **signal.condition}],
        "documentation": {
            "content": f"{signal.what_to_do}\n\nRunbook: {link}. This stack's names for its commands: `{names}`\n\n"
            f"{runbook(key)}",
            "mime_type": "text/markdown",
        },
        "alert_strategy": {"auto_close": "1800s"},
        "user_labels": {"cluster": cluster.name, "signal": key},
    }


def too_long(policy: dict[str, Any]) -> list[str]:
    """What of an alert policy is longer than Cloud Monitoring takes, each said with its length."""
    found = []
    for condition in policy["conditions"]:
        threshold = condition.get("condition_threshold", {})
        for field in ("filter", "denominator_filter"):
            if len(threshold.get(field, "")) > FILTER_MAX:
                found.append(f"its {field} is {len(threshold[field])} characters (at most {FILTER_MAX})")
    content = policy["documentation"]["content"]
    if len(content) > CONTENT_MAX or len(content.encode()) > CONTENT_MAX_BYTES:
        found.append(
            f"its documentation is {len(content)} characters, {len(content.encode())} bytes "
            f"(at most {CONTENT_MAX} characters and {CONTENT_MAX_BYTES} bytes)"
        )
    return found


def _threshold(terms: list[str], period: str, aligner: str, group_by: str, **fields: Any) -> dict[str, Any]:
    """A threshold on the series of ``terms`` (a filter's terms), each aligned over ``period`` by ``aligner`` and
    summed by ``group_by``; ``fields``: the threshold's value, duration and the rest."""
    aggregation = {"alignment_period": period, "per_series_aligner": aligner, "cross_series_reducer": "REDUCE_SUM"}
    threshold = {"filter": " AND ".join(terms), "comparison": "COMPARISON_GT", **fields}
    return {"condition_threshold": {**threshold, "aggregations": [{**aggregation, "group_by_fields": [group_by]}]}}


def _promql(query: str, minutes: int) -> dict[str, Any]:
    return {
        "condition_prometheus_query_language": {
            "query": query,
            "duration": f"{minutes * 60}s",
            "evaluation_interval": "60s",
            # The series exist only once Kueue has been scraped, or once a slice, partition or multi-host pool
            # exists: the policy is made before that.
            "disable_metric_validation": True,
        }
    }


def tpu_node_not_ready(alerts: AlertsConfig, cluster: ClusterConfig, pools: list[str], slicing: bool) -> Signal:
    terms = [
        'metric.type="kubernetes.io/node/status_condition"',
        'resource.type="k8s_node"',
        f'resource.labels.cluster_name="{cluster.name}"',
        'metric.labels.condition="Ready"',
        'metric.labels.status!="True"',
        f'metadata.user_labels."cloud.google.com/gke-nodepool"={_one_of(pools)}',
    ]
    condition = _threshold(
        terms,
        "60s",
        "ALIGN_COUNT_TRUE",
        "resource.labels.node_name",
        threshold_value=0,
        duration=f"{alerts.node_not_ready_minutes * 60}s",
        # A node auto-repair deletes loses its series: that is not an incident of its own.
        evaluation_missing_data="EVALUATION_MISSING_DATA_INACTIVE",
    )
    return Signal(
        "tpu-node-not-ready",
        "TPU node not Ready",
        PAGE,
        condition,
        f"A node of a TPU pool ({', '.join(pools)}) has not been Ready for {alerts.node_not_ready_minutes} minutes: "
        + (
            "every slice on its cube is down. `kubectl get nodes -l cloud.google.com/gke-tpu-accelerator` and `kubectl "
            "get slices -A`; GKE auto-repair recreates it."
            if slicing
            # no cubes and no Slice objects without dynamic slicing: a multi-host slice is its whole pool
            else "its TPU slice is down (a multi-host slice: the whole pool). `kubectl get nodes -l "
            "cloud.google.com/gke-tpu-accelerator`; GKE auto-repair recreates it."
        ),
    )


def kueue_pending(alerts: AlertsConfig, cluster: ClusterConfig, kueue_namespace: str, cluster_queue: str) -> Signal:
    query = (
        f'sum by (cluster_queue) (kueue_pending_workloads{{cluster="{cluster.name}", '
        f'namespace="{kueue_namespace}", cluster_queue="{cluster_queue}", replica_role="leader"}}) > 0'
    )
    return Signal(
        "kueue-pending",
        "Kueue workload pending",
        WARN,
        _promql(query, alerts.pending_minutes),
        f"ClusterQueue {cluster_queue} has held a pending workload for {alerts.pending_minutes} minutes. "
        "`kubectl get workloads -A` and `kubectl describe` the pending one: its conditions say whether it waits "
        "for quota, a free sub-slice, or the slice controller.",
    )


def model_server_restarts(alerts: AlertsConfig, cluster: ClusterConfig, serving_namespace: str) -> Signal:
    terms = [
        'metric.type="kubernetes.io/container/restart_count"',
        'resource.type="k8s_container"',
        f'resource.labels.cluster_name="{cluster.name}"',
        f'resource.labels.namespace_name="{serving_namespace}"',
        f"resource.labels.container_name={_one_of([LEADER_CONTAINER, WORKER_CONTAINER])}",
    ]
    return Signal(
        "model-server-restarts",
        "Model-server restarts",
        PAGE,
        _threshold(
            terms,
            "600s",
            "ALIGN_DELTA",
            "resource.labels.container_name",
            threshold_value=alerts.model_server_restarts,
            duration="0s",
        ),
        f"vLLM containers restarted more than {alerts.model_server_restarts} times in 10 minutes; each restart "
        f"recreates its group, which reloads the weights. `kubectl -n {serving_namespace} get pods` and the "
        "previous container's log (`kubectl logs --previous`).",
    )


def gateway_errors(alerts: AlertsConfig, serving: ServingConfig) -> Signal:
    """The Gateway's 5xx share, of any GKE Gateway until the Gateway's URL map is known (gateway_conditions)."""
    return Signal(
        GATEWAY_KEY,
        GATEWAY_TITLE,
        PAGE,
        _gateway_condition(alerts, serving.gateway.class_name, None),
        f"More than {alerts.gateway_error_ratio:.0%} of the serving Gateway's requests failed with 5xx for 5 minutes. "
        "Check the router (endpoint picker) and the model servers: `make verify`, then "
        f"`kubectl -n {serving.namespace} get pods`.",
    )


def gateway_conditions(alerts: AlertsConfig, gateway_class: GatewayClass, url_map: str | None) -> list[dict[str, Any]]:
    """The Gateway policy's conditions for ``url_map``, from the Gateway's annotation (None: any GKE Gateway's)."""
    return [{"display_name": GATEWAY_TITLE, **_gateway_condition(alerts, gateway_class, url_map)}]


def _gateway_condition(alerts: AlertsConfig, gateway_class: GatewayClass, url_map: str | None) -> dict[str, Any]:
    url_maps = f'"{url_map}"' if url_map else GKE_GATEWAY_URL_MAPS
    metric, resource = GATEWAY_REQUESTS[gateway_class]
    requests = [f'metric.type="{metric}"', f'resource.type="{resource}"', f"resource.labels.url_map_name={url_maps}"]
    condition = _threshold(
        [*requests, "metric.labels.response_code_class=500"],
        RATIO_WINDOW,
        "ALIGN_RATE",
        "resource.labels.url_map_name",
        threshold_value=alerts.gateway_error_ratio,
        duration=RATIO_WINDOW,
        evaluation_missing_data="EVALUATION_MISSING_DATA_INACTIVE",  # no traffic, no incident
    )
    threshold = condition["condition_threshold"]
    threshold |= {"denominator_filter": " AND ".join(requests), "denominator_aggregations": threshold["aggregations"]}
    return condition


def tpu_slice_unhealthy(alerts: AlertsConfig, cluster: ClusterConfig) -> Signal:
    query = (
        "max by (entity_namespace, entity_name, state) (kubernetes_io:accelerator_slice_state"
        f'{{monitored_resource="k8s_entity", cluster_name="{cluster.name}", state!="ACTIVE"}}) > 0'
    )
    return Signal(
        "tpu-slice-unhealthy",
        "TPU slice not ACTIVE",
        PAGE,
        _promql(query, alerts.slice_unhealthy_minutes),
        f"A TPU slice has been in a state other than ACTIVE (ACTIVATING, FAILED, INCOMPLETE, ...) for "
        f"{alerts.slice_unhealthy_minutes} minutes, longer than the slice controller takes to give up on it and "
        "place its workload again: the workload on it is down or waiting.",
    )


def tpu_partition_unhealthy(alerts: AlertsConfig, cluster: ClusterConfig, pools: list[str]) -> Signal:
    query = (
        "max by (node_pool_name, partition_topology, partition_id, state) (kubernetes_io:accelerator_partition_state"
        f'{{monitored_resource="k8s_node_pool", cluster_name="{cluster.name}", '
        f'node_pool_name=~"{_alternatives(pools)}", state=~"UNHEALTHY|DEGRADED|INCOMPLETE"}}) > 0'
    )
    return Signal(
        "tpu-partition-unhealthy",
        "TPU partition not HEALTHY",
        PAGE,
        _promql(query, alerts.slice_unhealthy_minutes),
        f"A partition of a TPU pool ({', '.join(pools)}) has been UNHEALTHY, DEGRADED or INCOMPLETE "
        f"for {alerts.slice_unhealthy_minutes} minutes: no new slice of that shape forms on it, and a slice on it "
        "fails.",
    )


def tpu_pool_unavailable(alerts: AlertsConfig, cluster: ClusterConfig, pools: list[str]) -> Signal:
    query = (
        "min by (node_pool_name) (kubernetes_io:node_pool_multi_host_available"
        f'{{monitored_resource="k8s_node_pool", cluster_name="{cluster.name}", '
        f'node_pool_name=~"{_alternatives(pools)}"}}) == 0'
    )
    return Signal(
        "tpu-pool-unavailable",
        "Multi-host TPU pool unavailable",
        PAGE,
        _promql(query, alerts.slice_unhealthy_minutes),
        f"A multi-host TPU pool ({', '.join(pools)}) has not had every node available for "
        f"{alerts.slice_unhealthy_minutes} minutes: GKE says why in `unavailability_reason` (maintenance, reboot, "
        "unhealthy host, ...), and every slice on the pool is down.",
    )


@dataclass(frozen=True)
class MonitoringObjects:
    """What the operations layer makes: alert policies, dashboards, and the scrapes both read."""

    alerts: list[dict[str, Any]] | None  # the alert policies; None: alerts.enabled is false
    dashboards: list[Dashboard]  # empty: no dashboards
    kueue_metrics: list[dict[str, Any]] | None  # None: Kueue is not this stack's, or nothing reads it
    model_server_metrics: list[dict[str, Any]] | None  # None: no serving, or no dashboard reads it
    gateway_class: GatewayClass  # serving.gateway.className: what the Gateway's load balancer reports requests as


def monitoring_objects(
    project: str,
    alerts: AlertsConfig,
    dashboards: DashboardsConfig,
    cluster: ClusterConfig,
    tpu: TpuConfig,
    platform: PlatformConfig,
    queues: QueuesConfig,
    serving: ServingConfig,
    saxml: SaxmlConfig,
) -> MonitoringObjects | None:
    """None: neither alerts nor dashboards. Each part of the stack is watched where it is this stack's: Kueue where
    the stack installs it, the ClusterQueue and the slices with dynamic slicing, serving and Saxml when enabled."""
    # A cluster made elsewhere has its dashboards made by its own stack.
    boards_on = dashboards.enabled and not cluster.existing.enabled
    if not (alerts.enabled or boards_on):
        return None
    slicing = tpu.dynamic_slicing
    kueue_namespace = release_namespaces(platform, slicing).get("kueue")
    cluster_queue = queues.cluster_queue_name if slicing else None
    serving_namespace = serving.namespace if serving.enabled else None  # serving is refused without dynamic slicing
    namespaces = {
        "serving": serving_namespace,
        "router": serving_namespace,
        "tpu": (serving_namespace or queues.namespaces[0]) if slicing and queues.namespaces else None,  # the slices'
        "kueue": kueue_namespace,
        "saxml": saxml.namespace if saxml.enabled else None,
    }
    boards = dashboard_objects.dashboards(cluster, namespaces, cluster_queue) if boards_on else []
    reads_kueue = (alerts.enabled and cluster_queue is not None) or any(board.key == "kueue" for board in boards)
    policies = None
    if alerts.enabled:
        # The Gateway's policy (GATEWAY_KEY) is of any GKE Gateway, its conditions made again once the Gateway's URL
        # map is known; no pending or serving alerts where that part is not this stack's.
        pools = [pool.name for pool in tpu.pools]
        variables = {
            "CLUSTER": cluster.name,
            "PROJECT": project,
            "TPU_POOLS": ",".join(pools),
            "KUEUE_NS": kueue_namespace,
            "CLUSTER_QUEUE": cluster_queue,
            "SERVING_NS": serving_namespace,
        }
        names = " ".join(f"{name}={value}" for name, value in variables.items() if value)
        signals = [tpu_node_not_ready(alerts, cluster, pools, slicing), tpu_pool_unavailable(alerts, cluster, pools)]
        if slicing:
            signals += [tpu_slice_unhealthy(alerts, cluster), tpu_partition_unhealthy(alerts, cluster, pools)]
        if kueue_namespace is not None and cluster_queue is not None:
            signals.append(kueue_pending(alerts, cluster, kueue_namespace, cluster_queue))
        if serving_namespace is not None:
            signals += [
                model_server_restarts(alerts, cluster, serving_namespace),
                gateway_errors(alerts, serving),
            ]
        policies = [_policy(signal, alerts, cluster, names) for signal in signals]
    return MonitoringObjects(
        alerts=policies,
        dashboards=boards,
        kueue_metrics=kueue_metrics_objects(kueue_namespace) if kueue_namespace and reads_kueue else None,
        model_server_metrics=(
            dashboard_objects.model_server_metrics_objects(serving_namespace)
            if boards_on and serving_namespace is not None
            else None
        ),
        gateway_class=serving.gateway.class_name,
    )
