"""Preview rules on the TPU reservation the pools are placed on, from what the preview read of it.

No Pulumi imports: the component that reads (components/gcp/tpu_capacity.py) hands these rules the answers, and
they return what the preview reports, warns of and refuses, each refusal under the key that fixes it.

What is read, and what it means (Compute Engine API, googleapis discovery document compute/v1 revision 20261106,
google.golang.org/api v0.316.0: Reservation, ReservationBlock, ReservationSubBlock and their HealthInfo, and
GroupMaintenanceInfo):

- a block's and a sub-block's ``count`` is the hosts allocated to it, its ``inUseCount`` the instances running
  there: the free hosts are ``count - inUseCount``, as xpk counts them before it makes TPU pools
  (AI-Hypercomputer/xpk@367c8382 src/xpk/core/capacity.py, _assess_healthy_and_fitting_sub_blocks_in_block:
  ``(count - inUseCount) // hosts per slice``, over the sub-blocks whose ``healthInfo.healthStatus`` is HEALTHY,
  src/xpk/core/reservation.py list_healthy_sub_blocks);
- ``healthInfo.healthStatus`` is HEALTHY, DEGRADED or HEALTH_STATUS_UNSPECIFIED, with the counts of healthy and
  degraded sub-blocks (of a block) or hosts (of a sub-block); ``status`` is READY once the resources are allocated;
- ``reservationMaintenance`` counts the hosts with pending and ongoing maintenance, and the reservation's holds its
  upcoming group maintenance window.

A TPU7x dynamic-slicing pool is one sub-block: "a node pool maps directly to a sub-block", a 16-node 4x4x4 cube
(GKE "Configure TPUs with GKE dynamic slicing"; "Deploy TPUs in All Capacity mode": 1 sub-block = 16 hosts,
64 chips, a block 144 sub-blocks; docs.cloud.google.com, read 2026-12). So a new pool needs a whole sub-block that
is READY, HEALTHY and has its hosts free, as xpk requires one per new pool (nodepool.py _prepare_reservation_iterator:
"Not enough available reservation capacity"); xpk checks only the pools it is about to create, not those that stay,
and so does this: a pool the stack already placed holds its hosts, which the block counts as in use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from components.config_base import Problem, Problems
from components.gcp.config import DEPLOYER_READS, TpuConfig

HEALTHY = "HEALTHY"
READY = "READY"
ACCEPT_RISK = "tpu.reservation.acceptRisk"
# What the reservation's reads need (reservation, block, sub-blocks): a failed reservation or block read is refused
# below, and the grant it names lets the `up` that places pools read the sub-blocks too
RESERVATION_PERMISSIONS = ", ".join(
    p for token, (permissions, _, _) in DEPLOYER_READS.items() if "/getReservation" in token for p in permissions
)


@dataclass(frozen=True)
class _HostsRead:
    """What a block and a sub-block both report: their state, their hosts and those hosts' maintenance."""

    name: str
    status: str
    health: str
    hosts: int
    in_use: int
    _: KW_ONLY
    maintenance_pending: int = 0
    maintenance_ongoing: int = 0

    @property
    def free(self) -> int:
        return max(0, self.hosts - self.in_use)

    def maintenance_text(self) -> str:
        if not (self.maintenance_pending or self.maintenance_ongoing):
            return ""
        return f", maintenance pending on {self.maintenance_pending} host(s), ongoing on {self.maintenance_ongoing}"


@dataclass(frozen=True)
class SubBlockRead(_HostsRead):
    degraded_hosts: int = 0

    def fits(self, hosts: int) -> bool:
        """Whether a new pool of ``hosts`` can be placed here: ready, healthy and that many hosts free."""
        return self.status == READY and self.health == HEALTHY and self.free >= hosts

    def line(self) -> str:
        text = f"sub-block {self.name}: {self.status}, {self.health}, {self.free} of {self.hosts} hosts free"
        if self.degraded_hosts:
            text += f", {self.degraded_hosts} host(s) degraded"
        return text + self.maintenance_text()


@dataclass(frozen=True)
class BlockRead(_HostsRead):
    sub_block_count: int
    sub_blocks_in_use: int
    degraded_sub_blocks: int
    sub_block_names: tuple[str, ...]

    def line(self) -> str:
        return (
            f"block {self.name}: {self.status}, {self.health} ({self.degraded_sub_blocks} of {self.sub_block_count} "
            f"sub-block(s) degraded), {self.free} of {self.hosts} hosts free, {self.sub_blocks_in_use} of "
            f"{self.sub_block_count} sub-block(s) in use" + self.maintenance_text()
        )


@dataclass(frozen=True)
class MaintenanceWindowRead:
    start: str
    end: str
    type: str
    status: str

    def line(self, reservation: str) -> str:
        return f"reservation {reservation}: {self.type} maintenance {self.status}, window {self.start} to {self.end}"


