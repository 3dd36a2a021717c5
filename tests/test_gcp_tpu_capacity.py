"""The preview reads the TPU reservation before it places pools there (components/gcp/tpu_capacity.py, rules.py).

The mocks answer the reads from a declared state of the cloud (harness/gcp_model.py Holdings): by default what the
stack names, ready, with a free sub-block for each pool (harness/mock_engine.py stack_holdings); each case below
changes that state or the config, expects the preview to refuse with the key and the fix, and then runs the same
stack with the fix (or with the risk accepted) to see it pass. Names come from the dev stack's own config.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components.gcp.rules import PoolPlacement, pools_to_place
from harness.gcp_model import (
    DEGRADED,
    GET_RESERVATION,
    GET_RESERVATION_BLOCK,
    GET_RESERVATION_SUB_BLOCK,
    Block,
    CloudProject,
    Holdings,
    MaintenanceWindow,
    SubBlock,
)
from harness.mock_engine import Invocation, ProgramRun, Registration, stack_holdings
from tests.conftest import as_pulumi_values, run_stack, stack_values, with_overrides
from tools import render

NODE_POOL = "gcp:container/nodePool:NodePool"
DEV = stack_values("dev")
RESERVATION = DEV["tpu"]["reservation"]
POOLS = [pool["name"] for pool in DEV["tpu"]["pools"]]
HOSTS = DEV["tpu"]["pools"][0]["nodeCount"]
ADDED_POOL = "tpu7-pool-added"  # a pool a running stack adds


def holdings(overrides: dict[str, Any] | None = None, previous: dict[str, Any] | None = None) -> Holdings:
    """What a project prepared for the dev stack (with ``overrides``) holds."""
    return stack_holdings(as_pulumi_values(with_overrides(DEV, overrides or {})), previous or {})


def with_block(change: Callable[[Block], Block], base: Holdings | None = None) -> Holdings:
    """The dev stack's holdings with its reservation's block changed."""
    base = base or holdings()
    (reservation,) = base.reservations
    (block,) = reservation.blocks
    return dataclasses.replace(base, reservations=(dataclasses.replace(reservation, blocks=(change(block),)),))


def with_sub_blocks(change: Callable[[list[SubBlock]], list[SubBlock]], base: Holdings | None = None) -> Holdings:
    return with_block(lambda b: dataclasses.replace(b, sub_blocks=tuple(change(list(b.sub_blocks)))), base)


def degraded(sub_block: SubBlock) -> SubBlock:
    return dataclasses.replace(sub_block, health=DEGRADED, degraded_hosts=2)


def run(
    overrides: dict[str, Any] | None = None,
    held: Holdings | None = None,
    registrations: list[Registration] | None = None,
    **engine: Any,
) -> ProgramRun:
    cloud = engine.pop("cloud", CloudProject())
    if held is not None:
        cloud = cloud.holding(held)
    # Only what differs from run_stack's defaults: a run that collects no registrations is then one run_stack keeps
    # (the recoveries below that name the same config and state are one run, the default project's the dev run).
    if cloud != CloudProject():
        engine["cloud"] = cloud
    if registrations is not None:
        engine["registrations"] = registrations
    return run_stack(overrides, **engine)


def pools_of(registrations: list[Registration]) -> list[str]:
    return [r.name for r in registrations if r.type == NODE_POOL and r.name in [*POOLS, ADDED_POOL]]


# Each: (case, config overrides, the cloud's state, the key refused, a fragment of its fix, the recovery: overrides and
# state of a run that passes; None: the project prepared for the stack, holdings(), so that those recoveries are one
# run, the dev stack's).
FREE = SubBlock("spare-0001", HOSTS)
CASES = [
    (
        "no such reservation",
        {},
        Holdings(),
        "tpu.reservation.name",
        "name an existing one (`gcloud compute reservations list",
        ({}, None),
    ),
    (
        "no such block",
        {"tpu.reservation.block": "block-9"},
        holdings(),
        "tpu.reservation.block",
        "set one of its blocks",
        ({"tpu.reservation.block": RESERVATION["block"]}, None),
    ),
    (
        "a degraded sub-block leaves one free cube for two new pools",
        {},
        with_sub_blocks(lambda s: [degraded(s[0]), *s[1:]]),
        "tpu.reservation.block",
        "set tpu.reservation.acceptRisk true",
        ({"tpu.reservation.acceptRisk": True}, with_sub_blocks(lambda s: [degraded(s[0]), *s[1:]])),
    ),
    (
        "a full block: another workload holds a sub-block",
        {},
        with_sub_blocks(lambda s: [dataclasses.replace(s[0], in_use=HOSTS), *s[1:]]),
        "tpu.reservation.block",
        "free or repair sub-blocks",
        ({}, with_sub_blocks(lambda s: [dataclasses.replace(s[0], in_use=HOSTS), *s[1:], FREE])),
    ),
    (
        "a degraded block where GKE chooses the sub-blocks",
        {},
        with_sub_blocks(lambda s: [*s, degraded(FREE)]),
        "tpu.reservation.block",
        # the fix names the healthy free sub-blocks to pin the pools to
        "pin each new pool to a healthy free sub-block (tpu.pools[].subBlock: "
        + ", ".join(f"subblock-{i:04d}" for i in range(len(POOLS)))
        + ")",
        (
            {"tpu.pools": [{**p, "subBlock": f"subblock-{i:04d}"} for i, p in enumerate(DEV["tpu"]["pools"])]},
            with_sub_blocks(lambda s: [*s, degraded(FREE)]),
        ),
    ),
    (
        "a pool pinned to a sub-block the block does not have",
        {"tpu.pools": [{**DEV["tpu"]["pools"][0], "subBlock": "subblock-9999"}, *DEV["tpu"]["pools"][1:]]},
        holdings(),
        "tpu.pools[0].subBlock",
        "use one from `gcloud compute reservations sub-blocks list",
        (
            {"tpu.pools": [{**DEV["tpu"]["pools"][0], "subBlock": "subblock-0000"}, *DEV["tpu"]["pools"][1:]]},
            holdings(),
        ),
    ),
    (
        "a pool pinned to a degraded sub-block",
        {"tpu.pools": [{**DEV["tpu"]["pools"][0], "subBlock": "subblock-0000"}, *DEV["tpu"]["pools"][1:]]},
        with_sub_blocks(lambda s: [degraded(s[0]), *s[1:], FREE]),
        "tpu.pools[0].subBlock",
        # the fix names the healthy free sub-blocks it may be pinned to instead
        "pin it to another sub-block (ready, healthy, free: subblock-0001, spare-0001)",
        (  # each pool pinned to a healthy one: GKE chooses no sub-block on the degraded block
            {
                "tpu.pools": [
                    {**DEV["tpu"]["pools"][0], "subBlock": "spare-0001"},
                    {**DEV["tpu"]["pools"][1], "subBlock": "subblock-0001"},
                ]
            },
            with_sub_blocks(lambda s: [degraded(s[0]), *s[1:], FREE]),
        ),
    ),
    (
        "a block still being made",
        {},
        with_block(lambda b: dataclasses.replace(b, status="CREATING")),
        "tpu.reservation.block",
        "wait until it is READY",
        ({}, None),
    ),
    (
        "a reservation of another machine type",
        {},
        dataclasses.replace(
            holdings(), reservations=(dataclasses.replace(holdings().reservations[0], machine_type="ct5lp-hightpu-4t"),)
        ),
        "tpu.machineType",
        "name a reservation of this one",
        ({}, None),
    ),
]


@pytest.mark.parametrize("case, overrides, held, key, fix, recovery", CASES, ids=[c[0] for c in CASES])
def test_a_preview_that_would_place_a_pool_where_it_cannot_go_is_refused_with_the_fix(
    case, overrides, held, key, fix, recovery, request
):
    registrations: list[Registration] = []
    with pytest.raises(pulumi.RunError) as raised:
        run(overrides, held, registrations)
    message = str(raised.value)
    assert f"  - {key}: " in message, message
    assert fix in message, message
    assert pools_of(registrations) == [], "a refused preview registers no TPU pool"
    recovered_overrides, recovered_state = recovery
    recovered_overrides = {**overrides, **recovered_overrides}
    # the dev stack as it is, in the project prepared for it, is the session's dev run (a run_stack() here would be a
    # second one: the tests import tests/conftest.py as another module than the one pytest loads, with its own cache)
    as_it_is = recovered_state is None and with_overrides(DEV, recovered_overrides) == DEV
    recovered = request.getfixturevalue("dev_run") if as_it_is else run(recovered_overrides, recovered_state)
    assert sorted(r.name for r in recovered.of_type(NODE_POOL) if r.name in POOLS) == sorted(POOLS)


def test_a_certain_failure_is_refused_even_with_the_risk_accepted():
    with pytest.raises(pulumi.RunError, match=r"tpu\.reservation\.name: "):
        run({"tpu.reservation.acceptRisk": True}, Holdings())


def test_a_reservation_the_deployer_cannot_read_is_refused_unless_the_risk_is_accepted():
    base = holdings()
    unreadable = dataclasses.replace(base, reservations=(dataclasses.replace(base.reservations[0], readable=False),))
    with pytest.raises(pulumi.RunError) as raised:
        run(held=unreadable)
    assert "tpu.reservation.name: the reservation could not be read" in str(raised.value)
    assert "Error 403: Required 'compute.reservations.get' permission" in str(raised.value)
    assert "roles/compute.viewer" in str(raised.value)
    # every permission the three reads need, not only the reservation's own (its read also lists the blocks)
    for permission in (
        "compute.reservationBlocks.list",
        "compute.reservationBlocks.get",
        "compute.reservationSubBlocks.get",
    ):
        assert permission in str(raised.value), permission
    # the provider's failure, taken by the review, does not fail the program at its end either
    accepted = run({"tpu.reservation.acceptRisk": True}, unreadable)
    assert sorted(pools_of(accepted.registrations)) == sorted(POOLS)
    assert any("risk taken" in w and "could not be read" in w for w in accepted.warnings)


def test_a_sub_block_the_deployer_cannot_read_is_refused_as_unread_not_as_too_full():
    """A custom role with the reservation's and the block's permissions but not compute.reservationSubBlocks.get: the
    read fails, and the review says so (with the permissions), rather than counting the sub-blocks it could read."""
    unreadable = with_sub_blocks(lambda s: [dataclasses.replace(s[0], readable=False), *s[1:]])
    with pytest.raises(pulumi.RunError) as raised:
        run(held=unreadable)
    refusal = str(raised.value)
    assert "tpu.reservation.name: the reservation could not be read" in refusal, refusal
    assert "Required 'compute.reservationSubBlocks.get' permission" in refusal
    assert "free" not in refusal.split("tpu.reservation.name: ", 1)[1].split("(grant", 1)[0]
    accepted = run({"tpu.reservation.acceptRisk": True}, unreadable)
    assert sorted(pools_of(accepted.registrations)) == sorted(POOLS)


def test_an_accepted_risk_is_warned_of_under_its_key():
    accepted = run({"tpu.reservation.acceptRisk": True}, with_sub_blocks(lambda s: [degraded(s[0]), *s[1:]]))
    (warning,) = [w for w in accepted.warnings if "risk taken" in w]
    assert "tpu.reservation.acceptRisk" in warning and "tpu.reservation.block: " in warning


def test_the_preview_reports_what_it_read():
    """The reservation, its block and sub-blocks: health, sub-block count, free hosts against the new pools' need."""
    reported = run(held=with_sub_blocks(lambda s: [*s, dataclasses.replace(FREE, maintenance_pending=3)])).infos
    lines = [line for line in reported if line.startswith("TPU reservation: ")]
    assert any(f"reservation {RESERVATION['name']} " in line and "READY, HEALTHY" in line for line in lines)
    (block,) = [line for line in lines if line.startswith(f"TPU reservation: block {RESERVATION['block']}: READY")]
    total = HOSTS * (len(POOLS) + 1)
    assert f"{total} of {total} hosts free" in block and f"of {len(POOLS) + 1} sub-block(s) in use" in block
    assert any(
        f"sub-block(s) with {HOSTS} hosts free; {len(POOLS)} new pool(s) need one each" in line for line in lines
    )
    assert any("sub-block spare-0001" in line and "maintenance pending on 3 host(s)" in line for line in lines)


