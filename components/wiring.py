"""Maps the validated stack onto each component's typed args, and decides what each waits for: the one module that
sees the whole stack and every layer, so that components and builders stay testable without a StackConfig. One
function per component, in the order of the deployment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.gcp import project_services as apis
from components.gcp.cluster import Cluster, ClusterArgs, RepositoryRead
from components.gcp.config import ARTIFACT_REGISTRY_SERVICE_AGENT, COMPUTE_SERVICE_AGENT, GKE_SERVICE_AGENT
from components.gcp.existing_cluster import ExistingClusterArgs, Target
from components.gcp.network import Network, NetworkArgs
from components.gcp.project_services import ProjectServices, ProjectServicesArgs
from components.gcp.pull_through import PullThrough, PullThroughArgs
from components.gcp.review import say_review
from components.gcp.service_agents import ServiceAgents, ServiceAgentsArgs, key_grant
from components.gcp.tpu_capacity import TpuCapacity, TpuCapacityArgs, pool_urn
from components.lifecycle import creates_cluster, lifecycle_facts, previous_pool_reservations, review_changes
from components.operations.component import MonitoringArgs
from components.operations.node_audit import NodeAuditLoggingArgs
from components.platform.config import control_plane_ports, release_namespaces
from components.platform.gates import ClusterGates, ClusterGatesArgs
from components.platform.queues import KueueQueues, QueuesArgs
from components.platform.releases import ClusterPlatform, PlatformArgs
from components.stack import Stack
from components.workloads.network_policies.component import NamespaceDefaultsArgs
from components.workloads.saxml.component import SaxmlArgs, SaxmlCell
from components.workloads.serving.component import ModelServing, ServingArgs
from components.workloads.slice_checks.component import SliceChecks, SliceChecksArgs
from components.workloads.slice_checks.config import checks_namespace


def project_apis(stack: Stack) -> tuple[str, ...]:
    """The APIs the stack's own Google Cloud calls go through: all of them for a stack that makes its network and
    cluster; on a cluster made elsewhere (whose project has GKE's APIs on already) only those of what the stack still
    makes there (none for the integration lab). Secret Manager's only with GKE's Secret Manager add-on or the Hugging
    Face token kept there: the grants on its secret and the pods' reads go through it, and it is on before the
    cluster gets the add-on (the cluster waits for every API enabled here)."""
    config = stack.config
    token_secret = stack.serving is not None and bool(config.serving.hf_token_secret_version)
    if not config.cluster.existing.enabled:
        # A cluster that enforces Binary Authorization's policy has that API on first (project_services.py).
        enforced = (apis.BINARY_AUTHORIZATION_API,) if config.cluster.binary_authorization_enforced else ()
        # The pull-through repositories go through Artifact Registry's API; Docker Hub's credentials are a secret
        # Artifact Registry reads through Secret Manager's (Artifact Registry's "Create remote repositories": enable
        # the Secret Manager API to authenticate to an upstream), for a Docker Hub repository to sign in with.
        pull_through = (apis.ARTIFACT_REGISTRY_API,) if config.pull_through_on else ()
        docker_hub = any(repository.docker_hub for repository in config.pull_through_repositories())
        upstream_secret = docker_hub and config.images.pull_through.docker_hub_credentials
        secrets = (apis.SECRET_MANAGER_API,) if token_secret or config.cluster.secret_manager or upstream_secret else ()
        return apis.REQUIRED_APIS + enforced + pull_through + secrets
    serving, saxml, bucket = stack.serving is not None, stack.saxml is not None, config.serving.weights_bucket
    needed = {  # each API, by what needs it
        apis.STORAGE_API: (serving and (bucket.create or bucket.grant_access)) or saxml,  # Saxml's admin bucket
        apis.RESOURCE_MANAGER_API: (serving and bucket.grant_access) or token_secret,  # grants read the project number
        apis.SECRET_MANAGER_API: token_secret,
        apis.IAM_API: saxml,  # the Saxml cell's Google service account
    }
    # (alerts are refused on a cluster made elsewhere: operations/config.py)
    return tuple(api for api in (*apis.REQUIRED_APIS, apis.SECRET_MANAGER_API) if needed.get(api))


def project_services_args(stack: Stack) -> ProjectServicesArgs:
    config = stack.config
    ai_zone = config.tpu.zone_is_ai_zone(config.region) and not config.cluster.existing.enabled
    return ProjectServicesArgs(project=config.project, apis=project_apis(stack), enable_ai_zones=ai_zone)


def service_agents_args(stack: Stack, services: ProjectServices) -> ServiceAgentsArgs | None:
    """The agents the stack grants something (None when none): each key of the stack's own project to the agent that
    uses it (a key of another project is the operator's to grant, said at preview: StackConfig.preview_warnings),
    and Docker Hub's password to Artifact Registry's agent."""
    config = stack.config
    grants = [grant for grant in config.key_grants() if grant.in_project(config.project)]
    agents = [grant.agent for grant in grants]
    # Docker Hub's pull-through repository pulls as an account, its password read by Artifact Registry's agent.
    docker_hub = any(r.docker_hub for r in config.pull_through_repositories())
    if docker_hub and config.images.pull_through.docker_hub_credentials:
        agents.append(ARTIFACT_REGISTRY_SERVICE_AGENT)
    if not agents:
        return None
    return ServiceAgentsArgs(project=config.project, services=services, agents=agents, key_grants=grants)


def network_args(stack: Stack) -> NetworkArgs:
    config = stack.config
    return NetworkArgs(
        network=config.network,
        project=config.project,
        region=config.region,
        nat=config.nat_needed,
        control_plane_ports=control_plane_ports(config.platform, config.tpu.dynamic_slicing),
    )


def cluster_args(
    stack: Stack,
    network: Network,
    services: ProjectServices,
    agents: ServiceAgents | None,
    pull_through: PullThrough | None,
    previous_outputs: pulumi.Input[Mapping[str, Any]],
) -> ClusterArgs:
    config = stack.config
    cluster = config.cluster
    facts = lifecycle_facts(config)
    return ClusterArgs(
        cluster=cluster,
        project=config.project,
        region=config.region,
        slice_controller=config.tpu.dynamic_slicing,
        network=network,
        secrets_key_grants=key_grant(agents, cluster.secrets_encryption_key, GKE_SERVICE_AGENT),
        boot_key_grants=key_grant(agents, cluster.system_pool_boot.boot_disk_key, COMPUTE_SERVICE_AGENT),
        container_api=services.api(apis.CONTAINER_API),
        image_repositories=image_repositories(stack, pull_through),
        creates_cluster=pulumi.Output.from_input(previous_outputs).apply(
            lambda outputs: creates_cluster(outputs, facts)
        ),
    )


def pull_through_args(stack: Stack, agents: ServiceAgents | None, services: ProjectServices) -> PullThroughArgs:
    config = stack.config
    return PullThroughArgs(
        cluster_name=config.cluster.name,
        repositories=config.pull_through_repositories(),
        pull_through=config.images.pull_through,
        agents=agents,
        secret_manager_api=enabled_api(stack, services, apis.SECRET_MANAGER_API),
    )


def enabled_api(stack: Stack, services: ProjectServices | None, api: str) -> list[pulumi.Resource]:
    """What a preview's read through ``api`` waits for (the secret versions' through Secret Manager, an existing
    bucket's through Cloud Storage): the API's enablement, where the stack enables it (none: no read)."""
    return [services.api(api)] if services and api in project_apis(stack) else []


def image_repositories(stack: Stack, pull_through: PullThrough | None) -> list[RepositoryRead]:
    """The repositories the nodes pull from, each read alone: the mirror, or the pull-through repositories."""
    if (mirror := stack.config.images.mirror_repository) is not None:
        return [
            RepositoryRead("node-sa-mirror-reader", mirror.project, mirror.location, mirror.repository, mirror=mirror)
        ]
    if pull_through is None:
        return []
    return [
        RepositoryRead(f"node-sa-reader-{remote.name}", remote.project, remote.location, made.repository_id, made)
        for remote, made in pull_through.repositories.items()
    ]


def existing_cluster_args(stack: Stack) -> ExistingClusterArgs:
    config = stack.config
    return ExistingClusterArgs(
        project=config.project,
        name=config.cluster.target_name,
        existing=config.cluster.existing,
        control_plane_ports=control_plane_ports(config.platform, config.tpu.dynamic_slicing),
        proxy_only_cidr=config.network.proxy_only_cidr if stack.serving else "",
        client_cidrs=(config.network.node_cidr, config.network.pod_cidr)
        if stack.saxml and config.saxml.http.cluster_clients
        else (),
    )


def tpu_capacity_args(
    stack: Stack,
    cluster: Cluster,
    agents: ServiceAgents | None,
    services: ProjectServices,
    previous_outputs: pulumi.Input[Mapping[str, Any]],
) -> TpuCapacityArgs:
    """The pools, and what the preview compares their reservation's read against: the pools of the last `up` (its
    lifecycle output) and the reservation path of each."""
    config = stack.config
    tpu = config.tpu
    return TpuCapacityArgs(
        tpu=tpu,
        cluster=config.cluster,
        project=config.project,
        region=config.region,
        gke_cluster=cluster,
        boot_key_grants={
            pool.name: key_grant(agents, tpu.pool_boot(pool, config.cluster).boot_disk_key, COMPUTE_SERVICE_AGENT)
            for pool in tpu.pools
        },
        previous_pools=pulumi.Output.from_input(previous_outputs).apply(previous_pool_reservations),
        compute_api=services.api(apis.COMPUTE_API),
    )


# --- Cluster platform -------------------------------------------------------------------
def platform_args(stack: Stack, cluster: Target, network: Network | None) -> PlatformArgs:
    config = stack.config
    releases = release_namespaces(config.platform, config.tpu.dynamic_slicing)
    return PlatformArgs(
        provider=cluster.provider,
        platform=config.platform,
        dynamic_slicing=config.tpu.dynamic_slicing,
        webhook_namespaces=list(config.queues.namespaces),
        pull_path=config.pull_path(),
        namespaces={name: stack.namespaces[name] for name in releases.values()},
        control_plane_access=list(network.control_plane_access) if network else [],
    )


def gates_args(
    stack: Stack, cluster: Target, network: Network | None, tpu: TpuCapacity | None, platform: ClusterPlatform
) -> ClusterGatesArgs:
    config = stack.config
    return ClusterGatesArgs(
        kubeconfig=cluster.kubeconfig,
        tpu_pools=list(tpu.pools) if tpu else [],
        queues=config.queues if stack.kueue else None,
        slice_controller=platform.slice_controller,
        platform=config.platform,
        subnets=[network.node_subnet, network.proxy_only_subnet] if network else [],
        load_balancer_namespaces=[
            *([config.serving.namespace] if stack.serving else []),
            *([config.saxml.namespace] if stack.saxml else []),
        ],
    )


def queues_args(stack: Stack, cluster: Target, platform: ClusterPlatform) -> QueuesArgs:
    assert stack.kueue is not None, "queues exist only with dynamic slicing"
    namespaces = {name: stack.namespaces[name] for name in stack.config.queues.namespaces}
    return QueuesArgs(
        provider=cluster.provider, kueue_release=platform.kueue, namespaces=namespaces, objects=stack.kueue
    )


# --- Workloads --------------------------------------------------------------------------
def slice_checks_args(
    stack: Stack, cluster: Target, platform: ClusterPlatform, queues: KueueQueues, gates: ClusterGates
) -> SliceChecksArgs:
    assert stack.checks is not None
    # The slice controller's webhooks (serving) and the LocalQueue first: a JobSet created before
    # them is never suspended by Kueue, and its pods never get their slice. The TPU drain gate
    # too, so the JobSets are deleted before it lets the TPU pools go.
    namespace = checks_namespace(stack.config.checks, stack.config.queues)
    return SliceChecksArgs(
        provider=cluster.provider,
        objects=stack.checks,
        namespace_ready=[queues.namespaces[namespace]],
        after=[*_present(platform.slice_controller), queues, *gates.before_tpu_workloads],
    )


def serving_args(
    stack: Stack,
    services: ProjectServices | None,
    cluster: Target,
    network: Network | None,
    platform: ClusterPlatform,
    queues: KueueQueues,
    gates: ClusterGates,
) -> ServingArgs:
    config = stack.config
    serving = config.serving
    assert stack.serving is not None
    return ServingArgs(
        serving=serving,
        project=config.project,
        region=config.region,
        services=services,
        # The read of an existing bucket goes through Cloud Storage: made where the stack enables that API.
        storage_api=enabled_api(stack, services, apis.STORAGE_API),
        secret_manager_api=enabled_api(stack, services, apis.SECRET_MANAGER_API),
        objects=stack.serving,
        cluster=cluster,
        namespace_ready=[queues.namespaces[serving.namespace]],
        platform_ready=[*_present(platform.leader_worker_set, platform.slice_controller), *gates.before_tpu_workloads],
        admission_ready=[queues.objects, *_present(gates.slice_webhook)],
        network_ready=[*([network.proxy_only_subnet] if network else []), gates.load_balancers],
    )


def saxml_args(stack: Stack, cluster: Target, platform: ClusterPlatform, gates: ClusterGates) -> SaxmlArgs:
    config = stack.config
    assert stack.saxml is not None
    return SaxmlArgs(
        saxml=config.saxml,
        project=config.project,
        region=config.region,
        namespace_object=stack.namespaces[config.saxml.namespace],
        objects=stack.saxml,
        cluster=cluster,
        model_servers_ready=[*_present(platform.jobset), gates.tpu],
        load_balancer_ready=[gates.load_balancers],
    )


def namespace_defaults_args(
    stack: Stack,
    cluster: Target,
    queues: KueueQueues | None,
    checks: SliceChecks | None,
    serving: ModelServing | None,
    saxml: SaxmlCell | None,
) -> NamespaceDefaultsArgs:
    """Each workload namespace's default deny waits for the namespace and for every NetworkPolicy of a workload
    there: the policies that admit the senders of the pods already running, so that no pod is ever cut off."""
    assert stack.namespace_defaults is not None
    after: dict[str, list[pulumi.Resource]] = {namespace: [] for namespace in stack.namespace_defaults.default_deny}
    if queues is not None:
        for namespace, made in queues.namespaces.items():
            after[namespace].append(made)
    if saxml is not None:
        after[stack.config.saxml.namespace].append(saxml.namespace)
    workloads: list[SliceChecks | ModelServing | SaxmlCell] = [w for w in (checks, serving, saxml) if w is not None]
    for workload in workloads:
        for namespace, policies in workload.network_policies.items():
            after[namespace] += policies
    return NamespaceDefaultsArgs(provider=cluster.provider, objects=stack.namespace_defaults, after=after)


def monitoring_args(
    stack: Stack,
    cluster: Target,
    services: ProjectServices | None,
    platform: ClusterPlatform,
    queues: KueueQueues | None,
    serving: ModelServing | None,
) -> MonitoringArgs:
    assert stack.monitoring is not None
    return MonitoringArgs(
        alerts=stack.config.alerts,
        cluster=stack.config.cluster,
        project=stack.config.project,
        objects=stack.monitoring,
        provider=cluster.provider,
        apis=list(services.apis) if services else [],
        kueue_ready=_present(platform.kueue),
        namespaces_ready=_present(queues),
        gateway_annotations=serving.gateway_annotations if serving else None,
    )


def node_audit_args(stack: Stack, cluster: Target) -> NodeAuditLoggingArgs:
    assert stack.node_audit is not None
    # Only the provider: it waits for the system pool, the pods of the TPU nodes come as the pools do, and the
    # nodes reach Cloud Logging through Private Google Access, with no NAT.
    namespace = stack.namespaces[stack.node_audit.daemonset["metadata"]["namespace"]]
    return NodeAuditLoggingArgs(objects=stack.node_audit, namespace_object=namespace, provider=cluster.provider)


def announce_changes(previous: Mapping[str, Any] | None, current: Mapping[str, Any], deletion_protection: bool) -> None:
    """Warn of every replacement the `up` makes and of each step it leaves to the operator; refuse (stop the
    preview) what would fail halfway. ``deletion_protection``: the cluster's, as the config sets it."""
    review = review_changes(
        previous,
        current,
        lambda pool: pool_urn(pulumi.get_stack(), pulumi.get_project(), pool),
        deletion_protection=deletion_protection,
    )
    say_review([], review.replaced + review.in_place + review.by_hand, review.refused)


def _present(*resources: pulumi.Resource | None) -> list[pulumi.Resource]:
    """The resources this stack makes (None: installed elsewhere)."""
    return [r for r in resources if r is not None]
