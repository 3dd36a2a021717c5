"""The stack's one typed configuration: every block composed, parsed, validated and built once.

The root of the config: no block module imports it. Each block (components/<concern>/config.py)
declares its settings and rules; this module runs every rule at once, so a bad stack fails with
one ``ConfigError`` listing every problem before any resource is registered. A valid stack is
then built once into a ``Stack``: the config plus the manifests of every enabled workload, which
the post-build checks and the components (through components/wiring.py) share.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pulumi
from pydantic import Field

from components import manifests, naming
from components.config_base import (
    NAMESPACE,
    Block,
    ConfigError,
    Problem,
    Problems,
    PullPath,
    parse_settings,
    redact_credentials,
    redact_secret_values,
    secrets_in_plain_text,
)
from components.gcp import config as gcp_config
from components.operations import config as operations_config
from components.operations.node_audit_objects import NodeAuditObjects, node_audit_objects
from components.operations.objects import MonitoringObjects, monitoring_objects
from components.platform import config as platform_config
from components.platform.kueue_objects import KueueObjects, kueue_objects
from components.platform.namespace_objects import namespace_objects
from components.tpu.admission import AdmissionPlan, CapacityReport, SliceWorkload
from components.workloads.network_policies.objects import NamespaceDefaultsObjects, namespace_defaults_objects
from components.workloads.saxml import config as saxml_config
from components.workloads.saxml.objects import SaxmlObjects, saxml_objects
from components.workloads.serving import config as serving_config
from components.workloads.serving.objects import (
    GUIDE,
    LEADER_CONTAINER,
    WORKER_CONTAINER,
    ServingObjects,
    leaderworkerset_problems,
    serving_objects,
)
from components.workloads.slice_checks import config as checks_config
from components.workloads.slice_checks.objects import SliceChecksObjects, slice_checks_objects


class StackConfig(Block):
    project: str = Field(description="Google Cloud project ID.")
    production: bool = Field(
        False,
        description="A production stack: preview refuses it unless every protection is on (cluster deletion protection, "
        "protected TPU pools, a maintenance window, 2+ system nodes per zone, 2+ Kueue, slice-controller and "
        "endpoint-picker replicas, private nodes, no public IP endpoint open to every address, every image pinned "
        "by digest unless images.requireDigests is false) and the CIS GKE controls held in production (flow logs, "
        "the Cloud KMS keys of the Secrets and of the boot disks, secure boot on the TPU nodes, Binary Authorization, "
        "Google Groups for RBAC, intranode visibility, node audit logging).",
    )
    region: str = Field("us-central1", description="Region of the cluster, network and workload policy.")
    network: gcp_config.NetworkConfig = Field(gcp_config.NetworkConfig(), description="VPC and subnets.")
    cluster: gcp_config.ClusterConfig = Field(gcp_config.ClusterConfig(), description="GKE cluster.")
    tpu: gcp_config.TpuConfig = Field(gcp_config.TpuConfig(), description="TPU capacity.")
    platform: platform_config.PlatformConfig = Field(
        platform_config.PlatformConfig(), description="In-cluster controllers installed by Helm."
    )
    queues: platform_config.QueuesConfig = Field(
        platform_config.QueuesConfig(), description="Kueue queueing for dynamic slicing (TPU7x only)."
    )
    checks: checks_config.ChecksConfig = Field(
        checks_config.ChecksConfig(), description="JAX slice-check JobSets proving sub- and super-slicing."
    )
    serving: serving_config.ServingConfig = Field(
        serving_config.ServingConfig(), description="P/D-disaggregated vLLM serving on TPU7x sub-slices."
    )
    saxml: saxml_config.SaxmlConfig = Field(
        saxml_config.SaxmlConfig(), description="Saxml on multi-host TPU v5e (the saxml stack)."
    )
    alerts: operations_config.AlertsConfig = Field(
        operations_config.AlertsConfig(),
        description="Cloud Monitoring alert policies of the TPU pools, Kueue and serving.",
    )
    images: gcp_config.ImagesConfig = Field(
        gcp_config.ImagesConfig(),
        description="Where the nodes pull every image from, and whether each must carry a digest.",
    )
    dashboards: operations_config.DashboardsConfig = Field(
        operations_config.DashboardsConfig(),
        description="Cloud Monitoring dashboards of serving, the router, TPUs and Kueue.",
    )
    node_audit_logging: operations_config.NodeAuditLoggingConfig = Field(
        operations_config.NodeAuditLoggingConfig(),
        description="The nodes' Linux audit records in Cloud Logging (the CIS benchmark's auditd control).",
    )

    # The questions __main__ and the tools ask of the whole stack.

    def enabled_checks(self) -> dict[str, checks_config.SliceCheckConfig]:
        return checks_config.enabled_checks(self.checks, self.tpu)

    def slice_workloads(self) -> list[SliceWorkload]:
        """The slice demand of every enabled workload, for the admission plan."""
        served = serving_config.serving_workloads(self.serving, self.queues) if self.serving.enabled else []
        return served + checks_config.check_workloads(self.checks, self.tpu, self.queues)

    def admission_plan(self) -> AdmissionPlan:
        return AdmissionPlan(self.tpu.cubes, tuple(self.slice_workloads()))

    def capacity_report(self) -> CapacityReport:
        return self.tpu.capacity_report()

    def pool_private_nodes(self, pool: gcp_config.TpuPoolConfig) -> bool:
        return self.tpu.pool_private_nodes(pool, self.cluster)

    def pool_boot(self, pool: gcp_config.TpuPoolConfig) -> gcp_config.NodeBoot:
        return self.tpu.pool_boot(pool, self.cluster)

    @property
    def nat_needed(self) -> bool:
        """Cloud NAT exactly when a node is private: public nodes leave by their own addresses."""
        return self.tpu.any_private_nodes(self.cluster)

    def reservation_path(self, pool: gcp_config.TpuPoolConfig) -> str | None:
        return self.tpu.reservation_path(pool, self.project)

    @property
    def tpu_zone_is_ai_zone(self) -> bool:
        return self.tpu.zone_is_ai_zone(self.region)

    @property
    def node_audit_logging_on(self) -> bool:
        return operations_config.node_audit_logging_on(self.node_audit_logging, self.cluster, self.production)

    def stack_images(self) -> list[operations_config.StackImage]:
        """Every image the stack runs, with the setting that pins it."""
        node_audit = self.node_audit_logging if self.node_audit_logging_on else None
        return operations_config.stack_images(
            self.tpu, self.platform, self.checks, self.serving, self.saxml, node_audit
        )

    def key_grants(self) -> list[gcp_config.KeyGrant]:
        """Each service agent's grant on each customer-managed key the cluster and its pools use."""
        return gcp_config.key_grants(self.cluster, self.tpu)

    @property
    def pull_through_on(self) -> bool:
        return self.images.pull_through_on(self.nat_needed, self.cluster.existing.enabled)

    @property
    def pull_through_docker_hub_credentials(self) -> bool:
        """Docker Hub's pull-through repository pulls as an account, its password read by Artifact Registry's agent."""
        repositories = self.pull_through_repositories()
        return self.images.pull_through.docker_hub_credentials and any(r.docker_hub for r in repositories)

    def pull_through_repositories(self) -> list[gcp_config.RemoteRepository]:
        """The Artifact Registry remote repositories the stack makes: one per registry outside Google its images come
        from (stack_images, `make bench`'s included), where pull-through is on."""
        if not self.pull_through_on:
            return []
        registries = [image.registry for image in self.stack_images()]
        return gcp_config.remote_repositories(registries, self.project, self.region, self.cluster.name)

    def pull_path(self) -> PullPath:
        """Where the nodes pull each image from: images.mirror, the pull-through repositories, or each image's own
        registry."""
        return gcp_config.pull_path(self.images, self.pull_through_repositories())

    def preview_warnings(self) -> list[str]:
        """What a valid stack's preview warns of (said at every preview, refusing nothing)."""
        return (
            operations_config.supply_chain_warnings(self.production, self.images, self.stack_images())
            + operations_config.boot_hardening_warnings(self.production, self.cluster, self.tpu)
            + gcp_config.key_grant_warnings(self.key_grants(), self.project)
            + (platform_config.control_plane_port_warnings(self.platform, self.tpu.dynamic_slicing))
        )


