"""Preview rules for the P/D model servers: pure functions returning problem strings.

No Pulumi imports. Each rule returns a list of sentences, empty when all is well; every sentence
says what is wrong and how to fix it. The caller (config validation) prefixes the config key.

Device arithmetic: a TPU7x chip is two TensorCores and JAX shows each as a device, so a slice
has ``chips x tensorcores_per_chip`` devices (2x2x2: 8 chips, 16 devices) and vLLM's tensor
parallelism can span at most that many. A LeaderWorkerSet group is one slice: its size is the
hosts of the shape (chips / chips per host).
"""

from __future__ import annotations

import re
from typing import Any

from components.config_base import parse_quantity
from components import manifests
from components.naming import bucket_name_problem
from components.serving_objects import (
    DECODE,
    LEADER_CONTAINER,
    PREFILL,
    ROLE_LABEL,
    SLICE_TOPOLOGY_ANNOTATION,
    STARTUP_SECONDS_NEEDED,
    TPU_RESOURCE,
    flag_values,
    gcs_bucket,
)
from components.topology import (
    GB,
    MACHINE_CATALOG,
    MachineType,
    Shape,
)

BYTES_PER_PARAMETER: dict[str, float] = {
    "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5,
}

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _machine(machine_type: str) -> tuple[MachineType | None, list[str]]:
    if machine_type not in MACHINE_CATALOG:
        known = ", ".join(sorted(MACHINE_CATALOG))
        return None, [f"machine type {machine_type!r} is unknown; use one of {known}"]
    return MACHINE_CATALOG[machine_type], []


def _shape(shape: str) -> tuple[Shape | None, list[str]]:
    try:
        return Shape.parse(shape), []
    except ValueError as error:
        return None, [str(error)]


# --- Parallelism and group size ------------------------------------------------------------


def tensor_parallel_match_problems(prefill_tp: int, decode_tp: int) -> list[str]:
    """Prefill and decode must shard the model alike: TPUConnectorHMA copies KV shard by shard."""
    if prefill_tp == decode_tp:
        return []
    return [
        f"prefill uses tensor-parallel size {prefill_tp} but decode uses {decode_tp}; TPUConnectorHMA "
        "moves KV caches between identically sharded servers only, so give both roles the same size"
    ]


def tensor_parallel_fit_problems(tensor_parallel_size: int, shape: str, machine_type: str) -> list[str]:
    """Tensor parallelism spans the JAX devices of one slice: chips x TensorCores per chip."""
    if tensor_parallel_size < 1:
        return [f"tensor-parallel size {tensor_parallel_size} is below 1; use at least 1"]
    machine, problems = _machine(machine_type)
    parsed, shape_problems = _shape(shape)
    if problems or shape_problems:
        return problems + shape_problems
    devices = machine.tensorcores(parsed)
    if tensor_parallel_size > devices:
        return [
            f"tensor-parallel size {tensor_parallel_size} exceeds the {devices} TensorCores of one {parsed} slice "
            f"({parsed.chips} chips x {machine.tensorcores_per_chip} on {machine.name}); use at most {devices} "
            "or a larger slice shape"
        ]
    return []


def group_size_problems(size: int, shape: str, machine_type: str) -> list[str]:
    """A LeaderWorkerSet group is one slice: its size must equal the hosts of the shape."""
    machine, problems = _machine(machine_type)
    parsed, shape_problems = _shape(shape)
    if problems or shape_problems:
        return problems + shape_problems
    try:
        hosts = machine.hosts(parsed)
    except ValueError as error:
        return [f"{error}; pick a shape of whole hosts"]
    if size != hosts:
        return [
            f"LeaderWorkerSet size {size} does not match the {hosts} hosts of a {parsed} slice "
            f"({parsed.chips} chips / {machine.chips_per_host} per {machine.name} host); set the size to {hosts}"
        ]
    return []


# --- Memory --------------------------------------------------------------------------------


def weight_bytes(parameters: float, dtype: str) -> float:
    """Bytes of ``parameters`` weights stored as ``dtype`` (KeyError for an unknown dtype)."""
    return parameters * BYTES_PER_PARAMETER[dtype]


def weights_fit_problems(
    parameters: float, dtype: str, shape: str, machine_type: str, headroom_fraction: float
) -> list[str]:
    """The weights must fit the slice's HBM with ``headroom_fraction`` of it left for the KV
    cache, activations and compiled programs: ``parameters x bytes <= chips x HBM x (1 - headroom)``."""
    if dtype not in BYTES_PER_PARAMETER:
        return [f"weights dtype {dtype!r} is unknown; use one of {', '.join(BYTES_PER_PARAMETER)}"]
    if parameters <= 0:
        return [f"parameter count {parameters:g} must be positive"]
    if not 0 <= headroom_fraction < 1:
        return [f"HBM headroom fraction {headroom_fraction} must be at least 0 and below 1"]
    machine, problems = _machine(machine_type)
    parsed, shape_problems = _shape(shape)
    if problems or shape_problems:
        return problems + shape_problems
    hbm = machine.hbm_bytes(parsed)
    usable = hbm * (1 - headroom_fraction)
    needed = weight_bytes(parameters, dtype)
    if needed <= usable:
        return []
    return [
        f"{parameters / 1e9:g}B parameters in {dtype} take {needed / GB:,.0f} GB, more than the {usable / GB:,.0f} GB "
        f"a {parsed} slice leaves for weights ({parsed.chips} chips x {machine.hbm_bytes_per_chip / GB:,.0f} GB HBM, "
        f"{headroom_fraction:.0%} kept free); use a larger slice shape, a smaller dtype or less headroom"
    ]