def test_upcoming_maintenance_is_reported_and_warned_of_but_not_refused():
    base = holdings()
    window = MaintenanceWindow("2027-01-09T02:00:00Z", "2027-01-09T08:00:00Z")
    held = dataclasses.replace(base, reservations=(dataclasses.replace(base.reservations[0], maintenance=(window,)),))
    result = run(held=held)
    assert any(window.start in line and window.end in line for line in result.infos)
    assert any("upcoming" in w and window.start in w for w in result.warnings)


# --- A running stack ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def previous(dev_run: ProgramRun) -> dict[str, Any]:
    """The outputs a real engine hands the next preview of the dev stack."""
    return {"lifecycle": copy.deepcopy(dev_run.raw_outputs["lifecycle"])}


def test_a_running_stack_whose_pools_fill_the_block_is_not_refused(previous):
    """Its own pools hold every host of the block (the model marks them in use): they are no new need."""
    held = holdings(previous=previous)
    assert all(s.in_use == s.hosts for s in held.reservations[0].blocks[0].sub_blocks)
    result = run(held=held, previous_outputs=previous)
    assert any(f"holding their hosts: {', '.join(POOLS)}" in line for line in result.infos)


def test_a_running_stack_on_a_degraded_block_is_warned_not_refused(previous):
    held = with_sub_blocks(lambda s: [degraded(s[0]), *s[1:]], holdings(previous=previous))
    run(held=held, previous_outputs=previous)  # no pool to place: nothing to refuse
    missing = run(held=Holdings(), previous_outputs=previous)
    assert any("no pool placed by this `up`" in w and "tpu.reservation.name" in w for w in missing.warnings)


