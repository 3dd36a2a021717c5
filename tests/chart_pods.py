"""The pods the registry charts run, as their templates at the pinned versions build them from a release's values:
only the fields the Pod Security Standards read (tests/pod_security.py), for tests/test_pod_security.py.

The render holds no object of these charts (tools/render.py renders local charts only: the registry ones would need
the registry), so each chart's pod is written out here from its template and default values, read at the pinned
tag, and built from the values the program hands the release, merged over the chart's own as Helm merges them. Each
carries the chart version it was read at: a release of another version fails the test until its pod is read again.
Also here: the sidecar GKE's Cloud Storage FUSE webhook injects into a pod that asks for it (the API server holds
the pod to its namespace's level with the sidecar in it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Values = Mapping[str, Any]
PodParts = tuple[dict[str, Any], dict[str, Any]]  # (metadata, spec)


def merged(defaults: Values, values: Values) -> dict[str, Any]:
    """``values`` over a chart's ``defaults`` as Helm coalesces them: mappings merged key by key, anything else
    replaced."""
    result = copy.deepcopy(dict(defaults))
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _probe(port: int, path: str) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}}


@dataclass(frozen=True)
class ChartPod:
    chart: str  # the chart's name, the last part of its reference
    version: str  # the chart version whose templates this was read from
    source: str
    defaults: Values  # the chart's own values that the pod's template reads
    build: Callable[[Values], PodParts]  # merged values -> the pod

    def pod(self, release_values: Values) -> PodParts:
        return self.build(merged(self.defaults, release_values))


def _jobset(values: Values) -> PodParts:
    controller = values["controller"]
    spec: dict[str, Any] = {
        "securityContext": controller["podSecurityContext"],
        "containers": [
            {
                "name": "controller",
                "securityContext": controller["securityContext"],
                "ports": [{"containerPort": port} for port in (8081, 9443, 8443)],
                "livenessProbe": _probe(8081, "/healthz"),
                "readinessProbe": _probe(8081, "/readyz"),
            }
        ],
        "volumes": [
            {"name": "manager-config", "configMap": {"name": "jobset-manager-config"}},
            *controller["volumes"],
            {"name": "webhook-cert", "secret": {"secretName": "jobset-webhook-server-cert"}},
        ],
    }
    if controller["hostNetwork"]:
        spec["hostNetwork"] = True
    return {"annotations": dict(controller["podAnnotations"])}, spec


def _kueue(values: Values) -> PodParts:
    manager = values["controllerManager"]["manager"]
    visibility = (
        {"secret": {"secretName": "kueue-visibility-server-cert"}} if values["enableCertManager"] else {"emptyDir": {}}
    )
    spec = {
        "securityContext": manager["podSecurityContext"],
        "containers": [
            {
                "name": "manager",
                "securityContext": manager["containerSecurityContext"],
                "ports": [{"containerPort": port} for port in (8082, 9443, 8443)],
                "livenessProbe": _probe(8081, "/healthz"),
                "readinessProbe": _probe(8081, "/readyz"),
            }
        ],
        "volumes": [
            {"name": "cert", "secret": {"secretName": "kueue-webhook-server-cert"}},
            {"name": "manager-config", "configMap": {"name": "kueue-manager-config"}},
            {"name": "visibility", **visibility},
        ],
    }
    return {"annotations": dict(manager["podAnnotations"])}, spec


def _lws(values: Values) -> PodParts:
    spec = {
        "securityContext": values["podSecurityContext"],
        "containers": [
            {
                "name": "manager",
                "securityContext": values["securityContext"],
                "ports": [{"containerPort": 9443}],
                "livenessProbe": _probe(8081, "/healthz"),
                "readinessProbe": _probe(8081, "/readyz"),
            }
        ],
        "volumes": [
            {"name": "manager-config", "configMap": {"name": "lws-manager-config"}},
            {"name": "cert", "secret": {"secretName": "lws-webhook-server-cert"}},
        ],
    }
    return {"annotations": dict(values["podAnnotations"])}, spec


def _router(values: Values) -> PodParts:
    epp = values["router"]["epp"]
    spec = {
        "containers": [
            {
                "name": "epp",  # no securityContext in the template or the values
                "ports": [{"containerPort": port} for port in (9002, 9003, 9090)],
                "livenessProbe": {"grpc": {"port": 9003}},
                "readinessProbe": {"grpc": {"port": 9003}},
            }
        ],
        "volumes": [*(epp.get("volumes") or []), {"name": "plugins-config-volume", "configMap": {"name": "router"}}],
    }
    return {"annotations": dict(epp["podAnnotations"])}, spec


# By the chart's name. The router's tokenizer, latency predictor and proxy containers are off by default
# (routerlib/values.yaml) and the program's values turn none on.
CHART_PODS = {
    pod.chart: pod
    for pod in (
        ChartPod(
            "jobset",
            "0.12.0",
            "kubernetes-sigs/jobset v0.12.0 (f22e565) charts/jobset/templates/controller/deployment.yaml, values.yaml",
            {
                "controller": {
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "hostNetwork": False,
                    "volumes": [],
                    "podAnnotations": {},
                }
            },
            _jobset,
        ),
        ChartPod(
            "kueue",
            "0.17.8",
            "kubernetes-sigs/kueue v0.17.8 (818686e) charts/kueue/templates/manager/manager.yaml, values.yaml",
            {
                "enableCertManager": False,
                "controllerManager": {
                    "manager": {
                        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containerSecurityContext": {
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "podAnnotations": {},
                    }
                },
            },
            _kueue,
        ),
        ChartPod(
            "lws",
            "0.10.0",
            "kubernetes-sigs/lws v0.10.0 (2161f38) charts/lws/templates/manager/deployment.yaml, values.yaml",
            {
                "podSecurityContext": {"runAsNonRoot": True},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "podAnnotations": {},
            },
            _lws,
        ),
        ChartPod(
            "llm-d-router-gateway",
            "v0.10.0",
            "llm-d/llm-d-router v0.10.0 (71f4f09) config/charts/routerlib/templates/_deployment.yaml, values.yaml",
            {"router": {"epp": {"podAnnotations": {}}}},
            _router,
        ),
    )
}

# GKE's Cloud Storage FUSE webhook adds its sidecar, a native one, to a pod annotated gke-gcsfuse/volumes: "true",
# with emptyDir volumes of its own; its security context follows restricted (GoogleCloudPlatform/gcs-fuse-csi-driver
# 855f0b69 pkg/webhook/sidecar_spec.go: GetSecurityContext, GetSidecarContainerVolumeSpec). GKE runs the version
# of its own choosing, so this is the injection as that source has it.
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
NOBODY = 65534


def with_gke_sidecars(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec as the API server admits it, once GKE's webhooks added their sidecars."""
    admitted = copy.deepcopy(dict(spec))
    if (metadata.get("annotations") or {}).get(GCSFUSE_ANNOTATION) != "true":
        return admitted
    sidecar = {
        "name": "gke-gcsfuse-sidecar",
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