def pod_resources_problems(cpu: str, memory: str, machine_type: str) -> list[str]:
    """A TPU pod takes a whole host: its CPU and memory requests must fit that host's VM."""
    machine, problems = _machine(machine_type)
    if problems:
        return problems
    for name, text, capacity, unit in (
        ("cpu", cpu, machine.vcpus_per_host, "vCPUs"),
        ("memory", memory, machine.memory_bytes_per_host, "bytes"),
    ):
        try:
            value = parse_quantity(text)
        except ValueError as error:
            problems.append(f"{name}: {error}")
            continue
        if value <= 0:
            problems.append(f"{name} request {text} must be positive")
        elif value > capacity:
            problems.append(
                f"{name} request {text} exceeds the {capacity:,} {unit} of one {machine.name} host; "
                "request less (the node's allocatable is lower still)"
            )
    return problems


# --- Startup, image, weights, labels -------------------------------------------------------


def startup_budget_problems(
    period_seconds: int, failure_threshold: int, needed_seconds: int = STARTUP_SECONDS_NEEDED
) -> list[str]:
    """The startup probe must outlast the Ray cluster wait plus the engine startup timeout."""
    if period_seconds < 1 or failure_threshold < 1:
        return [f"startup probe period {period_seconds} s and failure threshold {failure_threshold} must be at least 1"]
    budget = period_seconds * failure_threshold
    if budget >= needed_seconds:
        return []
    threshold = -(-needed_seconds // period_seconds)
    return [
        f"startup probe allows {period_seconds} s x {failure_threshold} = {budget} s, less than the {needed_seconds} s "
        "vLLM may take to form the Ray cluster and load the model; the kubelet would restart the group before "
        f"vLLM gives up; raise the failure threshold to at least {threshold}"
    ]


def weights_uri_problems(uri: str) -> list[str]:
    """The Run:ai streamer reads the weights from ``gs://<bucket>/<snapshot directory>``."""
    try:
        bucket = gcs_bucket(uri)
    except ValueError:
        return [f"weights URI {uri!r} is not gs://<bucket>/<path>; point it at the model snapshot in Cloud Storage"]
    problems = []
    if problem := bucket_name_problem(bucket):
        problems.append(f"{bucket!r} in the weights URI is not a Cloud Storage bucket name ({problem})")
    if uri.rstrip("/") == f"gs://{bucket}":
        problems.append(f"weights URI {uri!r} names the bucket only; point it at the snapshot directory inside it")
    return problems


def label_value_problems(value: str, what: str) -> list[str]:
    """A Kubernetes label value: at most 63 characters, alphanumeric at both ends."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [
            f"{what} {value!r} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        ]
    return []


# --- The rendered LeaderWorkerSets ---------------------------------------------------------


def _leader_container(lws: dict[str, Any]) -> dict[str, Any]:
    return manifests.container(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"], LEADER_CONTAINER)


def tensor_parallel_size_of(lws: dict[str, Any]) -> int:
    """``--tensor-parallel-size`` of the leader's vLLM arguments."""
    return int(flag_values(_leader_container(lws)["args"])["--tensor-parallel-size"])


def leaderworkerset_problems(objects: list[dict[str, Any]], machine_type: str) -> list[str]:
    """Rules on the rendered prefill/decode LeaderWorkerSets: group size vs slice hosts, tensor
    parallelism vs TensorCores and across roles, TPU requests vs chips per host."""
    problems: list[str] = []
    machine, machine_problems = _machine(machine_type)
    if machine_problems:
        return machine_problems
    by_role: dict[str, int] = {}
    for lws in objects:
        name = lws["metadata"]["name"]
        template = lws["spec"]["leaderWorkerTemplate"]
        shape = template["leaderTemplate"]["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION]
        tp = tensor_parallel_size_of(lws)
        by_role[lws["metadata"]["labels"][ROLE_LABEL]] = tp
        problems += [f"{name}: {p}" for p in group_size_problems(template["size"], shape, machine_type)]
        problems += [f"{name}: {p}" for p in tensor_parallel_fit_problems(tp, shape, machine_type)]
        for kind in ("leaderTemplate", "workerTemplate"):
            for container in template[kind]["spec"]["containers"]:
                requested = container.get("resources", {}).get("requests", {}).get(TPU_RESOURCE)
                if requested is not None and int(requested) != machine.chips_per_host:
                    problems.append(
                        f"{name}: container {container['name']} requests {requested} {TPU_RESOURCE}, not the "
                        f"{machine.chips_per_host} chips of a {machine.name} host; request all {machine.chips_per_host}"
                    )
    if PREFILL in by_role and DECODE in by_role:
        problems += tensor_parallel_match_problems(by_role[PREFILL], by_role[DECODE])
    return problems
