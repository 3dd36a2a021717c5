"""Slice-check JobSets: JAX proves that sub-slicing and super-slicing hand out whole TPU slices.

Pure Python (no Pulumi imports). The YAML bases under ``manifests/slice-checks/`` are real
manifests; this module loads them and overlays, on deep copies of the parsed dicts, what varies
per stack: namespace, Kueue queue and priority labels, image, hold time, and everything that
follows from the slice shape and the machine type (parallelism, device counts, TPU requests).

Device arithmetic on TPU7x (``tpu7x-standard-4t``): 4 chips per host, and JAX shows each chip as
2 devices (one per TensorCore chiplet), so a host has 8 devices and a slice ``chips x 2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import manifests
from components.topology import MACHINE_CATALOG, MachineType, Shape, is_sub_slice, is_super_slice

MANIFEST_DIR = Path(__file__).resolve().parent.parent / "manifests" / "slice-checks"

SUBSLICING = "subslicing"
SUPERSLICING = "superslicing"
BASE_FILES = {SUBSLICING: "subslicing-check.yaml", SUPERSLICING: "superslicing-check.yaml"}

SCRIPT_FILE = "check_devices.py"
SCRIPT_CONFIGMAP_NAME = "slice-check-script"
SCRIPT_MOUNT_PATH = "/checks"
CONTAINER_NAME = "jax-check"

# A dated tag of Google's JAX image for Cloud TPU (JAX 0.9.0; Python and JAX in /opt/venv, on PATH).
# Seen on TPU7x in public repositories; not checked against the registry from here.
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9.0-rev1"
DEFAULT_MACHINE_TYPE = "tpu7x-standard-4t"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"
ACCELERATOR_NODE_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_RESOURCE = "google.com/tpu"



# --- What a slice shape means on a machine type -------------------------------------------


def jax_devices_per_chip(machine: MachineType) -> int:
    """JAX devices one chip of ``machine`` shows up as.

    TPU7x chips are two TensorCore chiplets and JAX exposes each as a device (2 per chip); a v5e
    chip has one TensorCore and is one device. Both equal the TensorCores per chip, which is what
    this returns; megacore generations (v4, v5p: 2 TensorCores, 1 device) are not in the catalog.
    """
    return machine.tensorcores_per_chip


@dataclass(frozen=True)
class SliceFacts:
    """The numbers a check pod needs for one slice of ``shape`` on ``machine``."""

    shape: Shape
    machine: MachineType

    @property
    def chips(self) -> int:
        return self.shape.chips

    @property
    def hosts(self) -> int:
        """Pods per slice: the Job's parallelism and completions."""
        return self.machine.hosts(self.shape)

    @property
    def expected_global_devices(self) -> int:
        return self.chips * jax_devices_per_chip(self.machine)

    @property
    def expected_local_devices(self) -> int:
        return self.machine.chips_per_host * jax_devices_per_chip(self.machine)


def slice_facts(shape: str, machine_type: str = DEFAULT_MACHINE_TYPE) -> SliceFacts:
    """Facts of one ``shape`` slice (e.g. ``2x2x2``) on ``machine_type``; ValueError when unknown."""
    if machine_type not in MACHINE_CATALOG:
        raise ValueError(f"unknown machine type {machine_type!r}; known: {', '.join(sorted(MACHINE_CATALOG))}")
    facts = SliceFacts(Shape.parse(shape), MACHINE_CATALOG[machine_type])
    facts.machine.hosts(facts.shape)  # raises when the shape splits a host
    return facts


# --- The JobSets ---------------------------------------------------------------------------


def load_base(check: str) -> dict[str, Any]:
    """A fresh copy of the YAML base of ``check`` (``subslicing`` or ``superslicing``)."""
    if check not in BASE_FILES:
        raise ValueError(f"unknown slice check {check!r}; use {SUBSLICING!r} or {SUPERSLICING!r}")
    return manifests.load_document(f"slice-checks/{BASE_FILES[check]}")