@dataclass(frozen=True)
class ReservationRead:
    """What the reservation read returned; ``exists`` false when the provider answered without the API's fields
    (how pulumi-gcp's getReservation answers a 404: harness/gcp_model.py Holdings.answer)."""

    project: str
    zone: str
    name: str
    exists: bool
    status: str = ""
    health: str = ""
    machine_type: str = ""
    block_names: tuple[str, ...] = ()
    hosts: int = 0
    in_use: int = 0
    windows: tuple[MaintenanceWindowRead, ...] = ()

    def line(self) -> str:
        if not self.exists:
            return f"reservation {self.name}: not found in zone {self.zone} of project {self.project}"
        return (
            f"reservation {self.name} (project {self.project}, zone {self.zone}): {self.status}, {self.health}, "
            f"{self.machine_type or 'no machine type'}, block(s) {', '.join(self.block_names) or 'none'}"
        )


@dataclass(frozen=True)
class PoolPlacement:
    """A TPU pool of the config: ``key`` is its place there (tpu.pools[i]), ``path`` the reservation path it
    consumes (components/gcp/config.py TpuConfig.reservation_path)."""

    key: str
    name: str
    hosts: int
    sub_block: str
    path: str


@dataclass(frozen=True)
class CapacityRead:
    """Everything read of the reservation for one preview; ``error`` is a read the provider failed (its words)."""

    reservation: ReservationRead | None = None
    block: BlockRead | None = None
    sub_blocks: tuple[SubBlockRead, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class CapacityReview:
    report: list[str] = field(default_factory=list)  # what was read: the preview's info lines
    warnings: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # what the preview refuses


def pools_to_place(pools: Sequence[PoolPlacement], previous: Mapping[str, str]) -> list[PoolPlacement]:
    """The pools this `up` creates on the reservation: those the last `up` did not have at the same reservation
    path (``previous``: pool name -> its path, from the stack's ``lifecycle`` output). A pool replaced at its own
    path is deleted before it is created again (tpu_capacity.py), so it frees the hosts it then takes."""
    return [p for p in pools if previous.get(p.name) != p.path]


def review_capacity(
    read: CapacityRead, tpu: TpuConfig, pools: Sequence[PoolPlacement], to_place: Sequence[PoolPlacement]
) -> CapacityReview:
    """What the preview says of the reservation, and what it refuses.

    A refusal comes only when this `up` would place a pool (``to_place``): a running stack's pools keep their nodes
    whatever the block's state now, and its previews go on (with a warning). A certain failure (no such reservation,
    block or sub-block) is refused outright; a risk (a degraded or too full block, a read that failed) is refused
    unless tpu.reservation.acceptRisk takes it, and then warned of.
    """
    review = CapacityReview()
    certain, risks = Problems(), Problems()
    block = tpu.reservation.block

    def decide() -> CapacityReview:
        """The review, once the reads are reviewed as far as they go: what is refused, what only warned of."""
        if not to_place:
            # Nothing is placed: the running pools keep their nodes, and the preview only says what it found.
            review.warnings.extend(
                [f"TPU reservation (no pool placed by this `up`): {p}" for p in certain.items + risks.items]
            )
            return review
        review.problems.extend(certain.items)
        if tpu.reservation.accept_risk:
            review.warnings.extend([f"TPU reservation, risk taken ({ACCEPT_RISK}): {p}" for p in risks.items])
        else:
            review.problems.extend(risks.items)
        return review

    placing = ", ".join(p.name for p in to_place)
    need = sum(p.hosts for p in to_place)
    staying = [p.name for p in pools if p not in to_place]
    if staying:
        review.report.append(f"pools placed by an earlier `up`, holding their hosts: {', '.join(staying)}")
    if to_place:
        review.report.append(f"pools this `up` places: {placing}")
    reservation = read.reservation
    if read.error or reservation is None:
        risks.add(
            "tpu.reservation.name",
            f"the reservation could not be read ({read.error or 'no answer'})",
            f"grant the deployer {RESERVATION_PERMISSIONS} on the reservation's project (roles/compute.viewer), or "
            f"set {ACCEPT_RISK} true to place the pools unread",
        )
        return decide()
    review.report.append(reservation.line())
    review.report.extend([w.line(reservation.name) for w in reservation.windows])
    review.warnings.extend([f"TPU reservation: upcoming {w.line(reservation.name)}" for w in reservation.windows])
    if not reservation.exists:
        certain.add(
            "tpu.reservation.name",
            f"{reservation.name!r} is not a reservation in zone {reservation.zone} of project {reservation.project}",
            f"name an existing one (`gcloud compute reservations list --project {reservation.project}`), or set "
            "tpu.reservation.project to the project that shares it",
        )
        return decide()
    if reservation.machine_type and reservation.machine_type != tpu.machine_type:
        certain.add(
            "tpu.machineType",
            f"{tpu.machine_type!r} is not what reservation {reservation.name} holds ({reservation.machine_type})",
            "set the reservation's machine type, or name a reservation of this one",
        )
    if not block:
        free = max(0, reservation.hosts - reservation.in_use)
        review.report.append(f"reservation {reservation.name}: {free} of {reservation.hosts} hosts free, {need} needed")
        if need > free:
            _too_full(risks, "tpu.reservation.name", f"reservation {reservation.name}", free, need, to_place)
        return decide()
    if block not in reservation.block_names:
        certain.add(
            "tpu.reservation.block",
            f"{block!r} is not a block of reservation {reservation.name} (its blocks: "
            f"{', '.join(reservation.block_names) or 'none'})",
            "set one of its blocks",
        )
        return decide()
    block_read = read.block
    if block_read is None:
        risks.add(
            "tpu.reservation.block", f"block {block} could not be read", f"set {ACCEPT_RISK} true to place unread"
        )
        return decide()
    review.report.append(block_read.line())
    if block_read.maintenance_pending or block_read.maintenance_ongoing:
        review.warnings.append(
            f"TPU reservation: block {block_read.name} has maintenance pending on {block_read.maintenance_pending} "
            f"host(s), ongoing on {block_read.maintenance_ongoing}: a pool on them loses its nodes while it runs"
        )
    if block_read.status != READY and to_place:
        risks.add(
            "tpu.reservation.block",
            f"block {block} is {block_read.status}, not READY",
            f"wait until it is READY, set another block, or set {ACCEPT_RISK} true",
        )
    if tpu.dynamic_slicing:
        _review_sub_blocks(review, read, block_read, to_place, certain, risks)
    elif to_place:
        review.report.append(f"block {block}: {block_read.free} hosts free, {need} needed by {placing}")
        if block_read.health != HEALTHY or block_read.free < need:
            _too_full(
                risks, "tpu.reservation.block", f"block {block} ({block_read.health})", block_read.free, need, to_place
            )
    return decide()


def _review_sub_blocks(
    review: CapacityReview,
    read: CapacityRead,
    block: BlockRead,
    to_place: Sequence[PoolPlacement],
    certain: Problems,
    risks: Problems,
) -> None:
    """One new pool to one whole sub-block: a pinned pool to its own, the others to any left that fits."""
    review.report.extend([s.line() for s in read.sub_blocks if not s.fits(1) or s.maintenance_pending or s.in_use])
    by_name = {s.name: s for s in read.sub_blocks}
    taken: set[str] = set()
    for pool in (p for p in to_place if p.sub_block):
        sub_block = by_name.get(pool.sub_block)
        if pool.sub_block not in block.sub_block_names:
            certain.add(
                f"{pool.key}.subBlock",
                f"{pool.sub_block!r} is not a sub-block of block {block.name} (it has {block.sub_block_count})",
                f"use one from `gcloud compute reservations sub-blocks list --block-name={block.name}`, or leave it "
                "empty for GKE to choose",
            )
        elif sub_block is None or not sub_block.fits(pool.hosts):
            state = sub_block.line() if sub_block else f"sub-block {pool.sub_block} could not be read"
            risks.add(
                f"{pool.key}.subBlock",
                f"pool {pool.name} needs {pool.hosts} free hosts on a ready, healthy sub-block; {state}",
                f"pin it to another sub-block{_fitting_hint(read.sub_blocks, pool.hosts, taken)}, or set "
                f"{ACCEPT_RISK} true",
            )
        taken.add(pool.sub_block)
    unpinned = [p for p in to_place if not p.sub_block]
    if not unpinned:
        return
    hosts = max(p.hosts for p in unpinned)
    fitting = [s.name for s in read.sub_blocks if s.name not in taken and s.fits(hosts)]
    names = ", ".join(p.name for p in unpinned)
    have = f"{len(fitting)} ready, healthy sub-block(s) with {hosts} hosts free"
    need = f"{len(unpinned)} new pool(s) need one each ({names})"
    review.report.append(f"block {block.name}: {have}; {need}")
    if len(fitting) < len(unpinned):
        risks.add(
            "tpu.reservation.block",
            f"block {block.name} has {have}, and {need}: GKE would fail their create, or place them on degraded "
            "hardware",
            "free or repair sub-blocks (`gcloud compute reservations sub-blocks list`), set another block, or set "
            f"{ACCEPT_RISK} true",
        )
    elif block.health != HEALTHY:
        # GKE chooses the sub-block of a pool that names none: it may be a degraded one.
        risks.add(
            "tpu.reservation.block",
            f"block {block.name} is {block.health} ({block.degraded_sub_blocks} sub-block(s)), and GKE chooses the "
            f"sub-block of {names}",
            "pin each new pool to a healthy free sub-block (tpu.pools[].subBlock: "
            f"{', '.join(fitting[: len(unpinned)])}), or set {ACCEPT_RISK} true",
        )


def _fitting_hint(sub_blocks: Sequence[SubBlockRead], hosts: int, taken: set[str]) -> str:
    fitting = [s.name for s in sub_blocks if s.name not in taken and s.fits(hosts)]
    return f" (ready, healthy, free: {', '.join(fitting[:3])})" if fitting else ""


def _too_full(risks: Problems, key: str, where: str, free: int, need: int, to_place: Sequence[PoolPlacement]) -> None:
    risks.add(
        key,
        f"{where} has {free} host(s) free, and {', '.join(p.name for p in to_place)} need {need}",
        f"free hosts there, set another, or set {ACCEPT_RISK} true",
    )