@dataclass(frozen=True)
class Stack:
    """A validated stack: its config and the manifests of every enabled workload, built once."""

    config: StackConfig
    kueue: KueueObjects | None  # None: no dynamic slicing, so nothing is queued
    checks: SliceChecksObjects | None
    serving: ServingObjects | None
    saxml: SaxmlObjects | None
    # The default-deny policy of each workload namespace the stack makes (None: it makes none)
    namespace_defaults: NamespaceDefaultsObjects | None
    monitoring: MonitoringObjects | None  # None: neither alerts nor dashboards
    node_audit: NodeAuditObjects | None  # None: no node audit logging
    # Every namespace the stack makes (the controllers', the workloads'), by name, labelled for Pod Security.
    namespaces: dict[str, dict[str, Any]]


# --- Parsing, validation and the build ---------------------------------------------------


def load(raw: Mapping[str, Any], secret_keys: Iterable[str] | None = None) -> Stack:
    """Parse, validate and build a mapping of top-level key -> value (objects already decoded).

    ``secret_keys``: the top-level keys the engine holds as secrets; when given, a secret setting
    outside them (typed into the stack file in plain text) is refused.
    """
    problems = Problems()
    config = parse_settings(StackConfig, raw, problems)
    if config is not None:
        if secret_keys is not None and not problems.items:
            problems.items += secrets_in_plain_text(config, set(secret_keys))
        _validate(config, problems)
    if problems.items or config is None:
        raise ConfigError(_shown(problems.items, raw, secret_keys))
    stack = _build(config)
    _check_built(stack, problems)
    if problems.items:
        raise ConfigError(_shown(problems.items, raw, secret_keys))
    return stack


def parsed(raw: Mapping[str, Any]) -> StackConfig | None:
    """The config of ``raw`` with its settings' own checks only, or None if one fails (the rules across settings
    and the build are ``load``'s)."""
    problems = Problems()
    config = parse_settings(StackConfig, raw, problems)
    return None if problems.items else config


def _shown(problems: list[Problem], raw: Mapping[str, Any], secret_keys: Iterable[str] | None) -> list[Problem]:
    """The problems as the user reads them: no value inside a secret key, and nothing that looks like a credential
    under any key."""
    return redact_credentials(redact_secret_values(problems, raw, set(secret_keys or ())), raw)


def parse(raw: Mapping[str, Any]) -> StackConfig:
    """The validated config of ``raw`` (see ``load``)."""
    return load(raw).config


def load_pulumi_values(values: Mapping[str, str], secret_keys: Iterable[str] = ()) -> Stack:
    """Load config as Pulumi hands it over: ``<namespace>:<key>`` -> string (JSON for objects),
    with the full names of the keys the engine holds as secrets."""
    prefix = f"{NAMESPACE}:"
    raw: dict[str, Any] = {}
    bad_json: list[Problem] = []
    for full_key, text in values.items():
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix) :]
        info = next((f for f in StackConfig.model_fields.values() if f.alias == key), None)
        if info and info.annotation is not str and isinstance(text, str):
            try:
                raw[key] = json.loads(text)
            except json.JSONDecodeError:
                bad_json.append(
                    Problem(key, "is not valid structured config", "write it as a YAML mapping in the stack file")
                )
                continue
        else:
            raw[key] = text
    secret = {key[len(prefix) :] for key in secret_keys if key.startswith(prefix)}
    try:
        stack = load(raw, secret)
    except ConfigError as error:
        raise ConfigError(bad_json + error.problems) from None
    if bad_json:
        raise ConfigError(bad_json)
    return stack


def parse_pulumi_values(values: Mapping[str, str]) -> StackConfig:
    return load_pulumi_values(values).config


def load_from_pulumi() -> Stack:
    """Read this project's config from the running Pulumi program and load it.

    A bad config stops the program with the list of problems and no Python traceback: the error
    is a ``pulumi.RunError``, which the engine prints as a plain message.
    """
    from pulumi.runtime import config as runtime_config

    values = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = {
        *runtime_config.get_config_secret_keys_env(),
        *(k for k in values if runtime_config.is_config_secret(k)),
    }
    try:
        return load_pulumi_values(values, secret_keys)
    except ConfigError as error:
        raise StackConfigError(error.problems) from None


class StackConfigError(ConfigError, pulumi.RunError):
    """A ConfigError the Pulumi engine reports as a plain message: it recognises a RunError by
    type and prints any other exception with its traceback."""


