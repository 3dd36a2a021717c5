"""The `checks` block of the stack config: the JAX slice-check JobSets and their rules."""

from __future__ import annotations

from pydantic import Field

from components.config_base import Block, K8sName, Problems
from components.gcp.config import TpuConfig
from components.platform.config import PriorityLevel, QueuesConfig
from components.tpu import admission, topology
from components.workloads import rules

SUBSLICING = "subslicing"
SUPERSLICING = "superslicing"

# A dated tag of Google's JAX image for Cloud TPU (JAX 0.9.0; Python and JAX in /opt/venv, on PATH).
# Seen on TPU7x in public repositories; not checked against the registry from here.
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9.0-rev1"


class SliceCheckConfig(Block):
    name: K8sName = Field(description="JobSet name (counts against the 49-character slice-name budget).")
    shape: str = Field(description="Slice shape; one of tpu.sliceShapes.")
    slices: int = Field(description="Slices the check takes at once (the JobSet's replicas).", ge=1)
    priority: PriorityLevel = Field(description="Priority level: low, medium or high (queues.priorityClasses).")
    # Capped because the check script holds with time.sleep, and CPython refuses a sleep whose deadline (the monotonic
    # clock plus the delay, in int64 nanoseconds) overflows, about 9.2e9 s: OverflowError or EINVAL once the check has
    # passed, so every pod fails and the JobSet with it (python/cpython v3.11.7 Python/pytime.c
    # _PyTime_FromSecondsObject, Modules/timemodule.c pysleep). 2**31 - 1 s (68 years) leaves any uptime room.
    hold_seconds: int = Field(
        description="Seconds each pod holds its slice after the check passes.", ge=0, le=2**31 - 1
    )
    enabled: bool = Field(True, description="Run this check JobSet.")


class ChecksConfig(Block):
    namespace: str = Field(
        "", description="Namespace of the check JobSets; empty means the first of queues.namespaces."
    )
    image: str = Field(IMAGE, description="Pinned JAX-for-TPU image (tag or @sha256 digest) the checks run.")
    subslicing: SliceCheckConfig = Field(
        SliceCheckConfig(name="subslice-check", shape="2x2x2", slices=6, priority="low", hold_seconds=1800),
        description="Sub-slicing check (six 2x2x2 slices).",
    )
    superslicing: SliceCheckConfig = Field(
        SliceCheckConfig(name="superslice-check", shape="4x4x8", slices=1, priority="medium", hold_seconds=600),
        description="Super-slicing check (one 4x4x8 slice).",
    )

    def by_kind(self) -> dict[str, SliceCheckConfig]:
        return {SUBSLICING: self.subslicing, SUPERSLICING: self.superslicing}

    def enabled_by_kind(self) -> dict[str, SliceCheckConfig]:
        """The checks set to run, by kind, whether or not the TPUs can run them (``enabled_checks`` asks that)."""
        return {kind: check for kind, check in self.by_kind().items() if check.enabled}


def checks_namespace(checks: ChecksConfig, queues: QueuesConfig) -> str:
    return checks.namespace or next(iter(queues.namespaces), "")


def enabled_checks(checks: ChecksConfig, tpu: TpuConfig) -> dict[str, SliceCheckConfig]:
    """Enabled slice checks by kind (``subslicing``, ``superslicing``); none without dynamic slicing."""
    return checks.enabled_by_kind() if tpu.dynamic_slicing else {}


def check_workloads(checks: ChecksConfig, tpu: TpuConfig, queues: QueuesConfig) -> list[admission.SliceWorkload]:
    """The slice demand of every enabled check, for the admission plan."""
    workloads = []
    for kind, check in enabled_checks(checks, tpu).items():
        priority = queues.priority_class(check.priority)
        shape = topology.Shape.parse(check.shape)
        workloads.append(admission.SliceWorkload(f"checks.{kind}", shape, check.slices, priority.name, priority.value))
    return workloads


def validate_checks(checks: ChecksConfig, tpu: TpuConfig, queues: QueuesConfig, problems: Problems) -> None:
    enabled = checks.enabled_by_kind()
    if not enabled:
        return
    if not tpu.dynamic_slicing:
        for kind in enabled:
            problems.add(f"checks.{kind}.enabled", f"{tpu.machine_type} has no dynamic slicing to check", "set false")
        return
    namespace = checks_namespace(checks, queues)
    if checks.namespace:
        rules.validate_queued_namespace(queues, "checks.namespace", checks.namespace, problems)
    problems.require_pinned("checks.image", checks.image, "pin a dated tag or @sha256:<digest>")
    for kind, check in enabled.items():
        _validate_check(tpu, kind, check, namespace, problems)
    if len(enabled) > 1 and len({check.name for check in enabled.values()}) == 1:
        problems.add(
            f"checks.{SUPERSLICING}.name",
            f"{enabled[SUPERSLICING].name!r} is also checks.{SUBSLICING}.name: two JobSets of one name in one namespace",
            "give each check its own name",
        )
    if tpu.shapes_parse and not any(p.key.startswith("checks.") for p in problems.items):
        for workload in check_workloads(checks, tpu, queues):
            if problem := admission.never_admitted_problem(workload, tpu.cubes):
                problems.add(
                    f"{workload.key}.slices", problem, "lower the slices, use a smaller shape or add TPU pools"
                )


def _validate_check(tpu: TpuConfig, kind: str, check: SliceCheckConfig, namespace: str, problems: Problems) -> None:
    prefix = f"checks.{kind}"
    rules.validate_workload_name(f"{prefix}.name", namespace, check.name, "checks.namespace", problems)
    shape = topology.try_shape(check.shape)  # an admitted shape that does not parse is reported under tpu.sliceShapes
    if rules.validate_admitted_shape(tpu, f"{prefix}.shape", check.shape, problems) and shape:
        if kind == SUBSLICING and not topology.is_sub_slice(shape):
            problems.add(f"{prefix}.shape", f"{shape} is not a sub-slice", "use a sub-slice shape such as 2x2x2")
        elif kind == SUPERSLICING and not topology.is_super_slice(shape):
            problems.add(f"{prefix}.shape", f"{shape} is not a super-slice", "use a super-slice shape such as 4x4x8")
