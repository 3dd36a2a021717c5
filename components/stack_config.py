"""The stack's one typed configuration: schema, defaults, parsing and validation.

Every setting lives in the dataclasses below; their defaults are the reference deployment
(shared/reference/codelab-reference.md, sections 1-2). Parsing and validation collect every
problem before raising one ``ConfigError``, so a bad stack fails before any resource exists.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import typing
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from components import admission, naming, slice_check_objects, topology
from components.config_base import (
    EXACT_VERSION,
    NAMESPACE,
    QUANTITY,
    ConfigError,
    Problem,
    Problems,
    camel,
    is_k8s_name,
    join,
    parse_object,
    setting,
    snake,
)
from components.gke_version import GkeVersion
from components.checks_config import ChecksConfig, SliceCheckConfig, validate_checks
from components.saxml_config import SaxmlConfig, validate_saxml
from components.serving_config import ServingConfig, serving_workloads, validate_serving

TPU7X_MIN_GKE_VERSION = "1.34.0-gke.2201000"
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")
EXCLUSION_SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
NO_UPGRADES_MAX_DAYS = 30
MTU_RANGE = (1300, 8896)
PROXY_ONLY_MAX_PREFIX = 26


# --- Schema ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkConfig:
    prefix: str = setting("qwen-serving", "Prefix of the VPC, subnet and firewall names (`<prefix>-main`, `-tpu`, `-proxy`).")
    mtu: int = setting(8896, "VPC MTU; 8896 gives TPU hosts jumbo frames (1300-8896).")
    node_cidr: str = setting("10.10.0.0/18", "Primary range of the node subnet.")
    pod_cidr: str = setting("10.12.0.0/14", "Secondary range for pods (`<prefix>-pods`).")
    service_cidr: str = setting("10.16.0.0/20", "Secondary range for services (`<prefix>-services`).")
    proxy_only_cidr: str = setting("172.16.0.0/26", "Proxy-only subnet for the internal Gateway (/26 or larger).")


@dataclass(frozen=True)
class SystemPoolConfig:
    machine_type: str = setting("n2-standard-32", "Machine type of the system (non-TPU) node pool.")
    nodes_per_zone: int = setting(1, "System nodes in each zone of the region.")


@dataclass(frozen=True)
class MaintenanceWindowConfig:
    start: str = setting(doc="RFC 3339 start of the first window, e.g. 2026-01-03T04:00:00Z.")
    end: str = setting(doc="RFC 3339 end of the first window.")
    recurrence: str = setting("FREQ=WEEKLY;BYDAY=SA,SU", "RFC 5545 RRULE for the window.")


@dataclass(frozen=True)
class MaintenanceExclusionConfig:
    name: str = setting(doc="Exclusion name.")
    start: str = setting(doc="RFC 3339 start time.")
    end: str = setting(doc="RFC 3339 end time.")
    scope: str = setting("NO_MINOR_UPGRADES", "NO_UPGRADES (at most 30 days), NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES.")


@dataclass(frozen=True)
class ClusterConfig:
    name: str = setting("qwen-serving-cluster", "GKE cluster name (at most 40 characters).")
    version: str = setting(
        topology.SUB_SLICING_MIN_GKE_VERSION,
        "Minimum control-plane version; must meet the floor of the slicing in use.",
    )
    release_channel: str = setting("RAPID", "Release channel; dynamic slicing needs RAPID.")
    deletion_protection: bool = setting(True, "Refuse `pulumi destroy` of the cluster while true.")
    system_pool: SystemPoolConfig = setting(SystemPoolConfig(), "The system node pool.")
    node_service_account_id: str = setting("", "Node service account id; empty means `<cluster>-nodes`.")
    maintenance_window: MaintenanceWindowConfig | None = setting(None, "Optional recurring maintenance window.")
    maintenance_exclusions: list[MaintenanceExclusionConfig] = setting(
        [], "Optional maintenance exclusions (need a maintenance window)."
    )


@dataclass(frozen=True)
class ReservationConfig:
    name: str = setting("", "Reservation the TPU pools consume (an All Capacity mode reservation for TPU7x).")
    block: str = setting("", "Reservation block, e.g. block-0.")
    project: str = setting("", "Project owning the reservation; empty means the stack's project.")


@dataclass(frozen=True)
class TpuPoolConfig:
    name: str = setting(doc="Node pool name.")
    node_count: int = setting(doc="Nodes in the pool: chips of its topology / chips per host.")
    topology: str = setting("4x4x4", "Slice topology of the pool; a 4x4x4 cube for dynamic slicing.")
    sub_block: str = setting("", "Optional reservation sub-block the pool is pinned to.")


@dataclass(frozen=True)
class TpuConfig:
    zone: str = setting("us-central1-ai1a", "Zone of the TPU node pools (inside `region`).")
    machine_type: str = setting("tpu7x-standard-4t", "TPU machine type of every TPU pool.")
    workload_policy_name: str = setting("superslice-policy", "HIGH_THROUGHPUT workload policy for TPU7x cubes.")
    reservation: ReservationConfig = setting(ReservationConfig(), "Reservation the TPU pools are bound to.")
    pools: list[TpuPoolConfig] = setting(
        [
            TpuPoolConfig(name="tpu7-pool-1", node_count=16),
            TpuPoolConfig(name="tpu7-pool-2", node_count=16),
        ],
        "TPU node pools; for TPU7x one pool per 4x4x4 cube.",
    )
    slice_shapes: list[str] = setting(
        ["2x2x2", "4x4x8"], "Dynamic slice shapes the platform admits (drives version floor and Kueue levels)."
    )
    protect_pools: bool = setting(False, "Mark TPU pools `protect` so a stray change cannot delete them.")


@dataclass(frozen=True)
class HelmChartConfig:
    chart: str = setting(doc="Chart reference (oci://... or https://...).")
    version: str = setting(doc="Exact chart version (no ranges, no floating tags).")
    namespace: str = setting(doc="Namespace of the release.")


@dataclass(frozen=True)
class ResourceListConfig:
    cpu: str = setting(doc="CPU quantity.")
    memory: str = setting(doc="Memory quantity.")


@dataclass(frozen=True)
class KueueControllerConfig:
    replicas: int = setting(2, "Kueue controller replicas (leader election keeps one active).")
    requests: ResourceListConfig = setting(ResourceListConfig(cpu="2", memory="4Gi"), "Kueue controller requests.")
    limits: ResourceListConfig = setting(ResourceListConfig(cpu="4", memory="8Gi"), "Kueue controller limits.")


@dataclass(frozen=True)
class SliceControllerConfig:
    namespace: str = setting("slice-controller-system", "Namespace of the Kueue slice controller release.")
    image: str = setting("tpuongke/kueue-slice-controller", "Slice controller image repository.")
    tag: str = setting("v0.8.0-200", "Image tag.")
    digest: str = setting("", "Optional sha256 digest; when set the image is pulled by digest.")
    replicas: int = setting(1, "Controller replicas.")


@dataclass(frozen=True)
class PlatformConfig:
    jobset: HelmChartConfig = setting(
        HelmChartConfig("oci://registry.k8s.io/jobset/charts/jobset", "0.11.1", "jobset-system"), "JobSet chart."
    )
    kueue: HelmChartConfig = setting(
        HelmChartConfig("oci://registry.k8s.io/kueue/charts/kueue", "0.17.4", "kueue-system"), "Kueue chart."
    )
    kueue_controller: KueueControllerConfig = setting(KueueControllerConfig(), "Kueue controller sizing.")
    leader_worker_set: HelmChartConfig = setting(
        HelmChartConfig("oci://registry.k8s.io/lws/charts/lws", "0.8.0", "lws-system"),
        "LeaderWorkerSet chart (its webhook service is hard-coded to lws-system).",
    )
    slice_controller: SliceControllerConfig = setting(
        SliceControllerConfig(), "Kueue slice controller, from the local chart manifests/charts/slice-controller."
    )


@dataclass(frozen=True)
class PriorityClassConfig:
    name: str = setting(doc="WorkloadPriorityClass name.")
    value: int = setting(doc="Priority value; higher preempts lower.")


@dataclass(frozen=True)
class PriorityClassesConfig:
    low: PriorityClassConfig = setting(PriorityClassConfig("low-priority-1000", 1000), "Low priority (checks).")
    medium: PriorityClassConfig = setting(PriorityClassConfig("medium-priority-2000", 2000), "Medium priority.")
    high: PriorityClassConfig = setting(PriorityClassConfig("high-priority-3000", 3000), "High priority (serving).")


@dataclass(frozen=True)
class QueuesConfig:
    topology_name: str = setting("slice-topology", "Kueue Topology name.")
    resource_flavor_name: str = setting("slice-rf", "Kueue ResourceFlavor name.")
    admission_check_name: str = setting("ac", "Kueue AdmissionCheck name (controller accelerator.gke.io/slice).")
    cluster_queue_name: str = setting("cq", "Kueue ClusterQueue name.")
    local_queue_name: str = setting("lq", "LocalQueue name in each workload namespace.")
    namespaces: list[str] = setting(["llm-d-pd-disaggregation"], "Workload namespaces, each with a LocalQueue.")
    priority_classes: PriorityClassesConfig = setting(PriorityClassesConfig(), "WorkloadPriorityClasses.")


@dataclass(frozen=True)
class StackConfig:
    project: str = setting(doc="Google Cloud project ID.")
    region: str = setting("us-central1", "Region of the cluster, network and workload policy.")
    network: NetworkConfig = setting(NetworkConfig(), "VPC and subnets.")
    cluster: ClusterConfig = setting(ClusterConfig(), "GKE cluster.")
    tpu: TpuConfig = setting(TpuConfig(), "TPU capacity.")
    platform: PlatformConfig = setting(PlatformConfig(), "In-cluster controllers installed by Helm.")
    queues: QueuesConfig = setting(QueuesConfig(), "Kueue queueing for dynamic slicing (TPU7x only).")
    checks: ChecksConfig = setting(ChecksConfig(), "JAX slice-check JobSets proving sub- and super-slicing.")
    serving: ServingConfig = setting(ServingConfig(), "P/D-disaggregated vLLM serving on TPU7x sub-slices.")
    saxml: SaxmlConfig = setting(SaxmlConfig(), "Saxml on multi-host TPU v5e (the saxml stack).")

    # Derived facts, computed once here so components and reports agree.

    @property
    def machine(self) -> topology.MachineType:
        return topology.MACHINE_CATALOG[self.tpu.machine_type]

    @property
    def dynamic_slicing(self) -> bool:
        return self.machine.dynamic_slicing

    @property
    def dynamic_slicing_requested(self) -> bool:
        """Like ``dynamic_slicing``, but safe to ask while validating an unknown machine type."""
        machine = topology.MACHINE_CATALOG.get(self.tpu.machine_type)
        return bool(machine and machine.dynamic_slicing)

    @property
    def slice_shapes_parse(self) -> bool:
        return all(topology.try_shape(s) for s in self.tpu.slice_shapes)

    @property
    def slice_shapes(self) -> list[topology.Shape]:
        return [topology.Shape.parse(s) for s in self.tpu.slice_shapes]

    @property
    def cubes(self) -> int:
        return len(self.tpu.pools) if self.dynamic_slicing else 0

    @property
    def total_tpu_chips(self) -> int:
        return sum(topology.Shape.parse(p.topology).chips for p in self.tpu.pools)

    @property
    def tpu_zone_is_ai_zone(self) -> bool:
        return bool(re.match(rf"^{re.escape(self.region)}-ai\d+[a-z]$", self.tpu.zone))

    @property
    def reservation_project(self) -> str:
        return self.tpu.reservation.project or self.project

    def reservation_path(self, pool: TpuPoolConfig) -> str | None:
        reservation = self.tpu.reservation
        if not reservation.name:
            return None
        path = f"projects/{self.reservation_project}/reservations/{reservation.name}"
        if reservation.block:
            path += f"/reservationBlocks/{reservation.block}"
            if pool.sub_block:
                path += f"/reservationSubBlocks/{pool.sub_block}"
        return path

    @property
    def checks_namespace(self) -> str:
        return self.checks.namespace or next(iter(self.queues.namespaces), "")

    def enabled_checks(self) -> dict[str, SliceCheckConfig]:
        """Enabled slice checks by kind (``subslicing``, ``superslicing``); none without dynamic slicing."""
        if not self.dynamic_slicing:
            return {}
        checks = {slice_check_objects.SUBSLICING: self.checks.subslicing, slice_check_objects.SUPERSLICING: self.checks.superslicing}
        return {kind: check for kind, check in checks.items() if check.enabled}

    def priority_class(self, level: str) -> PriorityClassConfig:
        return getattr(self.queues.priority_classes, level)

    def slice_workloads(self) -> list[admission.SliceWorkload]:
        """The slice demand of every enabled workload, for the admission plan."""
        return (serving_workloads(self) if self.serving.enabled else []) + self.check_workloads()

    def check_workloads(self) -> list[admission.SliceWorkload]:
        return [
            admission.SliceWorkload(
                key=f"checks.{kind}",
                shape=topology.Shape.parse(check.shape),
                slices=check.slices,
                priority_name=self.priority_class(check.priority).name,
                priority=self.priority_class(check.priority).value,
            )
            for kind, check in self.enabled_checks().items()
        ]

    @property
    def node_service_account_id(self) -> str:
        return self.cluster.node_service_account_id or naming.node_service_account_id(self.cluster.name)


# --- Parsing ---------------------------------------------------------------------------


def parse(raw: Mapping[str, Any]) -> StackConfig:
    """Parse and validate a mapping of top-level key -> value (objects already decoded)."""
    problems = Problems()
    config = parse_object(StackConfig, raw, "", problems)
    _validate(config, problems)
    if problems.items:
        raise ConfigError(problems.items)
    return config


def parse_pulumi_values(values: Mapping[str, str]) -> StackConfig:
    """Parse config as Pulumi hands it over: ``<namespace>:<key>`` -> string (JSON for objects)."""
    prefix = f"{NAMESPACE}:"
    raw: dict[str, Any] = {}
    hints = typing.get_type_hints(StackConfig)
    bad_json: list[Problem] = []
    for full_key, text in values.items():
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        field_name = next((f.name for f in dataclasses.fields(StackConfig) if camel(f.name) == key), None)
        if field_name and hints[field_name] is not str and isinstance(text, str):
            try:
                raw[key] = json.loads(text)
            except json.JSONDecodeError:
                bad_json.append(Problem(key, "is not valid structured config", "write it as a YAML mapping in the stack file"))
                continue
        else:
            raw[key] = text
    try:
        config = parse(raw)
    except ConfigError as error:
        raise ConfigError(bad_json + error.problems) from None
    if bad_json:
        raise ConfigError(bad_json)
    return config


def load_from_pulumi() -> StackConfig:
    """Read this project's config from the running Pulumi program and parse it."""
    from pulumi.runtime import config as runtime_config

    values = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return parse_pulumi_values(values)