def _validate(config: StackConfig, problems: Problems) -> None:
    """Every block's rules, each given the blocks it reads."""
    _validate_project(config.project, config.region, problems)
    gcp_config.validate_network(config.network, problems)
    gcp_config.validate_cluster(config.cluster, config.tpu, problems, date.today())
    gcp_config.validate_encryption_keys(config.cluster, config.region, problems)
    gcp_config.validate_tpu(config.tpu, config.region, problems)
    platform_config.validate_platform(config.platform, problems)
    platform_config.validate_queues(config.queues, problems)
    platform_config.validate_namespace_levels(
        config.platform, config.tpu.dynamic_slicing_requested, _workload_namespaces(config), problems
    )
    checks_config.validate_checks(config.checks, config.tpu, config.queues, problems)
    serving_config.validate_serving(config.serving, config.tpu, config.queues, config.cluster, config.project, problems)
    saxml_config.validate_saxml(config.saxml, config.tpu, config.cluster, config.project, problems)
    serves = config.serving.enabled or config.saxml.enabled
    operations_config.validate_upgrade_policy(config.cluster, serves, problems)
    operations_config.validate_production(
        config.production, config.cluster, config.tpu, config.platform, config.serving, problems
    )
    operations_config.validate_production_security(
        config.production,
        config.network,
        config.cluster,
        config.tpu,
        config.serving,
        config.node_audit_logging,
        problems,
    )
    operations_config.validate_node_audit_logging(
        config.node_audit_logging, config.cluster, config.production, problems
    )
    operations_config.validate_node_audit_namespace(
        config.node_audit_logging_on,
        [
            *_workload_namespaces(config),
            *(
                (f"platform.{key}.namespace", namespace)
                for key, namespace in platform_config.release_namespaces(
                    config.platform, config.tpu.dynamic_slicing_requested
                ).items()
            ),
        ],
        problems,
    )
    operations_config.validate_alerts(config.alerts, config.cluster, config.production, problems)
    gcp_config.validate_images(config.images, problems)
    gcp_config.validate_pull_through(
        config.images,
        config.project,
        config.nat_needed,
        config.cluster.existing.enabled,
        gcp_config.remote_repositories(
            [image.registry for image in config.stack_images()], config.project, config.region, config.cluster.name
        ),
        problems,
    )
    operations_config.validate_supply_chain(config.production, config.images, config.stack_images(), problems)


def _workload_namespaces(config: StackConfig) -> list[tuple[str, str]]:
    """(config key, namespace) of every namespace the stack makes for its workloads."""
    queued = enumerate(config.queues.namespaces) if config.tpu.dynamic_slicing_requested else []
    return [
        *((f"queues.namespaces[{i}]", namespace) for i, namespace in queued),
        *([("saxml.namespace", config.saxml.namespace)] if config.saxml.enabled else []),
    ]


def _validate_project(project: str, region: str, problems: Problems) -> None:
    if problem := naming.project_id_problem(project):
        problems.add("project", problem, "set the ID of your Google Cloud project")
    if not re.match(r"^[a-z]+-[a-z]+\d+$", region):
        problems.add("region", f"{region!r} is not a region name", "use a region such as us-central1")


def _build(config: StackConfig) -> Stack:
    """Each enabled workload's block -> its builder input -> its manifests, once."""
    tpu, queues, pull_path = config.tpu, config.queues, config.pull_path()
    checks = checks_config.slice_checks_input(config.checks, tpu, queues, pull_path)
    return Stack(
        config=config,
        kueue=kueue_objects(platform_config.kueue_input(queues, tpu)) if tpu.dynamic_slicing else None,
        checks=slice_checks_objects(checks) if checks.checks else None,
        serving=(
            serving_objects(
                serving_config.serving_input(
                    config.serving,
                    tpu,
                    queues,
                    config.network,
                    config.project,
                    pull_path,
                    config.cluster.existing.skip_await,
                )
            )
            if config.serving.enabled
            else None
        ),
        saxml=saxml_objects(saxml_config.saxml_input(config.saxml, tpu, config.network, config.project, pull_path))
        if config.saxml.enabled
        else None,
        namespace_defaults=namespace_defaults_objects(namespaces)
        if (namespaces := workload_namespaces(config))
        else None,
        monitoring=_monitoring(config),
        node_audit=(
            node_audit_objects(
                operations_config.node_audit_input(config.node_audit_logging, config.cluster, config.region, pull_path)
            )
            if config.node_audit_logging_on
            else None
        ),
        namespaces=namespace_objects(
            platform_config.namespaces_input(
                config.platform,
                queues,
                config.cluster,
                tpu.dynamic_slicing,
                [config.saxml.namespace] if config.saxml.enabled else [],
                [operations_config.NODE_AUDIT_NAMESPACE] if config.node_audit_logging_on else [],
            )
        ),
    )


def workload_namespaces(config: StackConfig) -> list[str]:
    """The namespaces the stack makes for its workloads, each once: the queues' (with dynamic slicing), Saxml's."""
    queued = list(config.queues.namespaces) if config.tpu.dynamic_slicing else []
    return list(dict.fromkeys([*queued, *([config.saxml.namespace] if config.saxml.enabled else [])]))


def _monitoring(config: StackConfig) -> MonitoringObjects | None:
    # A cluster made elsewhere has its dashboards (and alerts, refused there) made by the stack that made it.
    dashboards = config.dashboards.enabled and not config.cluster.existing.enabled
    if not (config.alerts.enabled or dashboards):
        return None
    slicing = config.tpu.dynamic_slicing
    return monitoring_objects(
        config.project,
        _alerts_input(config) if config.alerts.enabled else None,
        _dashboards_input(config) if dashboards else None,
        kueue_namespace=config.platform.kueue.namespace if slicing and config.platform.install else None,
    )


def _dashboards_input(config: StackConfig) -> operations_config.DashboardsInput:
    slicing = config.tpu.dynamic_slicing
    return operations_config.DashboardsInput(
        project=config.project,
        cluster_name=config.cluster.name,
        kueue_namespace=config.platform.kueue.namespace if slicing and config.platform.install else None,
        cluster_queue=config.queues.cluster_queue_name if slicing else None,
        serving_namespace=config.serving.namespace if slicing and config.serving.enabled else None,
        serving_guide=GUIDE,
        slice_namespace=(config.serving.namespace if config.serving.enabled else config.queues.namespaces[0])
        if slicing and config.queues.namespaces
        else None,
        saxml_namespace=config.saxml.namespace if config.saxml.enabled else None,
    )


