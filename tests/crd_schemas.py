"""Strict validation of Kubernetes objects against the pinned CRD schemas in shared/schemas.

The schema directory comes from $TPU_GKE_SCHEMAS_DIR, else ../shared/schemas beside the repo;
tests skip with the reason when it or a schema is absent. "Strict" means an object schema that
lists its properties and does not preserve unknown fields rejects any other field, as the API
server's pruning would silently drop it.
"""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMAS_DIR = Path(os.environ.get("TPU_GKE_SCHEMAS_DIR", REPO_ROOT.parent / "shared" / "schemas"))

# Group -> CRD folder of the version this project pins.
PINNED_CRDS = {
    "kueue.x-k8s.io": "kueue-v0.17.4",
    "jobset.x-k8s.io": "jobset-v0.11.1",
    "leaderworkerset.x-k8s.io": "lws-v0.8.0",
    "gateway.networking.k8s.io": "gateway-api-v1.6.1",
    "inference.networking.k8s.io": "gateway-api-inference-extension-v1.5.0",
}


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
    directory = SCHEMAS_DIR / "crds" / folder
    if not directory.is_dir():
        pytest.skip(f"CRD schemas {directory} are absent (set TPU_GKE_SCHEMAS_DIR)")
    validators = {}
    for path in sorted(directory.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            _strict(schema)
            schema["properties"]["metadata"] = copy.deepcopy(_STRICT_METADATA)
            validators[(group, version["name"], kind)] = jsonschema.Draft202012Validator(schema)
    return validators


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every strict-schema violation of one custom object, as readable lines."""
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


def core_errors(obj: dict[str, Any]) -> list[str]:
    """Strict validation of a core Kubernetes object with kubernetes-validate."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    try:
        kubernetes_validate.validate(obj, CORE_KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{obj['kind']}/{obj['metadata'].get('name')}: {error.message}"]
    return []


CORE_KUBERNETES_VERSION = "1.33"
