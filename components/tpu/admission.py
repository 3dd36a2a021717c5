"""What the TPU capacity holds, and which TPU7x slice workloads Kueue can admit at the same time.

A workload asks for ``slices`` slices of one shape, all at once (Kueue admits a JobSet or an LWS group as a gang).
Capacity is counted in 4x4x4 cubes: a super-slice takes whole cubes (``cubes_in(shape)`` each); the sub-slice shapes
(2x2x1 ... 2x4x4) are nested partitions of a cube whose chip counts are powers of two dividing 64, so packing them
largest first never wastes a cube: ``ceil(chips / 64)`` cubes hold any mix of them. Within one ClusterQueue a
higher-priority workload preempts lower ones (``withinClusterQueue: LowerPriority``); at equal priority the later one
waits in the queue.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from components.tpu.topology import CUBE, Shape, cubes_in, is_sub_slice, is_super_slice


@dataclass(frozen=True)
class SliceWorkload:
    """One workload's slice demand, named after the config key that declares it."""

    key: str
    shape: Shape
    slices: int
    priority_name: str
    priority: int

    @property
    def chips(self) -> int:
        return self.shape.chips * self.slices

    def __str__(self) -> str:
        return f"{self.key} ({self.slices} x {self.shape}, {self.priority_name})"


def cubes_needed(workloads: list[SliceWorkload]) -> int:
    """Cubes that hold every one of ``workloads`` at once."""
    whole_cubes = sum(w.slices * cubes_in(w.shape) for w in workloads if is_super_slice(w.shape))
    sub_slice_chips = sum(w.chips for w in workloads if is_sub_slice(w.shape))
    return whole_cubes + math.ceil(sub_slice_chips / CUBE.chips)


def never_admitted_problem(workload: SliceWorkload, cubes: int) -> str | None:
    """Why ``workload`` could never be admitted on ``cubes`` cubes, even alone; or None."""
    needed = cubes_needed([workload])
    if needed <= cubes:
        return None
    return (
        f"{workload.slices} x {workload.shape} ({workload.chips} chips) needs {needed} cube(s) of {CUBE} "
        f"at once; the stack has {cubes} ({cubes * CUBE.chips} chips), so Kueue would never admit it"
    )


@dataclass(frozen=True)
class Expectation:
    """What the plan says of one workload (by its config key) when every enabled workload asks at once."""

    key: str
    runs: bool  # holds its slices once Kueue has settled
    preempts: tuple[str, ...]  # lower-priority keys it cannot run beside
    preempted_by: tuple[str, ...]  # higher-priority keys it cannot run beside
    waits_behind: tuple[str, ...]  # equal-priority keys listed before it that it cannot run beside


@dataclass(frozen=True)
class AdmissionPlan:
    """What runs together on ``cubes`` cubes: the preview-time report of the enabled workloads."""

    cubes: int
    workloads: tuple[SliceWorkload, ...]

    def conflicts(self) -> list[tuple[SliceWorkload, SliceWorkload]]:
        """Pairs that cannot hold their slices at the same time, the higher priority first."""
        return [
            (first, second) if first.priority >= second.priority else (second, first)
            for first, second in itertools.combinations(self.workloads, 2)
            if cubes_needed([first, second]) > self.cubes
        ]

    def expectations(self) -> dict[str, Expectation]:
        """The plan per workload, structured (``lines`` says the same in prose): who runs once Kueue settles, whom
        each preempts and who preempts it, who waits behind an equal priority. Kueue admits the highest priority
        first (preempting lower ones in its way); a workload runs when it fits beside those above it; at equal
        priority the one listed later waits."""
        running: list[SliceWorkload] = []
        # sorted is stable: equal priorities keep their order
        for workload in sorted(self.workloads, key=lambda w: -w.priority):
            if cubes_needed([*running, workload]) <= self.cubes:
                running.append(workload)
        conflicts = self.conflicts()
        return {
            w.key: Expectation(
                key=w.key,
                runs=w in running,
                preempts=tuple(lo.key for hi, lo in conflicts if hi == w and hi.priority > lo.priority),
                preempted_by=tuple(hi.key for hi, lo in conflicts if lo == w and hi.priority > lo.priority),
                # at equal priority conflicts() keeps the pair in listed order: the first listed is the higher
                waits_behind=tuple(hi.key for hi, lo in conflicts if lo == w and hi.priority == lo.priority),
            )
            for w in self.workloads
        }

    def lines(self) -> list[str]:
        if not self.workloads:
            return ["no slice workloads enabled"]
        used = cubes_needed(list(self.workloads))
        lines = [f"{w}: {cubes_needed([w])} cube(s) alone" for w in self.workloads]
        if used <= self.cubes:
            return [*lines, f"all run at the same time: {used} of {self.cubes} cube(s)"]
        lines.append(f"not all at once: together they need {used} cube(s), the stack has {self.cubes}")
        for higher, lower in self.conflicts():
            if higher.priority > lower.priority:
                lines.append(f"{higher.key} preempts {lower.key} (priority {higher.priority} > {lower.priority})")
            else:
                lines.append(f"{higher.key} and {lower.key} queue behind each other (equal priority {higher.priority})")
        return lines