def test_a_pool_added_to_a_running_stack_needs_a_free_sub_block_of_its_own(previous):
    added = {"name": ADDED_POOL, "nodeCount": HOSTS}
    overrides = {"tpu.pools": [*DEV["tpu"]["pools"], added]}
    held = holdings(overrides, previous)
    assert [s.in_use for s in held.reservations[0].blocks[0].sub_blocks] == [HOSTS] * len(POOLS) + [0]
    run(overrides, held, previous_outputs=previous)
    full = with_sub_blocks(lambda s: [*s[:-1], dataclasses.replace(s[-1], in_use=1)], held)
    with pytest.raises(pulumi.RunError) as raised:
        run(overrides, full, previous_outputs=previous)
    assert f"new pool(s) need one each ({ADDED_POOL})" in str(raised.value)


def test_the_pools_to_place_are_those_not_at_their_path_in_the_last_up():
    pools = [
        PoolPlacement(f"tpu.pools[{i}]", name, HOSTS, "", f"path/{name}") for i, name in enumerate(["a", "b", "c"])
    ]
    previous = {"a": "path/a", "b": "path/elsewhere"}
    assert [p.name for p in pools_to_place(pools, previous)] == ["b", "c"]


# --- What the reads wait for -----------------------------------------------------------------------------