def _shape_problem(check: str, shape: Shape, machine: MachineType) -> str | None:
    if not machine.dynamic_slicing:
        return f"{machine.name} does not support dynamic slicing"
    if check == SUBSLICING and not is_sub_slice(shape):
        return f"{shape} is not a sub-slice shape; the sub-slicing check needs one"
    if check == SUPERSLICING and not is_super_slice(shape):
        return f"{shape} is not a super-slice shape; the super-slicing check needs one"
    return None


def _only_replicated_job(jobset: dict[str, Any]) -> dict[str, Any]:
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    return replicated_job


def slice_check_jobset(
    check: str,
    *,
    name: str | None = None,
    namespace: str,
    queue_name: str,
    priority_class: str,
    image: str = IMAGE,
    hold_seconds: int | None = None,
    shape: str | None = None,
    machine_type: str = DEFAULT_MACHINE_TYPE,
    replicas: int | None = None,
) -> dict[str, Any]:
    """The ``check`` JobSet with this stack's values overlaid on its YAML base.

    ``name`` defaults to the base's JobSet name, ``shape`` to the base's slice topology (2x2x2 or 4x4x8), ``replicas`` (slices) to the
    base's (6 or 1) and ``hold_seconds`` to the base's HOLD_SECONDS. Parallelism, completions,
    NUM_PROCESSES, the expected device counts, the TPU request and the accelerator node selector
    always follow from the shape and the machine type.
    """
    required = {"namespace": namespace, "queue_name": queue_name, "priority_class": priority_class, "image": image}
    for key, value in required.items():
        if not value:
            raise ValueError(f"{key} must not be empty")
    if hold_seconds is not None and hold_seconds < 0:
        raise ValueError(f"hold_seconds must be 0 or more, not {hold_seconds}")
    if replicas is not None and replicas < 1:
        raise ValueError(f"replicas must be 1 or more, not {replicas}")

    jobset = load_base(check)
    replicated_job = _only_replicated_job(jobset)
    job_spec = replicated_job["template"]["spec"]
    pod_template = job_spec["template"]
    pod_spec = pod_template["spec"]
    container = manifests.container(pod_spec, CONTAINER_NAME)

    facts = slice_facts(shape or pod_template["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION], machine_type)
    problem = _shape_problem(check, facts.shape, facts.machine)
    if problem:
        raise ValueError(problem)

    metadata = jobset["metadata"]
    if name:
        metadata["name"] = name
    metadata["namespace"] = namespace
    metadata.setdefault("labels", {}).update({QUEUE_LABEL: queue_name, PRIORITY_LABEL: priority_class})

    if replicas is not None:
        replicated_job["replicas"] = replicas
    job_spec["parallelism"] = facts.hosts
    job_spec["completions"] = facts.hosts
    pod_template["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] = str(facts.shape)
    pod_spec.setdefault("nodeSelector", {})[ACCELERATOR_NODE_LABEL] = facts.machine.accelerator_label

    container["image"] = image
    tpus = str(facts.machine.chips_per_host)
    resources = container.setdefault("resources", {})
    resources.setdefault("requests", {})[TPU_RESOURCE] = tpus
    resources.setdefault("limits", {})[TPU_RESOURCE] = tpus
    manifests.set_env(container, "EXPECTED_GLOBAL_DEVICES", facts.expected_global_devices)
    manifests.set_env(container, "EXPECTED_LOCAL_DEVICES", facts.expected_local_devices)
    manifests.set_env(container, "NUM_PROCESSES", facts.hosts)
    if hold_seconds is not None:
        manifests.set_env(container, "HOLD_SECONDS", hold_seconds)
    return jobset


# --- The script ConfigMap ------------------------------------------------------------------


def check_script_text() -> str:
    """The check script, exactly as the ConfigMap carries it."""
    return (MANIFEST_DIR / SCRIPT_FILE).read_text(encoding="utf-8")


def check_script_configmap(namespace: str) -> dict[str, Any]:
    """The ConfigMap the check JobSets mount at /checks (one key: check_devices.py)."""
    if not namespace:
        raise ValueError("namespace must not be empty")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCRIPT_CONFIGMAP_NAME, "namespace": namespace},
        "data": {SCRIPT_FILE: check_script_text()},
    }