# --- Validation ------------------------------------------------------------------------


def _validate(config: StackConfig, problems: Problems) -> None:
    _validate_project(config, problems)
    _validate_network(config.network, problems)
    _validate_cluster(config, problems)
    _validate_tpu(config, problems)
    _validate_platform(config.platform, problems)
    _validate_queues(config.queues, problems)
    validate_checks(config, problems)
    validate_serving(config, problems)
    validate_saxml(config, problems)


def _validate_project(config: StackConfig, problems: Problems) -> None:
    if problem := naming.project_id_problem(config.project):
        problems.add("project", problem, "set the ID of your Google Cloud project")
    if not re.match(r"^[a-z]+-[a-z]+\d+$", config.region):
        problems.add("region", f"{config.region!r} is not a region name", "use a region such as us-central1")


def _validate_network(network: NetworkConfig, problems: Problems) -> None:
    for name in (*naming.network_names(network.prefix).values(), *naming.secondary_range_names(network.prefix).values()):
        if problem := naming.gcp_name_problem(name):
            problems.add("network.prefix", f"derived name {problem}", "use a shorter lowercase prefix")
            break
    low, high = MTU_RANGE
    if not low <= network.mtu <= high:
        problems.add("network.mtu", f"{network.mtu} is outside {low}-{high}", "use 8896 for TPU hosts")
    ranges = {}
    for key in ("nodeCidr", "podCidr", "serviceCidr", "proxyOnlyCidr"):
        text = getattr(network, snake(key))
        try:
            ranges[key] = ipaddress.IPv4Network(text)
        except ValueError as error:
            problems.add(f"network.{key}", f"{text!r} is not an IPv4 CIDR range ({error})", "write it as a.b.c.d/n with no host bits set")
    keys = list(ranges)
    for i, first in enumerate(keys):
        for second in keys[i + 1:]:
            if ranges[first].overlaps(ranges[second]):
                problems.add(
                    f"network.{second}",
                    f"{ranges[second]} overlaps network.{first} {ranges[first]}",
                    "give every subnet and secondary range its own addresses",
                )
    proxy = ranges.get("proxyOnlyCidr")
    if proxy and proxy.prefixlen > PROXY_ONLY_MAX_PREFIX:
        problems.add(
            "network.proxyOnlyCidr",
            f"{proxy} is smaller than /{PROXY_ONLY_MAX_PREFIX}",
            f"the regional managed proxy needs a /{PROXY_ONLY_MAX_PREFIX} or larger range",
        )


