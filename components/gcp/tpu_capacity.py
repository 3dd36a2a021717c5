"""TPU capacity: the workload policy and one node pool per slice (per cube for TPU7x)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.cluster import (
    GKE_METADATA_SERVER,
    NETWORK_CONFIG_NOT_OURS,
    NODE_OAUTH_SCOPES,
    node_network_config,
    with_boot,
)
from components.gcp.config import NodeBoot
from components.resources import children_of
from components.tpu import topology

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
TPU_POOL_REPLACED_ON = ["nodeLocations", "nodeConfig.machineType"]
# Bringing up and draining a reserved multi-host TPU slice takes far longer than the defaults.
TPU_POOL_TIMEOUTS = pulumi.CustomTimeouts(create="90m", update="90m", delete="60m")


@dataclass(frozen=True)
class TpuPoolArgs:
    name: str
    topology: str
    node_count: int
    reservation_path: str | None
    private_nodes: bool
    boot: NodeBoot
    boot_key_grants: list[pulumi.Resource]  # the grant on its boot disks' key (service_agents.py); empty: none made


@dataclass(frozen=True)
class TpuCapacityArgs:
    project: str
    region: str
    zone: str
    machine: topology.MachineType
    cluster_name: pulumi.Input[str]
    node_service_account_email: pulumi.Input[str]
    workload_policy_name: str
    pools: list[TpuPoolArgs]
    protect_pools: bool
    egress: list[pulumi.Resource]  # the Cloud NAT private nodes pull their images through


TYPE = "tpu-gke:gcp:TpuCapacity"
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"


def pool_urn(stack: str, project: str, pool: str) -> str:
    """The URN of a TPU pool in the stack's state: a child of the stack's one TpuCapacity, which has no parent of
    its own (the stack's root resource is no part of a URN's type chain)."""
    return f"urn:pulumi:{stack}::{project}::{TYPE}${NODE_POOL_TYPE}::{pool}"


class TpuCapacity(pulumi.ComponentResource):
    def __init__(self, name: str, args: TpuCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = children_of(self, opts)

        self.workload_policy = None
        if args.machine.dynamic_slicing:
            # PROVISION_ONLY: GKE provisions the cube but leaves ICI inactive until a Slice forms.
            self.workload_policy = gcp.compute.ResourcePolicy(
                "workload-policy",
                project=args.project,
                region=args.region,
                name=args.workload_policy_name,
                description=f"HIGH_THROUGHPUT {topology.CUBE} cubes for dynamic slicing",
                workload_policy={
                    "type": "HIGH_THROUGHPUT",
                    "accelerator_topology": str(topology.CUBE),
                    "accelerator_topology_mode": "PROVISION_ONLY",
                },
                opts=child,
            )

        pool_opts = pulumi.ResourceOptions.merge(
            child,
            pulumi.ResourceOptions(
                custom_timeouts=TPU_POOL_TIMEOUTS,
                protect=args.protect_pools,
                # GKE cannot move a multi-host TPU slice to another zone or machine type in place,
                # so those are replacements too, like the provider's own (reservation, service
                # account, scopes, placement policy name). The new pool needs the cube the old one
                # holds in the reservation: the old one goes first.
                replace_on_changes=TPU_POOL_REPLACED_ON,
                delete_before_replace=True,
                # The TPU workloads' images come from outside Google (Docker Hub): a private pool waits for the
                # NAT, and is deleted before it.
                depends_on=args.egress,
                ignore_changes=NETWORK_CONFIG_NOT_OURS,
            ),
        )
        self.pools = [
            gcp.container.NodePool(
                pool.name,
                project=args.project,
                cluster=args.cluster_name,
                location=args.region,
                node_locations=[args.zone],
                name=pool.name,
                node_count=pool.node_count,
                node_config=_node_config(args, pool),
                placement_policy=self._placement(pool),
                # A slice is one unit: upgrading it node by node would break it, so it is
                # drained and recreated whole, never surged beyond its reservation.
                upgrade_settings={"strategy": "SURGE", "max_surge": 0, "max_unavailable": pool.node_count},
                network_config=node_network_config(pool.private_nodes),
                management={"auto_repair": True, "auto_upgrade": True},
                # Compute Engine makes its boot disks with the key: its agent's grant on the key first
                opts=pulumi.ResourceOptions.merge(pool_opts, pulumi.ResourceOptions(depends_on=pool.boot_key_grants)),
            )
            for pool in args.pools
        ]

        self.pool_names = [pool.name for pool in self.pools]
        self.workload_policy_name = self.workload_policy.name if self.workload_policy else None
        self.register_outputs({"poolNames": self.pool_names, "workloadPolicyName": self.workload_policy_name})

    def _placement(self, pool: TpuPoolArgs) -> gcp.container.NodePoolPlacementPolicyArgsDict:
        if self.workload_policy is not None:
            # What GKE stores for a pool under a workload policy: the policy's name and the
            # topology, and no type (vllm-project/ci-infra#547, #552). The provider requires
            # `type`, so it goes empty; leaving out the topology would show a change on every
            # preview that no update clears (the update has no placement step).
            return {"type": "", "policy_name": self.workload_policy.name, "tpu_topology": pool.topology}
        return {"type": "COMPACT", "tpu_topology": pool.topology}


def _node_config(args: TpuCapacityArgs, pool: TpuPoolArgs) -> gcp.container.NodePoolNodeConfigArgsDict:
    config: gcp.container.NodePoolNodeConfigArgsDict = {
        "machine_type": args.machine.name,
        "service_account": args.node_service_account_email,
        "oauth_scopes": NODE_OAUTH_SCOPES,
        "workload_metadata_config": GKE_METADATA_SERVER,
        "gvnic": {"enabled": True},
    }
    if pool.reservation_path:
        config["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [pool.reservation_path],
        }
    return with_boot(config, pool.boot)