def _alerts_input(config: StackConfig) -> operations_config.AlertsInput:
    slicing = config.tpu.dynamic_slicing
    serving = slicing and config.serving.enabled
    return operations_config.alerts_input(
        config.alerts,
        config.project,
        config.cluster,
        config.tpu,
        kueue_namespace=config.platform.kueue.namespace if slicing and config.platform.install else None,
        cluster_queue=config.queues.cluster_queue_name if slicing else None,
        serving_namespace=config.serving.namespace if serving else None,
        model_server_containers=[LEADER_CONTAINER, WORKER_CONTAINER] if serving else [],
    )


def _check_built(stack: Stack, problems: Problems) -> None:
    """The rules that read the built manifests (the serving rules on the rendered LeaderWorkerSets; one writer per
    NetworkPolicy)."""
    if stack.serving is not None:
        for problem in leaderworkerset_problems(stack.serving.leaderworkersets, stack.config.tpu.machine):
            problems.add("serving", problem, "report this: the LeaderWorkerSets contradict the serving config")
    _check_network_policy_names(stack, problems)


def _check_network_policy_names(stack: Stack, problems: Problems) -> None:
    """A check's NetworkPolicy takes its JobSet's name: a name another policy of the namespace has already (the
    serving ones, the default deny) would have two resources write one object, each undoing the other."""
    if stack.checks is None:
        return
    taken = {
        (policy["metadata"]["namespace"], policy["metadata"]["name"])
        for policy in [
            *(stack.serving.network_policies if stack.serving else []),
            *(stack.namespace_defaults.default_deny.values() if stack.namespace_defaults else []),
        ]
    }
    kinds = {check.name: kind for kind, check in stack.config.enabled_checks().items()}
    for policy in stack.checks.network_policies:
        namespace, name = policy["metadata"]["namespace"], policy["metadata"]["name"]
        if (namespace, name) in taken:
            problems.add(
                f"checks.{kinds[name]}.name",
                f"{name!r} is also the name of a NetworkPolicy the stack makes in {namespace}",
                "give the check another name",
            )


# --- Where the nodes pull from ---------------------------------------------------------------