def _validate_cluster(config: StackConfig, problems: Problems) -> None:
    cluster = config.cluster
    if problem := naming.gcp_name_problem(cluster.name, naming.GKE_CLUSTER_NAME_MAX):
        problems.add("cluster.name", problem, "choose a shorter lowercase name")
    if problem := naming.service_account_id_problem(config.node_service_account_id):
        key = "cluster.nodeServiceAccountId" if cluster.node_service_account_id else "cluster.name"
        problems.add(key, problem, "set cluster.nodeServiceAccountId to a 6-30 character id")
    if cluster.release_channel not in RELEASE_CHANNELS:
        problems.add("cluster.releaseChannel", f"{cluster.release_channel!r} is not a release channel", f"use one of {', '.join(RELEASE_CHANNELS)}")
    elif config.dynamic_slicing_requested and cluster.release_channel != "RAPID":
        problems.add("cluster.releaseChannel", "dynamic slicing is only offered on the RAPID channel", "set RAPID")
    _validate_version(config, problems)
    pool = cluster.system_pool
    if not re.match(r"^[a-z][a-z0-9]*-[a-z0-9-]+$", pool.machine_type):
        problems.add("cluster.systemPool.machineType", f"{pool.machine_type!r} is not a machine type", "use a type such as n2-standard-32")
    if pool.nodes_per_zone < 1:
        problems.add("cluster.systemPool.nodesPerZone", f"{pool.nodes_per_zone} leaves no system nodes", "use 1 or more")
    _validate_maintenance(cluster, problems)


