"""The stack's one typed configuration, the root no block imports: every block (components/<concern>/config.py)
composed and its rules run at once, so a bad stack fails with one ``ConfigError`` listing every problem before any
resource is registered; a valid one built once into a ``Stack``, the config and the manifests of every enabled
workload, which the post-build checks and the components (through components/wiring.py) share."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

import pulumi
from pydantic import Field

from components import manifests
from components.config_base import (
    NAMESPACE,
    Block,
    ConfigError,
    Problem,
    Problems,
    PullPath,
    form,
    parse_settings,
    redacted,
    secrets_in_plain_text,
    walk,
)
from components.gcp import config as gcp_config
from components.hardening import rules as hardening_rules
from components.hardening.rules import StackImage
from components.operations import config as operations_config
from components.operations import objects as alerting
from components.operations.node_audit_objects import NodeAuditObjects, node_audit_objects
from components.operations.objects import MonitoringObjects, monitoring_objects
from components.platform import config as platform_config
from components.platform.config import CONTROLLERS_POD_SECURITY, NODE_AGENTS_POD_SECURITY, WORKLOADS_POD_SECURITY
from components.platform.kueue_objects import kueue_objects
from components.platform.namespace_objects import namespace_objects
from components.tpu.admission import AdmissionPlan
from components.workloads.network_policies.objects import NamespaceDefaultsObjects, namespace_defaults_objects
from components.workloads.saxml import config as saxml_config
from components.workloads.saxml.objects import SaxmlObjects, saxml_objects
from components.workloads.serving import config as serving_config
from components.workloads.serving.config import endpoint_picker_image, routing_sidecar_image
from components.workloads.serving.objects import ServingObjects, serving_objects
from components.workloads.slice_checks import config as checks_config
from components.workloads.slice_checks.objects import SliceChecksObjects, slice_checks_objects

# The stack output holding `production` as validated: the policy pack decides production by it (on the root stack's
# outputs), so program and pack have one definition of a production stack.
PRODUCTION_OUTPUT = "production"

# The controller each registry chart runs, by the chart's key under ``platform``, as stack_images names it.
CONTROLLERS = {"jobset": "JobSet", "kueue": "Kueue", "leaderWorkerSet": "LeaderWorkerSet"}


class StackConfig(Block):
    project: gcp_config.ProjectId = Field(description="Google Cloud project ID.")
    production: bool = Field(
        False,
        description="A production stack: preview refuses it unless every protection is on (cluster deletion protection, "
        "protected TPU pools, a maintenance window, 2+ system nodes per zone, 2+ Kueue, slice-controller and "
        "endpoint-picker replicas, private nodes, no public IP endpoint open to every address, every image pinned "
        "by digest unless images.requireDigests is false) and the CIS GKE controls held in production (flow logs, "
        "the Cloud KMS keys of the Secrets and of the boot disks, secure boot on the TPU nodes, Binary Authorization, "
        "Google Groups for RBAC, intranode visibility, node audit logging).",
    )
    region: str = Field(
        "us-central1",
        description="Region of the cluster, network and workload policy.",
        pattern=r"^[a-z]+-[a-z]+[0-9]+$",
        json_schema_extra=form("region name", "use a region such as us-central1"),
        examples=["us-central1"],
    )
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

    def admission_plan(self) -> AdmissionPlan:
        """The slice demand of every enabled workload against the cubes."""
        served = serving_config.serving_workloads(self.serving, self.queues) if self.serving.enabled else []
        checks = checks_config.check_workloads(self.checks, self.tpu, self.queues)
        return AdmissionPlan(self.tpu.cubes, (*served, *checks))

    @property
    def nodes(self) -> int:
        """Every node the stack's pools make: its TPU pools' and the system pool's in each of its zones."""
        return self.tpu.total_nodes + self.cluster.system_pool.nodes

    @property
    def nat_needed(self) -> bool:
        """Cloud NAT exactly when a node is private: public nodes leave by their own addresses."""
        return self.cluster.private_nodes or any(self.tpu.pool_private_nodes(p, self.cluster) for p in self.tpu.pools)

    @property
    def node_audit_logging_on(self) -> bool:
        return operations_config.node_audit_logging_on(self.node_audit_logging, self.cluster, self.production)

    def namespace_claims(self) -> list[tuple[str, str, str, str]]:
        """Each namespace the stack makes, with the setting that names it, who makes it and the Pod Security level it
        enforces there: the node agents' (the node audit logging's, where it is on; no setting names it), the
        controllers' (the releases this stack installs) and the workloads'."""
        node_agents = [operations_config.NODE_AUDIT_NAMESPACE] if self.node_audit_logging_on else []
        releases = platform_config.release_namespaces(self.platform, self.tpu.dynamic_slicing)
        return [
            *(("", namespace, "the node audit logging", NODE_AGENTS_POD_SECURITY) for namespace in node_agents),
            *(
                (f"platform.{key}.namespace", namespace, f"the platform.{key} release", CONTROLLERS_POD_SECURITY)
                for key, namespace in releases.items()
            ),
            *(
                (key, namespace, "the workloads", WORKLOADS_POD_SECURITY)
                for key, namespace in _workload_namespaces(self)
            ),
        ]

    def stack_images(self) -> list[StackImage]:
        """Every image the stack's objects and Helm releases run, with the setting that pins it, in the order of the
        deployment. Held equal to the images of the render and `make bench`'s Job (tests/test_operations_stack.py), so
        nothing the stack pulls is missing from the mirror or from the pull-through repositories."""
        serving, saxml, audit, slicing = self.serving, self.saxml, self.node_audit_logging, self.tpu.dynamic_slicing
        used = [
            StackImage(
                f"platform.{key}.image", platform_config.chart_image(key, chart), f"the {CONTROLLERS[key]} controller"
            )
            for key, chart in platform_config.installed_charts(self.platform, slicing).items()
        ]
        if controller := platform_config.installed_slice_controller(self.platform, slicing):
            image = platform_config.slice_controller_image(controller)
            used.append(StackImage("platform.sliceController.digest", image, "the slice controller"))
        if slicing and self.checks.enabled_by_kind():
            used.append(StackImage("checks.image", self.checks.image, "the slice check JobSets"))
        if serving.enabled:
            if (staging := serving.weights_staging).enabled:
                used.append(StackImage("serving.weightsStaging.image", staging.image, "the staging Job"))
            if serving.router.install:
                used.append(
                    StackImage("serving.router.eppImage", endpoint_picker_image(serving), "the endpoint picker")
                )
            used.append(StackImage("serving.image", serving.image, "the vLLM model servers"))
            used.append(StackImage("serving.routingSidecarImage", routing_sidecar_image(serving), "the P/D sidecar"))
            # Run by `make bench`, not by the stack: listed so the mirror holds it and the pull-through serves it.
            used.append(
                StackImage("serving.benchmarkImage", serving.benchmark_image, "the serving benchmark (make bench)")
            )
        if saxml.enabled:
            used += [
                StackImage("saxml.adminImage", saxml.admin_image, "the Saxml admin server"),
                StackImage("saxml.modelServerImage", saxml.model_server_image, "the Saxml model servers"),
                StackImage("saxml.httpImage", saxml.http_image, "the Saxml HTTP server"),
            ]
        if self.node_audit_logging_on:
            used += [
                StackImage("nodeAuditLogging.setupImage", audit.setup_image, "the node audit setup (init container)"),
                StackImage("nodeAuditLogging.image", audit.image, "the node audit log agent"),
            ]
        return used

    def key_grants(self) -> list[gcp_config.KeyGrant]:
        return gcp_config.key_grants(self.cluster, self.tpu)

    @property
    def pull_through_on(self) -> bool:
        return self.images.pull_through_on(self.nat_needed, self.cluster.existing.enabled)

    def pull_through_repositories(self) -> list[gcp_config.RemoteRepository]:
        """The Artifact Registry remote repositories the stack makes: one per registry outside Google its images come
        from (stack_images, `make bench`'s included), where pull-through is on."""
        if not self.pull_through_on:
            return []
        registries = [image.registry for image in self.stack_images()]
        return gcp_config.remote_repositories(registries, self.project, self.region, self.cluster.name)

    def pull_path(self) -> PullPath:
        remotes = tuple((r.registry, r.path) for r in self.pull_through_repositories())
        return PullPath(mirror=self.images.mirror, remotes=remotes)

    def preview_warnings(self) -> list[str]:
        """What a valid stack's preview warns of (said at every preview, refusing nothing)."""
        return (
            hardening_rules.supply_chain_warnings(self.production, self.images, self.stack_images())
            + hardening_rules.boot_hardening_warnings(self.production, self.cluster, self.tpu)
            + gcp_config.key_grant_warnings(self.key_grants(), self.project)
            + platform_config.control_plane_port_warnings(self.platform, self.tpu.dynamic_slicing)
        )


