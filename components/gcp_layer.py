"""Maps the validated stack config onto the Google Cloud components' typed args."""

from __future__ import annotations

import pulumi

from components.cluster import ClusterArgs
from components.network import Network, NetworkArgs
from components.project_services import ProjectServicesArgs
from components.stack_config import StackConfig
from components.tpu_capacity import TpuCapacityArgs, TpuPoolArgs


def project_services_args(config: StackConfig) -> ProjectServicesArgs:
    return ProjectServicesArgs(project=config.project, enable_ai_zones=config.tpu_zone_is_ai_zone)


def network_args(config: StackConfig) -> NetworkArgs:
    network = config.network
    return NetworkArgs(
        project=config.project,
        region=config.region,
        prefix=network.prefix,
        mtu=network.mtu,
        node_cidr=network.node_cidr,
        pod_cidr=network.pod_cidr,
        service_cidr=network.service_cidr,
        proxy_only_cidr=network.proxy_only_cidr,
    )


def cluster_args(config: StackConfig, network: Network) -> ClusterArgs:
    cluster = config.cluster
    return ClusterArgs(
        project=config.project,
        region=config.region,
        name=cluster.name,
        version=cluster.version,
        release_channel=cluster.release_channel,
        deletion_protection=cluster.deletion_protection,
        slice_controller=config.dynamic_slicing,
        network=network.vpc.id,
        subnetwork=network.node_subnet.id,
        pods_range_name=network.pods_range_name,
        services_range_name=network.services_range_name,
        system_machine_type=cluster.system_pool.machine_type,
        system_nodes_per_zone=cluster.system_pool.nodes_per_zone,
        node_service_account_id=config.node_service_account_id,
        maintenance_window=cluster.maintenance_window,
        maintenance_exclusions=cluster.maintenance_exclusions,
    )


def tpu_capacity_args(
    config: StackConfig, cluster_name: pulumi.Input[str], node_service_account_email: pulumi.Input[str]
) -> TpuCapacityArgs:
    return TpuCapacityArgs(
        project=config.project,
        region=config.region,
        zone=config.tpu.zone,
        machine=config.machine,
        cluster_name=cluster_name,
        node_service_account_email=node_service_account_email,
        workload_policy_name=config.tpu.workload_policy_name,
        pools=[
            TpuPoolArgs(
                name=pool.name,
                topology=pool.topology,
                node_count=pool.node_count,
                reservation_path=config.reservation_path(pool),
            )
            for pool in config.tpu.pools
        ],
        protect_pools=config.tpu.protect_pools,
    )