def _validate_version(config: StackConfig, problems: Problems) -> None:
    try:
        version = GkeVersion.parse(config.cluster.version)
    except ValueError as error:
        problems.add("cluster.version", str(error), "write a full GKE version such as 1.36.0-gke.3712000")
        return
    floors = []
    if config.tpu.machine_type == "tpu7x-standard-4t":
        floors.append((TPU7X_MIN_GKE_VERSION, "TPU7x node pools"))
    if config.dynamic_slicing_requested and config.slice_shapes_parse:
        shapes = config.slice_shapes
        floor = topology.min_gke_version(shapes)
        if floor == topology.SUB_SLICING_MIN_GKE_VERSION:
            floors.append((floor, "sub-slicing (" + ", ".join(str(s) for s in shapes if topology.is_sub_slice(s)) + ")"))
        elif floor:
            floors.append((floor, "super-slicing"))
    for floor, why in floors:
        if version < GkeVersion.parse(floor):
            problems.add("cluster.version", f"{version} is below {floor}, the minimum for {why}", f"set {floor} or later")


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _validate_time_range(prefix: str, start: str, end: str, problems: Problems) -> timedelta | None:
    begin, finish = _parse_time(start), _parse_time(end)
    for key, text, parsed in (("start", start, begin), ("end", end, finish)):
        if parsed is None or parsed.tzinfo is None:
            problems.add(f"{prefix}.{key}", f"{text!r} is not an RFC 3339 time with a zone", "write e.g. 2026-01-03T04:00:00Z")
    if begin and finish and begin.tzinfo and finish.tzinfo:
        if finish <= begin:
            problems.add(f"{prefix}.end", "ends before it starts", "set an end after the start")
            return None
        return finish - begin
    return None


