"""Loads the YAML bases under manifests/ as plain dicts, and the edits the Python overlays share."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"


@cache
def _load(relative_path: str) -> str:
    with open(MANIFESTS / relative_path) as stream:
        # Kept as JSON: each load decodes fresh objects (three times faster than a deep copy), and it unshares the
        # nodes YAML anchors alias (the env of a leader and its worker, say), so an overlay of one never leaks into
        # the other. libyaml's parser (the safe loader's C twin, as tools/render.py reads) parses them ten times faster.
        return json.dumps([doc for doc in yaml.load_all(stream, Loader=yaml.CSafeLoader) if doc])


def _placed(documents: list[dict[str, Any]], namespace: str | None) -> list[dict[str, Any]]:
    """``documents``, each moved to ``namespace`` (from its base's placeholder), or left where they are (None)."""
    if namespace is not None:
        for document in documents:
            document["metadata"]["namespace"] = namespace
    return documents


def load_documents(relative_path: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """Fresh copies of every document in a manifest file, safe to overlay, each in ``namespace`` if given."""
    return _placed(json.loads(_load(relative_path)), namespace)


def load_document(relative_path: str, namespace: str | None = None) -> dict[str, Any]:
    """A fresh copy of the one document of a manifest file, in ``namespace`` if given."""
    (document,) = load_documents(relative_path, namespace)
    return document


def load_list(relative_path: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """Fresh copies of the items of a manifest file's one ``kind: List`` document (kubectl applies each item), whose
    items share YAML anchors: a fact they all use is written once. Each item is in ``namespace``, if given."""
    return _placed(list(load_document(relative_path)["items"]), namespace)


def by_kind(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (document,) = [d for d in documents if d["kind"] == kind]
    return document


def by_name(documents: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (document,) = [d for d in documents if d["metadata"]["name"] == name]
    return document


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    """A ConfigMap of ``data`` (a program and its files, mounted by the pods that run it)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def container(pod_spec: dict[str, Any], name: str, key: str = "containers") -> dict[str, Any]:
    """The container (or init container, with ``key``) ``name`` of a base's pod spec."""
    found: dict[str, Any]
    for found in pod_spec.get(key, []):
        if found["name"] == name:
            return found
    raise ValueError(f"the base has no {key[:-1]} named {name!r}")


def set_env(target: dict[str, Any], name: str, value: str | int | dict[str, Any]) -> None:
    """Set env var ``name`` of a container: a plain value, or ``{"valueFrom": ...}``."""
    entry = {"name": name, **(value if isinstance(value, dict) else {"value": str(value)})}
    env = target.setdefault("env", [])
    for index, existing in enumerate(env):
        if existing["name"] == name:
            env[index] = entry
            return
    env.append(entry)


def remove_env(target: dict[str, Any], name: str) -> None:
    """Remove env var ``name`` of a container; a base without it is an error (the overlay is out of date)."""
    env = target.get("env", [])
    kept = [entry for entry in env if entry["name"] != name]
    if len(kept) == len(env):
        raise ValueError(f"the container {target.get('name')!r} has no env var {name!r} to remove")
    target["env"] = kept


def set_flag(args: list[str], flag: str, value: Any, *, optional: bool = False) -> None:
    """Replace ``flag=...`` (``flag`` with its dashes) in a base's arguments; objects become JSON; None takes the flag
    out. A flag missing from the base is an error (the YAML base is the place to add arguments), but an ``optional``
    one, a setting unset by default that the base cannot hold, is added at the end."""
    if value is None:
        args[:] = [arg for arg in args if not (arg == flag or arg.startswith(flag + "="))]
        return
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    for index, arg in enumerate(args):
        if arg == flag or arg.startswith(flag + "="):
            args[index] = f"{flag}={text}"
            return
    if not optional:
        raise ValueError(f"the base's arguments have no {flag}")
    args.append(f"{flag}={text}")


def files_digest(files: dict[str, str]) -> str:
    """One sha256 over named texts (a ConfigMap's data), names and lengths included, so no two sets of files share
    it: the pod template annotation that makes a workload roll, or be replaced, when what it mounts changes."""
    hasher = hashlib.sha256()
    for name in sorted(files):
        hasher.update(f"{name}\0{len(files[name].encode())}\0".encode() + files[name].encode())
    return hasher.hexdigest()


# On the pod template of a Job or JobSet that runs a program of the repository from a ConfigMap: the program's digest.
SCRIPT_DIGEST_ANNOTATION = "tpu-gke.dev/script-sha256"


def mark_mounted_files(
    pod_template: dict[str, Any], files: dict[str, str], annotation: str = SCRIPT_DIGEST_ANNOTATION
) -> None:
    """Annotate ``pod_template`` with the digest of ``files``, the ConfigMap data its pods mount. A ConfigMap
    updates in place, and the kubelet refreshes a mounted ConfigMap's files in running pods (kubernetes/website
    content/en/docs/concepts/configuration/configmap.md, "Mounted ConfigMaps are updated automatically"): a program
    already running keeps what it read, a pod restarted mid-run reads the new files, and nothing runs again. With the
    digest on the template, new files change the workload: a Job's or JobSet's template is immutable and the program
    replaces it (it runs again), a DaemonSet rolls."""
    pod_template.setdefault("metadata", {}).setdefault("annotations", {})[annotation] = files_digest(files)


def pods_by_image(*objects: dict[str, Any]) -> dict[str, int | None]:
    """How many pods of the workloads ``objects`` start when they are created, by each image they run (containers and
    init containers): a Deployment's or StatefulSet's replicas, a Job's parallelism, a JobSet's replicated Jobs, a
    LeaderWorkerSet's leaders and workers (replicas groups of `size` pods, the leader's template for one of each when
    it has one). None for a DaemonSet (a pod on each node it selects); nothing for a kind that runs no pod."""
    templates: list[tuple[int | None, dict[str, Any]]] = []
    for obj in objects:
        kind, spec = obj.get("kind"), obj.get("spec") or {}
        if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            templates.append((spec.get("replicas", 1), spec["template"]))
        elif kind == "Job":
            templates.append((spec.get("parallelism", 1), spec["template"]))
        elif kind == "DaemonSet":
            templates.append((None, spec["template"]))
        elif kind == "JobSet":
            for replicated in spec.get("replicatedJobs") or []:
                job = replicated["template"]["spec"]
                templates.append((replicated.get("replicas", 1) * job.get("parallelism", 1), job["template"]))
        elif kind == "LeaderWorkerSet":
            groups, group = spec.get("replicas", 1), spec["leaderWorkerTemplate"]
            size = group.get("size", 1)
            if "leaderTemplate" in group:
                templates += [(groups, group["leaderTemplate"]), (groups * (size - 1), group["workerTemplate"])]
            else:
                templates.append((groups * size, group["workerTemplate"]))
    counts: dict[str, int | None] = {}
    for pods, template in templates:
        pod = template.get("spec") or {}
        for image in {c["image"] for key in ("containers", "initContainers") for c in pod.get(key) or []}:
            before = counts.get(image, 0)
            counts[image] = None if pods is None or before is None else before + pods
    return counts
