"""The `checks` block of the stack config: the JAX slice-check JobSets, and their preview rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from components import admission, slice_check_objects, topology, workload_rules
from components.config_base import Problems, image_pin_problem, setting

if TYPE_CHECKING:
    from components.stack_config import StackConfig


@dataclass(frozen=True)
class SliceCheckConfig:
    name: str = setting(doc="JobSet name (counts against the 49-character slice-name budget).")
    shape: str = setting(doc="Slice shape; one of tpu.sliceShapes.")
    slices: int = setting(doc="Slices the check takes at once (the JobSet's replicas).")
    priority: str = setting(doc="Priority level: low, medium or high (queues.priorityClasses).")
    hold_seconds: int = setting(doc="Seconds each pod holds its slice after the check passes.")
    enabled: bool = setting(True, "Run this check JobSet.")


@dataclass(frozen=True)
class ChecksConfig:
    namespace: str = setting("", "Namespace of the check JobSets; empty means the first of queues.namespaces.")
    image: str = setting(slice_check_objects.IMAGE, "Pinned JAX-for-TPU image (tag or @sha256 digest) the checks run.")
    subslicing: SliceCheckConfig = setting(
        SliceCheckConfig("subslice-check", "2x2x2", 6, "low", 1800), "Sub-slicing check (six 2x2x2 slices)."
    )
    superslicing: SliceCheckConfig = setting(
        SliceCheckConfig("superslice-check", "4x4x8", 1, "medium", 600), "Super-slicing check (one 4x4x8 slice)."
    )


def validate_checks(config: StackConfig, problems: Problems) -> None:
    checks = config.checks
    enabled = {kind: c for kind, c in ((slice_check_objects.SUBSLICING, checks.subslicing), (slice_check_objects.SUPERSLICING, checks.superslicing)) if c.enabled}
    if not enabled:
        return
    if not config.dynamic_slicing_requested:
        for kind in enabled:
            problems.add(f"checks.{kind}.enabled", f"{config.tpu.machine_type} has no dynamic slicing to check", "set false")
        return
    namespace = config.checks_namespace
    if checks.namespace:
        workload_rules.validate_queued_namespace(config, "checks.namespace", checks.namespace, problems)
    if problem := image_pin_problem(checks.image):
        problems.add("checks.image", problem, "pin a dated tag or @sha256:<digest>")
    for kind, check in enabled.items():
        _validate_check(config, kind, check, namespace, problems)
    if config.slice_shapes_parse and not any(p.key.startswith("checks.") for p in problems.items):
        for workload in config.check_workloads():
            if problem := admission.never_admitted_problem(workload, config.cubes):
                problems.add(f"{workload.key}.slices", problem, "lower the slices, use a smaller shape or add TPU pools")


def _validate_check(config: StackConfig, kind: str, check: SliceCheckConfig, namespace: str, problems: Problems) -> None:
    prefix = f"checks.{kind}"
    workload_rules.validate_workload_name(f"{prefix}.name", namespace, check.name, "checks.namespace", problems)
    shape = topology.try_shape(check.shape)  # an admitted shape that does not parse is reported under tpu.sliceShapes
    if workload_rules.validate_admitted_shape(config, f"{prefix}.shape", check.shape, problems) and shape:
        _validate_check_kind(kind, f"{prefix}.shape", shape, problems)
    if check.slices < 1:
        problems.add(f"{prefix}.slices", f"{check.slices} checks nothing", "use 1 or more")
    workload_rules.validate_priority_level(f"{prefix}.priority", check.priority, problems)
    if check.hold_seconds < 0:
        problems.add(f"{prefix}.holdSeconds", f"{check.hold_seconds} is negative", "use 0 or more seconds")


def _validate_check_kind(kind: str, key: str, shape: topology.Shape, problems: Problems) -> None:
    if kind == slice_check_objects.SUBSLICING and not topology.is_sub_slice(shape):
        problems.add(key, f"{shape} is not a sub-slice", "use a sub-slice shape such as 2x2x2")
    elif kind == slice_check_objects.SUPERSLICING and not topology.is_super_slice(shape):
        problems.add(key, f"{shape} is not a super-slice", "use a super-slice shape such as 4x4x8")
