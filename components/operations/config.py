"""The rules of operating a stack: what a stack marked production must have on, and the TPU
upgrade policy of every stack that serves.

They read several blocks (cluster, tpu, platform, and whether a workload serves), so they live
here, above the blocks they read, and the stack runs them with the others.
"""

from __future__ import annotations

from components.config_base import Problems
from components.gcp.config import ClusterConfig, TpuConfig
from components.platform.config import PlatformConfig

MIN_HA_REPLICAS = 2  # one controller replica may restart (or its node upgrade) while the other serves
MIN_PRODUCTION_SYSTEM_NODES = 2  # per zone: a system-node upgrade or repair never leaves a zone empty


def validate_upgrade_policy(cluster: ClusterConfig, serves: bool, problems: Problems) -> None:
    """A stack that serves has a maintenance window: GKE then upgrades a TPU cube only inside it.

    Without one, an auto-upgrade of a TPU pool may start at any hour: GKE recreates the pool's
    nodes as one unit (the pools upgrade with max_surge 0 and every node unavailable, the only way
    a multi-host slice can), which takes every slice of that cube down and reloads the weights of
    each serving group on it.
    """
    if not serves or cluster.existing.enabled or cluster.maintenance_window is not None:
        return
    problems.add(
        "cluster.maintenanceWindow",
        "is not set on a stack that serves: GKE may auto-upgrade a TPU pool at any hour, recreating a whole "
        "cube (every slice on it) and reloading the weights of each serving group it held",
        "set start, end and recurrence to the hours serving can lose a cube (see the README, TPU upgrades)",
    )


def validate_production(
    production: bool, cluster: ClusterConfig, tpu: TpuConfig, platform: PlatformConfig, problems: Problems
) -> None:
    """Every protection of a stack marked production is on."""
    if not production:
        return
    if not cluster.existing.enabled:
        if not cluster.deletion_protection:
            problems.add(
                "cluster.deletionProtection",
                "is false on a production stack: `pulumi destroy` or a replacing change would delete the cluster",
                "set it true (set it false in a reviewed change right before a planned destroy)",
            )
        if not tpu.protect_pools:
            problems.add(
                "tpu.protectPools",
                "is false on a production stack: a stray change could delete a TPU pool and its reservation cube",
                "set it true",
            )
        if cluster.maintenance_window is None:
            problems.add(
                "cluster.maintenanceWindow",
                "is not set on a production stack: GKE would upgrade the cluster and its pools at any hour",
                "set start, end and recurrence to the hours the stack can lose a cube",
            )
        if cluster.system_pool.nodes_per_zone < MIN_PRODUCTION_SYSTEM_NODES:
            problems.add(
                "cluster.systemPool.nodesPerZone",
                f"{cluster.system_pool.nodes_per_zone} on a production stack: an upgrade or repair of that node "
                "leaves its zone without controllers",
                f"use {MIN_PRODUCTION_SYSTEM_NODES} or more",
            )
    if platform.install:
        replicas = (
            ("platform.kueueController.replicas", platform.kueue_controller.replicas),
            ("platform.sliceController.replicas", platform.slice_controller.replicas),
        )
        for key, count in replicas:
            if count < MIN_HA_REPLICAS:
                problems.add(
                    key,
                    f"{count} on a production stack: while that one replica restarts, its fail-closed webhooks "
                    "refuse every workload create",
                    f"use {MIN_HA_REPLICAS} or more",
                )
