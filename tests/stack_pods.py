"""Every pod a stack runs, and the Pod Security labels of every namespace it makes: what the lab's API server is
asked to admit (tests/itest/test_lab_pod_security.py) and what tests/test_pod_security.py checks offline.

The pods are every pod template of the render (the program's objects and its local charts', as kubernetes.yaml
holds them), the pods of the registry charts the stack installs as Helm renders them from charts.lock with the
values the program hands each release (tests/webhook_reach.py, the one fetch and render of those charts), and the
Job `make bench` runs in the serving namespace; each as the API server is asked to admit it, with GKE's Cloud
Storage FUSE sidecar where a pod asks for it.

Two registry charts of charts.lock are rendered from a stand-in tag (tests/webhook_reach.py STAND_INS); their pod
templates hold the same Pod Security fields as the pinned release's: kubernetes-sigs/lws `git diff v0.9.0 v0.10.0
(2161f38) -- charts/lws/templates/manager/deployment.yaml charts/lws/values.yaml` adds only an optional
priorityClassName (empty by default), kubernetes-sigs/kueue `git diff v0.17.0 v0.17.8 (818686e) --
charts/kueue/templates/manager/manager.yaml` only the probes' periodSeconds.

One chart is not at hand: the llm-d router's (the Go module proxy refuses github.com/llm-d/llm-d-router), whose
endpoint picker's pod is written below from its template, at the version it was read at.

    python -m tests.stack_pods STACK...   # JSON on stdout: {stack: {namespaces, pods, chart_defaults}}

(the lab runs it with the project's .venv, which has Helm's SDK; the lab's own venv has not).
"""

from __future__ import annotations

import copy
import functools
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from components.operations import benchmark
from components.stack import load_pulumi_values
from harness import charts
from harness.mock_engine import ProgramRun
from tests import webhook_reach
from tests.conftest import FIXTURE_STACKS, run_stack
from tools.render import kubernetes_objects
from tools.stack_file import stack_config_values

LABEL = "pod-security.kubernetes.io/"
RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass(frozen=True)
class Pod:
    owner: str  # what declares it, and where its template is
    namespace: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


@dataclass(frozen=True)
class HandWrittenPod:
    """The pod of a registry chart that cannot be rendered here, as its template builds it from the release's values."""

    version: str  # the chart version whose template this was read from
    source: str
    pod: Any  # (release values) -> (metadata, spec)


