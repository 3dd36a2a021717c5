"""The dashboards as the Monitoring API would take them, and every metric they and the alerts read.

- Schema: each dashboard parses into the Monitoring API's own ``google.monitoring.dashboard.v1.Dashboard``
  message (the generated types of google-cloud-monitoring-dashboards, with protobuf's JSON parser: an
  unknown field, a wrong enum value or two members of one oneof are refused), and has what
  ``dashboard.proto`` marks REQUIRED and what a chart needs to draw (a widget's content, a data set's query),
  tiles inside the grid and apart. Broken copies are refused, so the check can fail.
- Metrics: every query is parsed as PromQL; every series it reads is in the program's list of what it keeps
  (components/operations/metric_catalog.py) or a GKE metric, by labels it carries as the harness's model says
  (harness/monitoring_model.py). In each stack's render, a Prometheus series is kept by the scrape of its producer
  (vLLM's PodMonitorings, Kueue's, the router chart's), and a system metric is GKE's, queried against its own
  monitored resource.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
from google.cloud.monitoring_dashboard_v1.types import dashboard as dashboard_types
from google.protobuf import json_format

from components.operations import dashboard_objects, metric_catalog
from components.operations import objects as alerting
from components.workloads.serving.config import DECODE, PREFILL
from components.workloads.serving.objects import ROLE_LABEL
from harness import monitoring_model as world
from harness.mock_engine import ProgramRun
from tests.conftest import run_stack, stack_config
from tests.crd_schemas import crd_errors
from tests.test_operations_objects import RUNBOOK_KEYS

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
PODMONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
RELEASE = "kubernetes:helm.sh/v3:Release"
KEYS = ("serving", "router", "tpu", "kueue", "saxml")
# The oneofs a chart needs set (google/monitoring/dashboard/v1: widget.proto `content`, metrics.proto `source`).
WIDGET_CONTENT = "content"
QUERY_SOURCE = "source"


def schema_errors(body: dict[str, Any]) -> list[str]:
    """What the Monitoring API would refuse in a Dashboard, or what would leave a chart empty."""
    message = dashboard_types.Dashboard.pb()()
    try:
        json_format.Parse(json.dumps(body), message)  # unknown fields, enum values, oneofs, types
    except json_format.ParseError as error:
        return [str(error)]
    errors = []
    if not message.display_name:
        errors.append("displayName is required (dashboard.proto: display_name REQUIRED)")
    if message.WhichOneof("layout") != "mosaic_layout":
        errors.append("the dashboards here lay their tiles out on a mosaic")
        return errors
    layout = message.mosaic_layout
    taken: set[tuple[int, int]] = set()
    for index, tile in enumerate(layout.tiles):
        where = f"tile {index} ({tile.widget.title!r})"
        if tile.widget.WhichOneof(WIDGET_CONTENT) is None:
            errors.append(f"{where}: a widget shows nothing")
        if tile.width <= 0 or tile.height <= 0 or tile.x_pos + tile.width > layout.columns:
            errors.append(f"{where}: outside the {layout.columns}-column grid")
        cells = {
            (x, y)
            for x in range(tile.x_pos, tile.x_pos + tile.width)
            for y in range(tile.y_pos, tile.y_pos + tile.height)
        }
        if cells & taken:
            errors.append(f"{where}: overlaps another tile")
        taken |= cells
        if tile.widget.WhichOneof(WIDGET_CONTENT) == "xy_chart":
            for data_set in tile.widget.xy_chart.data_sets:
                if data_set.time_series_query.WhichOneof(QUERY_SOURCE) is None:
                    errors.append(f"{where}: a data set without a query")
    return errors


@pytest.mark.parametrize("key", KEYS)
def test_each_dashboard_file_is_a_valid_dashboard_of_the_monitoring_api(key):
    assert schema_errors(dashboard_objects.load_dashboard(key)) == []


def _first_chart(body: dict[str, Any]) -> dict[str, Any]:
    return next(t["widget"] for t in body["mosaicLayout"]["tiles"] if "xyChart" in t["widget"])


@pytest.mark.parametrize(
    ("breakage", "fragment"),
    [
        (lambda b: _first_chart(b).update(pieChart={}), 'multiple "content" oneof fields'),
        (lambda b: _first_chart(b)["xyChart"]["dataSets"][0].update(plotType="LINES"), "Invalid enum value LINES"),
        (lambda b: _first_chart(b)["xyChart"].update(yaxis={}), 'no field named "yaxis"'),
        (
            lambda b: _first_chart(b)["xyChart"]["dataSets"][0]["timeSeriesQuery"].update(timeSeriesQueryLanguage="x"),
            'multiple "source" oneof fields',
        ),
        (lambda b: b.pop("displayName"), "displayName is required"),
        (lambda b: _first_chart(b).pop("xyChart"), "a widget shows nothing"),
        (lambda b: b["mosaicLayout"]["tiles"][1].update(yPos=0), "overlaps another tile"),
        (lambda b: b["mosaicLayout"]["tiles"][1].update(xPos=40), "outside the 48-column grid"),
    ],
)
def test_a_broken_dashboard_is_refused(breakage, fragment):
    body = copy.deepcopy(dashboard_objects.load_dashboard("serving"))
    breakage(body)
    errors = schema_errors(body)
    assert errors and any(fragment in error for error in errors), errors


# --- What the provider compares at each preview ----------------------------------------
# The Monitoring API answers in proto3 JSON, which leaves out a field at its default value: a tile's xPos or yPos of 0.
# terraform-provider-google-beta v7.45.0 (which pulumi-gcp bridges) keeps that answer as the state of
# `dashboardJson`, and its diff (services/monitoring/resource_monitoring_dashboard.go, monitoringDashboardDiffSuppress
# through removeComputedKeys) drops only the keys the state holds and the config does not; a key the config writes and
# the state lacks is a change, at every preview (hashicorp/terraform-provider-google issue #16173, still open). So a
# tile at the left edge or the top leaves its position out, which the API reads as 0.


@pytest.mark.parametrize("key", KEYS)
def test_no_tile_writes_a_zero_position(key):
    tiles = dashboard_objects.load_dashboard(key)["mosaicLayout"]["tiles"]
    zeros = [f"tile {i} {axis}" for i, tile in enumerate(tiles) for axis in ("xPos", "yPos") if tile.get(axis) == 0]
    assert zeros == [], f"leave them out of manifests/operations/dashboards/{key}.json: the API defaults them to 0"


def test_each_stack_s_dashboards_read_back_as_sent(stack_run):
    """The general form, on what each stack sends: protobuf's JSON printer, as the API answers, gives back every key
    and value of the body (a default it would leave out is the diff above, whatever the field)."""
    name, run = stack_run
    for board in run.of_type(DASHBOARD):
        body = json.loads(board.input("dashboardJson"))
        message = dashboard_types.Dashboard.pb()()
        json_format.Parse(json.dumps(body), message)
        assert json_format.MessageToDict(message) == body, f"{name}: {board.name}"


# --- What each query reads ---------------------------------------------------------------


def selectors(query: str) -> Iterator[tuple[str, dict[str, tuple[str, str]]]]:
    """(series name, {label: (operator, value)}) of every selector of a PromQL query."""
    found: list[tuple[str, dict[str, tuple[str, str]]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {query}"
            found.append((node.name, {m.name: (str(m.op), m.value) for m in node.matchers.matchers}))

    promql_parser.walk(promql_parser.parse(query), visit)
    return iter(found)


def grouped_by(query: str) -> tuple[set[str], set[str]]:
    """The labels a query aggregates by, and the labels it makes with label_replace."""
    by: set[str] = set()
    made: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            by.update(node.modifier.labels)
        if isinstance(node, promql_parser.Call) and node.func.name == "label_replace":
            made.add(node.args[1].val)

    promql_parser.walk(promql_parser.parse(query), visit)
    return by, made


def series_labels(name: str, labels: dict[str, tuple[str, str]]) -> set[str]:
    """The labels a series carries in PromQL (for a system metric: of the resource queried)."""
    kept = world.read_series(name)
    if kept is not None:
        extra = {"role"} if kept.producer == metric_catalog.VLLM else set()
        histogram = {"le"} if name.endswith("_bucket") else set()
        return {*world.EXPORTS[kept.producer][kept.name], *world.TARGET_LABELS, *extra, *histogram}
    system = world.SYSTEM_METRICS_BY_PROMQL_NAME[name]
    (resource,) = [value for label, (_, value) in labels.items() if label == "monitored_resource"]
    return {*system.labels, *world.RESOURCE_LABELS[resource], "monitored_resource"}


def every_query() -> Iterator[tuple[str, str]]:
    for key in KEYS:
        for query in dashboard_objects.queries(dashboard_objects.load_dashboard(key)):
            yield key, query


@pytest.mark.parametrize(("key", "query"), list(every_query()))
def test_every_query_reads_a_known_metric_by_labels_it_carries(key, query):
    by, made = grouped_by(query)
    carried: set[str] = set(made)
    for name, labels in selectors(query):
        kept = world.read_series(name)
        system = world.SYSTEM_METRICS_BY_PROMQL_NAME.get(name)
        assert kept or system, f"{name} is neither scraped by the stack nor a GKE metric ({key}: {query})"
        if system is not None:
            resource = labels.get("monitored_resource")
            assert resource is not None and resource[1] in system.resources, f"{name}: monitored_resource {resource}"
        known = series_labels(name, labels)
        assert set(labels) <= known, f"{name} carries no {set(labels) - known} ({key})"
        carried |= known
    assert by <= carried, f"{key}: aggregates by {by - carried}, which no series of {query} carries"


def test_the_metric_extraction_itself_can_fail():
    with pytest.raises(ValueError, match="unclosed left parenthesis"):
        list(selectors("sum(rate(vllm:request_success_total[5m])"))
    ((name, _),) = selectors('vllm:num_requests_waitng{role="decode"}')
    assert world.read_series(name) is None, "a misspelled series is not in the catalog"
    by, _ = grouped_by("sum by (rol) (vllm:num_requests_waiting)")
    assert by == {"rol"}


def test_the_program_keeps_each_series_by_the_scrape_of_the_producer_that_exports_it():
    """A series kept by the wrong producer's scrape is dropped by the one that sees it; one the program adds that no
    producer of the model exports cannot be checked, and one the model keeps after the program dropped it is stale.
    (A histogram kept as a gauge is the scrape tests' to catch: the keep regex would drop its _bucket.)"""
    kept = {(metric.producer, name) for name, metric in metric_catalog.PROMETHEUS_METRICS.items()}
    assert kept == {(producer, name) for producer, series in world.EXPORTS.items() for name in series}


def test_only_metrics_of_the_pinned_vllm_are_read():
    """vLLM at 5b39b26 has neither gpu_cache_usage_perc nor time_per_output_token_seconds any more."""
    read = {name for _, query in every_query() for name, _ in selectors(query)}
    assert not {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"} & read
    assert {"vllm:kv_cache_usage_perc", "vllm:request_time_per_output_token_seconds_bucket"} <= read


# --- Each stack scrapes what its dashboards and alerts read ------------------------------


@pytest.fixture(scope="module", params=["dev", "prod", "saxml"])
def stack_run(request):
    return request.param, run_stack(stack=request.param)


def stack_queries(run) -> list[str]:
    found = []
    for board in run.of_type(DASHBOARD):
        found += dashboard_objects.queries(json.loads(board.input("dashboardJson")))
    for policy in run.of_type(POLICY):
        for condition in policy.input("conditions") or []:
            if "conditionPrometheusQueryLanguage" in condition:
                found.append(condition["conditionPrometheusQueryLanguage"]["query"])
    return found


def _alerting(name: str, run: ProgramRun) -> ProgramRun:
    """The stack's run with its alerts on (the saxml stack leaves them off)."""
    if name == "saxml":
        return run_stack({"alerts": {"enabled": True, "emails": ["sax@example.com"]}}, stack="saxml")
    return run


@pytest.mark.external  # the CRD files of schemas.lock
def test_each_stack_s_scrapes_pass_the_pinned_crd_schema(stack_run):
    for monitor in _alerting(*stack_run).of_type(PODMONITORING):
        body = {"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring", **monitor.inputs}
        assert crd_errors(body) == []


def test_each_stack_scrapes_every_prometheus_series_it_reads(stack_run):
    name, run = stack_run
    run = _alerting(name, run)
    monitors = {r.name: r.inputs for r in run.of_type(PODMONITORING)}
    read = {series for query in stack_queries(run) for series, _ in selectors(query)}
    assert read, f"{name} reads nothing"
    for series in read:
        metric = world.read_series(series)
        if metric is None:
            assert series in world.SYSTEM_METRICS_BY_PROMQL_NAME
            continue
        if metric.producer == metric_catalog.EPP:
            values = run.one(RELEASE, "router").input("values")
            assert values["provider"]["name"] == "gke", "the chart's PodMonitoring is rendered for GKE only"
            assert values["router"]["monitoring"]["prometheus"]["enabled"] is True, f"{series}: EPP not scraped"
            continue
        scrapes = {
            metric_catalog.VLLM: ["metrics-vllm-prefill", "metrics-vllm-decode"],
            metric_catalog.KUEUE: ["kueue-metrics-podmonitoring"],
        }[metric.producer]
        for scrape in scrapes:
            assert scrape in monitors, f"{name} reads {series} but makes no {scrape}"
            for endpoint in monitors[scrape]["spec"]["endpoints"]:
                keep = [r["regex"] for r in endpoint.get("metricRelabeling", []) if r["action"] == "keep"]
                assert all(re.fullmatch(regex, series) for regex in keep), f"{scrape} drops {series}"


def test_the_vllm_scrapes_read_vllm_itself_on_the_leaders_of_each_role(dev_run):
    monitors = {r.name: r.inputs for r in dev_run.of_type(PODMONITORING) if r.name.startswith("metrics-vllm-")}
    leaderworkersets = {
        r.input("metadata.labels")[ROLE_LABEL]: r.inputs
        for r in dev_run.registrations
        if r.type == "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    }
    for role in (PREFILL, DECODE):
        monitor = monitors[f"metrics-vllm-{role}"]
        assert monitor["metadata"]["namespace"] == "llm-d-pd-disaggregation"
        leader = leaderworkersets[role]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert selector.items() <= leader["metadata"]["labels"].items(), "selects the leaders"
        worker = leaderworkersets[role]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert not selector.items() <= worker["metadata"].get("labels", {}).items(), "the workers serve no HTTP"
        (endpoint,) = monitor["spec"]["endpoints"]
        ports = {p["name"]: p["containerPort"] for c in leader["spec"]["containers"] for p in c.get("ports", [])}
        (vllm,) = leader["spec"]["containers"]
        assert f"--port={int(ports[endpoint['port']])}" in vllm["args"], (
            f"{role}: scrapes vLLM itself, not the P/D sidecar"
        )
        assert monitor["spec"]["targetLabels"]["fromPod"] == [{"from": ROLE_LABEL, "to": "role"}]


def test_each_stack_reads_only_its_own_names(stack_run):
    name, run = stack_run
    cluster = run.outputs["clusterName"]
    for board in run.of_type(DASHBOARD):
        body = json.loads(board.input("dashboardJson"))
        assert body["displayName"].startswith(f"{cluster}: ")
        for query in dashboard_objects.queries(body):
            for _, labels in selectors(query):
                for label in ("cluster", "cluster_name"):
                    if label in labels:
                        assert labels[label] == ("MatchOp.Equal", cluster), f"{board.name}: {query}"
    if name == "prod":
        dumped = json.dumps([b.input("dashboardJson") for b in run.of_type(DASHBOARD)])
        assert dashboard_objects.BASE_CLUSTER not in dumped


def test_the_overlay_names_the_namespaces_of_each_source():
    """Names other than those the dashboard files are written with (the dev stack's), so an overlay that changed
    nothing fails."""
    dev = stack_config("dev")
    kueue = dev.platform.kueue.model_copy(update={"namespace": "kq"})
    objects = alerting.monitoring_objects(
        dev.project,
        dev.alerts,
        dev.dashboards,
        dev.cluster,
        dev.tpu,
        dev.platform.model_copy(update={"kueue": kueue}),
        dev.queues.model_copy(update={"cluster_queue_name": "tpu-cq"}),
        dev.serving.model_copy(update={"namespace": "serve"}),
        dev.saxml,
    )
    assert objects is not None
    boards = {board.key: board.body for board in objects.dashboards}
    assert sorted(boards) == ["kueue", "router", "serving", "tpu"]
    for key, body in boards.items():
        for query in dashboard_objects.queries(body):
            for series, labels in selectors(query):
                expected = {"kueue": "kq"}.get(key, "serve")
                if "namespace" in labels:
                    assert labels["namespace"][1] == expected, f"{key}: {series}"
                if "namespace_name" in labels:
                    assert labels["namespace_name"][1] == "serve"
                if "cluster_queue" in labels:
                    assert labels["cluster_queue"][1] == "tpu-cq"


def test_every_metric_of_the_catalog_is_read_somewhere():
    """The catalog is what is read: a metric no dashboard or alert reads is scraped and billed for nothing."""
    read = {name for _, query in every_query() for name, _ in selectors(query)}
    spec_run = run_stack(stack="prod")
    read |= {name for query in stack_queries(spec_run) for name, _ in selectors(query)}
    # the Gateway's alert reads what the load balancer of its class reports (prod's internal one, or the external)
    external = run_stack({"serving.gateway.className": "gke-l7-regional-external-managed"}, stack="prod")
    read_filters = {
        m.group(1)
        for policy in [*spec_run.of_type(POLICY), *external.of_type(POLICY)]
        for condition in policy.input("conditions") or []
        for m in re.finditer(r'metric\.type="([^"]+)"', json.dumps(condition).replace('\\"', '"'))
    }
    bases = {
        name.removesuffix(s) for name in read for s in ("", *metric_catalog.HISTOGRAM_SUFFIXES) if name.endswith(s)
    }
    unread = [m for m in metric_catalog.PROMETHEUS_METRICS if m not in bases and m not in read]
    unread += [
        m.type for m in world.SYSTEM_METRICS.values() if m.promql_name not in read and m.type not in read_filters
    ]
    assert unread == []
    assert read_filters <= set(world.SYSTEM_METRICS), "every filter-based alert reads a GKE metric of the model"


def test_the_runbooks_and_alerts_reach_every_policy_of_prod():
    keys = {policy.name.removeprefix("alert-") for policy in run_stack(stack="prod").of_type(POLICY)}
    assert sorted(keys) == RUNBOOK_KEYS