def _objects(value: Any) -> Iterable[dict[str, Any]]:
    """Every Kubernetes object of a built stack's manifests (a dataclass of objects, lists and maps of them)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _objects(getattr(value, f.name))
    elif isinstance(value, Mapping):
        if "apiVersion" in value and "kind" in value:
            yield value  # type: ignore[misc]  # a manifest: a JSON object
        else:
            for item in value.values():
                yield from _objects(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _objects(item)


def image_pulls(stack: Stack) -> dict[str, gcp_config.ImagePull]:
    """Each image the stack runs (by its setting), with the pods that pull it when their workload starts: counted on
    the built objects, and for the Helm releases from the replicas the stack gives them (a chart's own: unknown)."""
    config, pull_path = stack.config, stack.config.pull_path()
    counted: dict[str, int | None] = {}
    for obj in _objects([getattr(stack, f.name) for f in dataclasses.fields(stack) if f.name != "config"]):
        for reference, pods in manifests.pods_by_image(obj).items():
            before = counted.get(reference, 0)
            counted[reference] = None if pods is None or before is None else before + pods
    released = {
        "platform.kueue.image": config.platform.kueue_controller.replicas,
        "platform.sliceController.digest": config.platform.slice_controller.replicas,
        "serving.router.eppImage": config.serving.router.replicas,
        "serving.benchmarkImage": 1,  # `make bench`'s Job, later
    }
    pulls = {}
    for image in config.stack_images():
        pulled = image.pull(pull_path)
        pulls[image.key] = gcp_config.ImagePull(pulled, image.runs, counted.get(pulled, released.get(image.key)))
    return pulls


def image_pull_warnings(stack: Stack) -> list[str]:
    """Private nodes that would pull from a registry with a published limit per address through Cloud NAT: no mirror,
    and pull-through turned off."""
    config = stack.config
    if not config.nat_needed or config.images.mirror or config.pull_through_on or config.cluster.existing.enabled:
        return []
    pulls = image_pulls(stack)
    by_registry: dict[str, list[gcp_config.ImagePull]] = {}
    for image in config.stack_images():
        by_registry.setdefault(image.registry, []).append(pulls[image.key])
    nodes = config.tpu.total_nodes + config.cluster.system_pool.nodes_per_zone
    warnings = []
    for registry, registry_pulls in by_registry.items():
        if warning := gcp_config.nat_pull_warning(registry, registry_pulls, nodes, config.network.nat):
            warnings.append(warning)
    return warnings


def image_pull_notes(stack: Stack) -> list[str]:
    """What the preview says, as information, of where the nodes pull from where the stack makes no pull path: a
    cluster made elsewhere; and of the Docker Hub repository pulling anonymously."""
    config = stack.config
    notes = []
    if config.cluster.existing.enabled and not config.images.mirror:
        registries = sorted(
            {i.registry for i in config.stack_images() if not gcp_config.is_google_registry(i.registry)}
        )
        notes.append(
            "images: the stack makes no pull-through repository on a cluster made elsewhere (cluster.existing): its "
            f"nodes pull from {', '.join(registries) or 'Google registries only'} as that cluster's network lets them. "
            "If they leave through a NAT, Docker Hub's limit per address applies to them all: give them a mirror "
            "(images.mirror) their own account may read"
        )
    repositories = config.pull_through_repositories()
    # Artifact Registry pulls from Docker Hub from addresses it shares across users and projects, so an anonymous
    # remote repository may meet the anonymous limit (hail-is/hail dev-docs/services/docker-hub-cache.md at 4ec2e9e5,
    # from running one).
    if any(r.docker_hub for r in repositories) and not config.images.pull_through.docker_hub_credentials:
        notes.append(
            "images.pullThrough: the Docker Hub repository pulls anonymously, once per image it does not hold yet; "
            "Artifact Registry's addresses are shared with other projects, so Docker Hub's anonymous limit per "
            "address may refuse that first pull (the pod retries). A Docker ID lifts it: "
            "images.pullThrough.dockerHubUsername with dockerHubPasswordSecretVersion"
        )
    return notes


# --- What a changed `up` would do to the stack that is running ---------------------------

LIFECYCLE_OUTPUT = "lifecycle"  # the stack output the next preview compares against
RELEASES_OUTPUT = "helmReleases"  # Helm release name -> chart version, exported since the platform was first pinned


def lifecycle_facts(config: StackConfig) -> dict[str, Any]:
    """The inputs whose change replaces (or that Kueue refuses to change): exported, then compared.

    GKE replaces a cluster on a change of its name, region, network or ranges, and a node pool (the
    system pool and the TPU pools) on one of its reservation, service account, placement policy or boot (the key of
    its boot disks, secure boot: NodeBoot); this program also replaces a TPU pool whose zone or machine type changes
    (GKE cannot move a multi-host slice in place). Kueue refuses a new topologyName or nodeLabels on a ResourceFlavor
    in use. GKE's Secret Manager add-on must outlive the pods that mount the token file through it (the cluster
    is updated before them).
    """
    cluster = config.cluster
    names = naming.network_names(config.network.prefix)
    facts: dict[str, Any] = {
        "cluster": {
            "name": cluster.name,
            "region": config.region,
            "network": names["network"],
            "subnetwork": names["nodeSubnet"],
            "secondaryRanges": sorted(naming.secondary_range_names(config.network.prefix).values()),
        },
        # the system pool's service account and boot disk key are ForceNew on the node pool; the cluster's node config
        # (its create's default pool) is ignored after the create
        "systemPool": {
            "nodeServiceAccount": cluster.node_account_id,
            "bootDiskKey": cluster.system_pool_boot.boot_disk_key,
        },
        "tpuPools": {
            pool.name: {
                "zone": config.tpu.zone,
                "machineType": config.tpu.machine_type,
                "reservation": config.reservation_path(pool) or "",
                "placementPolicy": config.tpu.workload_policy_name if config.tpu.dynamic_slicing else "",
                "topology": pool.topology,
                "nodeServiceAccount": cluster.node_account_id,
                **boot_facts(config.pool_boot(pool)),
            }
            for pool in config.tpu.pools
        },
        "tpuPoolsProtected": config.tpu.protect_pools,
    }
    charts = platform_config.installed_charts(config.platform, config.tpu.dynamic_slicing)
    facts["chartsWithCrdsHelmKeeps"] = {
        key: {"chart": chart.chart, "version": chart.version}
        for key, chart in charts.items()
        if key in platform_config.CHARTS_WITH_CRDS_HELM_KEEPS
    }
    if config.tpu.dynamic_slicing:
        facts["queues"] = {
            "topologyName": config.queues.topology_name,
            "resourceFlavorName": config.queues.resource_flavor_name,
            "acceleratorLabel": config.tpu.machine.accelerator_label,  # the ResourceFlavor's nodeLabels
        }
    if not cluster.existing.enabled:
        facts["isolation"] = isolation_facts(config)
        facts["hardening"] = hardening_facts(config.cluster)
        facts["secretManager"] = {
            "addOn": cluster.secret_manager,
            "tokenFile": config.serving.enabled and bool(config.serving.hf_token_secret_version),
        }
        facts[PULL_THROUGH_FACT] = pull_through_facts(config)
    if namespaces := workload_namespaces(config):
        facts[DEFAULT_DENY_FACT] = sorted(namespaces)
    return facts


# The lifecycle fact of the pull-through repositories: registry -> what replaces its repository.
PULL_THROUGH_FACT = "pullThrough"


def pull_through_facts(config: StackConfig) -> dict[str, Any]:
    """Each pull-through repository's inputs that replace it: its id, upstream and upstream credentials are all
    ForceNew (hashicorp/terraform-provider-google google/services/artifactregistry/resource_artifact_registry_
    repository.go, read at 07fc8657: `repository_id`, `remote_repository_config` and every field under it)."""
    pull_through = config.images.pull_through
    return {
        repository.registry: {
            "repository": repository.repository_id,
            "upstream": repository.upstream,
            "credentials": (
                f"{pull_through.docker_hub_username} {pull_through.docker_hub_password_secret_version}"
                if repository.docker_hub and pull_through.docker_hub_credentials
                else ""
            ),
        }
        for repository in config.pull_through_repositories()
    }


# The lifecycle fact of the namespaces whose pods accept only what a NetworkPolicy admits (the default deny).
DEFAULT_DENY_FACT = "defaultDenyNamespaces"


SYSTEM_POOL = naming.SYSTEM_POOL_NAME
BOOT_FACTS = ("bootDiskKey", "secureBoot")  # a TPU pool's facts of its boot: what boot hardening replaces


def boot_facts(boot: gcp_config.NodeBoot) -> dict[str, Any]:
    return dict(zip(BOOT_FACTS, (boot.boot_disk_key, boot.secure_boot), strict=True))


def before_boot_hardening(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """A pool's ``previous`` facts, with the boot facts ``current`` has and an `up` of an older program did not export
    as that program made every pool: no key, no secure boot (the system pool's secure boot was always on, no fact)."""
    unhardened = boot_facts(gcp_config.UNHARDENED_BOOT)
    return {**{key: unhardened[key] for key in BOOT_FACTS if key in current}, **previous}


def isolation_facts(config: StackConfig) -> dict[str, Any]:
    """Who reaches the nodes and the control plane: every field here changes in place (components/gcp/cluster.py),
    but a change of a pool's nodes or of the endpoint kubectl uses is felt, so the preview says what it does."""
    control_plane = config.cluster.control_plane
    return {
        "privateNodes": {
            SYSTEM_POOL: config.cluster.private_nodes,
            **{pool.name: config.pool_private_nodes(pool) for pool in config.tpu.pools},
        },
        "nat": naming.network_names(config.network.prefix)["nat"] if config.nat_needed else "",
        "dnsEndpoint": control_plane.dns_endpoint,
        "ipEndpoint": control_plane.ip_endpoint,
        "authorizedNetworks": sorted(network.cidr for network in control_plane.authorized_networks),
    }


def isolation_before_private_clusters(pools: Iterable[str]) -> dict[str, Any]:
    """What the program made before these settings existed: nodes with external addresses and no NAT, GKE's
    default IP endpoints (public, no authorized network), the DNS-based endpoint not opened to outside traffic."""
    return {
        "privateNodes": dict.fromkeys([SYSTEM_POOL, *pools], False),
        "nat": "",
        "dnsEndpoint": False,
        "ipEndpoint": "public",
        "authorizedNetworks": [],
    }


def hardening_facts(cluster: gcp_config.ClusterConfig) -> dict[str, Any]:
    """The cluster's CIS GKE settings a production stack requires: each changes in place (components/gcp/cluster.py),
    and what GKE then does to running pods or nodes is felt, so the preview says it."""
    return {
        "binaryAuthorization": cluster.binary_authorization,
        "rbacSecurityGroup": cluster.rbac_security_group,
        "intranodeVisibility": cluster.intranode_visibility,
    }


# What the program made before these settings existed: a cluster that never asked for Binary Authorization's
# enforcement or a group of RBAC, each off until asked for (https://cloud.google.com/binary-authorization/docs/
# enable-cluster turns enforcement on for an existing cluster), nor for intranode visibility, which GKE leaves off
# on Standard clusters (https://cloud.google.com/kubernetes-engine/docs/how-to/intranode-visibility).
HARDENING_BEFORE_SETTINGS: dict[str, Any] = {
    "binaryAuthorization": gcp_config.BINARY_AUTHORIZATION_OFF,
    "rbacSecurityGroup": "",
    "intranodeVisibility": False,
}


def previous_pool_reservations(outputs: Mapping[str, Any] | None) -> dict[str, str]:
    """The TPU pools of the stack's last `up` and the reservation path each consumes (its ``lifecycle`` output;
    nothing for a new stack, or one whose last `up` predates that output)."""
    pools: Mapping[str, Any] = ((outputs or {}).get(LIFECYCLE_OUTPUT) or {}).get("tpuPools") or {}
    return {name: facts.get("reservation") or "" for name, facts in pools.items()}


def previous_lifecycle(outputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``lifecycle`` output of the stack's last update, for ``review_changes``. A stack whose last `up` predates
    the chart versions in that output (or the output itself) still exported ``helmReleases``: its versions stand
    in, so the first chart upgrade after it is announced too."""
    lifecycle: Mapping[str, Any] | None = outputs.get(LIFECYCLE_OUTPUT)
    releases: Mapping[str, str] = outputs.get(RELEASES_OUTPUT) or {}
    if (lifecycle and "chartsWithCrdsHelmKeeps" in lifecycle) or not releases:
        return lifecycle
    charts = {
        key: {"version": releases[name]}
        for key in platform_config.CHARTS_WITH_CRDS_HELM_KEEPS
        if (name := platform_config.CHART_RELEASE_NAMES[key]) in releases
    }
    return {**(lifecycle or {}), "chartsWithCrdsHelmKeeps": charts}


@dataclass(frozen=True)
class ChangeReview:
    refused: list[Problem]  # the `up` would fail halfway or strand capacity: stop the preview
    replaced: list[str]  # what the `up` replaces, said loudly
    by_hand: list[str] = field(default_factory=list)  # what the `up` cannot do and the operator must, said as loudly
    in_place: list[str] = field(default_factory=list)  # what the `up` changes in place that running work feels


def review_changes(
    previous: Mapping[str, Any] | None, current: Mapping[str, Any], tpu_pool_urn: Callable[[str], str]
) -> ChangeReview:
    """What applying ``current`` over the stack whose last ``lifecycle`` output was ``previous`` does.

    ``tpu_pool_urn``: the URN a TPU pool has in the stack's state, by its name (what `pulumi state unprotect` takes).
    """
    refused: list[Problem] = []
    replaced: list[str] = []
    if not previous:
        return ChangeReview(refused, replaced)  # a new stack: nothing to replace

    def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
        return [
            f"{key} {before[key]!r} -> {after[key]!r}" for key in after if key in before and before[key] != after[key]
        ]

    if cluster_changes := changes(previous.get("cluster") or {}, current["cluster"]):
        replaced.append(
            f"the GKE cluster {previous['cluster'].get('name')} will be REPLACED ({'; '.join(cluster_changes)}): "
            "every node pool, every Kubernetes object, the Kueue queues and their state are deleted and created anew"
        )
    system_after = current.get("systemPool") or {}
    if system_changes := changes(before_boot_hardening(previous.get("systemPool") or {}, system_after), system_after):
        replaced.append(
            f"the system node pool will be REPLACED ({'; '.join(system_changes)}): the controllers and the staging "
            "Job move to its new nodes, and the webhooks that fail closed refuse workload creates until they are back"
        )
    before_pools, after_pools = previous.get("tpuPools") or {}, current["tpuPools"]
    removed = sorted(set(before_pools) - set(after_pools))
    added = sorted(set(after_pools) - set(before_pools))
    if removed and added and any(after_pools[name]["reservation"] for name in added):
        refused.append(
            Problem(
                "tpu.pools",
                f"pool(s) {', '.join(removed)} leave and {', '.join(added)} arrive in one `up`: the new pools would ask "
                "the reservation for the cubes the old ones still hold, and Pulumi creates before it deletes",
                "remove the old pools in one `pulumi up`, then add the new ones in the next",
            )
        )
    pool_changes: dict[str, list[str]] = {}  # TPU pool -> what replaces it
    rebooted: set[str] = set()  # the TPU pools whose boot changes
    for name in sorted(set(before_pools) & set(after_pools)):
        before, after = before_boot_hardening(before_pools[name], after_pools[name]), after_pools[name]
        if changed := changes(before, after):
            pool_changes[name] = changed
        if any(before[key] != after[key] for key in BOOT_FACTS if key in after):
            rebooted.add(name)
    # Pulumi refuses, at preview, to replace a resource protected before and after (pulumi/pulumi v3.259.0,
    # pkg/resource/deploy/step_generator.go: "unable to replace resource ... marked for protection"), unless the
    # state's flag is cleared first; the `up` then protects the new pool again.
    # (the state's flag is the last `up`'s; one of a program that did not export it is taken as today's setting)
    protected = bool(current.get("tpuPoolsProtected")) and bool(previous.get("tpuPoolsProtected", True))
    for name, changed in pool_changes.items():
        line = (
            f"TPU pool {name} will be REPLACED, deleted before it is created again ({'; '.join(changed)}): "
            "its nodes and every slice on them go; delete the workloads on it first (active Slices hold a pool)"
        )
        if name in rebooted and len(rebooted) > 1:
            line += (
                ". Its boot is what changes: to keep serving on the other cubes, replace one per `up`, with "
                "tpu.pools[].hardenedBoot false on the others for this one"
            )
        if protected:
            line += (
                f". It is protected (tpu.protectPools): the preview stops at it until the state's flag is cleared, "
                f"`pulumi state unprotect '{tpu_pool_urn(name)}'`, and the `up` protects the new pool"
            )
        replaced.append(line)
    by_hand = []
    before_charts = previous.get("chartsWithCrdsHelmKeeps") or {}
    for key, chart in (current.get("chartsWithCrdsHelmKeeps") or {}).items():
        old_version = (before_charts.get(key) or {}).get("version")
        if old_version and old_version != chart["version"]:
            by_hand.append(
                f"platform.{key}: the chart goes {old_version} -> {chart['version']}, and Helm upgrades the controller "
                "but neither updates nor adds the CRDs this chart ships in its crds/ folder (a controller that watches "
                "a kind without its CRD exits once its cache cannot sync, which Helm's wait may not see). Apply them "
                "before this `up`: "
                f"helm show crds {chart['chart']} --version {chart['version']} "
                "| kubectl apply --server-side --force-conflicts -f -"
            )
    before_queues, after_queues = previous.get("queues") or {}, current.get("queues") or {}
    for key, setting_key in (
        ("topologyName", "queues.topologyName"),
        ("resourceFlavorName", "queues.resourceFlavorName"),
        ("acceleratorLabel", "tpu.machineType"),
    ):
        if key in before_queues and key in after_queues and before_queues[key] != after_queues[key]:
            refused.append(
                Problem(
                    setting_key,
                    f"{before_queues[key]!r} -> {after_queues[key]!r}: Kueue refuses to repoint a ResourceFlavor in use "
                    "and holds a Topology or flavor in use until nothing references it",
                    f"keep {before_queues[key]!r} on this stack",
                )
            )
    if (previous.get("secretManager") or {}).get("tokenFile") and (current.get("secretManager") or {}).get(
        "addOn"
    ) is False:
        refused.append(
            Problem(
                "cluster.secretManager",
                "false while the running model servers and staging Job mount the Hugging Face token through GKE's "
                "Secret Manager add-on: the cluster is updated before those pods change, so the add-on's driver "
                "would be gone while they still hold its volumes",
                "keep it true in this `up`, which moves the pods off the token file; turn it off in the next one",
            )
        )
    in_place: list[str] = []
    if "isolation" in current:
        isolation_before = previous.get("isolation") or isolation_before_private_clusters(before_pools or after_pools)
        in_place, isolation_by_hand = _review_isolation(isolation_before, current["isolation"], current["cluster"])
        by_hand += isolation_by_hand
    if "hardening" in current:
        hardening_before = previous.get("hardening") or HARDENING_BEFORE_SETTINGS
        hardening_in_place, hardening_by_hand = _review_hardening(
            hardening_before, current["hardening"], current["cluster"]
        )
        in_place += hardening_in_place
        by_hand += hardening_by_hand
    if PULL_THROUGH_FACT in current:
        pull_through_replaced, pull_through_in_place = _review_pull_through(
            previous.get(PULL_THROUGH_FACT) or {}, current[PULL_THROUGH_FACT]
        )
        replaced += pull_through_replaced
        in_place += pull_through_in_place
    denied_before = set(previous.get(DEFAULT_DENY_FACT) or [])
    if newly_denied := [n for n in current.get(DEFAULT_DENY_FACT) or [] if n not in denied_before]:
        in_place.append(
            f"network policies: every pod of {', '.join(newly_denied)} accepts only what a NetworkPolicy admits, "
            "in place: each namespace's default-deny-ingress policy is made after the policies that admit the "
            "senders of the stack's own pods there, so nothing the stack runs is cut off; a pod you run there "
            "yourself accepts connections only from its own node until it has a NetworkPolicy of its own "
            "(docs/security.md, Network policies)"
        )
    return ChangeReview(refused, replaced, by_hand, in_place)


def _review_pull_through(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(what is replaced, what changes in place) when the pull-through repositories change."""
    replaced, in_place = [], []
    added = [registry for registry in after if registry not in before]
    removed = [registry for registry in before if registry not in after]
    if added:
        ids = ", ".join(after[registry]["repository"] for registry in added)
        in_place.append(
            f"images.pullThrough: the Artifact Registry remote repositories {ids} are created (the API first, then each "
            "repository and the nodes' read on it) before any Kubernetes object changes; every image from "
            f"{', '.join(added)} is then pulled through them, so each pod template naming one changes and its "
            "workload rolls as for a new image (docs/operations.md, What a change does). Each repository starts empty "
            "and fetches an image at its first pull"
        )
    if removed:
        ids = ", ".join(before[registry]["repository"] for registry in removed)
        in_place.append(
            f"images.pullThrough: the repositories {ids} and their caches are deleted once no pod template names them; "
            f"the workloads roll back to pulling from {', '.join(removed)} (or the mirror)"
        )
    for registry in after:
        if registry in before and (
            changed := [key for key in after[registry] if before[registry].get(key) != after[registry][key]]
        ):
            replaced.append(
                f"the pull-through repository {before[registry].get('repository')} of {registry} will be REPLACED, "
                f"deleted before it is created again ({', '.join(changed)} changed): its cache starts empty, a pod that "
                "pulls in between waits in back-off until it is back, and the nodes' read on it is granted again"
            )
    return replaced, in_place


def _review_hardening(
    before: Mapping[str, Any], after: Mapping[str, Any], cluster: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """(what changes in place, what is left to do by hand) when a CIS GKE setting of the cluster changes.

    Intranode visibility turned on for a running cluster restarts its control plane and nodes: gcloud's help of
    --enable-intra-node-visibility (google-cloud-sdk 578.0.0, lib/googlecloudsdk/command_lib/container/flags.py,
    read in the google-cloud-sdk-unofficial/google-cloud-sdk mirror at v578.0.0); nothing read here says what turning
    it off restarts. gcloud turns Google Groups for RBAC on only: every --security-group sends enabled=True
    (lib/googlecloudsdk/api_lib/container/api_adapter.py, same release), so turning it off is an API call.
    """
    in_place: list[str] = []
    by_hand: list[str] = []
    if before.get("intranodeVisibility", False) != after["intranodeVisibility"]:
        if after["intranodeVisibility"]:
            in_place.append(
                "cluster.intranodeVisibility: turned on IN PLACE (the cluster is updated, not replaced), and GKE "
                "restarts the control plane and every node to apply it (gcloud's help of --enable-intra-node-"
                "visibility): the controllers restart, and each TPU pool loses every slice of its cube at once, the "
                "serving groups on it reloading the model. Make this `up` in the maintenance window"
            )
        else:
            in_place.append(
                "cluster.intranodeVisibility: turned off IN PLACE (the cluster is updated, not replaced); what GKE "
                "restarts to apply it is not documented in a source this program could read: plan for what turning "
                "it on does, the control plane and every node restarted, in the maintenance window"
            )
    mode_before = before.get("binaryAuthorization", gcp_config.BINARY_AUTHORIZATION_OFF)
    mode_after = after["binaryAuthorization"]
    if mode_before != mode_after:
        if mode_after == gcp_config.BINARY_AUTHORIZATION_ENFORCED:
            in_place.append(
                "cluster.binaryAuthorization: the cluster enforces the project's Binary Authorization policy, in place "
                "(its API enabled first). Running pods keep running; every pod created after it (a rollout, a pod "
                "moved by a node upgrade or repair, the next slice check) is admitted only if the policy allows its "
                "images: read the policy first, `gcloud container binauthz policy export`"
            )
        else:
            in_place.append(
                "cluster.binaryAuthorization: the cluster no longer enforces the project's Binary Authorization policy, "
                "in place: every image is admitted again"
            )
    group_before, group_after = before.get("rbacSecurityGroup", ""), after["rbacSecurityGroup"]
    if group_before != group_after:
        if group_after and not group_before:
            in_place.append(
                f"cluster.rbacSecurityGroup: Google Groups for RBAC is turned on with {group_after}, in place: a "
                "RoleBinding that names a group nested in it grants the group's members its role"
            )
        elif group_after:
            in_place.append(
                f"cluster.rbacSecurityGroup: GKE reads the groups of RBAC from {group_after} instead of "
                f"{group_before}, in place: bindings to groups nested only in {group_before} stop granting"
            )
        else:
            by_hand.append(
                "cluster.rbacSecurityGroup: the group is now empty, but the provider reads a missing "
                f"authenticator_groups_config as GKE's, so GKE keeps reading the groups of RBAC from {group_before}. "
                "gcloud only sets a group (--security-group); to turn the feature off, update the cluster through "
                f"GKE's API: clusters.update of projects/<project>/locations/{cluster['region']}/clusters/"
                f'{cluster["name"]} with {{"update": {{"desiredAuthenticatorGroupsConfig": {{"enabled": false}}}}}}'
            )
    return in_place, by_hand


def _review_isolation(
    before: Mapping[str, Any], after: Mapping[str, Any], cluster: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """(what changes in place, what is left to do by hand) when the nodes' or the control plane's exposure changes."""
    in_place: list[str] = []
    by_hand: list[str] = []
    credentials = f"gcloud container clusters get-credentials {cluster['name']} --region {cluster['region']}"
    nodes_before: Mapping[str, bool] = before.get("privateNodes") or {}
    flipped = {
        pool: private
        for pool, private in after["privateNodes"].items()
        if pool in nodes_before and nodes_before[pool] != private
    }
    if after["nat"] and not before.get("nat"):
        in_place.append(
            f"network.nat: Cloud NAT {after['nat']} and its Cloud Router are created, before any node goes private: "
            "the private nodes' way to registries outside Google, Hugging Face and the package index"
        )
    for pool, private in flipped.items():
        change = "lose their external addresses" if private else "get external addresses again"
        key = "cluster.privateNodes" if pool == SYSTEM_POOL else "tpu.pools[].privateNodes or cluster.privateNodes"
        if pool == SYSTEM_POOL:
            in_place.append(
                f"{key}: the system node pool's nodes {change} IN PLACE (the pool is updated, not replaced); GKE may "
                "recreate the nodes to apply it, and the controllers on them restart elsewhere"
            )
        else:
            in_place.append(
                f"{key}: the nodes of TPU pool {pool} {change} IN PLACE (the pool is updated, not replaced, and keeps "
                "its reservation cube); GKE may recreate the nodes to apply it, which takes every slice of the cube "
                "down at once. To keep serving, move one TPU pool per `up` (tpu.pools[].privateNodes), in the "
                "maintenance window"
            )
    if before.get("nat") and not after["nat"]:
        in_place.append(f"network.nat: Cloud NAT {before['nat']} is deleted, after the nodes have external addresses")
    if before.get("dnsEndpoint") != after["dnsEndpoint"]:
        if after["dnsEndpoint"]:
            in_place.append(
                "cluster.controlPlane.dnsEndpoint: the DNS-based endpoint takes traffic from outside Google Cloud, in "
                "place (IAM's container.clusters.connect decides who); the stack's kubeconfig and Kubernetes provider "
                f"move to it (the provider is updated, not replaced). kubectl: `{credentials} --dns-endpoint`"
            )
        else:
            in_place.append(
                "cluster.controlPlane.dnsEndpoint: the DNS-based endpoint refuses traffic from outside Google Cloud, in "
                "place; the stack's kubeconfig and Kubernetes provider move to the IP endpoint (the provider is "
                "updated, not replaced), and kubeconfigs made with --dns-endpoint stop working"
            )
    ip_before, ip_after = before.get("ipEndpoint"), after["ipEndpoint"]
    if ip_before != ip_after:
        what = {
            "public": "a public and a private IP",
            "private": "the private IP only (the VPC)",
            "off": "no IP at all (the DNS-based endpoint only)",
        }
        line = f"cluster.controlPlane.ipEndpoint: the control plane answers on {what[ip_after]}, in place"
        if ip_after != "public":
            line += (
                "; kubeconfigs that name its public IP stop working: outside the VPC, use "
                f"`{credentials} --dns-endpoint`"
            )
        in_place.append(line)
    networks_before, networks_after = before.get("authorizedNetworks") or [], after["authorizedNetworks"]
    if ip_after == "public" and networks_before != networks_after:
        if networks_after:
            in_place.append(
                f"cluster.controlPlane.authorizedNetworks: the public IP admits only {', '.join(networks_after)} "
                "(and no other Google Cloud address), in place"
            )
        elif ip_before == "public":
            by_hand.append(
                "cluster.controlPlane.authorizedNetworks: the list is now empty, but the provider reads a missing "
                "list as 'keep GKE's', so the public IP still admits only "
                f"{', '.join(networks_before)}. To open it to every address: gcloud container clusters update "
                f"{cluster['name']} --region {cluster['region']} --no-enable-master-authorized-networks"
            )
    return in_place, by_hand