def _validate_maintenance(cluster: ClusterConfig, problems: Problems) -> None:
    window = cluster.maintenance_window
    if window:
        _validate_time_range("cluster.maintenanceWindow", window.start, window.end, problems)
        if not window.recurrence.startswith("FREQ="):
            problems.add("cluster.maintenanceWindow.recurrence", f"{window.recurrence!r} is not an RRULE", "write e.g. FREQ=WEEKLY;BYDAY=SA,SU")
    if cluster.maintenance_exclusions and not window:
        problems.add("cluster.maintenanceExclusions", "exclusions need a maintenance window", "set cluster.maintenanceWindow too")
    for i, exclusion in enumerate(cluster.maintenance_exclusions):
        prefix = f"cluster.maintenanceExclusions[{i}]"
        if problem := naming.gcp_name_problem(exclusion.name):
            problems.add(f"{prefix}.name", problem, "use a short lowercase name")
        if exclusion.scope not in EXCLUSION_SCOPES:
            problems.add(f"{prefix}.scope", f"{exclusion.scope!r} is not a scope", f"use one of {', '.join(EXCLUSION_SCOPES)}")
        length = _validate_time_range(prefix, exclusion.start, exclusion.end, problems)
        if exclusion.scope == "NO_UPGRADES" and length and length > timedelta(days=NO_UPGRADES_MAX_DAYS):
            problems.add(f"{prefix}.end", f"a NO_UPGRADES exclusion may last {NO_UPGRADES_MAX_DAYS} days, this one {length.days}", "shorten it or use NO_MINOR_UPGRADES")