@dataclass(frozen=True)
class Stack:
    """A validated stack: its config and the manifests of every enabled workload, built once."""

    config: StackConfig
    kueue: list[dict[str, Any]] | None  # None: no dynamic slicing, so nothing is queued
    checks: SliceChecksObjects | None
    serving: ServingObjects | None
    saxml: SaxmlObjects | None
    namespace_defaults: NamespaceDefaultsObjects | None  # each workload namespace's default deny (None: no namespace)
    monitoring: MonitoringObjects | None  # None: neither alerts nor dashboards
    node_audit: NodeAuditObjects | None  # None: no node audit logging
    # Every namespace the stack makes (the controllers', the workloads'), by name, labelled for Pod Security.
    namespaces: dict[str, dict[str, Any]]


def load(raw: Mapping[str, Any], secret_keys: Iterable[str] | None = None) -> Stack:
    """Parse, validate and build a mapping of top-level key -> value (objects already decoded). ``secret_keys``: the
    top-level keys the engine holds as secrets; when given, a secret setting outside them is refused."""
    problems = Problems()
    config = parse_settings(StackConfig, raw, problems)
    if config is not None:
        if secret_keys is not None and not problems.items:
            problems.items += secrets_in_plain_text(config, set(secret_keys))
        _validate(config, problems)
    stack = None
    if config is not None and not problems.items:  # what is built is checked too (_check_built)
        stack = _build(config)
        _check_built(stack, problems)
        _check_alert_policies(stack, problems)
    if problems.items or stack is None:
        raise ConfigError(redacted(problems.items, raw, set(secret_keys or ())))
    return stack


