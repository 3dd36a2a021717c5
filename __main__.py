"""GKE for Cloud TPU serving: load the stack config, build the layers, export what users need."""

import pulumi

from components import lifecycle as lifecycle_review
from components import naming, wiring
from components import stack as stack_config
from components.gcp.cluster import Cluster
from components.gcp.existing_cluster import ExistingCluster, Target
from components.gcp.network import Network
from components.gcp.project_services import ProjectServices
from components.gcp.pull_through import PullThrough
from components.gcp.service_agents import ServiceAgents
from components.gcp.tpu_capacity import TpuCapacity
from components.operations.component import Monitoring
from components.operations.node_audit import NodeAuditLogging
from components.platform.gates import ClusterGates
from components.platform.queues import KueueQueues
from components.platform.releases import ClusterPlatform
from components.resources import previous_outputs
from components.workloads.network_policies.component import NamespaceDefaults
from components.workloads.saxml.component import SaxmlCell
from components.workloads.serving.component import ModelServing, endpoint_outputs
from components.workloads.slice_checks.component import SliceChecks

# 1. One typed, validated config, built once: a bad stack fails here, before any resource exists.
stack = stack_config.load_from_pulumi()
config = stack.config

# What this `up` would replace in the running stack, said before anything changes; a change that
# would fail halfway (a pool renamed into a reservation its old self holds) stops the preview.
lifecycle = lifecycle_review.lifecycle_facts(config)
for warning in config.preview_warnings() + stack_config.image_pull_warnings(stack):
    pulumi.log.warn(warning)
previous = previous_outputs()
for note in stack_config.image_pull_notes(stack):
    pulumi.log.info(note)
previous.apply(
    lambda outputs: wiring.announce_changes(
        lifecycle_review.previous_lifecycle(outputs), lifecycle, config.cluster.deletion_protection
    )
)

# 2. Google Cloud layer, or the cluster made elsewhere that the Kubernetes layer goes onto. The APIs
#    first: every Google Cloud call waits for the one it goes through (an empty project refuses it).
network = tpu = after_apis = services = pull_through = None
if wiring.project_apis(stack):
    services = ProjectServices("project-services", wiring.project_services_args(stack))
    after_apis = pulumi.ResourceOptions(depends_on=[services])  # a component's children inherit its wait
cluster: Target
if config.cluster.existing.enabled:
    cluster = ExistingCluster("cluster", wiring.existing_cluster_args(stack))
else:
    assert services is not None, "a stack that makes its cluster enables every API it needs"
    # The service agents' grants on the keys of this project, before the cluster and pools that use the keys.
    agents_args = wiring.service_agents_args(stack, services)
    agents = ServiceAgents("service-agents", agents_args) if agents_args else None
    network = Network("network", wiring.network_args(stack), opts=after_apis)
    # The nodes pull from registries outside Google through Artifact Registry remote repositories (images.pullThrough):
    # made before the cluster's read grants on them, which every Kubernetes object waits for.
    if config.pull_through_on:
        pull_through = PullThrough("pull-through", wiring.pull_through_args(stack, agents, services), opts=after_apis)
    cluster = Cluster(
        "cluster", wiring.cluster_args(stack, network, services, agents, pull_through, previous), opts=after_apis
    )
    # The pools are placed once the preview has read their reservation and found room (components/gcp/rules.py).
    tpu = TpuCapacity(
        "tpu-capacity", wiring.tpu_capacity_args(stack, cluster, agents, services, previous), opts=after_apis
    )

# 3. Cluster platform: controllers by Helm; the gates between the layers (what workloads wait
#    for, and what `pulumi destroy` waits to be gone before the TPU pools and the subnets go);
#    then the Kueue queueing for dynamic slicing.
platform = ClusterPlatform("platform", wiring.platform_args(stack, cluster, network))
gates = ClusterGates("gates", wiring.gates_args(stack, cluster, network, tpu, platform))
queues = None
admission_plan = config.admission_plan()
if stack.kueue is not None:
    queues = KueueQueues("queues", wiring.queues_args(stack, cluster, platform))
    for line in admission_plan.lines():
        pulumi.log.info(f"TPU admission: {line}")

# 4. Workloads: slice checks and P/D serving (TPU7x), Saxml (TPU v5e); wiring decides what each waits for.
checks = serving = saxml = None
if stack.checks is not None and queues is not None:
    checks = SliceChecks("slice-checks", wiring.slice_checks_args(stack, cluster, platform, queues, gates))
if stack.serving is not None and queues is not None:
    serving = ModelServing(
        "serving", wiring.serving_args(stack, services, cluster, network, platform, queues, gates), opts=after_apis
    )
if stack.saxml is not None:
    saxml = SaxmlCell("saxml", wiring.saxml_args(stack, cluster, platform, gates), opts=after_apis)

# 4b. Each workload namespace's default deny: after the NetworkPolicies that admit its pods' senders.
if stack.namespace_defaults is not None:
    NamespaceDefaults(
        "namespace-defaults", wiring.namespace_defaults_args(stack, cluster, queues, checks, serving, saxml)
    )

# 5. Operations: the alert policies and dashboards an operator watches, and the scrapes they read; the nodes'
#    audit records in Cloud Logging.
monitoring = None
if stack.monitoring is not None:
    monitoring = Monitoring("operations", wiring.monitoring_args(stack, cluster, services, platform, queues, serving))
if stack.node_audit is not None:
    NodeAuditLogging("node-audit-logging", wiring.node_audit_args(stack, cluster))

# 6. Stack outputs.
pulumi.export("project", config.project)
pulumi.export("region", config.region)
pulumi.export(stack_config.PRODUCTION_OUTPUT, config.production)
if network is not None:
    for output, value in network.outputs.items():
        pulumi.export(output, value)
pulumi.export("clusterName", cluster.name)
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("getCredentialsCommand", cluster.get_credentials_command)
pulumi.export("tpuPoolNames", tpu.pool_names if tpu else [pool.name for pool in config.tpu.pools])
pulumi.export("tpuChips", config.tpu.total_chips)
pulumi.export(lifecycle_review.RELEASES_OUTPUT, platform.release_versions)
pulumi.export(lifecycle_review.LIFECYCLE_OUTPUT, lifecycle)
pulumi.export("images", [image.output(config.pull_path()) for image in config.stack_images()])
if queues is not None:
    if tpu is not None:
        pulumi.export("workloadPolicyName", tpu.workload_policy_name)
    pulumi.export("workloadNamespaces", list(config.queues.namespaces))
    pulumi.export("clusterQueueName", config.queues.cluster_queue_name)
    pulumi.export("localQueueName", config.queues.local_queue_name)
    pulumi.export(naming.ADMISSION_PLAN_OUTPUT, admission_plan.lines())
    pulumi.export("priorityClassNames", config.queues.priority_class_names)
if checks is not None:
    pulumi.export("sliceCheckJobSets", checks.jobset_names)
if saxml is not None:
    pulumi.export("saxBucketName", saxml.bucket_name)
    pulumi.export(naming.SAX_ADDRESS_OUTPUT, saxml.http_address)
if serving is not None:
    pulumi.export("gatewayAddress", serving.gateway_address)
    for output, value in endpoint_outputs(config.serving, serving.gateway_address).items():
        pulumi.export(output, value)
if monitoring is not None and monitoring.policy_names:
    pulumi.export("alertPolicies", monitoring.policy_names)
if monitoring is not None and monitoring.dashboard_urls:
    pulumi.export("dashboards", monitoring.dashboard_urls)