def _router_pod(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    epp = (values.get("router") or {}).get("epp") or {}
    spec = {
        "containers": [
            {
                "name": "epp",  # no securityContext in the template or the values
                "image": "ghcr.io/llm-d/llm-d-router-endpoint-picker",
                "ports": [{"containerPort": port} for port in (9002, 9003, 9090)],
                "livenessProbe": {"grpc": {"port": 9003}},
                "readinessProbe": {"grpc": {"port": 9003}},
            }
        ],
        "volumes": [*(epp.get("volumes") or []), {"name": "plugins-config-volume", "configMap": {"name": "router"}}],
    }
    return {"annotations": dict(epp.get("podAnnotations") or {})}, spec


# By the chart's name. The router's tokenizer, latency predictor and proxy containers are off by default
# (routerlib/values.yaml) and the program's values turn none on.
HAND_WRITTEN = {
    "llm-d-router-gateway": HandWrittenPod(
        "v0.10.0",
        "llm-d/llm-d-router v0.10.0 (71f4f09) config/charts/routerlib/templates/_deployment.yaml, values.yaml",
        _router_pod,
    )
}


def pod_templates(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, metadata, spec) of every pod template in an object, the object itself when it is a Pod: a mapping
    whose spec lists containers."""
    if isinstance(value, dict):
        spec = value.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield path or "(the pod)", value.get("metadata") or {}, spec
        for key, child in value.items():
            yield from pod_templates(child, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from pod_templates(child, f"{path}[{index}]")


def rendered_pods(objects: list[dict[str, Any]], owner: str = "") -> list[Pod]:
    pods = []
    for obj in objects:
        metadata = obj["metadata"]
        for where, pod_metadata, spec in pod_templates(obj):
            declared = f"{owner}{obj['kind']} {metadata.get('namespace')}/{metadata['name']} {where}"
            pods.append(Pod(declared, metadata["namespace"], pod_metadata, spec))
    return pods


def _registry_releases(run: ProgramRun) -> list[Any]:
    return [r for r in run.of_type(RELEASE) if not r.inputs["chart"].startswith(("./", "../", "/"))]


def chart_pods(run: ProgramRun, own_values_only: bool = False) -> list[Pod]:
    """The pods of every registry chart the stack installs (a local chart's are in the render): rendered by Helm
    from charts.lock, else written by hand; with the program's values, or the chart's own alone."""
    locked = {chart.release for chart in charts.load_lock()}
    pods = []
    for release in _registry_releases(run):
        inputs = {**release.inputs, "values": {}} if own_values_only else release.inputs
        name = inputs["chart"].rsplit("/", 1)[-1]
        owner = f"Helm release {release.name} ({name}): "
        if inputs["name"] in locked:
            pods += rendered_pods(webhook_reach.render_registry_release(inputs), owner)
        elif name in HAND_WRITTEN:
            metadata, spec = HAND_WRITTEN[name].pod(inputs.get("values") or {})
            pods.append(Pod(f"{owner}Deployment {inputs['namespace']}/{name}", inputs["namespace"], metadata, spec))
        else:
            raise LookupError(f"the stack installs the chart {inputs['chart']}: lock it in charts.lock")
    return pods


def bench_pods(stack: str) -> list[Pod]:
    """The Job `make bench` runs in the serving namespace (tools/bench.py builds it from the stack file)."""
    config = load_pulumi_values(*stack_config_values(stack, FIXTURE_STACKS)).config
    if not config.serving.enabled:
        return []
    ramp = benchmark.Ramp(run_id="pod-security", base_url="http://10.0.0.1/v1", rates=(1.0,), stage_seconds=60)
    return rendered_pods(benchmark.benchmark_objects(config.serving, config.project, config.pull_path(), ramp))


# GKE's Cloud Storage FUSE webhook adds its sidecar, a native one, to a pod annotated gke-gcsfuse/volumes: "true",
# with emptyDir volumes of its own; its security context follows restricted (GoogleCloudPlatform/gcs-fuse-csi-driver
# 855f0b69 pkg/webhook/sidecar_spec.go: GetSecurityContext, GetSidecarContainerVolumeSpec). GKE runs the version
# of its own choosing, so this is the injection as that source has it. The lab has no such webhook: the pods are
# handed to its API server as GKE's would pass them on (mutating webhooks run before PodSecurity's validation).
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
NOBODY = 65534


def with_gke_sidecars(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec as the API server admits it, once GKE's webhooks added their sidecars."""
    admitted = copy.deepcopy(dict(spec))
    if (metadata.get("annotations") or {}).get(GCSFUSE_ANNOTATION) != "true":
        return admitted
    sidecar = {
        "name": "gke-gcsfuse-sidecar",
        "image": "gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter",
        "restartPolicy": "Always",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
            "runAsNonRoot": True,
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
        },
    }
    admitted["initContainers"] = [sidecar, *(admitted.get("initContainers") or [])]
    volumes = ("gke-gcsfuse-tmp", "gke-gcsfuse-buffer", "gke-gcsfuse-cache")
    admitted["volumes"] = [*(admitted.get("volumes") or []), *({"name": v, "emptyDir": {}} for v in volumes)]
    return admitted


@dataclass(frozen=True)
class StackPods:
    namespaces: dict[str, dict[str, str]]  # namespace -> its Pod Security labels
    pods: list[Pod]  # as the API server is asked to admit them: with GKE's sidecars
    chart_defaults: list[Pod]  # the registry charts' pods from their own values alone, without the program's
    releases: dict[str, tuple[str, str]]  # registry chart name -> (version, namespace)


def _admitted(pod: Pod) -> Pod:
    return Pod(pod.owner, pod.namespace, pod.metadata, with_gke_sidecars(pod.metadata, pod.spec))


@functools.cache
def _stack_pods(stack: str) -> StackPods:
    run = run_stack(stack=stack)
    objects = kubernetes_objects(run.registrations)
    namespaces = {
        o["metadata"]["name"]: {k: v for k, v in (o["metadata"].get("labels") or {}).items() if k.startswith(LABEL)}
        for o in objects
        if o["kind"] == "Namespace"
    }
    pods = [_admitted(p) for p in [*rendered_pods(objects), *chart_pods(run), *bench_pods(stack)]]
    releases = {
        r.inputs["chart"].rsplit("/", 1)[-1]: (r.inputs["version"], r.inputs["namespace"])
        for r in _registry_releases(run)
    }
    return StackPods(namespaces, pods, chart_pods(run, own_values_only=True), releases)


def stack_pods(stack: str) -> StackPods:
    """A fresh copy, free to change."""
    return copy.deepcopy(_stack_pods(stack))


def main(stacks: list[str]) -> int:
    json.dump({stack: asdict(stack_pods(stack)) for stack in stacks}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
