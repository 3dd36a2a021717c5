"""Offline preview: run the program for one stack under mocks and write build/render/<stack>/.

    python -m tools.render --stack dev [--out build/render]

Writes resources.json, kubernetes.yaml and outputs.json and prints a summary. kubernetes.yaml
holds every object the program declares plus the objects of Helm releases from a local chart
(rendered with helm-python-sdk, as Helm would install them); releases of published charts stay
in resources.json only, since rendering them would need the registry. An invalid stack config
prints the validation message, exits 1 and leaves no render behind.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from tools.mock_engine import PROJECT_ROOT, ProgramRun, Registration, run_program, sanitize, stack_config_values

# Types whose inputs are a Kubernetes object (not Helm releases, providers or our components).
_NOT_OBJECTS = ("pulumi:providers:", "kubernetes:helm.sh/")
_HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def render(stack: str, stack_dir: Path = PROJECT_ROOT) -> tuple[dict[str, str], ProgramRun]:
    """The three render files for ``stack`` as text, plus the run they came from."""
    values, secret_keys = stack_config_values(stack, stack_dir)
    run = run_program(values, secret_keys, stack=stack, preview=True)
    files = {
        "resources.json": _json(resources_document(run.registrations)),
        "kubernetes.yaml": kubernetes_document(run.registrations),
        "outputs.json": _json(dict(sorted(run.outputs.items()))),
    }
    return files, run


def resources_document(registrations: list[Registration]) -> list[dict[str, Any]]:
    entries = [
        {"type": r.type, "name": r.name, "parent": r.parent, "inputs": sanitize(r.inputs)} for r in registrations
    ]
    return sorted(entries, key=lambda e: (e["type"], e["name"]))


def kubernetes_objects(registrations: list[Registration]) -> list[dict[str, Any]]:
    objects = []
    for r in registrations:
        if r.type == _HELM_RELEASE and _is_local_chart(r.inputs["chart"]):
            objects.extend(local_chart_objects(r.inputs))
            continue
        if not r.type.startswith("kubernetes:") or r.type.startswith(_NOT_OBJECTS):
            continue
        inputs = sanitize(r.inputs)
        if "objs" in inputs:  # yaml/v2 ConfigGroup
            objects.extend(inputs["objs"])
        elif "apiVersion" in inputs and "kind" in inputs:
            objects.append(inputs)
    return sorted(objects, key=_object_sort_key)


def _is_local_chart(chart: str) -> bool:
    return chart.startswith(("./", "../", "/"))


def local_chart_objects(release: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects Helm would install for a release of a chart in this repository."""
    import helm_python  # a dev dependency: binds Helm's Go SDK, so no helm binary is needed

    with helm_python.Chart.load(PROJECT_ROOT / release["chart"]) as chart:
        manifests = chart.render(release.get("values") or {}, name=release["name"], namespace=release["namespace"])
    return [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]


def _object_sort_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    metadata = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata.get("name", ""))


def kubernetes_document(registrations: list[Registration]) -> str:
    objects = kubernetes_objects(registrations)
    return yaml.safe_dump_all(objects, sort_keys=True) if objects else ""


def summary(stack: str, run: ProgramRun, stack_dir: Path = PROJECT_ROOT) -> list[str]:
    from components import stack as stack_config

    values, _ = stack_config_values(stack, stack_dir)
    config = stack_config.parse_pulumi_values(values)
    counts = collections.Counter(r.type for r in run.registrations)
    lines = [f"stack {stack}: {len(run.registrations)} resources"]
    lines += [f"  {count:3d}  {type_token}" for type_token, count in sorted(counts.items())]
    lines += ["TPU capacity:"] + [f"  {line}" for line in config.capacity_report().lines()]
    lines += ["TPU admission:"] + [f"  {line}" for line in run.outputs.get("admissionPlan", ["no slice workloads"])]
    return lines


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "build" / "render")
    parser.add_argument("--stack-dir", type=Path, default=PROJECT_ROOT, help="folder holding Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    target = args.out / args.stack
    if target.exists():
        shutil.rmtree(target)  # a stale render must never pass for the current one
    from components.config_base import ConfigError

    try:
        files, run = render(args.stack, args.stack_dir)
    except ConfigError as error:
        print(f"render of stack {args.stack} failed:\n{error}", file=sys.stderr)
        return 1
    except FileNotFoundError as error:
        print(f"render of stack {args.stack} failed: {error}", file=sys.stderr)
        return 1
    target.mkdir(parents=True)
    for name, text in files.items():
        (target / name).write_text(text)
    print("\n".join(summary(args.stack, run, args.stack_dir)))
    print(f"wrote {target.relative_to(PROJECT_ROOT) if target.is_relative_to(PROJECT_ROOT) else target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