def parsed(raw: Mapping[str, Any]) -> StackConfig | None:
    """The config of ``raw`` with its settings' own checks only, or None if one fails (the rules across settings
    and the build are ``load``'s)."""
    problems = Problems()
    config = parse_settings(StackConfig, raw, problems)
    return None if problems.items else config


def load_pulumi_values(values: Mapping[str, str], secret_keys: Iterable[str]) -> Stack:
    """Load config as Pulumi hands it over: ``<namespace>:<key>`` -> string (JSON for objects), with the full names of
    the keys the engine holds as secrets (no default: a caller that left them out took every encrypted setting for
    one typed in plain text, as three operator tools did)."""
    prefix = f"{NAMESPACE}:"
    raw: dict[str, Any] = {}
    bad_json: list[Problem] = []
    ours = {key.removeprefix(prefix): text for key, text in values.items() if key.startswith(prefix)}
    for key, text in ours.items():
        info = next((f for f in StackConfig.model_fields.values() if f.alias == key), None)
        if info and info.annotation is not str and isinstance(text, str):
            try:
                raw[key] = json.loads(text)
            except json.JSONDecodeError:
                bad_json.append(
                    Problem(key, "is not valid structured config", "write it as a YAML mapping in the stack file")
                )
        else:
            raw[key] = text
    secret = {key.removeprefix(prefix) for key in secret_keys if key.startswith(prefix)}
    try:
        stack = load(raw, secret)
    except ConfigError as error:
        raise ConfigError(bad_json + error.problems) from None
    if bad_json:
        raise ConfigError(bad_json)
    return stack


