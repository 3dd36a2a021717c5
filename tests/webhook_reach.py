"""What the control plane calls in a stack's cluster, derived from what the stack renders: every admission webhook,
CRD conversion webhook and aggregated API (APIService) of the stack's own objects, of its local charts and of the
registry charts it installs (rendered from charts.lock with the values the program gives each release), each with
the Service it names and the pods that serve it, the Service's targetPort resolved against their container ports.

The registry charts are rendered with helm-python-sdk (Helm's Go SDK, no helm binary) from the module zips
harness/charts.py fetches into its cache on first use (a fresh clone needs the Go module proxy once; `make charts
CHARTS_FROM=<dir>` fills the cache offline).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import charts
from harness.mock_engine import ProgramRun, unwrap_secrets
from policy.network import Pod
from tests import external
from tools.render import kubernetes_objects

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"

# Helm release -> (the pinned chart release, the module tag rendered in its place, why); charts.lock says the same.
STAND_INS = {
    "kueue": (
        "0.17.8",
        "v0.17.0",
        "stands in for chart 0.17.8, whose module zip the Go module proxy here refuses (403); kubernetes-sigs/kueue "
        "`git diff v0.17.0 v0.17.8 -- charts/kueue` changes no webhook, Service, APIService or container port",
    ),
    "lws": (
        "0.10.0",
        "v0.9.0",
        "stands in for chart 0.10.0, whose module zip the Go module proxy here refuses (403); kubernetes-sigs/lws "
        "`git diff v0.9.0 v0.10.0 -- charts/lws` changes no webhook Service or container port",
    ),
}
# Registry charts and remote files the harness cannot render, and what they hold that the control plane calls.
NOT_RENDERED = {
    "oci://ghcr.io/llm-d/charts/llm-d-router-gateway": (
        "nothing: llm-d/llm-d-router v0.10.0 (71f4f09) config/charts holds no WebhookConfiguration, APIService or "
        "CRD (`git grep -i 'WebhookConfiguration\\|APIService\\|conversion:' v0.10.0 -- config/charts`); the Go "
        "module proxy refuses github.com/llm-d/llm-d-router (403), so it is not rendered"
    ),
    "inference-pool-crds": (
        "nothing: the InferencePool CRD of gateway-api-inference-extension v1.5.0 has no conversion webhook "
        "(schemas.lock locks the file)"
    ),
}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


@dataclass(frozen=True)
class ControlPlaneCall:
    """One thing the API server calls: where it sends the call, and the pods and port it lands on."""

    kind: str  # the webhook configuration's kind, CustomResourceDefinition (conversion) or APIService
    name: str  # the webhook's or object's name
    service: tuple[str, str]  # (namespace, name)
    port: int  # the container port the Service's targetPort resolves to
    pods: tuple[Pod, ...]
    failure_policy: str  # Fail or Ignore (conversion and aggregated APIs: Fail, nothing else to fall back on)

    def __str__(self) -> str:
        return f"{self.kind} {self.name} -> {self.service[0]}/{self.service[1]} tcp:{self.port}"


@functools.cache
def chart_cache() -> Path:
    """The chart cache, every locked chart in it (fetched on first use); an error says why one is not."""
    external.require("the registry charts of charts.lock (fetched from the Go module proxy on first use)")
    cache = charts.cache_dir()
    failures = charts.ensure(charts.load_lock(), cache)
    if failures:
        raise RuntimeError("the charts of charts.lock are not in place (run `make charts`): " + "; ".join(failures))
    return cache


def locked_chart(release: str) -> charts.LockedChart:
    by_release = {chart.release: chart for chart in charts.load_lock()}
    if release not in by_release:
        raise KeyError(f"charts.lock locks no chart for the Helm release {release!r}")
    return by_release[release]


def render_registry_release(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects Helm installs for a registry chart's release (templates and crds/), from charts.lock."""
    values = json.dumps(unwrap_secrets(inputs.get("values") or {}), sort_keys=True)
    return copy.deepcopy(list(_rendered(inputs["name"], inputs["namespace"], values)))


@functools.cache
def _rendered(release: str, namespace: str, values: str) -> tuple[dict[str, Any], ...]:
    import helm_python  # a dev dependency: binds Helm's Go SDK

    chart = locked_chart(release)
    with helm_python.Chart.load_archive(charts.chart_archive(chart, chart_cache())) as loaded:
        rendered = loaded.render(json.loads(values), name=release, namespace=namespace)
        crds = [crd["data"] for crd in loaded.crds]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    objects = [
        doc
        for text in [*rendered.values(), *crds]
        for doc in yaml.load_all(text, Loader=loader)
        if doc and "kind" in doc
    ]
    for obj in objects:  # Helm installs a namespaced object without a namespace into the release's
        if obj["kind"] not in _CLUSTER_SCOPED:
            obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    return tuple(objects)


