"""GKE for Cloud TPU serving: load the stack config, build the layers, export what users need."""

import pulumi

from components import gcp_layer, stack_config
from components.cluster import Cluster
from components.network import Network
from components.project_services import ProjectServices
from components.tpu_capacity import TpuCapacity

# 1. One typed, validated config: a bad stack fails here, before any resource is registered.
config = stack_config.load_from_pulumi()

# 2. Google Cloud layer.
services = ProjectServices("project-services", gcp_layer.project_services_args(config))
after_apis = pulumi.ResourceOptions(depends_on=[services])
network = Network("network", gcp_layer.network_args(config), opts=after_apis)
cluster = Cluster("cluster", gcp_layer.cluster_args(config, network), opts=after_apis)
tpu = TpuCapacity(
    "tpu-capacity",
    gcp_layer.tpu_capacity_args(config, cluster.name, cluster.node_service_account_email),
    opts=after_apis,
)

# 3. Stack outputs.
pulumi.export("project", config.project)
pulumi.export("region", config.region)
pulumi.export("networkName", network.network_name)
pulumi.export("nodeSubnetName", network.node_subnet_name)
pulumi.export("proxyOnlySubnetName", network.proxy_only_subnet_name)
pulumi.export("clusterName", cluster.name)
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("getCredentialsCommand", cluster.get_credentials_command)
pulumi.export("workloadPolicyName", tpu.workload_policy_name)
pulumi.export("tpuPoolNames", tpu.pool_names)
pulumi.export("tpuChips", config.total_tpu_chips)