def compute_reads(invocations: list[Invocation]) -> list[Invocation]:
    return [i for i in invocations if i.token in (GET_RESERVATION, GET_RESERVATION_BLOCK, GET_RESERVATION_SUB_BLOCK)]


def test_each_read_waits_for_the_compute_engine_api_and_graph_txt_shows_it(dev_run):
    compute = next(
        r.name
        for r in dev_run.of_type("gcp:projects/service:Service")
        if r.input("service") == "compute.googleapis.com"
    )
    reads = compute_reads(dev_run.invocations)
    assert {i.token for i in reads} == {GET_RESERVATION, GET_RESERVATION_BLOCK, GET_RESERVATION_SUB_BLOCK}
    assert len([i for i in reads if i.token == GET_RESERVATION_SUB_BLOCK]) == len(POOLS), "one per sub-block"
    graph = render.graph_document(dev_run.registrations, dev_run.invocations)
    for read in reads:
        assert read.waited_for == [compute]
        assert f"invoke {read.token} waits for {compute}" in graph


def test_on_a_new_project_the_preview_cannot_read_and_the_up_reads_before_it_places_the_pools():
    preview = run(cloud=CloudProject.empty())
    assert [i.answer for i in compute_reads(preview.invocations)] == ["unknown"]
    assert any("not read yet" in line and "Compute Engine API" in line for line in preview.infos)
    assert sorted(pools_of(preview.registrations)) == sorted(POOLS)

    registrations: list[Registration] = []
    with pytest.raises(pulumi.RunError, match=r"tpu\.reservation\.block: "):
        run(
            held=with_sub_blocks(lambda s: [degraded(s[0]), *s[1:]]),
            cloud=CloudProject.empty(),
            registrations=registrations,
            preview=False,
        )
    assert pools_of(registrations) == [], "the `up` read the block and placed no pool"
    up = run(cloud=CloudProject.empty(), preview=False)
    assert {i.answer for i in compute_reads(up.invocations)} == {"answered"}
    assert sorted(pools_of(up.registrations)) == sorted(POOLS)


def test_a_stack_without_a_reservation_reads_none():
    saxml = run_stack(stack="saxml")
    assert compute_reads(saxml.invocations) == []
