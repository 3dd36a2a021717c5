"""What the configured TPU capacity holds: cubes, chips and slices of each shape in use."""

from __future__ import annotations

from dataclasses import dataclass

from components import topology
from components.stack_config import StackConfig


@dataclass(frozen=True)
class CapacityReport:
    machine_type: str
    pools: int
    nodes: int
    chips: int
    cubes: int
    slices_that_fit: dict[str, int]

    def lines(self) -> list[str]:
        head = f"{self.pools} pool(s) of {self.machine_type}: {self.nodes} nodes, {self.chips} chips"
        if not self.cubes:
            return [head]
        fits = ", ".join(f"{count} x {shape}" for shape, count in self.slices_that_fit.items())
        return [f"{head}, {self.cubes} cube(s) of {topology.CUBE}", f"slices that fit at once: {fits or 'none configured'}"]


def capacity_report(config: StackConfig) -> CapacityReport:
    return CapacityReport(
        machine_type=config.tpu.machine_type,
        pools=len(config.tpu.pools),
        nodes=sum(p.node_count for p in config.tpu.pools),
        chips=config.total_tpu_chips,
        cubes=config.cubes,
        slices_that_fit={str(s): topology.slices_that_fit(s, config.cubes) for s in config.slice_shapes},
    )