def _validate_tpu(config: StackConfig, problems: Problems) -> None:
    tpu = config.tpu
    if not tpu.zone.startswith(f"{config.region}-") or not re.match(r"^[a-z]+-[a-z]+\d+-[a-z0-9]+$", tpu.zone):
        problems.add("tpu.zone", f"{tpu.zone!r} is not a zone of region {config.region}", f"use a zone such as {config.region}-a, or change region")
    machine = topology.MACHINE_CATALOG.get(tpu.machine_type)
    if machine is None:
        problems.add("tpu.machineType", f"{tpu.machine_type!r} is not a known TPU machine type", f"use one of {', '.join(topology.MACHINE_CATALOG)}")
        return
    shapes = _validate_slice_shapes(config, machine, problems)
    _validate_pools(config, machine, problems)
    _validate_reservation(config, machine, problems)
    if machine.dynamic_slicing:
        if problem := naming.gcp_name_problem(tpu.workload_policy_name):
            problems.add("tpu.workloadPolicyName", problem, "use a short lowercase name")
        for i, shape in shapes:
            if topology.is_super_slice(shape) and topology.cubes_in(shape) > config.cubes:
                problems.add(
                    f"tpu.sliceShapes[{i}]",
                    f"{shape} needs {topology.cubes_in(shape)} cubes; the stack has {config.cubes}",
                    "add TPU pools (one per cube) or remove the shape",
                )


