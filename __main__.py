"""GKE for Cloud TPU serving: load the stack config, build the layers, export what users need."""

import pulumi

from components import cluster_layer, gcp_layer, stack_config
from components.cluster import Cluster
from components.network import Network
from components.platform import ClusterPlatform
from components.project_services import ProjectServices
from components.queues import KueueQueues
from components.saxml import SaxmlCell
from components.serving import ModelServing
from components.slice_checks import SliceChecks
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

# 3. Cluster platform: controllers by Helm, then the Kueue queueing for dynamic slicing.
platform = ClusterPlatform("platform", cluster_layer.platform_args(config, cluster.provider))
queues = None
if config.dynamic_slicing:
    queues = KueueQueues("queues", cluster_layer.queues_args(config, cluster.provider, platform.kueue))
    admission_plan = cluster_layer.admission_plan(config)
    for line in admission_plan.lines():
        pulumi.log.info(f"TPU admission: {line}")

# 4. Workloads: slice checks and P/D serving (TPU7x), Saxml (TPU v5e).
checks = serving = saxml = None
if config.enabled_checks():
    after_platform = [platform.slice_controller, queues.objects, *queues.namespaces]
    checks = SliceChecks("slice-checks", cluster_layer.slice_checks_args(config, cluster.provider, after_platform))
if config.serving.enabled:
    serving = ModelServing(
        "serving",
        cluster_layer.serving_args(
            config,
            cluster.provider,
            namespace_ready=[queues.namespace(config.serving.namespace), queues.objects],
            platform_ready=[platform.leader_worker_set, platform.slice_controller],
        ),
        opts=after_apis,
    )
if config.saxml.enabled:
    saxml = SaxmlCell("saxml", cluster_layer.saxml_args(config, cluster.provider, platform.jobset), opts=after_apis)

# 5. Stack outputs.
pulumi.export("project", config.project)
pulumi.export("region", config.region)
pulumi.export("networkName", network.network_name)
pulumi.export("nodeSubnetName", network.node_subnet_name)
pulumi.export("proxyOnlySubnetName", network.proxy_only_subnet_name)
pulumi.export("clusterName", cluster.name)
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("getCredentialsCommand", cluster.get_credentials_command)
pulumi.export("tpuPoolNames", tpu.pool_names)
pulumi.export("tpuChips", config.total_tpu_chips)
pulumi.export("helmReleases", platform.release_versions)
if queues is not None:
    pulumi.export("workloadPolicyName", tpu.workload_policy_name)
    pulumi.export("workloadNamespaces", list(config.queues.namespaces))
    pulumi.export("clusterQueueName", config.queues.cluster_queue_name)
    pulumi.export("localQueueName", config.queues.local_queue_name)
    pulumi.export("admissionPlan", admission_plan.lines())
    pulumi.export("priorityClassNames", [p.name for p in (config.queues.priority_classes.low, config.queues.priority_classes.medium, config.queues.priority_classes.high)])
if checks is not None:
    pulumi.export("sliceCheckJobSets", checks.jobset_names)
if saxml is not None:
    pulumi.export("saxBucketName", saxml.bucket_name)
    pulumi.export("saxHttpAddress", saxml.http_address)
if serving is not None:
    endpoint = cluster_layer.serving_endpoint(config, serving.gateway_address)
    pulumi.export("gatewayAddress", serving.gateway_address)
    pulumi.export("modelName", endpoint.model_name)
    pulumi.export("openaiBaseUrl", endpoint.base_url)
    pulumi.export("exampleCurl", endpoint.example_curl)