def load_from_pulumi() -> Stack:
    """This project's config, read from the running Pulumi program and loaded; a bad one stops the program with the
    list of problems and no Python traceback (StackConfigError)."""
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
    """A ConfigError the Pulumi engine reports as a plain message: it recognises a RunError by type and prints any
    other exception with its traceback."""


def _validate(config: StackConfig, problems: Problems) -> None:
    """Every block's rules, each given the blocks it reads."""
    cluster, tpu, production = config.cluster, config.tpu, config.production
    gcp_config.validate_network(config.network, 0 if cluster.existing.enabled else config.nodes, problems)
    gcp_config.validate_cluster(cluster, tpu, problems, date.today())
    gcp_config.validate_encryption_keys(cluster, config.region, problems)
    gcp_config.validate_tpu(tpu, config.region, problems)
    waits = {
        "platform.install": (config.platform.install, "the controllers' Helm releases (then roll them back)"),
        "serving.router.install": (config.serving.enabled and config.serving.router.install, "an endpoint picker"),
    }
    gcp_config.validate_skip_await(cluster.existing, {key: what for key, (on, what) in waits.items() if on}, problems)
    platform_config.validate_platform(config.platform, problems)
    platform_config.validate_queues(config.queues, problems)
    platform_config.validate_namespace_levels(config.namespace_claims(), problems)
    checks_config.validate_checks(config.checks, tpu, config.queues, problems)
    serving_config.validate_serving(config.serving, tpu, config.queues, cluster, config.project, problems)
    saxml_config.validate_saxml(config.saxml, tpu, cluster, config.project, problems)
    hardening_rules.validate_upgrade_policy(
        cluster, config.serving.enabled or config.saxml.enabled, production, problems
    )
    hardening_rules.validate_production(
        production, config.network, cluster, tpu, config.platform, config.serving, config.node_audit_logging, problems
    )
    operations_config.validate_node_audit_logging(config.node_audit_logging, cluster, production, problems)
    operations_config.validate_alerts(config.alerts, cluster, production, problems)
    gcp_config.validate_images(config.images, problems)
    # (the repositories are checked only where the stack makes them: none where pull-through is off)
    remotes = config.pull_through_repositories()
    gcp_config.validate_pull_through(
        config.images, config.project, config.pull_through_on, cluster.existing.enabled, remotes, problems
    )
    hardening_rules.validate_supply_chain(production, config.images, config.stack_images(), problems)
    hardening_rules.validate_pulled_names(config.pull_path(), config.stack_images(), problems)


def _workload_namespaces(config: StackConfig) -> list[tuple[str, str]]:
    """(config key, namespace) of every namespace the stack makes for its workloads."""
    queued = enumerate(config.queues.namespaces) if config.tpu.dynamic_slicing else []
    return [
        *((f"queues.namespaces[{i}]", namespace) for i, namespace in queued),
        *([("saxml.namespace", config.saxml.namespace)] if config.saxml.enabled else []),
    ]


def workload_namespaces(config: StackConfig) -> list[str]:
    """The namespaces the stack makes for its workloads, each once."""
    return list(dict.fromkeys(namespace for _, namespace in _workload_namespaces(config)))


def _build(config: StackConfig) -> Stack:
    """Each enabled workload's blocks -> its manifests, once."""
    cluster, tpu, queues, pull_path = config.cluster, config.tpu, config.queues, config.pull_path()
    namespaces = workload_namespaces(config)
    # Each namespace -> the level it enforces (validate_namespace_levels holds that no two of its makers disagree).
    levels = {namespace: level for _, namespace, _, level in config.namespace_claims()}
    return Stack(
        config=config,
        kueue=kueue_objects(queues, tpu) if tpu.dynamic_slicing else None,
        checks=slice_checks_objects(config.checks, tpu, queues, pull_path),
        serving=serving_objects(
            config.serving, tpu, queues, config.network, config.project, pull_path, cluster.existing.skip_await
        )
        if config.serving.enabled
        else None,
        saxml=saxml_objects(config.saxml, tpu, config.network, config.project, pull_path)
        if config.saxml.enabled
        else None,
        namespace_defaults=namespace_defaults_objects(namespaces) if namespaces else None,
        monitoring=monitoring_objects(
            config.project,
            config.alerts,
            config.dashboards,
            cluster,
            tpu,
            config.platform,
            queues,
            config.serving,
            config.saxml,
        ),
        node_audit=node_audit_objects(config.node_audit_logging, cluster, config.region, pull_path)
        if config.node_audit_logging_on
        else None,
        namespaces=namespace_objects(levels, platform_config.pod_security_version(cluster)),
    )


