"""TPU capacity: the workload policy and one node pool per slice (per cube for TPU7x), placed after the preview has
read the reservation they go on (its block and sub-blocks) and found room there (components/gcp/rules.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.gcp.cluster import Cluster, node_config
from components.gcp.config import ClusterConfig, TpuConfig, TpuPoolConfig
from components.gcp.review import say_review, say_unread
from components.gcp.rules import (
    BlockRead,
    CapacityRead,
    CapacityReview,
    MaintenanceWindowRead,
    PoolPlacement,
    ReservationRead,
    SubBlockRead,
    pools_to_place,
    review_capacity,
)
from components.resources import ReadAnswer, answer_of, children_of, waiting_for
from components.tpu import topology


@dataclass(frozen=True)
class TpuCapacityArgs:
    tpu: TpuConfig
    cluster: ClusterConfig  # what a pool inherits: private nodes, boot hardening
    project: str
    region: str
    # The cluster the pools join, their nodes running as its node account (node_service_account); what every pool
    # waits for (node_pool_options): the Cloud NAT private nodes pull their images through, and that account's read on
    # each repository the nodes pull from, so that a pool replaced onto a new node account pulls the images of the
    # pods it gets back
    gke_cluster: Cluster
    # Each pool's grant on its boot disks' key (service_agents.py), by pool name; empty: none made
    boot_key_grants: Mapping[str, list[pulumi.Resource]]
    # What the preview's read of the reservation (tpu.reservation; none when unnamed) compares against and waits for
    previous_pools: pulumi.Input[Mapping[str, str]]  # the last `up`'s pools and their reservation paths
    compute_api: pulumi.Resource  # the Compute Engine API's enablement: the reads wait for it


TYPE = "tpu-gke:gcp:TpuCapacity"


def pool_urn(stack: str, project: str, pool: str) -> str:
    """The URN of a TPU pool in the stack's state: a child of the stack's one TpuCapacity, which has no parent of
    its own (the stack's root resource is no part of a URN's type chain)."""
    return f"urn:pulumi:{stack}::{project}::{TYPE}$gcp:container/nodePool:NodePool::{pool}"


class TpuCapacity(pulumi.ComponentResource):
    def __init__(self, name: str, args: TpuCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = children_of(self, opts)
        tpu = args.tpu

        self.workload_policy = None
        if tpu.machine.dynamic_slicing:
            # PROVISION_ONLY: GKE provisions the cube but leaves ICI inactive until a Slice forms.
            self.workload_policy = gcp.compute.ResourcePolicy(
                "workload-policy",
                project=args.project,
                region=args.region,
                name=tpu.workload_policy_name,
                description=f"HIGH_THROUGHPUT {topology.CUBE} cubes for dynamic slicing",
                workload_policy={
                    "type": "HIGH_THROUGHPUT",
                    "accelerator_topology": str(topology.CUBE),
                    "accelerator_topology_mode": "PROVISION_ONLY",
                },
                # A new name is a new policy: the provider updates `name` in place (no ForceNew), and its update
                # addresses the policy by the new name, which does not exist yet (hashicorp/terraform-provider-google-
                # beta v7.45.0 google-beta/services/compute/resource_compute_resource_policy.go). The new policy is
                # made first, the pools are replaced onto it, and the old one goes last.
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(replace_on_changes=["name"])),
            )

        # The pools wait for the reservation's review: an `up` whose review refuses places no pool.
        placed_after: list[pulumi.Input[pulumi.Resource]] = []
        if tpu.reservation.name:
            placed_after.append(self._review_reservation(args).apply(lambda _: args.compute_api))
        pool_opts = pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions.merge(child, args.gke_cluster.node_pool_options),
            pulumi.ResourceOptions(
                # Bringing up and draining a reserved multi-host TPU slice takes far longer than the defaults.
                custom_timeouts=pulumi.CustomTimeouts(create="90m", update="90m", delete="60m"),
                protect=tpu.protect_pools,
                # GKE cannot move a multi-host TPU slice to another zone or machine type in place,
                # so those are replacements too, like the provider's own (reservation, service
                # account, scopes, placement policy name). The new pool needs the cube the old one
                # holds in the reservation: the old one goes first (the cluster's node_pool_options).
                replace_on_changes=["nodeLocations", "nodeConfig.machineType"],
                # The TPU workloads' images come from outside Google (Docker Hub): a private pool waits for the
                # NAT, and is deleted before it; and through the mirror or pull-through repositories, for which it
                # waits for the node account's read (both through node_pool_options).
                depends_on=placed_after,
            ),
        )
        self.pools = [
            gcp.container.NodePool(
                pool.name,
                project=args.project,
                cluster=args.gke_cluster.name,
                location=args.region,
                node_locations=[tpu.zone],
                name=pool.name,
                node_count=pool.node_count,
                node_config=_pool_node_config(args, pool),
                placement_policy=self._placement(pool),
                # A slice is one unit: upgrading it node by node would break it, so it is
                # drained and recreated whole, never surged beyond its reservation.
                upgrade_settings={"strategy": "SURGE", "max_surge": 0, "max_unavailable": pool.node_count},
                # set either way, as on the system pool (components/gcp/cluster.py)
                network_config={"enable_private_nodes": tpu.pool_private_nodes(pool, args.cluster)},
                management={"auto_repair": True, "auto_upgrade": True},
                # Compute Engine makes its boot disks with the key: its agent's grant on the key first
                opts=waiting_for(pool_opts, *args.boot_key_grants.get(pool.name, [])),
            )
            for pool in tpu.pools
        ]

        self.pool_names = [pool.name for pool in self.pools]
        self.workload_policy_name = self.workload_policy.name if self.workload_policy else None
        self.register_outputs({"poolNames": self.pool_names, "workloadPolicyName": self.workload_policy_name})

    def _review_reservation(self, args: TpuCapacityArgs) -> pulumi.Output[CapacityReview | None]:
        """Read the reservation, its block and (when a pool is to be placed on one) its sub-blocks; say what was read;
        refuse (fail the preview) what components/gcp/rules.py refuses. None when the reads are not answered: on a new
        project the Compute Engine API they go through is enabled by this very `up`, so the preview's engine answers
        them as unknown, and the `up` reads before it places the pools."""

        tpu, reserved = args.tpu, args.tpu.reservation
        project = reserved.owner(args.project)
        pools = [
            PoolPlacement(
                key=f"tpu.pools[{i}]",
                name=pool.name,
                hosts=pool.node_count,
                sub_block=pool.sub_block,
                path=tpu.reservation_path(pool, args.project) or "",
            )
            for i, pool in enumerate(tpu.pools)
        ]

        def read(data_source: Callable[..., pulumi.Output[Any]], **names: str) -> pulumi.Output[ReadAnswer[Any]]:
            # Its own wait, like every invoke: a parent's depends_on is not an invoke's.
            opts = pulumi.InvokeOutputOptions(parent=self, depends_on=[args.compute_api])
            return answer_of(data_source(project=project, zone=tpu.zone, opts=opts, **names))

        def after_reservation(values: list[Any]) -> pulumi.Output[CapacityReview | None] | CapacityReview | None:
            answer: ReadAnswer[Any] = values[0]
            if answer.unknown:
                say_unread(f"TPU reservation {reserved.name}", "Compute Engine API", "it places the pools")
                return None
            to_place = pools_to_place(pools, values[1] or {})  # the last `up`'s pools, if any

            def decide(capacity: CapacityRead) -> CapacityReview:
                review = review_capacity(capacity, tpu, pools, to_place)
                say_review([f"TPU reservation: {line}" for line in review.report], review.warnings, review.problems)
                return review

            reservation = _reservation(answer.value, tpu, project) if answer.ok else None
            if not (reservation and reservation.exists and reserved.block in reservation.block_names):
                return decide(CapacityRead(reservation=reservation, error=answer.error))

            def after_block(block: ReadAnswer[Any]) -> pulumi.Output[CapacityReview | None] | CapacityReview | None:
                if not block.ok:
                    return decide(CapacityRead(reservation=reservation, error=block.error))
                block_read = _block(block.value)
                if not (tpu.dynamic_slicing and to_place):
                    return decide(CapacityRead(reservation=reservation, block=block_read))
                # Only an `up` that places a pool reads the sub-blocks (a block has up to 144), each by its name.
                sub_blocks = [
                    read(
                        gcp.compute.get_reservation_sub_block_output,
                        name=name,
                        reservation_block=reserved.block,
                        reservation=reserved.name,
                    )
                    for name in block_read.sub_block_names
                ]
                # A sub-block that could not be read fails the read: counting only the others refused the pools as
                # too many for the block, naming no permission.
                return pulumi.Output.all(*sub_blocks).apply(
                    lambda answers: decide(
                        CapacityRead(
                            reservation,
                            block_read,
                            tuple(_sub_block(a.value) for a in answers if a.ok),
                            next((a.error for a in answers if a.error), ""),
                        )
                    )
                )

            block = read(gcp.compute.get_reservation_block_output, name=reserved.block, reservation=reserved.name)
            return block.apply(after_block)

        reservation_read = read(gcp.compute.get_reservation_output, name=reserved.name)
        return pulumi.Output.all(reservation_read, args.previous_pools).apply(after_reservation)

    def _placement(self, pool: TpuPoolConfig) -> gcp.container.NodePoolPlacementPolicyArgsDict | None:
        if pool.node_count == 1:
            # A single-host slice (v5e 2x2) takes no placement: GKE refuses a tpu_topology on a single-host TPU slice
            # pool (its 400 quoted in AI-Hypercomputer/xpk#825), and xpk makes one with neither topology nor COMPACT
            # (AI-Hypercomputer/xpk@367c838 src/xpk/core/nodepool.py, #822).
            return None
        if self.workload_policy is not None:
            # What GKE stores for a pool under a workload policy: the policy's name and the
            # topology, and no type (vllm-project/ci-infra#547, #552). The provider requires
            # `type`, so it goes empty; leaving out the topology would show a change on every
            # preview that no update clears (the update has no placement step).
            return {"type": "", "policy_name": self.workload_policy.name, "tpu_topology": pool.topology}
        return {"type": "COMPACT", "tpu_topology": pool.topology}


def _pool_node_config(args: TpuCapacityArgs, pool: TpuPoolConfig) -> gcp.container.NodePoolNodeConfigArgsDict:
    reservation_path = args.tpu.reservation_path(pool, args.project)
    config: gcp.container.NodePoolNodeConfigArgsDict = {
        "machine_type": args.tpu.machine.name,
        "gvnic": {"enabled": True},
    }
    if reservation_path:
        config["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [reservation_path],
        }
    return node_config(config, args.gke_cluster.node_service_account.email, args.tpu.pool_boot(pool, args.cluster))


# --- The reads and their answers -------------------------------------------------------------------------


def _first(items: Sequence[Any] | None) -> Any:
    """A nested block of a data source's result: a list of at most one (the provider's flatteners)."""
    return items[0] if items else None


def _reservation(result: Any, tpu: TpuConfig, project: str) -> ReservationRead:
    """getReservation's result: a reservation the API does not know comes back with none of its fields (no status,
    no creation time: hashicorp/terraform-provider-google v7.45.0 resourceComputeReservationRead clears a 404 and the
    data source answers anyway)."""
    status = _first(result.resource_statuses)
    health = _first(status.health_infos) if status else None
    maintenance = _first(status.reservation_maintenances) if status else None
    specific = _first(result.specific_reservations)
    properties = _first(specific.instance_properties) if specific else None
    return ReservationRead(
        project=project,
        zone=tpu.zone,
        name=tpu.reservation.name,
        exists=bool(result.status or result.creation_timestamp),
        status=result.status or "",
        health=(health.health_status if health else "") or "",
        machine_type=(properties.machine_type if properties else "") or "",
        block_names=tuple(result.block_names or ()),
        hosts=int(specific.count or 0) if specific else 0,
        in_use=int(specific.in_use_count or 0) if specific else 0,
        windows=tuple(
            MaintenanceWindowRead(w.window_start_time, w.window_end_time, w.type, w.maintenance_status)
            for w in (maintenance.upcoming_group_maintenances or [] if maintenance else [])
        ),
    )


def _block(result: Any) -> BlockRead:
    health = _first(result.health_infos)
    maintenance = _first(result.reservation_maintenances)
    return BlockRead(
        name=result.name,
        status=result.status or "",
        health=(health.health_status if health else "") or "",
        hosts=int(result.block_count or 0),
        in_use=int(result.in_use_count or 0),
        sub_block_count=int(result.reservation_sub_block_count or 0),
        sub_blocks_in_use=int(result.reservation_sub_block_in_use_count or 0),
        degraded_sub_blocks=int(health.degraded_sub_block_count or 0) if health else 0,
        sub_block_names=tuple(result.sub_block_names or ()),
        maintenance_pending=int(maintenance.maintenance_pending_count or 0) if maintenance else 0,
        maintenance_ongoing=int(maintenance.maintenance_ongoing_count or 0) if maintenance else 0,
    )


def _sub_block(result: Any) -> SubBlockRead:
    health = _first(result.health_infos)
    maintenance = _first(result.reservation_sub_block_maintenances)
    return SubBlockRead(
        name=result.name,
        status=result.status or "",
        health=(health.health_status if health else "") or "",
        hosts=int(result.sub_block_count or 0),
        in_use=int(result.in_use_count or 0),
        degraded_hosts=int(health.degraded_host_count or 0) if health else 0,
        maintenance_pending=int(maintenance.maintenance_pending_count or 0) if maintenance else 0,
        maintenance_ongoing=int(maintenance.maintenance_ongoing_count or 0) if maintenance else 0,
    )
