"""Slice-check JobSets: JAX proves that sub-slicing and super-slicing hand out whole TPU slices.

Pure Python (no Pulumi imports): the YAML bases under ``manifests/slice-checks/`` with what varies per stack overlaid
on fresh copies; the parallelism, the device counts and the TPU request follow from the slice shape and machine type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import manifests
from components.config_base import PullPath
from components.gcp.config import TpuConfig
from components.platform.config import QueuesConfig
from components.platform.kueue_objects import queue_labels
from components.tpu.topology import SLICE_TOPOLOGY_ANNOTATION, MachineType, Shape, take_tpu_host
from components.workloads.slice_checks.config import (
    SUBSLICING,
    SUPERSLICING,
    ChecksConfig,
    SliceCheckConfig,
    checks_namespace,
    enabled_checks,
)

BASE_FILES = {SUBSLICING: "slice-checks/subslicing-check.yaml", SUPERSLICING: "slice-checks/superslicing-check.yaml"}
NETWORK_POLICY_FILE = "slice-checks/network-policy.yaml"
SERVICE_ACCOUNT_FILE = "slice-checks/service-account.yaml"
# The label the JobSet controller gives every pod of a JobSet, its name (kubernetes-sigs/jobset v0.12.0
# api/jobset/v1alpha2/jobset_types.go JobSetNameKey; pkg/controllers/jobset_controller.go labelAndAnnotateObject).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
SCRIPT_FILE = "check_devices.py"
SCRIPT_PATH = manifests.MANIFESTS / "slice-checks" / SCRIPT_FILE
SCRIPT_CONFIGMAP_NAME = "slice-check-script"
CONTAINER_NAME = "jax-check"


@dataclass(frozen=True)
class SliceChecksObjects:
    script_configmap: dict[str, Any]
    service_account: dict[str, Any]  # the checks' own, with no token: never the namespace's default one
    jobsets: list[dict[str, Any]]
    network_policies: list[dict[str, Any]]  # one per JobSet: its pods admit each other, and nothing else


def slice_checks_objects(
    checks: ChecksConfig, tpu: TpuConfig, queues: QueuesConfig, pull_path: PullPath
) -> SliceChecksObjects | None:
    """The enabled checks' objects (None: no check runs). ``pull_path``: where the nodes pull the image from."""
    enabled = enabled_checks(checks, tpu)
    if not enabled:
        return None
    namespace = checks_namespace(checks, queues)
    image = pull_path.image(checks.image)
    jobsets = [
        slice_check_jobset(kind, check, namespace, image, queues, tpu.machine) for kind, check in enabled.items()
    ]
    return SliceChecksObjects(
        check_script_configmap(namespace),
        check_service_account(namespace),
        jobsets,
        [network_policy(jobset) for jobset in jobsets],
    )


def check_service_account(namespace: str) -> dict[str, Any]:
    """The ServiceAccount every check pod runs as (its YAML base, in ``namespace``)."""
    return manifests.load_document(SERVICE_ACCOUNT_FILE, namespace)


def slice_check_jobset(
    kind: str, check: SliceCheckConfig, namespace: str, image: str, queues: QueuesConfig, machine: MachineType
) -> dict[str, Any]:
    """The ``kind`` check JobSet (its YAML base) with ``check`` overlaid, in ``namespace``, running ``image``
    (ValueError on a shape that splits a host)."""
    shape = Shape.parse(check.shape)
    hosts = machine.hosts(shape)
    # JAX shows each TensorCore as a device: a TPU7x chip is two TensorCore chiplets (2 devices), a v5e chip one.
    # Megacore generations (v4, v5p: 2 TensorCores, 1 device) are not in the catalog.
    devices_per_chip = machine.tensorcores_per_chip
    jobset = manifests.load_document(BASE_FILES[kind])
    metadata = jobset["metadata"]
    metadata.update(name=check.name, namespace=namespace)
    metadata.setdefault("labels", {}).update(queue_labels(queues, check.priority))
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    replicated_job["replicas"] = check.slices
    job_spec = replicated_job["template"]["spec"]
    job_spec.update(parallelism=hosts, completions=hosts)
    pod_template = job_spec["template"]
    pod_template["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] = str(shape)
    # A new script changes the JobSet's spec, which replaces it (components/resources.py REPLACE_ON_SPEC_CHANGE): the
    # check runs again on it. Without the digest the ConfigMap alone would change, in place, and nothing would rerun.
    manifests.mark_mounted_files(pod_template, check_files())
    pod_spec = pod_template["spec"]
    container = manifests.container(pod_spec, CONTAINER_NAME)
    take_tpu_host(pod_spec, container, machine)
    container["image"] = image
    manifests.set_env(container, "EXPECTED_SLICE_DEVICES", shape.chips * devices_per_chip)
    manifests.set_env(container, "EXPECTED_LOCAL_DEVICES", machine.chips_per_host * devices_per_chip)
    manifests.set_env(container, "NUM_PROCESSES", hosts)
    manifests.set_env(container, "HOLD_SECONDS", check.hold_seconds)
    return jobset


def network_policy(jobset: dict[str, Any]) -> dict[str, Any]:
    """Who may connect to the pods of a check JobSet: its own pods, on any port (manifests/slice-checks/
    network-policy.yaml says why), named after the JobSet, selecting by the label its controller gives them."""
    policy = manifests.load_document(NETWORK_POLICY_FILE)
    name, namespace = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    policy["metadata"].update(name=name, namespace=namespace)
    pods = {JOBSET_NAME_LABEL: name}
    policy["spec"]["podSelector"]["matchLabels"] = dict(pods)
    ((peer,),) = [rule["from"] for rule in policy["spec"]["ingress"]]
    peer["podSelector"]["matchLabels"] = dict(pods)
    return policy


def check_files() -> dict[str, str]:
    """The check script, exactly as the ConfigMap carries it."""
    return {SCRIPT_FILE: SCRIPT_PATH.read_text(encoding="utf-8")}


def check_script_configmap(namespace: str) -> dict[str, Any]:
    """The ConfigMap the check JobSets mount at /checks (one key: check_devices.py)."""
    return manifests.config_map(SCRIPT_CONFIGMAP_NAME, namespace, check_files())
