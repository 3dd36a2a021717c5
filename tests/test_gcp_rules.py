"""The reservation rules (components/gcp/rules.py) on reads the stacks' own runs do not reach: machines placed by
hosts rather than whole sub-blocks, and a reservation without a block. The TPU7x cases run through the program in
tests/test_gcp_tpu_capacity.py."""

from __future__ import annotations

import pytest

from components.gcp.config import ReservationConfig, TpuConfig
from components.gcp.rules import (
    BlockRead,
    CapacityRead,
    PoolPlacement,
    ReservationRead,
    review_capacity,
)

MACHINE = "ct5lp-hightpu-4t"
POOLS = [PoolPlacement(f"tpu.pools[{i}]", f"tpu{i}", 8, "", f"path/tpu{i}") for i in range(2)]


def reservation(hosts: int, in_use: int, blocks: tuple[str, ...] = ()) -> ReservationRead:
    return ReservationRead("p", "us-west4-a", "res", True, "READY", "HEALTHY", MACHINE, blocks, hosts, in_use)


def tpu(block: str, accept_risk: bool = False) -> TpuConfig:
    return TpuConfig(
        machine_type=MACHINE, reservation=ReservationConfig(name="res", block=block, accept_risk=accept_risk)
    )


def block(health: str, hosts: int, in_use: int) -> BlockRead:
    return BlockRead(
        "b", "READY", health, hosts, in_use, 4, 0, 0 if health == "HEALTHY" else 1, ("s1", "s2", "s3", "s4")
    )


@pytest.mark.parametrize(
    "read, chosen_block, key, fix",
    [
        (CapacityRead(reservation(24, 10)), "", "tpu.reservation.name", "free hosts there"),
        (
            CapacityRead(reservation(64, 0, ("b",)), block("HEALTHY", 32, 20)),
            "b",
            "tpu.reservation.block",
            "free hosts",
        ),
        (
            CapacityRead(reservation(64, 0, ("b",)), block("DEGRADED", 32, 0)),
            "b",
            "tpu.reservation.block",
            "acceptRisk",
        ),
        (CapacityRead(reservation(64, 0, ("b",)), None), "b", "tpu.reservation.block", "acceptRisk"),
    ],
    ids=["reservation without a block, too full", "block too full", "degraded block", "block unread"],
)
def test_a_pool_placed_by_hosts_needs_free_hosts_on_a_healthy_block(read, chosen_block, key, fix):
    (problem,) = review_capacity(read, tpu(chosen_block), POOLS, POOLS).problems
    assert problem.key == key and fix in problem.fix
    accepted = review_capacity(read, tpu(chosen_block, accept_risk=True), POOLS, POOLS)
    assert accepted.problems == [] and any("risk taken" in w for w in accepted.warnings)
    placed = review_capacity(read, tpu(chosen_block), POOLS, [])
    assert placed.problems == [], "a stack that places no pool is not refused"


def test_enough_free_hosts_pass():
    read = CapacityRead(reservation(64, 0, ("b",)), block("HEALTHY", 32, 16))
    review = review_capacity(read, tpu("b"), POOLS, POOLS)
    assert review.problems == []
    assert any("16 hosts free, 16 needed by tpu0, tpu1" in line for line in review.report)