_CLUSTER_SCOPED = frozenset(
    {
        "CustomResourceDefinition",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "Namespace",
        "PriorityClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
)


def unrendered(run: ProgramRun) -> list[str]:
    """The registry releases and remote files of the run that charts.lock does not render and NOT_RENDERED does not
    account for (each must be one or the other)."""
    missing = []
    locked = {chart.release for chart in charts.load_lock()}
    for release in run.of_type(RELEASE):
        chart = release.inputs["chart"]
        if chart.startswith(("./", "../", "/")) or release.inputs["name"] in locked or chart in NOT_RENDERED:
            continue
        missing.append(f"{release.name} ({chart})")
    missing += [f"{r.name} (a remote file)" for r in run.of_type(CONFIG_FILE) if r.name not in NOT_RENDERED]
    return missing


def stack_objects(run: ProgramRun) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack installs: its own and its local charts' (the render's kubernetes.yaml) and
    those of the registry charts charts.lock renders."""
    objects = kubernetes_objects(run.registrations)
    locked = {chart.release for chart in charts.load_lock()}
    for release in run.of_type(RELEASE):
        if release.inputs["name"] in locked and not release.inputs["chart"].startswith(("./", "../", "/")):
            objects += render_registry_release(release.inputs)
    return objects


def _pods(objects: Iterable[Mapping[str, Any]]) -> list[Pod]:
    pods = []
    for obj in objects:
        if obj["kind"] not in WORKLOAD_KINDS:
            continue
        template = obj["spec"]["template"]
        named = {
            port["name"]: int(port["containerPort"])
            for container in template["spec"]["containers"]
            for port in container.get("ports") or ()
            if port.get("name")
        }
        numbers = {
            int(port["containerPort"])
            for container in template["spec"]["containers"]
            for port in container.get("ports") or ()
        }
        pods.append(
            Pod(
                namespace=obj["metadata"]["namespace"],
                labels=dict((template.get("metadata") or {}).get("labels") or {}),
                ports={**named, **{str(n): n for n in numbers}},
            )
        )
    return pods


def _service_target(
    objects: list[dict[str, Any]], pods: list[Pod], reference: Mapping[str, Any], kind: str, name: str
) -> tuple[int, tuple[Pod, ...]]:
    """The container port and pods behind a webhook's or APIService's service reference."""
    namespace, service_name, port = reference["namespace"], reference["name"], int(reference.get("port") or 443)
    where = f"{kind} {name}: Service {namespace}/{service_name}"
    services = [
        o
        for o in objects
        if o["kind"] == "Service"
        and o["metadata"]["name"] == service_name
        and o["metadata"].get("namespace") == namespace
    ]
    if len(services) != 1:
        raise LookupError(f"{where} is rendered {len(services)} times")
    (service,) = services
    entries = [p for p in service["spec"].get("ports") or () if int(p["port"]) == port]
    if len(entries) != 1:
        raise LookupError(f"{where} has no port {port}")
    target = entries[0].get("targetPort", port)
    selector = service["spec"].get("selector") or {}
    serving = tuple(
        p
        for p in pods
        if p.namespace == namespace and selector and all(p.labels.get(k) == v for k, v in selector.items())
    )
    if not serving:
        raise LookupError(f"{where} selects no pod the stack renders ({selector})")
    resolved = {pod.ports.get(str(target)) for pod in serving}
    if None in resolved or len(resolved) != 1:
        raise LookupError(f"{where}: targetPort {target!r} is not one container port of its pods")
    (number,) = resolved
    assert number is not None
    return number, serving


def control_plane_calls(objects: list[dict[str, Any]]) -> list[ControlPlaneCall]:
    """Every call of the control plane into the cluster that ``objects`` set up, resolved to its pods and port."""
    pods = _pods(objects)
    calls = []
    for obj in objects:
        kind = obj["kind"]
        references: list[tuple[str, Mapping[str, Any], str]] = []
        if kind in WEBHOOK_KINDS:
            for webhook in obj.get("webhooks") or ():
                service = webhook["clientConfig"].get("service")
                if service is None:
                    raise LookupError(f"{kind} {webhook['name']} calls a URL, outside the cluster")
                references.append((webhook["name"], service, webhook.get("failurePolicy") or "Fail"))
        elif kind == "CustomResourceDefinition":
            conversion = obj["spec"].get("conversion") or {}
            if conversion.get("strategy") == "Webhook":
                references.append((obj["metadata"]["name"], conversion["webhook"]["clientConfig"]["service"], "Fail"))
        elif kind == "APIService" and (obj.get("spec") or {}).get("service"):
            references.append((obj["metadata"]["name"], obj["spec"]["service"], "Fail"))
        for name, reference, policy in references:
            port, serving = _service_target(objects, pods, reference, kind, name)
            calls.append(
                ControlPlaneCall(kind, name, (reference["namespace"], reference["name"]), port, serving, policy)
            )
    return calls


def network_policies(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [o for o in objects if o["kind"] == "NetworkPolicy"]
