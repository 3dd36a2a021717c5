"""The engine side of the lab: one stack driven through the Automation API, and what each operation did.

The program is the project's own __main__.py, run in this process as the Automation API's inline program:
the real CLI connects to the SDK's own language server (the Go module proxy refuses the Python language
host's module). Each test module opens a stack of its own with ``open_lab`` and closes it with
``close_lab``, which takes down whatever a failed test left up.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from tests.conftest import stack_values, with_overrides
from tests.itest.conftest import Report
from tests.itest.lab import (
    PROJECT_NAME,
    REPO_ROOT,
    REPORT_DIR,
    ControlPlane,
    KubeApi,
    PulumiHome,
    config_text,
    flatten_config,
    mock_render,
    object_key,
)
from tests.test_gcp_existing_cluster import LAB

HF_TOKEN = "hf_lab_0f8e2c71d4a94b6e9c35"  # a real --secret value: it must never reach the state in plain text
SECRET_PATHS = ("cluster.existing.kubeconfig", "serving.hfToken")
SECRET_TOP_LEVEL_KEYS = ("cluster", "serving")
WORKLOAD_NAMESPACE = "llm-d-pd-disaggregation"
DYNAMIC_DEFAULT_PROVIDER = "pulumi:providers:pulumi-python::default"
REPLACE_STEPS = ("replace", "create-replacement", "delete-replaced")

# A STAND-IN for GKE's slices.accelerator.gke.io: the real CRD comes with GKE's slice controller, which the
# lab does not have. Cluster-scoped, as components/platform/drain.py lists Slices; only what the drain gate
# reads (that one exists) matters. Not a model of the real schema.
STAND_IN_SLICE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "slices.accelerator.gke.io", "labels": {"tpu-gke.lab/stand-in": "true"}},
    "spec": {
        "group": "accelerator.gke.io",
        "scope": "Cluster",
        "names": {"plural": "slices", "singular": "slice", "kind": "Slice", "listKind": "SliceList"},
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}
STAND_IN_SLICE = {
    "apiVersion": "accelerator.gke.io/v1beta1",
    "kind": "Slice",
    "metadata": {"name": "lab-stand-in-slice", "finalizers": ["tpu-gke.lab/held-by-the-test"]},
    "spec": {"type": "tpu7x", "topology": "2x2x2"},
}


@dataclass
class Operation:
    """What one engine operation did: each resource step (op by URN), its diagnostics and its output."""

    steps: dict[str, str] = field(default_factory=dict)  # urn -> op ("replace" for any step of a replacement)
    all_ops: dict[str, list[str]] = field(default_factory=dict)  # urn -> every step's op, in order
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # urn -> new inputs
    old_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # urn -> inputs before the step
    diagnostics: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    order: list[tuple[float, str, str]] = field(default_factory=list)  # (timestamp, op, urn) as the engine began them
    diffs: dict[str, list[str]] = field(default_factory=dict)  # urn -> the properties that differ

    def on_event(self, event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            metadata = event.resource_pre_event.metadata
            op = str(metadata.op.value)
            self.all_ops.setdefault(metadata.urn, []).append(op)
            self.steps[metadata.urn] = "replace" if op in REPLACE_STEPS else op
            self.order.append((event.timestamp, str(metadata.op.value), metadata.urn))
            if metadata.diffs:
                self.diffs[metadata.urn] = list(metadata.diffs)
            if metadata.new is not None and metadata.new.inputs is not None:
                self.inputs[metadata.urn] = metadata.new.inputs
            if metadata.old is not None and metadata.old.inputs is not None:
                self.old_inputs[metadata.urn] = metadata.old.inputs
        if event.diagnostic_event is not None:
            self.diagnostics.append(event.diagnostic_event.message.strip())

    def on_output(self, line: str) -> None:
        self.output.append(line)

    def ops_of(self, name: str) -> list[str]:
        return [op for urn, ops in self.all_ops.items() if urn.split("::")[-1] == name for op in ops]

    def changed(self) -> dict[str, str]:
        """Name -> op of every step that changes something (a provider's name is qualified by its type)."""
        return {_short(urn): op for urn, op in self.steps.items() if op not in ("same", "read")}

    def changed_by_the_program(self) -> dict[str, str]:
        """What ``changed`` shows but the update of the dynamic providers' default provider: the engine
        configures it with the whole stack config (pulumi.dynamic's Configure keeps it for the providers'
        ``configure``), so any `pulumi config set` updates it, and nothing else."""
        changed = self.changed()
        if changed.get(DYNAMIC_DEFAULT_PROVIDER) == "update":
            del changed[DYNAMIC_DEFAULT_PROVIDER]
        return changed

    def text(self) -> str:
        return "\n".join([*self.output, *self.diagnostics])


def _short(urn: str) -> str:
    kind = urn.split("::")[-2].split("$")[-1]
    name = urn.split("::")[-1]
    return f"{kind}::{name}" if kind.startswith("pulumi:providers:") else name


@dataclass
class Lab:
    stack: auto.Stack
    home: PulumiHome
    plane: ControlPlane
    api: KubeApi
    report: Report
    kubeconfig: str
    expected: list[dict[str, Any]]  # the Kubernetes objects of the mock run of the same config
    registrations: list[tuple[str, str]]  # (type, name) the program registers under the mocks
    state: dict[str, Any] = field(default_factory=dict)
    count: int = 0

    def run(
        self, name: str, call: Callable[[Operation], Any], operation: Operation | None = None
    ) -> tuple[Operation, Any]:
        """Run one engine operation, timed, its output kept in build/itest/logs/ and its result in the report."""
        self.count += 1
        operation = operation or Operation()
        began = time.monotonic()
        result: Any = None
        status = "ok"
        try:
            result = call(operation)
            summary = getattr(result, "change_summary", None) or getattr(
                getattr(result, "summary", None), "resource_changes", None
            )
            operation.summary = {str(getattr(k, "value", k)): v for k, v in (summary or {}).items()}
            return operation, result
        except Exception as error:
            status = f"failed: {str(error)[:1500]}"
            raise
        finally:
            seconds = time.monotonic() - began
            changed = operation.changed()
            diffs = {_short(u): d for u, d in operation.diffs.items() if operation.steps.get(u) not in ("same", "read")}
            self.report.operation(
                f"pulumi {name}", seconds, status, summary=operation.summary, changed=changed, diffs=diffs
            )
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
            log = REPORT_DIR / "logs" / f"{self.stack.name}-{self.count:02d}-{slug}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(operation.text() + "\n")

    def up(self, name: str) -> Operation:
        operation, _ = self.run(
            name, lambda op: self.stack.up(on_output=op.on_output, on_event=op.on_event, color="never", diff=True)
        )
        return operation

    def served(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return self.api.object(obj)

    def expected_object(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [o for o in self.expected if o["kind"] == kind and o["metadata"]["name"] == name]
        return found

    def require(self, key: str) -> Any:
        if key not in self.state:
            pytest.skip(f"needs the step that records {key!r}, which did not pass")
        return self.state[key]


def lab_overrides(kubeconfig: str) -> dict[str, Any]:
    overrides = dict(LAB)
    overrides["cluster.existing"] = {**LAB["cluster.existing"], "kubeconfig": kubeconfig}
    overrides["serving.hfToken"] = HF_TOKEN
    return overrides


def program() -> None:
    """The project's own __main__.py, as `pulumi up` in the project directory would run it."""
    runpy.run_path(str(REPO_ROOT / "__main__.py"), run_name="__pulumi_main__")


def kubernetes_objects_of(
    operation: Operation, ops: tuple[str, ...], before: bool = False
) -> dict[str, dict[str, Any]]:
    """The Kubernetes objects (by kind, namespace and name) of the steps ``ops``, with their inputs."""
    objects = {}
    for urn, inputs in (operation.old_inputs if before else operation.inputs).items():
        is_kubernetes = urn.split("::")[-2].split("$")[-1].startswith("kubernetes:")
        if is_kubernetes and operation.steps.get(urn) in ops and "kind" in inputs and "metadata" in inputs:
            objects[object_key(inputs)] = inputs
    return objects


def open_lab(name: str, control_plane: ControlPlane, api: KubeApi, pulumi_home: PulumiHome, report: Report) -> Lab:
    """``pulumi stack init <name>`` in the lab's project, with the stand-in Slice CRD installed and the mock
    render of the same config at hand."""
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(STAND_IN_SLICE_CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/slices.accelerator.gke.io")
    kubeconfig = control_plane.inline_kubeconfig
    overrides = lab_overrides(kubeconfig)
    rendered = mock_render(overrides, SECRET_TOP_LEVEL_KEYS)
    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(pulumi_home.project_dir),
        pulumi_command=auto.PulumiCommand(root=str(pulumi_home.cli_root), skip_version_check=True),
        env_vars=pulumi_home.env(),
        secrets_provider="passphrase",
        project_settings=auto.ProjectSettings(name=PROJECT_NAME, runtime="python"),
    )
    began = time.monotonic()
    stack = auto.create_stack(name, project_name=PROJECT_NAME, program=program, opts=workspace)
    report.operation(f"pulumi stack init {name}", time.monotonic() - began, "ok")
    return Lab(
        stack,
        pulumi_home,
        control_plane,
        api,
        report,
        kubeconfig,
        rendered["objects"],
        [tuple(r) for r in rendered["registrations"]],
        state={"overrides": overrides},
    )


def stack_config(lab: Lab) -> dict[str, auto.ConfigValue]:
    """The lab stack's whole config as `pulumi config set-all --path` takes it, secrets marked."""
    values = with_overrides(stack_values("dev"), lab.state["overrides"])
    config = {}
    for top, value in values.items():
        leaves = flatten_config(value, top) if isinstance(value, dict | list) else {top: value}
        for path, leaf in leaves.items():
            config[f"{PROJECT_NAME}:{path}"] = auto.ConfigValue(config_text(leaf), secret=path in SECRET_PATHS)
    return config


def release_stand_in_slice(control_plane: ControlPlane) -> None:
    """Delete the stand-in Slice and take off its finalizer, wherever a test left it."""
    name = STAND_IN_SLICE["metadata"]["name"]
    control_plane.kubectl("delete", "slice", name, "--wait=false", "--ignore-not-found", check=False)
    control_plane.kubectl(
        "patch", "slice", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False
    )  # fmt: skip


def close_lab(lab: Lab, remove: bool = False) -> None:
    """Take down what a failed test left up, so the next module starts on an empty cluster."""
    if lab.state.get("up") and not lab.state.get("destroyed"):
        release_stand_in_slice(lab.plane)
        lab.run(
            "destroy (cleanup after a failure)", lambda op: lab.stack.destroy(on_output=op.on_output, color="never")
        )
    if remove:
        lab.stack.workspace.remove_stack(lab.stack.name)


def state_of(lab: Lab) -> dict[str, Any]:
    """`pulumi stack export` of the lab's stack (secrets stay encrypted)."""
    exported: dict[str, Any] = json.loads(lab.home.cli("stack", "export", "--stack", lab.stack.name).stdout)
    deployment: dict[str, Any] = exported["deployment"]
    return deployment


def processes() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) of every process on the machine."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        found[int(entry.name)] = (int(stat.rpartition(")")[2].split()[1]), argv)
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the CLI's plugins, the language runtime's children)."""
    table = processes()
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, (ppid, _) in table.items() if ppid == parent]
        found += children
        todo += children
    return found


def cli_of(operation: str) -> int | None:
    """The pid of this process's `pulumi <operation>` child, the CLI the Automation API started."""
    for pid, (ppid, argv) in processes().items():
        if ppid == os.getpid() and argv and os.path.basename(argv[0]) == "pulumi" and operation in argv[1:3]:
            return pid
    return None


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