def _validate_slice_shapes(config: StackConfig, machine: topology.MachineType, problems: Problems) -> list[tuple[int, topology.Shape]]:
    shapes = []
    for i, text in enumerate(config.tpu.slice_shapes):
        key = f"tpu.sliceShapes[{i}]"
        try:
            shape = topology.Shape.parse(text)
        except ValueError as error:
            problems.add(key, str(error), "use a shape such as 2x2x2")
            continue
        if not machine.dynamic_slicing:
            problems.add(key, f"{machine.name} has no dynamic slicing", "remove tpu.sliceShapes for this machine type")
        elif problem := topology.dynamic_slice_problem(shape):
            problems.add(key, problem, "use an allowed shape")
        else:
            shapes.append((i, shape))
    return shapes


def _validate_pools(config: StackConfig, machine: topology.MachineType, problems: Problems) -> None:
    pools = config.tpu.pools
    if not pools:
        problems.add("tpu.pools", "is empty", "declare at least one TPU node pool")
    seen: set[str] = set()
    for i, pool in enumerate(pools):
        prefix = f"tpu.pools[{i}]"
        if problem := naming.gcp_name_problem(pool.name, naming.GKE_NODE_POOL_NAME_MAX):
            problems.add(f"{prefix}.name", problem, "use a short lowercase name")
        if pool.name in seen:
            problems.add(f"{prefix}.name", f"{pool.name!r} is used by another pool", "give each pool its own name")
        seen.add(pool.name)
        if pool.sub_block and (problem := naming.gcp_name_problem(pool.sub_block)):
            problems.add(f"{prefix}.subBlock", problem, "use the sub-block name from `gcloud compute reservations sub-blocks list`")
        try:
            shape = topology.Shape.parse(pool.topology)
        except ValueError as error:
            problems.add(f"{prefix}.topology", str(error), "use e.g. 4x4x4")
            continue
        if machine.dynamic_slicing and shape != topology.CUBE:
            problems.add(f"{prefix}.topology", f"{machine.name} pools are provisioned as whole {topology.CUBE} cubes, not {shape}", f"set {topology.CUBE}")
            continue
        if problem := topology.static_slice_problem(shape, machine):
            problems.add(f"{prefix}.topology", problem, "use a topology of this machine type")
            continue
        hosts = machine.hosts(shape)
        if pool.node_count != hosts:
            problems.add(
                f"{prefix}.nodeCount",
                f"{pool.node_count} nodes do not make a {shape} slice of {machine.name} "
                f"({shape.chips} chips / {machine.chips_per_host} per host = {hosts})",
                f"set {hosts}",
            )


def _validate_reservation(config: StackConfig, machine: topology.MachineType, problems: Problems) -> None:
    reservation = config.tpu.reservation
    if machine.dynamic_slicing:
        # PROVISION_ONLY workload policies only provision from a specific All Capacity reservation.
        for key, value, example in (("name", reservation.name, "my-tpu7x-reservation"), ("block", reservation.block, "block-0")):
            if not value:
                problems.add(f"tpu.reservation.{key}", "is required: TPU7x dynamic-slicing pools consume a specific reservation block", f"set it, e.g. {example}")
    elif reservation.block and not reservation.name:
        problems.add("tpu.reservation.name", "a block is set without its reservation", "set the reservation name")
    for key in ("name", "block"):
        value = getattr(reservation, key)
        if value and (problem := naming.gcp_name_problem(value)):
            problems.add(f"tpu.reservation.{key}", problem, "copy it from `gcloud compute reservations list`")
    if reservation.project and (problem := naming.project_id_problem(reservation.project)):
        problems.add("tpu.reservation.project", problem, "set the project owning the reservation, or leave it empty")
    if any(p.sub_block for p in config.tpu.pools) and not reservation.block:
        problems.add("tpu.reservation.block", "pools name sub-blocks but no block is set", "set the block the sub-blocks belong to")


