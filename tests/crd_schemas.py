"""Strict validation of Kubernetes objects against the pinned upstream CRD files of schemas.lock.

Each locked file is looked up, in this order, in the schema cache `make schemas` fills
(harness.schemas.cache_dir(): $TPU_GKE_SCHEMAS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/schemas),
in $TPU_GKE_SCHEMAS_DIR, then in ../shared/schemas beside the repo; a directory counts only if it
holds the file with the locked sha256. Tests skip with the reason (run make schemas) when none does.
"Strict" means an object schema that lists its properties and does not preserve unknown fields
rejects any other field, as the API server's pruning would silently drop it.
"""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.schemas import LockedFile, cache_dir, holds, load_lock
from tests import external

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMAS_DIR_ENV = "TPU_GKE_SCHEMAS_DIR"
SHARED_SCHEMAS = REPO_ROOT.parent / "shared" / "schemas"

# Group -> CRD folder of the version this project pins (schemas.lock locks the files under crds/<folder>/).
PINNED_CRDS = {
    "kueue.x-k8s.io": "kueue-v0.17.8",
    "jobset.x-k8s.io": "jobset-v0.12.0",
    "leaderworkerset.x-k8s.io": "lws-v0.10.0",
    "gateway.networking.k8s.io": "gateway-api-v1.6.1",
    "inference.networking.k8s.io": "gateway-api-inference-extension-v1.5.0",
    "monitoring.googleapis.com": "prometheus-engine-v0.17.2",  # GKE's managed Prometheus (PodMonitoring)
    "secrets-store.csi.x-k8s.io": "secrets-store-csi-driver-v1.6.0",  # GKE's Secret Manager add-on
}


def schema_dirs(environ: dict[str, str] | None = None) -> list[Path]:
    """Where a locked file may be, in lookup order: the cache, $TPU_GKE_SCHEMAS_DIR, ../shared/schemas."""
    env = dict(os.environ) if environ is None else environ
    dirs = [cache_dir(env)]
    if env.get(SCHEMAS_DIR_ENV):
        dirs.append(Path(env[SCHEMAS_DIR_ENV]))
    return [*dirs, SHARED_SCHEMAS]


def find_locked(locked: LockedFile, dirs: list[Path]) -> tuple[Path | None, str]:
    """The first of `dirs` holding the locked file with its digest; else None and the skip reason."""
    for directory in dirs:
        if holds(directory, locked):
            return directory / locked.path, ""
    other = [str(d) for d in dirs if (d / locked.path).is_file()]
    found = f"; a copy with another digest is in {', '.join(other)}" if other else ""
    return None, (
        f"CRD schema {locked.path} (sha256 {locked.sha256[:12]}…) is in none of {', '.join(map(str, dirs))}"
        f"{found}: run make schemas (or set {SCHEMAS_DIR_ENV})"
    )


@cache
def _locked_files(folder: str) -> tuple[LockedFile, ...]:
    files = tuple(f for f in load_lock() if f.path.startswith(f"crds/{folder}/"))
    if not files:
        raise KeyError(f"schemas.lock locks no file under crds/{folder}/")
    return files


@cache
def _located(locked: LockedFile) -> tuple[Path | None, str]:
    return find_locked(locked, schema_dirs())


# What our objects may carry in metadata; anything else (a typo such as `lables`) is an error.
_STRICT_METADATA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def _strict(node: Any) -> None:
    """Forbid unknown fields in every object schema that lists its properties, recursively."""
    if not isinstance(node, dict):
        return
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        node["additionalProperties"] = False
    for key in ("properties", "patternProperties"):
        for sub in node.get(key, {}).values():
            _strict(sub)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, []):
            _strict(sub)
    for key in ("items", "additionalProperties", "not"):
        _strict(node.get(key))


@cache
def _crd_validators(folder: str) -> dict[tuple[str, str, str], Any]:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    paths = []
    for locked in _locked_files(folder):
        path, reason = _located(locked)
        if path is None:
            pytest.skip(reason)
        paths.append(path)
    validators = {}
    for path in paths:
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        if PINNED_CRDS.get(group) != folder:
            raise KeyError(
                f"schemas.lock locks {path.name} under crds/{folder}/, but its group {group} is not pinned there"
            )
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            _strict(schema)
            schema["properties"]["metadata"] = copy.deepcopy(_STRICT_METADATA)
            validators[(group, version["name"], kind)] = jsonschema.Draft202012Validator(schema)
    return validators


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every strict-schema violation of one custom object, as readable lines."""
    external.require("the CRD files of schemas.lock (make schemas fetches them)")
    group, _, version = obj["apiVersion"].rpartition("/")
    if group not in PINNED_CRDS:
        raise KeyError(f"no pinned CRD for {obj['apiVersion']}")
    validator = _crd_validators(PINNED_CRDS[group]).get((group, version, obj["kind"]))
    if validator is None:
        raise KeyError(f"{obj['kind']} {obj['apiVersion']} is not served by {PINNED_CRDS[group]}")
    return [
        f"{obj['kind']}/{obj['metadata'].get('name')}: {'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def is_custom(obj: dict[str, Any]) -> bool:
    return obj["apiVersion"].rpartition("/")[0] in PINNED_CRDS


# Strict validation in two halves: the core kinds against kubernetes-validate's schemas (in .venv: make test), the
# custom kinds against the pinned CRD files (fetched by make schemas: marked external, make check-tools).
HALVES = [pytest.param("core", id="core"), pytest.param("crd", id="crd", marks=pytest.mark.external)]


def strict_errors(obj: dict[str, Any], half: str) -> list[str]:
    """The object's violations if it belongs to ``half`` (a param of HALVES), else none."""
    if is_custom(obj) != (half == "crd"):
        return []
    return crd_errors(obj) if half == "crd" else core_errors(obj)


def core_errors(obj: dict[str, Any]) -> list[str]:
    """Strict validation of a core Kubernetes object with kubernetes-validate."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    try:
        kubernetes_validate.validate(obj, CORE_KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{obj['kind']}/{obj['metadata'].get('name')}: {error.message}"]
    return []


CORE_KUBERNETES_VERSION = "1.33"