def _check_built(stack: Stack, problems: Problems) -> None:
    """The rule that reads the built manifests: one writer per NetworkPolicy (a check's takes its JobSet's name: a name
    another policy of the namespace has already, the serving ones' or the default deny's, would have two resources
    write one object, each undoing the other)."""
    if stack.checks is None:
        return
    taken = {
        (policy["metadata"]["namespace"], policy["metadata"]["name"])
        for policy in [
            *(stack.serving.network_policies if stack.serving else []),
            *(stack.namespace_defaults.default_deny.values() if stack.namespace_defaults else []),
        ]
    }
    checks = checks_config.enabled_checks(stack.config.checks, stack.config.tpu)
    kinds = {check.name: kind for kind, check in checks.items()}
    for policy in stack.checks.network_policies:
        namespace, name = policy["metadata"]["namespace"], policy["metadata"]["name"]
        if (namespace, name) in taken:
            problems.add(
                f"checks.{kinds[name]}.name",
                f"{name!r} is also the name of a NetworkPolicy the stack makes in {namespace}",
                "give the check another name",
            )


def _check_alert_policies(stack: Stack, problems: Problems) -> None:
    """An alert policy Cloud Monitoring would refuse as too long (objects.too_long): the TPU policies name every TPU
    pool in their filter and documentation, so many pools with long names fail the `up` halfway."""
    for policy in stack.monitoring.alerts or [] if stack.monitoring else []:
        for what in alerting.too_long(policy):
            problems.add(
                "tpu.pools",
                f"make alert policy {policy['key']} longer than Cloud Monitoring takes: {what}; it names every TPU "
                "pool",
                "give the TPU pools shorter names (or publish the runbooks at a shorter alerts.runbookBaseUrl)",
            )


# --- Where the nodes pull from ---------------------------------------------------------------
def image_pull_warnings(stack: Stack) -> list[str]:
    """Private nodes that would pull from a registry with a published limit per address through Cloud NAT: no mirror,
    and pull-through turned off. The pods that pull each image when their workload starts are counted on the built
    objects, and for the Helm releases from the replicas the stack gives them (a chart's own: unknown)."""
    config, pull_path = stack.config, stack.config.pull_path()
    if not config.nat_needed or config.images.mirror or config.pull_through_on or config.cluster.existing.enabled:
        return []
    # Every Kubernetes object of the built manifests, each a JSON object with its apiVersion and kind (the config, a
    # pydantic model, holds none; no manifest holds another).
    built = (value for _, value in walk(dataclasses.asdict(stack)) if isinstance(value, dict))
    counted = manifests.pods_by_image(*(obj for obj in built if "apiVersion" in obj and "kind" in obj))
    released = {
        "platform.kueue.image": config.platform.kueue_controller.replicas,
        "platform.sliceController.digest": config.platform.slice_controller.replicas,
        "serving.router.eppImage": config.serving.router.replicas,
        "serving.benchmarkImage": 1,  # `make bench`'s Job, later
    }
    by_registry: dict[str, list[gcp_config.ImagePull]] = {}
    for image in config.stack_images():
        pulled = pull_path.image(image.image)
        if pulled in counted:  # None there: a DaemonSet's
            pull = gcp_config.ImagePull(pulled, image.runs, counted[pulled])
        else:  # a Helm release's Deployment: the replicas the stack gives it, or the chart's own (unknown here)
            pull = gcp_config.ImagePull(pulled, image.runs, released.get(image.key), "as many as its chart makes")
        by_registry.setdefault(image.registry, []).append(pull)
    warnings = [
        gcp_config.nat_pull_warning(r, pulls, config.nodes, config.network.nat) for r, pulls in by_registry.items()
    ]
    return [warning for warning in warnings if warning]


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