def _validate_platform(platform: PlatformConfig, problems: Problems) -> None:
    for key, chart in (("jobset", platform.jobset), ("kueue", platform.kueue), ("leaderWorkerSet", platform.leader_worker_set)):
        prefix = f"platform.{key}"
        if not chart.chart.startswith(("oci://", "https://")):
            problems.add(f"{prefix}.chart", f"{chart.chart!r} is not an oci:// or https:// chart reference", "use the chart's published URL")
        if not EXACT_VERSION.match(chart.version):
            problems.add(f"{prefix}.version", f"{chart.version!r} is not an exact version", "pin a released version such as 0.11.1")
        if not is_k8s_name(chart.namespace):
            problems.add(f"{prefix}.namespace", f"{chart.namespace!r} is not a namespace name", "use a DNS-1123 label")
    if platform.leader_worker_set.namespace != "lws-system":
        problems.add("platform.leaderWorkerSet.namespace", "the LWS chart hard-codes its webhook service in lws-system", "set lws-system")
    slice_controller = platform.slice_controller
    if slice_controller.digest and not re.match(r"^sha256:[0-9a-f]{64}$", slice_controller.digest):
        problems.add("platform.sliceController.digest", "is not sha256:<64 hex digits>", "copy the digest from the registry, or leave it empty")
    if slice_controller.replicas < 1:
        problems.add("platform.sliceController.replicas", f"{slice_controller.replicas} runs no controller", "use 1 or more")
    if not is_k8s_name(slice_controller.namespace):
        problems.add("platform.sliceController.namespace", f"{slice_controller.namespace!r} is not a namespace name", "use a DNS-1123 label")
    controller = platform.kueue_controller
    if controller.replicas < 1:
        problems.add("platform.kueueController.replicas", f"{controller.replicas} runs no controller", "use 1 or more")
    for group in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            value = getattr(getattr(controller, group), resource)
            if not QUANTITY.match(value):
                problems.add(f"platform.kueueController.{group}.{resource}", f"{value!r} is not a Kubernetes quantity", "write e.g. 2, 500m or 4Gi")


def _validate_queues(queues: QueuesConfig, problems: Problems) -> None:
    for key in ("topologyName", "resourceFlavorName", "admissionCheckName", "clusterQueueName", "localQueueName"):
        value = getattr(queues, snake(key))
        if not is_k8s_name(value):
            problems.add(f"queues.{key}", f"{value!r} is not a Kubernetes object name", "use lowercase letters, digits and hyphens")
    if not queues.namespaces:
        problems.add("queues.namespaces", "is empty", "list at least one workload namespace")
    for i, namespace in enumerate(queues.namespaces):
        if not is_k8s_name(namespace):
            problems.add(f"queues.namespaces[{i}]", f"{namespace!r} is not a namespace name", "use a DNS-1123 label of at most 63 characters")
    if len(set(queues.namespaces)) != len(queues.namespaces):
        problems.add("queues.namespaces", "lists a namespace twice", "list each namespace once")
    levels = [("low", queues.priority_classes.low), ("medium", queues.priority_classes.medium), ("high", queues.priority_classes.high)]
    for level, priority in levels:
        if not is_k8s_name(priority.name):
            problems.add(f"queues.priorityClasses.{level}.name", f"{priority.name!r} is not a Kubernetes object name", "use lowercase letters, digits and hyphens")
    for (lower, low), (higher, high) in zip(levels, levels[1:]):
        if low.value >= high.value:
            problems.add(
                f"queues.priorityClasses.{higher}.value",
                f"{high.value} is not above {lower} ({low.value}), so it could not preempt it",
                f"set a value above {low.value}",
            )


# --- Documentation ---------------------------------------------------------------------


def documented_settings(cls: type = StackConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, description) for every setting, in schema order, for the README table."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = join(prefix, camel(f.name))
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(documented_settings(tp, key))
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        rows.append((key, _render_default(default), f.metadata["doc"]))
        nested = next((a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)), None)
        if nested is not None:
            rows.extend(documented_settings(nested, key + ("[]" if typing.get_origin(tp) is list else "")))
    return rows


def _render_default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if dataclasses.is_dataclass(value):
        value = _to_config_value(value)
    elif isinstance(value, list):
        value = [_to_config_value(v) for v in value]
    return json.dumps(value) if not isinstance(value, str) else (value or '""')


def _to_config_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {camel(f.name): _to_config_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [_to_config_value(v) for v in value]
    return value
