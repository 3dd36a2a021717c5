"""The `network`, `cluster`, `tpu` and `images` blocks of the stack config, their derived facts and rules.

Their defaults are the reference deployment (two 4x4x4 TPU7x cubes on a reservation block).
Every rule reports under the config key that fixes it and collects into one ``Problems``.
"""

from __future__ import annotations

import bisect
import contextlib
import ipaddress
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Final, Literal

from annotated_types import Predicate
from dateutil import rrule
from pydantic import Field, StringConstraints
from pydantic.alias_generators import to_snake

from components import naming
from components.config_base import DOCKER_HUB, HINT, SECRET_SETTING, SECRET_VERSION, Block, Problems, form, kind
from components.tpu import topology

TPU7X_MIN_GKE_VERSION = "1.34.0-gke.2201000"
NO_UPGRADES_MAX_DAYS = 30
# How many exclusions a cluster takes: 20 in all, 3 of them NO_UPGRADES (GKE's "Maintenance windows and exclusions",
# Limitations: cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions; the 20 in the
# provider's maintenance_exclusion, hashicorp/terraform-provider-google website/docs/r/container_cluster.html.markdown).
EXCLUSIONS_MAX = 20
NO_UPGRADES_EXCLUSIONS_MAX = 3
# GKE refuses a maintenance window that leaves less than 48 hours of maintenance in some 32 days, counting only
# stretches of at least 4 hours in a row ("Configure maintenance windows and exclusions", Considerations when
# configuring a maintenance window: cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-exclusions;
# terraform-google-modules/terraform-google-kubernetes-engine says the same above its cluster's maintenance_policy).
MAINTENANCE_MIN_HOURS = 48
MAINTENANCE_PERIOD_DAYS = 32
MAINTENANCE_MIN_STRETCH_HOURS = 4
# a year of windows of any sensible rule; more (FREQ=DAILY with a BYMINUTE of every minute) are not followed
_MAINTENANCE_OCCURRENCES_MAX = 5000
# The frequencies GKE refuses for a recurring maintenance window: "The FREQ values of HOURLY, MINUTELY, and SECONDLY
# are not supported" (RecurringTimeWindow.recurrence, googleapis/googleapis@f8291d2b
# google/container/v1/cluster_service.proto).
MAINTENANCE_FREQUENCIES_REFUSED = ("HOURLY", "MINUTELY", "SECONDLY")
PROXY_ONLY_MAX_PREFIX = 26
# What each node the stack makes takes of its ranges: an address of the node range, where Google Cloud keeps four
# of every subnet's primary range (cloud.google.com/vpc/docs/subnets, "Reserved IPv4 addresses in subnets"), and a /24
# of the Pod range, for GKE Standard's default of 110 Pods per node, which the pools keep; "Node creation is limited by
# the number of available addresses in the Pod address range" (cloud.google.com/kubernetes-engine/docs/how-to/
# flexible-pod-cidr, "CIDR ranges for Standard clusters" and "Restrictions").
SUBNET_RESERVED_ADDRESSES = 4
NODE_POD_RANGE_ADDRESSES = 256
# The ranges no subnet range, primary or secondary, may hold any of: Google Cloud refuses a subnet range that matches,
# is narrower or is broader than one (Google's "Subnets" page, cloud.google.com/vpc/docs/subnets, "Prohibited IPv4
# subnet ranges" and "Limitations for IPv4 subnet ranges"; Google's public netblocks, also refused, are not listed).
SUBNET_PROHIBITED_RANGES = {
    ipaddress.IPv4Network("0.0.0.0/8"): "the current network (RFC 1122)",
    ipaddress.IPv4Network("127.0.0.0/8"): "the local host (RFC 1122)",
    ipaddress.IPv4Network("169.254.0.0/16"): "link-local addresses (RFC 3927)",
    ipaddress.IPv4Network("224.0.0.0/4"): "multicast (RFC 5771)",
    ipaddress.IPv4Network("255.255.255.255/32"): "the limited broadcast address (RFC 919)",
    ipaddress.IPv4Network("199.36.153.4/30"): "restricted.googleapis.com (Private Google Access)",
    ipaddress.IPv4Network("199.36.153.8/30"): "private.googleapis.com (Private Google Access)",
}
# The RFC ranges a subnet range may use (the same page, "Valid IPv4 ranges"); every other address outside the
# prohibited ranges is a privately used public one. A subnet range lies within one of these, or outside them all: the
# page refuses one that spans two of them, or one of them and privately used public addresses.
SUBNET_RFC_RANGES = tuple(
    ipaddress.IPv4Network(cidr)
    for cidr in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "240.0.0.0/4",
    )
)
# An authorized network wider than this admits too much of the internet to be a restriction.
AUTHORIZED_NETWORK_MIN_PREFIX = 8
# How many ranges GKE's authorized networks take: "cidr_blocks define up to 50 external networks"
# (MasterAuthorizedNetworksConfig, googleapis/googleapis@f8291d2b google/container/v1/cluster_service.proto).
AUTHORIZED_NETWORKS_MAX = 50
NAT_LOGGING_OFF = "OFF"

# [0-9], not \d: Python's and pydantic's regex take any Unicode digit for \d ("1.3٦6.0" was read as 1.366)
_GKE_VERSION = re.compile(r"^([0-9]+)\.([0-9]+)\.([0-9]+)-gke\.([0-9]+)$")
# A Cloud KMS key's resource name, as GKE's databaseEncryption.keyName and a node pool's bootDiskKmsKey take it. The
# Secrets' key is in the cluster's location: GKE takes no "global" key there (hashicorp/terraform-provider-google
# v7.45.0, google/services/container/resource_container_cluster_test.go, TestAccContainerCluster_withDatabaseEncryption).
# A boot disk's key may be the region's (the same release's resource_container_node_pool_test.go and
# resource_container_cluster_test.go, TestAccContainerNodePool_withConfidentialBootDisk and
# TestAccContainerCluster_withBootDiskKmsKey) or global (the examples of `gcloud compute disks update-kms-key`,
# docs.cloud.google.com/sdk/gcloud/reference/compute/disks/update-kms-key): no location is refused for it.
# A key ring's and a key's IDs match [a-zA-Z0-9_-]{1,63} (Cloud KMS API, CreateKeyRingRequest.key_ring_id and
# CreateCryptoKeyRequest.crypto_key_id, cloud.google.com/dotnet/docs/reference/Google.Cloud.Kms.V1/latest) and a
# location is lowercase letters, digits and hyphens: [^/]+ took a space, a non-ASCII letter or a final newline
# ("cryptoKeys/k\n", a YAML `|` scalar), which pydantic's `$` does not stop. The project is checked on its own.
_KMS_KEY = r"projects/[^/]+/locations/[a-z0-9-]+/keyRings/[A-Za-z0-9_-]{1,63}/cryptoKeys/[A-Za-z0-9_-]{1,63}"
# Binary Authorization's evaluation modes a cluster takes (GKE's BinaryAuthorization.EvaluationMode, as the
# provider validates binary_authorization.evaluation_mode: hashicorp/terraform-provider-google v7.45.0
# google/services/container/resource_container_cluster.go): none, or enforcement of the project's singleton policy.
BINARY_AUTHORIZATION_OFF: Final = "DISABLED"
BINARY_AUTHORIZATION_ENFORCED: Final = "PROJECT_SINGLETON_POLICY_ENFORCE"
# Google Groups for RBAC reads one group of the organisation's domain, of this name only (the provider's
# authenticator_groups_config.security_group, v7.45.0, same file: "gke-security-groups@yourdomain.com"); the
# groups RBAC bindings name are its members.
RBAC_SECURITY_GROUP_NAME = "gke-security-groups"
_RBAC_SECURITY_GROUP = rf"^{RBAC_SECURITY_GROUP_NAME}@([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z]{{2,}}$|^$"


# The names a stack file sets, each a GCP resource name (naming.GCP_NAME); GKE's clusters and node pools are shorter.
_GCP_NAME_FORM = Field(
    json_schema_extra=form(
        "Google Cloud name", "use lowercase letters, digits and hyphens, starting with a letter and not ending with one"
    ),
    examples=["example"],
)


def _gcp_name(max_length: int, *, or_empty: bool = False) -> StringConstraints:
    """A GCP resource name of at most ``max_length`` characters; ``or_empty``: or nothing."""
    pattern = f"^({naming.GCP_NAME})?$" if or_empty else f"^{naming.GCP_NAME}$"
    return StringConstraints(pattern=pattern, max_length=max_length)


GcpName = Annotated[str, _gcp_name(naming.COMPUTE_NAME_MAX), _GCP_NAME_FORM]
GcpNameOrEmpty = Annotated[str, _gcp_name(naming.COMPUTE_NAME_MAX, or_empty=True), _GCP_NAME_FORM]
GkeName = Annotated[str, _gcp_name(naming.GKE_NAME_MAX), _GCP_NAME_FORM]
GkeNameOrEmpty = Annotated[str, _gcp_name(naming.GKE_NAME_MAX, or_empty=True), _GCP_NAME_FORM]
_PROJECT_ID_FORM = Field(json_schema_extra=form("project ID", f"use {naming.PROJECT_ID_FORM}"), examples=["my-project"])
ProjectId = Annotated[str, StringConstraints(pattern=f"^{naming.PROJECT_ID}$"), _PROJECT_ID_FORM]
ProjectIdOrEmpty = Annotated[str, StringConstraints(pattern=f"^({naming.PROJECT_ID})?$"), _PROJECT_ID_FORM]
KmsKeyOrEmpty = Annotated[
    str,
    StringConstraints(pattern=f"^({_KMS_KEY})?$"),
    Field(
        json_schema_extra=form(
            "Cloud KMS key name", "write projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>"
        ),
        examples=[""],
    ),
]


@dataclass(frozen=True, order=True)
class GkeVersion:
    """A GKE version string (``1.36.0-gke.3712000``), parsed so floors compare numerically."""

    major: int
    minor: int
    patch: int
    gke: int

    @classmethod
    def parse(cls, text: str) -> GkeVersion:
        match = _GKE_VERSION.match(text) if isinstance(text, str) else None
        if not match:
            raise ValueError(f"{text!r} is not a full GKE version (MAJOR.MINOR.PATCH-gke.N)")
        return cls(*(int(g) for g in match.groups()))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}-gke.{self.gke}"

    @property
    def minor_alias(self) -> str:
        """``1.36``: GKE's alias for the newest patch of this minor that the channel offers."""
        return f"{self.major}.{self.minor}"


# When GKE ends standard support of each minor (its release schedule,
# https://cloud.google.com/kubernetes-engine/docs/release-schedule, "End of standard support"), read from
# the copy in endoflife-date/endoflife.date products/google-kubernetes-engine.md at a70eca33 (2026-08-22)
# and checked against the GKE release notes. 1.34 is the one uncertain row: the schedule first said
# "2026-Q4" (endoflife.date then wrote 2026-10-01 as a placeholder), a later copy of it says 2027-01-25,
# which is 14 months after 1.34 reached the Regular channel (release notes, 2025-11-28); we use the
# later date. From then on the Regular channel no longer offers the minor for new clusters (only
# Extended does), and GKE upgrades clusters on it. A minor below the table is long past it.
GKE_END_OF_STANDARD_SUPPORT = {
    (1, 31): date(2026, 1, 16),
    (1, 32): date(2026, 4, 11),
    (1, 33): date(2026, 8, 3),
    (1, 34): date(2027, 1, 25),
    (1, 35): date(2027, 4, 11),
    (1, 36): date(2027, 8, 9),
}


def channel_floor_problem(
    floor: str, channel: str, newest_of_minor: str | None, channel_default: str | None
) -> tuple[str, str] | None:
    """Whether the release channel offers a patch of the floor's minor at or above the floor: (problem, fix).

    ``newest_of_minor`` is the channel's newest version of that minor here (get_engine_versions with the
    minor as prefix: release_channel_latest_version[channel]), None when it offers none. A new cluster
    asks for the minor alias and gets the channel's newest patch of it, so it meets the floor exactly when
    that patch does.
    """
    wanted = GkeVersion.parse(floor)
    default = f" (its default is {channel_default})" if channel_default else ""
    if newest_of_minor is None:
        return (
            f"the {channel} channel offers no {wanted.minor_alias} version here{default}: "
            "a new cluster cannot start at this floor",
            "set a floor of a minor the channel offers, such as its default",
        )
    try:
        newest = GkeVersion.parse(newest_of_minor)
    except ValueError:
        return None  # not a full version: nothing to compare
    if newest >= wanted:
        return None
    return (
        f"the newest {wanted.minor_alias} version the {channel} channel offers here is {newest}, below the floor "
        f"{wanted}: a new cluster would start below what its slicing needs",
        "set a floor the channel offers, or wait for the patch",
    )


@dataclass(frozen=True)
class NodeBoot:
    """How a node pool's nodes boot, both fixed when the pool is made (each field is ForceNew on the node pool:
    hashicorp/terraform-provider-google v7.45.0 google/services/container/node_config.go, `boot_disk_kms_key` and
    `shielded_instance_config.enable_secure_boot`)."""

    boot_disk_key: str  # the Cloud KMS key of the boot disk; "" for Google's default encryption
    secure_boot: bool


# How every TPU pool was made before the stack hardened its nodes' boot, and how one with hardenedBoot false still is.
UNHARDENED_BOOT = NodeBoot(boot_disk_key="", secure_boot=False)


# --- Service agents and their grants on the Cloud KMS keys -------------------------------------


@dataclass(frozen=True)
class ServiceAgent:
    """A Google-managed service agent of the stack's project: the identity a Google service uses a key as.

    ``service``: the API whose enablement makes it. ``made_on_request``: Service Usage's generateServiceIdentity
    makes it (and answers its address) for that service, so the stack asks for it before a grant; otherwise the
    agent is there once the API's enablement is done. Its address, service-<project number>@<domain>.iam.
    gserviceaccount.com, is written from the project number, as Google's list of service agents gives it
    (cloud.google.com/iam/docs/service-agents, read through GoogleCloudPlatform/cloud-foundation-fabric@11c1d248
    modules/project/service-agents.yaml, 2026-07-21, which the module derives every agent's address from too).
    """

    service: str
    domain: str
    title: str  # Google's name of the agent, for the reader
    made_on_request: bool

    def member(self, project_number: str) -> str:
        return f"serviceAccount:service-{project_number}@{self.domain}.iam.gserviceaccount.com"


# GKE encrypts the cluster's Secrets in etcd as its service agent (CIS GKE 5.3.1, kube-bench cfg/gke-1.9.0
# managedservices.yaml's remediation; hashicorp/terraform-provider-google-beta v7.45.0
# google-beta/services/container/resource_container_cluster_test.go grants this agent before a cluster with
# database_encryption). generateServiceIdentity makes it: Google's list marks it the primary agent of
# container.googleapis.com (cloud-foundation-fabric@11c1d248 service-agents.yaml, `is_primary: true`; its
# service-agents.tf makes exactly the primary agents with google_project_service_identity).
GKE_SERVICE_AGENT = ServiceAgent(
    "container.googleapis.com", "container-engine-robot", "Kubernetes Engine Service Agent", made_on_request=True
)
# The nodes' boot disks are Compute Engine disks, encrypted and decrypted by Compute Engine's agent (gcloud's reference
# of `compute disks update-kms-key`; v7.45.0 resource_container_node_pool_test.go grants it before a pool with
# boot_disk_kms_key). generateServiceIdentity refuses compute.googleapis.com ("not configured for service identities":
# terraform-google-modules/terraform-google-project-factory#628, 2021-10-09; the three answers it gives are in
# hashicorp/terraform-provider-google#18649, 2024-09-30), and Google's list does not mark this agent primary. It is
# there once the Compute Engine API is enabled: Fabric grants it roles right after that enablement, and it is not
# among the agents Fabric's tools/build_service_agents.py lists as made later than the enablement (SKIP_IAM_AGENTS).
COMPUTE_SERVICE_AGENT = ServiceAgent(
    "compute.googleapis.com", "compute-system", "Compute Engine Service Agent", made_on_request=False
)
# Artifact Registry reads a remote repository's upstream password as its service agent (Artifact Registry "Configure
# authentication to remote repository upstreams": service-PROJECT_NUMBER@gcp-sa-artifactregistry.iam.gserviceaccount.com
# gets the Secret Accessor role on the secret); generateServiceIdentity makes it (the primary agent of
# artifactregistry.googleapis.com in cloud-foundation-fabric@11c1d248 service-agents.yaml).
ARTIFACT_REGISTRY_SERVICE_AGENT = ServiceAgent(
    "artifactregistry.googleapis.com",
    "gcp-sa-artifactregistry",
    "Artifact Registry Service Agent",
    made_on_request=True,
)
# What a service agent needs on a customer-managed key to encrypt and decrypt with it (both GKE guides above).
KMS_ENCRYPTER_DECRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"

# The deployer's permissions for each read of the cloud (invoke) the program makes at preview and `up`: the read's
# token -> (the permissions, what they are held on, the source). A read is every call its data source makes whose
# failure fails it (hashicorp/terraform-provider-google-beta v7.45.0, what pulumi-gcp 10.2.0 runs: getProject also
# asks Cloud Billing's getBillingInfo, which takes resourcemanager.projects.get; getReservation lists the
# reservation's blocks and getReservationBlock the block's sub-blocks; getBucket's own GET of the project, unasked
# when the provider knows it, fails soft). tests/test_deployer_reads.py fails on a read not here, and
# docs/deploying.md's list is generated from it (tools/config_table.py).
DEPLOYER_READS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "gcp:organizations/getProject:getProject": (
        ("resourcemanager.projects.get",),
        "the project",
        "cloud.google.com/resource-manager/reference/rest/v3/projects/get, "
        "cloud.google.com/billing/docs/reference/rest/v1/projects/getBillingInfo",
    ),
    "gcp:container/getEngineVersions:getEngineVersions": (
        ("container.clusters.list",),
        "the project",
        # Google's api-permissions page lists clusters, nodePools and operations only, not getServerConfig
        "no Google page names getServerConfig's permission; container.clusters.list per "
        "cloudpilot-ai/karpenter-provider-gcp#403, which dropped a container.clusters.getServerConfig that does not "
        "exist",
    ),
    "gcp:compute/getReservation:getReservation": (
        ("compute.reservations.get", "compute.reservationBlocks.list"),
        "the reservation's project",
        "cloud.google.com/compute/docs/reference/rest/v1/reservations/get, .../beta/reservationBlocks/list",
    ),
    "gcp:compute/getReservationBlock:getReservationBlock": (
        ("compute.reservationBlocks.get", "compute.reservationSubBlocks.list"),
        "the reservation's project",
        "cloud.google.com/compute/docs/reference/rest/beta/reservationBlocks/get, .../v1/reservationSubBlocks/list",
    ),
    "gcp:compute/getReservationSubBlock:getReservationSubBlock": (
        ("compute.reservationSubBlocks.get",),
        "the reservation's project",
        "cloud.google.com/compute/docs/reference/rest/v1/reservationSubBlocks/get",
    ),
    "gcp:storage/getBucket:getBucket": (
        ("storage.buckets.get",),
        "the weights bucket",
        "cloud.google.com/storage/docs/json_api/v1/buckets/get",
    ),
    "gcp:secretmanager/getSecretVersion:getSecretVersion": (
        ("secretmanager.versions.get",),
        "the secret",
        "cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/get",
    ),
    "gcp:kms/getKMSCryptoKey:getKMSCryptoKey": (
        ("cloudkms.cryptoKeys.get",),
        "the Cloud KMS key",
        "cloud.google.com/kms/docs/reference/rest/v1/projects.locations.keyRings.cryptoKeys/get",
    ),
    "gcp:artifactregistry/getRepository:getRepository": (
        ("artifactregistry.repositories.get",),
        "the image mirror",
        "cloud.google.com/artifact-registry/docs/reference/rest/v1/projects.locations.repositories/get",
    ),
    "gcp:container/getCluster:getCluster": (
        ("container.clusters.get",),
        "the cluster made elsewhere",
        "cloud.google.com/kubernetes-engine/docs/reference/api-permissions (projects.locations.clusters.get)",
    ),
    "gcp:compute/getSubnetworks:getSubnetworks": (
        ("compute.subnetworks.list",),
        "that cluster's VPC's project",
        "cloud.google.com/compute/docs/reference/rest/v1/subnetworks/list",
    ),
    "gcp:compute/getSubnetwork:getSubnetwork": (
        ("compute.subnetworks.get",),
        "that cluster's VPC's project",
        "cloud.google.com/compute/docs/reference/rest/v1/subnetworks/get",
    ),
}


@dataclass(frozen=True)
class KmsKey:
    """A Cloud KMS key's resource name, parsed (its setting's pattern holds its form: KmsKeyOrEmpty)."""

    name: str  # projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>
    project: str
    location: str
    ring: str
    key: str

    @classmethod
    def parse(cls, name: str) -> KmsKey:
        _, project, _, location, _, ring, _, key = name.split("/")
        return cls(name, project, location, ring, key)

    @property
    def where(self) -> str:
        """The gcloud flags of its location and project."""
        return f"--location {self.location} --project {self.project}"


@dataclass(frozen=True)
class KeyGrant:
    """One service agent's grant on one key: made once however many settings and pools use the key through it."""

    key: KmsKey
    agent: ServiceAgent
    setting: str  # the setting that names the key
    uses: tuple[str, ...]  # what the agent encrypts with it, for the reader

    @property
    def name(self) -> str:
        """The grant's resource name: unique per (key, agent) in one project."""
        return f"{self.key.location}-{self.key.ring}-{self.key.key}-{self.agent.domain}"

    def in_project(self, project: str) -> bool:
        return self.key.project == project


# --- Schema ----------------------------------------------------------------------------


# Cloud NAT dynamic port allocation: powers of two, at least 32 ports a VM, at most 65536
# (RouterNat enable_dynamic_port_allocation, hashicorp/terraform-provider-google v7.45.0
# google/services/compute/resource_compute_router_nat.go).
_NAT_PORTS = form("power of two from 32 to 65536", "dynamic port allocation takes powers of two, e.g. 64 and 4096")
NatPorts = Annotated[int, Field(ge=32, le=65536, json_schema_extra=_NAT_PORTS), Predicate(lambda n: n & (n - 1) == 0)]


class NatConfig(Block):
    # RouterNat log_config.filter, and OFF for no logs.
    logging: Literal["ERRORS_ONLY", "TRANSLATIONS_ONLY", "ALL", "OFF"] = Field(
        "ERRORS_ONLY",
        description="Cloud NAT logs: ERRORS_ONLY (connections it dropped), TRANSLATIONS_ONLY, ALL or OFF.",
        json_schema_extra=kind("Cloud NAT log filter"),
    )
    min_ports_per_vm: NatPorts = Field(
        64, description="Ports each node always holds for its outside connections (a power of two, 32 or more)."
    )
    max_ports_per_vm: NatPorts = Field(
        4096,
        description="Ports a node may hold while it needs them (dynamic port allocation: image pulls, the weights staging); "
        "a power of two above minPortsPerVm, at most 65536.",
    )


class FlowLogsConfig(Block):
    enabled: bool = Field(
        True,
        description="VPC Flow Logs on the node subnet (CIS GKE 5.6.1): a sample of every flow of the nodes and pods.",
    )
    sampling: float = Field(
        0.5, description="Share of the flows reported, above 0 and at most 1 (Google Cloud's default 0.5).", gt=0, le=1
    )


# The names derived from network.prefix are `<prefix>-<suffix>`, each suffix a hyphen and words: each is a GCP name
# (naming.GCP_NAME) of at most COMPUTE_NAME_MAX characters where the prefix starts with a letter, holds lowercase
# letters, digits and hyphens only, and leaves room for the longest suffix.
_NETWORK_SUFFIX_MAX = max(map(len, [*naming.network_names("").values(), *naming.secondary_range_names("").values()]))


class NetworkConfig(Block):
    prefix: str = Field(
        "qwen-serving",
        description="Prefix of the VPC, subnet, firewall, router and NAT names (`<prefix>-main`, `-tpu`, `-proxy`, `-router`, "
        "`-nat`).",
        pattern=r"^[a-z][-a-z0-9]*$",
        max_length=naming.COMPUTE_NAME_MAX - _NETWORK_SUFFIX_MAX,
        json_schema_extra=form(
            "network name prefix", "use lowercase letters, digits and hyphens, starting with a letter"
        ),
        examples=["qwen-serving"],
    )
    mtu: int = Field(8896, description="VPC MTU; 8896 gives TPU hosts jumbo frames (1300-8896).", ge=1300, le=8896)
    node_cidr: str = Field("10.10.0.0/18", description="Primary range of the node subnet.")
    pod_cidr: str = Field("10.12.0.0/14", description="Secondary range for pods (`<prefix>-pods`).")
    service_cidr: str = Field("10.16.0.0/20", description="Secondary range for services (`<prefix>-services`).")
    proxy_only_cidr: str = Field(
        "172.16.0.0/26",
        description="Proxy-only subnet for the internal Gateway (/26 or larger); the serving NetworkPolicies admit the Gateway's "
        "proxies from it (on a cluster made elsewhere: that region's proxy-only range).",
    )
    nat: NatConfig = Field(
        NatConfig(),
        description="Cloud NAT (a Cloud Router and NAT in the region) for the node subnet, made when cluster.privateNodes is true: "
        "the private nodes' way to registries outside Google, Hugging Face and the package index.",
    )
    flow_logs: FlowLogsConfig = Field(FlowLogsConfig(), description="VPC Flow Logs of the node subnet.")


class SystemPoolConfig(Block):
    machine_type: str = Field(
        "n2-standard-32",
        description="Machine type of the system (non-TPU) node pool.",
        pattern=r"^[a-z][a-z0-9]*-[a-z0-9-]+$",
        json_schema_extra=form("machine type", "use a type such as n2-standard-32"),
        examples=["n2-standard-32"],
    )
    nodes_per_zone: int = Field(1, description="System nodes in each zone of the region.", ge=1)

    @property
    def nodes(self) -> int:
        """The pool's nodes: GKE spreads a regional cluster's pool over three zones of its region (GKE's "Regional
        clusters": cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters)."""
        return self.nodes_per_zone * 3


class MaintenanceWindowConfig(Block):
    start: str = Field(description="RFC 3339 start of the first window, e.g. 2026-01-03T04:00:00Z.")
    end: str = Field(
        description="RFC 3339 end of the first window. GKE needs windows of 4 hours or more that leave it 48 hours in "
        "every 32 days."
    )
    recurrence: str = Field(
        "FREQ=WEEKLY;BYDAY=SA,SU",
        description="RFC 5545 RRULE for the window.",
        pattern="^FREQ=",
        json_schema_extra=form("recurrence rule (RRULE)", "write e.g. FREQ=WEEKLY;BYDAY=SA,SU"),
        examples=["FREQ=WEEKLY;BYDAY=SA,SU"],
    )


class MaintenanceExclusionConfig(Block):
    name: GcpName = Field(description="Exclusion name.")
    start: str = Field(description="RFC 3339 start time.")
    end: str = Field(description="RFC 3339 end time.")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        "NO_MINOR_UPGRADES",
        description="NO_UPGRADES (at most 30 days), NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES.",
        json_schema_extra=kind("scope"),
    )


class ExistingClusterConfig(Block):
    kubeconfig: str = Field(
        "",
        description="Kubeconfig of a cluster to deploy the Kubernetes layer onto (set with --secret); the stack then "
        "creates no Google Cloud network, cluster or TPU pools.",
        json_schema_extra=SECRET_SETTING,
    )
    name: GkeNameOrEmpty = Field(
        "",
        description="Name of an existing GKE cluster to deploy onto instead (with location); skips the Google Cloud layer.",
        json_schema_extra={HINT: "copy it from `gcloud container clusters list`"},
    )
    location: str = Field("", description="Region or zone of that GKE cluster.")
    skip_await: bool = Field(
        False,
        description="Do not wait for the Gateway to be programmed or Jobs to finish: for a control plane that runs no "
        "workloads (the integration lab), with platform.install and serving.router.install false.",
    )

    @property
    def enabled(self) -> bool:
        return bool(self.kubeconfig or self.name)

    def identifier(self, project: str, name: str) -> str:
        """The Kubernetes provider's clusterIdentifier of this cluster, named ``name`` (ClusterConfig.target_name): a
        kubeconfig's cluster goes by the stack's name for it, as its credentials name no cluster. The identity of the
        cluster the stack deploys onto, not its endpoint or credentials, which rotate. A new one replaces the provider,
        and with it every object of the stack (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go,
        DiffConfig)."""
        return f"kubeconfig/{name}" if self.kubeconfig else cluster_identifier(project, self.location, name)


class AuthorizedNetworkConfig(Block):
    cidr: str = Field(description="An IPv4 range that may reach the control plane's public IP, a.b.c.d/n.")
    name: str = Field(
        description="What the range is (GKE's display name), e.g. office-vpn.",
        pattern=r"\S",  # not empty, nor blank
        json_schema_extra=form("name for the range", "say what the range is, e.g. office-vpn (GKE shows it)"),
        examples=["office-vpn"],
    )


class ControlPlaneConfig(Block):
    dns_endpoint: bool = Field(
        True,
        description="GKE's DNS-based endpoint takes requests from outside Google Cloud, each authorized by IAM "
        "(container.clusters.connect); the stack's kubeconfig and Kubernetes provider then use it.",
    )
    # GKE's ControlPlaneEndpointsConfig.IPEndpointsConfig (googleapis/googleapis@f8291d2b
    # google/container/v1/cluster_service.proto).
    ip_endpoint: Literal["public", "private", "off"] = Field(
        "public",
        description="The IP-based endpoints: public (a public and a private IP), private (the VPC only) or off (the DNS-based "
        "endpoint only).",
        json_schema_extra=kind("IP endpoint mode"),
    )
    authorized_networks: list[AuthorizedNetworkConfig] = Field(
        [],
        max_length=AUTHORIZED_NETWORKS_MAX,
        description="With ipEndpoint public: the only ranges its public IP admits, at most 50 (empty: every address).",
    )


class ClusterConfig(Block):
    name: GkeName = Field("qwen-serving-cluster", description="GKE cluster name (at most 40 characters).")
    version: str = Field(
        topology.SUB_SLICING_MIN_GKE_VERSION,
        description="Minimum control-plane version; must meet the floor of the slicing in use.",
        pattern=_GKE_VERSION.pattern,
        json_schema_extra=form("full GKE version", "write MAJOR.MINOR.PATCH-gke.N, such as 1.36.0-gke.3712000"),
        examples=[topology.SUB_SLICING_MIN_GKE_VERSION],
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = Field(
        "RAPID", description="Release channel; dynamic slicing needs RAPID.", json_schema_extra=kind("release channel")
    )
    deletion_protection: bool = Field(True, description="Refuse `pulumi destroy` of the cluster while true.")
    system_pool: SystemPoolConfig = Field(SystemPoolConfig(), description="The system node pool.")
    node_service_account_id: str = Field("", description="Node service account id; empty means `<cluster>-nodes`.")
    private_nodes: bool = Field(
        True,
        description="Nodes have internal addresses only (every node pool and the cluster's default for new ones); their way out "
        "is the Cloud NAT of network.nat.",
    )
    control_plane: ControlPlaneConfig = Field(
        ControlPlaneConfig(), description="How the control plane is reached: its DNS-based and IP-based endpoints."
    )
    maintenance_window: MaintenanceWindowConfig | None = Field(
        None, description="Optional recurring maintenance window."
    )
    maintenance_exclusions: list[MaintenanceExclusionConfig] = Field(
        [],
        max_length=EXCLUSIONS_MAX,
        description="Optional maintenance exclusions (need a maintenance window): at most 20, 3 of them NO_UPGRADES, each "
        "of its own name.",
    )
    secrets_encryption_key: KmsKeyOrEmpty = Field(
        "",
        description="Cloud KMS key that encrypts the cluster's Secrets in etcd (application-layer secrets encryption, CIS GKE "
        "5.3.1): projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>, made beforehand in the cluster's region. The "
        "stack grants it to GKE's service agent when the key is in its own project; a key of another project is "
        "granted by hand (the preview says how). Empty: Google's default encryption only.",
    )
    boot_disk_encryption_key: KmsKeyOrEmpty = Field(
        "",
        description="Cloud KMS key that encrypts the boot disk of every node (CMEK, CIS GKE 5.9.2): the system pool's, the TPU "
        "pools' (but those with tpu.pools[].hardenedBoot false) and the cluster's first default pool's, "
        "projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>, made beforehand. The stack grants it to Compute "
        "Engine's service agent when the key is in its own project; a key of another project is granted by hand (the "
        "preview says how). A pool takes it only when made: setting or changing it replaces the pools. Empty: "
        "Google's default encryption only.",
    )
    binary_authorization: Literal["DISABLED", "PROJECT_SINGLETON_POLICY_ENFORCE"] = Field(
        BINARY_AUTHORIZATION_OFF,
        description="Binary Authorization's evaluation mode (CIS GKE 5.1.4): PROJECT_SINGLETON_POLICY_ENFORCE admits a pod only if "
        "the project's Binary Authorization policy (the organisation's, made outside the stack) allows its images; "
        "DISABLED admits every image.",
        json_schema_extra=kind("Binary Authorization evaluation mode"),
    )
    rbac_security_group: str = Field(
        "",
        pattern=_RBAC_SECURITY_GROUP,
        json_schema_extra=form(
            f"{RBAC_SECURITY_GROUP_NAME}@<domain> group (GKE reads the groups of RBAC from that group only)",
            f"name the organisation's group, e.g. {RBAC_SECURITY_GROUP_NAME}@example.com, made in its Google Workspace "
            "or Cloud Identity",
        ),
        examples=[f"{RBAC_SECURITY_GROUP_NAME}@example.com"],
        description="Google Groups for RBAC (CIS GKE 5.8.2): the organisation's group gke-security-groups@<domain>, made "
        "beforehand, whose member groups RoleBindings may name; empty: RBAC knows users and service accounts only.",
    )
    # Turned on for a running cluster, GKE restarts its control plane and nodes (gcloud's help of
    # --enable-intra-node-visibility, google-cloud-sdk 578.0.0 lib/googlecloudsdk/command_lib/container/flags.py).
    intranode_visibility: bool = Field(
        False,
        description="Pod-to-pod traffic within a node goes through the VPC too, so flow logs and firewall rules see it (CIS GKE "
        "5.6.1). Turning it on restarts the control plane and every node of a running cluster.",
    )
    secret_manager: bool = Field(
        False,
        description="GKE's Secret Manager add-on: pods mount Secret Manager secrets as files (CSI driver "
        "secrets-store-gke.csi.k8s.io), as serving.hfTokenSecretVersion needs. Turn it off only in the `up` after "
        "the one that stops the pods mounting from it.",
    )
    existing: ExistingClusterConfig = Field(
        ExistingClusterConfig(),
        description="A cluster made elsewhere to deploy onto (the Google Cloud layer is then skipped).",
    )

    @property
    def system_pool_boot(self) -> NodeBoot:
        """How the system pool's nodes (and those of the cluster's first default pool) boot: secure boot always, on
        general-purpose machine types GKE makes Shielded."""
        return NodeBoot(self.boot_disk_encryption_key, secure_boot=True)

    @property
    def binary_authorization_enforced(self) -> bool:
        return self.binary_authorization == BINARY_AUTHORIZATION_ENFORCED

    @property
    def node_account_id(self) -> str:
        """The node service account id in use: the configured one, or ``<cluster>-nodes``."""
        return self.node_service_account_id or naming.node_service_account_id(self.name)

    @property
    def target_name(self) -> str:
        """The name of the cluster the stack deploys onto: cluster.existing.name, else cluster.name (which also names
        the cluster of an existing kubeconfig)."""
        return self.existing.name or self.name


def cluster_identifier(project: str, location: str, name: str) -> str:
    return f"projects/{project}/locations/{location}/clusters/{name}"


_FROM_RESERVATIONS_LIST: dict[str, Any] = {HINT: "copy it from `gcloud compute reservations list`"}


class ReservationConfig(Block):
    name: GcpNameOrEmpty = Field(
        "",
        description="Reservation the TPU pools consume (an All Capacity mode reservation for TPU7x).",
        json_schema_extra=_FROM_RESERVATIONS_LIST,
    )
    block: GcpNameOrEmpty = Field(
        "", description="Reservation block, e.g. block-0.", json_schema_extra=_FROM_RESERVATIONS_LIST
    )
    project: ProjectIdOrEmpty = Field(
        "", description="Project owning the reservation; empty means the stack's project."
    )
    accept_risk: bool = Field(
        False,
        description="Place new TPU pools even where the preview finds the block degraded, not ready, without a ready, healthy, "
        "free sub-block for each new pool (or hosts, for other machines), or the reservation unreadable: it then warns "
        "instead of refusing, and GKE may fail the create or place a pool on degraded hardware. A missing "
        "reservation, block or sub-block is refused either way.",
    )

    def owner(self, project: str) -> str:
        """The project that owns the reservation: its own setting, or else the stack's ``project``."""
        return self.project or project


class TpuPoolConfig(Block):
    name: GkeName = Field(description="Node pool name.")
    node_count: int = Field(description="Nodes in the pool: chips of its topology / chips per host.")
    topology: str = Field("4x4x4", description="Slice topology of the pool; a 4x4x4 cube for dynamic slicing.")
    sub_block: GcpNameOrEmpty = Field(
        "",
        description="Optional reservation sub-block the pool is pinned to.",
        json_schema_extra={HINT: "use the sub-block name from `gcloud compute reservations sub-blocks list`"},
    )
    private_nodes: bool | None = Field(
        None,
        description="Overrides cluster.privateNodes for this pool: to move a running stack's cubes to private nodes one per `up` "
        "(each loses its slices while GKE changes it) and keep serving on the others.",
    )
    hardened_boot: bool = Field(
        True,
        description="The pool's nodes boot hardened as the stack says: a boot disk encrypted with cluster.bootDiskEncryptionKey "
        "and secure boot (tpu.secureBoot). false: neither, as every pool made before them. Both are set only when a "
        "pool is made, so a change replaces the pool and gives up its cube until it is made again: false on every "
        "pool but one lets a running stack replace its cubes one per `up` and keep serving on the others.",
    )


class TpuConfig(Block):
    zone: str = Field("us-central1-ai1a", description="Zone of the TPU node pools (inside `region`).")
    machine_type: str = Field(topology.TPU7X, description="TPU machine type of every TPU pool.")
    workload_policy_name: GcpName = Field(
        "superslice-policy", description="HIGH_THROUGHPUT workload policy for TPU7x cubes."
    )
    reservation: ReservationConfig = Field(ReservationConfig(), description="Reservation the TPU pools are bound to.")
    pools: list[TpuPoolConfig] = Field(
        [TpuPoolConfig(name="tpu7-pool-1", node_count=16), TpuPoolConfig(name="tpu7-pool-2", node_count=16)],
        description="TPU node pools; for TPU7x one pool per 4x4x4 cube.",
    )
    slice_shapes: list[str] = Field(
        ["2x2x2", "4x4x8"],
        description="Dynamic slice shapes the platform admits (drives version floor and Kueue levels).",
    )
    protect_pools: bool = Field(False, description="Mark TPU pools `protect` so a stray change cannot delete them.")
    secure_boot: bool | None = Field(
        None,
        description="Secure boot on the TPU pools' nodes (Shielded GKE Nodes, CIS GKE 5.5.7; tpu.pools[].hardenedBoot false "
        "leaves a pool without). Unset: on for a machine type GKE is known to make with it (tpu7x-standard-4t), off "
        "for the others (ct5lp-hightpu-4t). A pool takes it only when made: a change replaces the pools.",
    )

    # Derived facts, computed once here so validation, components and reports agree.

    @property
    def machine(self) -> topology.MachineType:
        return topology.MACHINE_CATALOG[self.machine_type]

    @property
    def dynamic_slicing(self) -> bool:
        """Whether the machine type slices dynamically (TPU7x); safe to ask while validating an unknown machine type."""
        machine = topology.MACHINE_CATALOG.get(self.machine_type)
        return bool(machine and machine.dynamic_slicing)

    @property
    def shapes_parse(self) -> bool:
        return all(topology.try_shape(s) for s in self.slice_shapes)

    @property
    def shapes(self) -> list[topology.Shape]:
        """``slice_shapes`` parsed (ask ``shapes_parse`` first while validating)."""
        return [topology.Shape.parse(s) for s in self.slice_shapes]

    @property
    def cubes(self) -> int:
        return len(self.pools) if self.dynamic_slicing else 0

    @property
    def total_chips(self) -> int:
        return sum(topology.Shape.parse(p.topology).chips for p in self.pools)

    @property
    def total_nodes(self) -> int:
        return sum(p.node_count for p in self.pools)

    def zone_is_ai_zone(self, region: str) -> bool:
        return bool(re.match(rf"^{re.escape(region)}-ai[0-9]+[a-z]$", self.zone))

    def pool_private_nodes(self, pool: TpuPoolConfig, cluster: ClusterConfig) -> bool:
        """Whether ``pool``'s nodes have internal addresses only: its own setting, else the cluster's."""
        return cluster.private_nodes if pool.private_nodes is None else pool.private_nodes

    @property
    def secure_boot_on(self) -> bool:
        """Whether the stack asks for secure boot on its TPU pools: its setting, else whether GKE is known to make
        the machine type's nodes with it (safe to ask while validating an unknown machine type)."""
        if self.secure_boot is not None:
            return self.secure_boot
        machine = topology.MACHINE_CATALOG.get(self.machine_type)
        return bool(machine and machine.secure_boot_known)

    def pool_boot(self, pool: TpuPoolConfig, cluster: ClusterConfig) -> NodeBoot:
        """How ``pool``'s nodes boot: the stack's boot hardening, or none where the pool opts out."""
        if not pool.hardened_boot:
            return UNHARDENED_BOOT
        return NodeBoot(cluster.boot_disk_encryption_key, self.secure_boot_on)

    def reservation_path(self, pool: TpuPoolConfig, project: str) -> str | None:
        """The reservation (block, sub-block) ``pool`` consumes, in ``project`` unless the reservation's own."""
        reservation = self.reservation
        if not reservation.name:
            return None
        path = f"projects/{reservation.owner(project)}/reservations/{reservation.name}"
        if reservation.block:
            path += f"/reservationBlocks/{reservation.block}"
            if pool.sub_block:
                path += f"/reservationSubBlocks/{pool.sub_block}"
        return path

    def capacity_lines(self) -> list[str]:
        """What the pools hold: nodes, chips, cubes and slices of each shape at once."""
        head = f"{len(self.pools)} pool(s) of {self.machine_type}: {self.total_nodes} nodes, {self.total_chips} chips"
        if not self.cubes:
            return [head]
        fits = ", ".join(f"{topology.slices_that_fit(shape, self.cubes)} x {shape}" for shape in self.shapes)
        return [
            f"{head}, {self.cubes} cube(s) of {topology.CUBE}",
            f"slices that fit at once: {fits or 'none configured'}",
        ]


# An Artifact Registry Docker repository: <location>-docker.pkg.dev/<project>/<repository> (Artifact Registry's
# repository paths; a repository id is a lowercase letter, then lowercase letters, digits and hyphens, at most 63).
# Both matched whole (fullmatch): re.match's `$` also matches before a final newline, so the mirror
# "us-docker.pkg.dev/my-project/mirror\n" (a YAML `|` scalar) passed with the repository id "mirror\n".
_ARTIFACT_REGISTRY_REPOSITORY = re.compile(
    r"(?P<location>[a-z]+(?:-[a-z]+[0-9]*)?)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repository>[^/]+)"
)
_REPOSITORY_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class MirrorRepository:
    """The Artifact Registry repository ``images.mirror`` names: what the nodes' read grant is scoped to."""

    location: str
    project: str
    repository: str

    @property
    def name(self) -> str:
        """Its resource name, as Artifact Registry's API names it."""
        return f"projects/{self.project}/locations/{self.location}/repositories/{self.repository}"


# Docker Hub's limit on the pulls of an unauthenticated client: 10 an hour per IPv4 address or IPv6 /64 subnet (its
# usage and limits page, docker/docs content/manuals/docker-hub/usage/_index.md at 0d14e0d9; docker/docs#22134); a
# free Personal account has 100 an hour, paid ones none. The one registry the stack pulls from whose limit per address
# its owner publishes: registry -> (pulls, per what, for whom).
PULL_RATE_LIMITS = {DOCKER_HUB: (10, "an hour per IPv4 address", "anonymous pulls")}


# Registries Google serves: Artifact Registry (`<location>-docker.pkg.dev`) and Container Registry's hosts (gcr.io and
# its regional ones), which private nodes reach over Private Google Access (Artifact Registry is reached at the
# default Google APIs domains or private.googleapis.com: cloud.google.com/artifact-registry/docs/securing-with-vpc-sc),
# never through Cloud NAT. No pull-through repository is made for them: the JAX and Saxml images are in Google's
# public repositories there.
def is_google_registry(registry: str) -> bool:
    return registry == "gcr.io" or registry.endswith((".pkg.dev", ".gcr.io"))


# A Docker ID: 4 to 30 lowercase letters and digits (Docker's General FAQs, "What is a Docker ID?", docker/docs
# content/admin/faqs/general-faqs.md at dca05f51). A Docker Hub access token has an underscore (dckr_pat_...), so it is
# never taken for a username. Matched whole (fullmatch): `$` also matches before a final newline ("myorgbot\n").
_DOCKER_ID = re.compile(r"[a-z0-9]{4,30}")


class PullThroughConfig(Block):
    enabled: bool | None = Field(
        None,
        description="Artifact Registry remote repositories the nodes pull through, made by the stack in its project and region: one "
        "per registry outside Google the stack's images come from (Docker Hub, ghcr.io, registry.k8s.io, quay.io), each "
        "caching what it serves; the nodes may read those repositories only. Unset: on where a node is private and "
        "images.mirror is empty (every pull from outside Google would otherwise leave through Cloud NAT's few "
        "addresses); never on a cluster made elsewhere. An alternative to images.mirror, not a complement.",
    )
    docker_hub_username: str = Field(
        "",
        description="Docker ID the Docker Hub repository pulls as (with dockerHubPasswordSecretVersion). Empty: anonymously, under "
        "Docker Hub's limit for the addresses Artifact Registry pulls from, which other projects share.",
    )
    docker_hub_password_secret_version: str = Field(
        "",
        description="Secret Manager secret version in the stack's project holding that account's password or access "
        "token, projects/<project>/secrets/<secret>/versions/<n> (or latest): never the password itself. The stack "
        "grants Artifact Registry's service agent read on the secret.",
    )

    @property
    def docker_hub_credentials(self) -> bool:
        return bool(self.docker_hub_username and self.docker_hub_password_secret_version)


class ImagesConfig(Block):
    mirror: str = Field(
        "",
        description="Artifact Registry Docker repository every image is pulled from, `<location>-docker.pkg.dev/<project>/"
        "<repository>`, made and filled outside the stack: an image `<registry>/<path>:<tag>[@<digest>]` is pulled as "
        "`<mirror>/<registry>/<path>` with the same tag and digest (Docker Hub's images under docker.io/). Empty: each "
        "image from its own registry, or through pullThrough.",
    )
    pull_through: PullThroughConfig = Field(
        PullThroughConfig(), description="Pull-through repositories the stack makes for the registries outside Google."
    )
    require_digests: bool | None = Field(
        None,
        description="Refuse at preview an image without a @sha256 digest. Unset: required on a production stack, not elsewhere; "
        "false on a production stack is allowed and warned about at every preview.",
    )

    @property
    def mirror_repository(self) -> MirrorRepository | None:
        """The repository ``mirror`` names; None where it is empty or names none."""
        match = _ARTIFACT_REGISTRY_REPOSITORY.fullmatch(self.mirror)
        return MirrorRepository(**match.groupdict()) if match else None

    def digests_required(self, production: bool) -> bool:
        return production if self.require_digests is None else self.require_digests

    def pull_through_on(self, private_nodes: bool, existing_cluster: bool) -> bool:
        """Whether the stack makes pull-through repositories: as set, else where a node is private and no mirror
        serves the images. Never on a cluster made elsewhere (whose nodes' account the stack does not know, so could
        not grant read; preview refuses true there)."""
        if existing_cluster or self.mirror:
            return False
        return private_nodes if self.pull_through.enabled is None else self.pull_through.enabled


@dataclass(frozen=True)
class RemoteRepository:
    """An Artifact Registry remote repository the stack makes for one registry (images.pullThrough)."""

    registry: str  # the registry it proxies: docker.io, ghcr.io, registry.k8s.io, quay.io
    project: str
    location: str
    repository_id: str
    name: str  # the registry's part of the id (docker-io), which names the stack's resources for the repository

    @property
    def path(self) -> str:
        """Where the nodes pull from it: <location>-docker.pkg.dev/<project>/<repository>."""
        return f"{self.location}-docker.pkg.dev/{self.project}/{self.repository_id}"

    @property
    def docker_hub(self) -> bool:
        """Docker Hub has its own preset upstream (DOCKER_HUB); any other registry is named by its URL."""
        return self.registry == DOCKER_HUB

    @property
    def upstream(self) -> str:
        """What the repository proxies, as its create states it: the preset's name, or the registry's URL."""
        return "DOCKER_HUB" if self.docker_hub else f"https://{self.registry}"


def remote_repositories(registries: list[str], project: str, region: str, cluster_name: str) -> list[RemoteRepository]:
    """One remote repository per registry outside Google among ``registries``, in the order given, each once. Its id
    is ``<cluster>-<registry with . and : as ->``: the cluster's name keeps two stacks of a project apart, and the
    registry's keeps its repositories apart (qwen-serving-cluster-docker-io)."""
    names = {r: re.sub(r"[^a-z0-9]+", "-", r.lower()).strip("-") for r in registries if not is_google_registry(r)}
    return [RemoteRepository(r, project, region, f"{cluster_name}-{n}", n) for r, n in names.items()]


# --- Rules -----------------------------------------------------------------------------


def validate_network(network: NetworkConfig, nodes: int, problems: Problems) -> None:
    """``nodes``: how many the stack's node pools make (none on a cluster made elsewhere)."""
    keys = ("nodeCidr", "podCidr", "serviceCidr", "proxyOnlyCidr")
    parsed = {key: _ipv4_range(f"network.{key}", getattr(network, to_snake(key)), problems) for key in keys}
    ranges = {key: cidr for key, cidr in parsed.items() if cidr is not None}
    for key, cidr in ranges.items():
        _validate_subnet_range(f"network.{key}", cidr, problems)
    for first, second in itertools.combinations(ranges, 2):
        if ranges[first].overlaps(ranges[second]):
            problems.add(
                f"network.{second}",
                f"{ranges[second]} overlaps network.{first} {ranges[first]}",
                "give every subnet and secondary range its own addresses",
            )
    taken = {  # what the nodes take of each range, and how
        "nodeCidr": (
            nodes + SUBNET_RESERVED_ADDRESSES,
            f"one each, and the {SUBNET_RESERVED_ADDRESSES} of a subnet Google Cloud keeps",
        ),
        "podCidr": (nodes * NODE_POD_RANGE_ADDRESSES, "a /24 each, for GKE's 110 Pods per node"),
    }
    for key, (needed, how) in taken.items():
        if (given := ranges.get(key)) and given.num_addresses < needed:
            problems.add(
                f"network.{key}",
                f"{given} has {given.num_addresses} addresses, and the {nodes} nodes of the stack's pools take {needed} "
                f"({how}): GKE fails to create the nodes past them",
                # (a running stack's Pod range is not changed: the lifecycle review refuses it, fewer nodes remain)
                f"use a /{32 - (needed - 1).bit_length()} or larger range, or make fewer nodes",
            )
    proxy = ranges.get("proxyOnlyCidr")
    if proxy and proxy.prefixlen > PROXY_ONLY_MAX_PREFIX:
        problems.add(
            "network.proxyOnlyCidr",
            f"{proxy} is smaller than /{PROXY_ONLY_MAX_PREFIX}",
            f"the regional managed proxy needs a /{PROXY_ONLY_MAX_PREFIX} or larger range",
        )
    _validate_nat(network.nat, problems)


def _validate_subnet_range(key: str, cidr: ipaddress.IPv4Network, problems: Problems) -> None:
    """``cidr`` is a range Google Cloud takes for a subnet: none of the prohibited addresses, and within one RFC range
    or outside them all."""
    if prohibited := [f"{r}, {what}" for r, what in SUBNET_PROHIBITED_RANGES.items() if cidr.overlaps(r)]:
        problems.add(
            key,
            f"{cidr} overlaps {'; '.join(prohibited)}: Google Cloud refuses those addresses in any subnet range",
            "use a private range, such as one of 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
        )
        return
    spanned = [r for r in SUBNET_RFC_RANGES if cidr.overlaps(r)]
    if spanned and not cidr.subnet_of(spanned[0]):
        problems.add(
            key,
            f"{cidr} is broader than {' and '.join(map(str, spanned))}: Google Cloud takes a subnet range within one "
            "RFC range it lists, or outside them all (privately used public addresses), never across",
            f"use a range within {spanned[0]}",
        )


def _ipv4_range(key: str, text: str, problems: Problems) -> ipaddress.IPv4Network | None:
    """``text`` as an IPv4 range, or None after a problem under ``key``."""
    try:
        return ipaddress.IPv4Network(text)
    except ValueError as error:
        problems.add(
            key, f"{text!r} is not an IPv4 CIDR range ({error})", "write it as a.b.c.d/n with no host bits set"
        )
        return None


def _validate_nat(nat: NatConfig, problems: Problems) -> None:
    # a minimum that failed to parse holds its default here: not compared
    if nat.max_ports_per_vm <= nat.min_ports_per_vm and "network.nat.minPortsPerVm" not in problems.unparsed:
        problems.add(
            "network.nat.maxPortsPerVm",
            f"{nat.max_ports_per_vm} is not above minPortsPerVm {nat.min_ports_per_vm}",
            "set a larger maximum (dynamic port allocation needs one above the minimum)",
        )


def validate_cluster(cluster: ClusterConfig, tpu: TpuConfig, problems: Problems, today: date) -> None:
    """``today``: the date the end-of-support table is read at (the preview's)."""
    _validate_existing(cluster.existing, problems)
    if problem := naming.service_account_id_problem(cluster.node_account_id):
        key = "cluster.nodeServiceAccountId" if cluster.node_service_account_id else "cluster.name"
        problems.add(key, problem, "set cluster.nodeServiceAccountId to a 6-30 character id")
    if tpu.dynamic_slicing and cluster.release_channel != "RAPID":
        problems.add("cluster.releaseChannel", "dynamic slicing is only offered on the RAPID channel", "set RAPID")
    _validate_version(cluster, tpu, problems, today)
    _validate_maintenance(cluster, problems)
    _validate_control_plane(cluster.control_plane, problems)


def _validate_control_plane(control_plane: ControlPlaneConfig, problems: Problems) -> None:
    if control_plane.ip_endpoint == "off" and not control_plane.dns_endpoint:
        problems.add(
            "cluster.controlPlane.ipEndpoint",
            "is off while cluster.controlPlane.dnsEndpoint is false: nothing outside Google could reach the control "
            "plane, this stack's own `pulumi up` included",
            "turn the DNS-based endpoint on (IAM decides who reaches it), or set the IP endpoint private or public",
        )
    networks = control_plane.authorized_networks
    if networks and control_plane.ip_endpoint != "public":
        problems.add(
            "cluster.controlPlane.authorizedNetworks",
            f"lists ranges, but only a public IP endpoint admits by authorized networks (ipEndpoint is "
            f"{control_plane.ip_endpoint!r})",
            "remove them, or set cluster.controlPlane.ipEndpoint public",
        )
    seen: dict[ipaddress.IPv4Network, int] = {}
    for i, network in enumerate(networks):
        key = f"cluster.controlPlane.authorizedNetworks[{i}]"
        if (cidr := _ipv4_range(f"{key}.cidr", network.cidr, problems)) is None:
            continue
        if cidr.prefixlen < AUTHORIZED_NETWORK_MIN_PREFIX:
            problems.add(
                f"{key}.cidr",
                f"{cidr} admits {cidr.num_addresses} addresses: that is no restriction",
                f"list the ranges clients really come from (/{AUTHORIZED_NETWORK_MIN_PREFIX} or narrower), or reach "
                "the control plane through the DNS-based endpoint",
            )
        elif cidr in seen:
            problems.add(f"{key}.cidr", f"{cidr} is listed at [{seen[cidr]}] already", "list each range once")
        seen.setdefault(cidr, i)


def validate_encryption_keys(cluster: ClusterConfig, region: str, problems: Problems) -> None:
    """The Cloud KMS keys of the cluster's Secrets and of its nodes' boot disks, each when set (its form: its
    setting's pattern): of a project ID; the Secrets' in the cluster's region."""
    for key, name in (
        ("cluster.secretsEncryptionKey", cluster.secrets_encryption_key),
        ("cluster.bootDiskEncryptionKey", cluster.boot_disk_encryption_key),
    ):
        if name and (problem := naming.project_id_problem(KmsKey.parse(name).project)):
            problems.add(key, f"its project: {problem}", "name the project that holds the key")
    if cluster.secrets_encryption_key:
        location = KmsKey.parse(cluster.secrets_encryption_key).location
        if location != region:
            problems.add(
                "cluster.secretsEncryptionKey",
                f"is in {location}, not in the cluster's region {region}: GKE takes a key of the cluster's "
                "location only",
                f"make the key ring in {region}",
            )


def key_grants(cluster: ClusterConfig, tpu: TpuConfig) -> list[KeyGrant]:
    """Every (key, service agent) the cluster and its pools need granted, once each: the Secrets' key to GKE's agent,
    every boot disk's key (the system pool's, the cluster's first default pool's, each hardened TPU pool's) to
    Compute Engine's. None for a cluster made elsewhere (the stack sets neither key there)."""
    if cluster.existing.enabled:
        return []
    uses: dict[tuple[str, ServiceAgent], tuple[str, list[str]]] = {}

    def use(key: str, agent: ServiceAgent, setting: str, what: str) -> None:
        if key:
            uses.setdefault((key, agent), (setting, []))[1].append(what)

    use(cluster.secrets_encryption_key, GKE_SERVICE_AGENT, "cluster.secretsEncryptionKey", "the cluster's Secrets")
    boot = "cluster.bootDiskEncryptionKey"
    use(cluster.system_pool_boot.boot_disk_key, COMPUTE_SERVICE_AGENT, boot, "the system pool's boot disks")
    use(cluster.system_pool_boot.boot_disk_key, COMPUTE_SERVICE_AGENT, boot, "the cluster's first default pool's")
    for pool in tpu.pools:
        use(tpu.pool_boot(pool, cluster).boot_disk_key, COMPUTE_SERVICE_AGENT, boot, f"TPU pool {pool.name}'s")
    return [KeyGrant(KmsKey.parse(key), agent, setting, tuple(what)) for (key, agent), (setting, what) in uses.items()]


def key_grant_warnings(grants: list[KeyGrant], project: str) -> list[str]:
    """What preview says of a key in another project: the stack grants nothing there (its run may not administer that
    project's keys), so the grant is the operator's, before the first `up` that uses the key. The agent exists once
    its API is enabled in this project (or, GKE's, once asked for)."""
    lines = []
    # the agent's address needs the project number, which the shell asks gcloud for (as projectNumber)
    number = f"$(gcloud projects describe {project} --format='value(projectNumber)')"
    for grant in grants:
        if grant.in_project(project):
            continue
        agent, key = grant.agent, grant.key
        exists = f"`gcloud services enable {agent.service} --project {project}`"
        if agent.made_on_request:
            exists += f" or `gcloud beta services identity create --service={agent.service} --project {project}`"
        lines.append(
            f"{grant.setting}: the key is in project {key.project}, not this stack's {project}, so the stack "
            f"does not grant it: {agent.title} of {project} needs {KMS_ENCRYPTER_DECRYPTER} on it for "
            f"{', '.join(grant.uses)}, or the create fails. The agent exists once {exists} has run; then grant it "
            f"before the first `up` that uses the key: gcloud kms keys add-iam-policy-binding {key.key} --keyring "
            f'{key.ring} --location {key.location} --project {key.project} --member "{agent.member(number)}" --role '
            f"{KMS_ENCRYPTER_DECRYPTER}"
        )
    return lines


def _validate_existing(existing: ExistingClusterConfig, problems: Problems) -> None:
    if existing.kubeconfig and existing.name:
        problems.add(
            "cluster.existing.name",
            "names a GKE cluster while cluster.existing.kubeconfig gives one too",
            "set one of them",
        )
    if existing.name and not existing.location:
        problems.add("cluster.existing.location", "is required with cluster.existing.name", "set its region or zone")
    if existing.skip_await and not existing.enabled:
        problems.add(
            "cluster.existing.skipAwait",
            "would stop `pulumi up` from waiting for the Gateway and Jobs of a cluster the stack creates",
            "leave it false, or deploy onto an existing cluster",
        )


def validate_skip_await(existing: ExistingClusterConfig, waits: Mapping[str, str], problems: Problems) -> None:
    """cluster.existing.skipAwait is for a control plane that runs no workloads: each setting of ``waits`` that is on
    (its key -> what the `up` would then wait for) would have the `up` wait for pods that never become Ready."""
    if not existing.skip_await:
        return
    for key, what in waits.items():
        problems.add(
            key,
            f"is on with cluster.existing.skipAwait (a control plane that runs no workloads): `pulumi up` would wait "
            f"for {what}, and nothing becomes Ready there",
            "set it false, or cluster.existing.skipAwait false",
        )


def _validate_version(cluster: ClusterConfig, tpu: TpuConfig, problems: Problems, today: date) -> None:
    version = GkeVersion.parse(cluster.version)  # a full GKE version: its field's pattern
    floors = []
    if tpu.machine_type == topology.TPU7X:
        floors.append((TPU7X_MIN_GKE_VERSION, "TPU7x node pools"))
    if tpu.dynamic_slicing and tpu.shapes_parse:
        # Sub-slicing's floor is the higher: with a sub-slice in use, it alone applies.
        shapes = tpu.shapes
        if sub_slices := [str(s) for s in shapes if topology.is_sub_slice(s)]:
            floors.append((topology.SUB_SLICING_MIN_GKE_VERSION, f"sub-slicing ({', '.join(sub_slices)})"))
        elif shapes:
            floors.append((topology.SUPER_SLICING_MIN_GKE_VERSION, "super-slicing"))
    for floor, why in floors:
        if version < GkeVersion.parse(floor):
            problems.add(
                "cluster.version", f"{version} is below {floor}, the minimum for {why}", f"set {floor} or later"
            )
    # None for a minor newer than the table; one older than it is long past its end
    minor = (version.major, version.minor)
    ends = GKE_END_OF_STANDARD_SUPPORT.get(minor, date.min if minor < min(GKE_END_OF_STANDARD_SUPPORT) else None)
    # The Extended channel keeps a minor about 10 months past its end of standard support (GKE's "GKE versioning and
    # support", cloud.google.com/kubernetes-engine/versioning: up to 24 months in all, extended support "available
    # with the Extended channel"; its release notes' table of current versions lists minors below the Regular
    # channel's as available in Extended). The table holds no end of extended support: on that channel a dated row
    # is not refused here, and the preview's lookup of what the channel offers (channel_floor_problem) says the rest.
    if cluster.release_channel == "EXTENDED" and ends != date.min:
        ends = None
    # a cluster made elsewhere is not ours to start
    if ends is not None and ends <= today and not cluster.existing.enabled:
        supported = sorted(minor for minor, end in GKE_END_OF_STANDARD_SUPPORT.items() if end > today)
        newer = ", ".join(f"{major}.{minor}" for major, minor in supported) or "a newer minor"
        problems.add(
            "cluster.version",
            f"GKE ended standard support of {version.minor_alias}"
            + (f" on {ends.isoformat()}" if ends != date.min else "")
            + ": the Regular and Stable channels no longer create clusters at it, and GKE upgrades those on it",
            f"set a floor of a supported minor ({newer}), at most the running cluster's own minor",
        )


# An unquoted time in a stack file is a YAML timestamp, which the Pulumi CLI hands the program as the text of Go's
# time.Time.String() (tools/stack_file.py reads it the same way offline).
_TIMESTAMP_AS_HANDED = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)? [-+][0-9]{4} \S+$"
)


# The RFC 3339 form the provider takes for every time of maintenance_policy: Go's time.Parse with time.RFC3339
# (verify.ValidateRFC3339Date, hashicorp/terraform-provider-google v7.45.0 google/verify/validation.go), whose layout
# is 2006-01-02T15:04:05Z07:00 (a fraction of a second may follow the seconds). Python's fromisoformat takes more of
# ISO 8601 (a space for the T, no seconds, 20260103T040000Z), which the provider refuses before GKE sees it.
_RFC3339_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})")


def _zoned_time(key: str, text: str, problems: Problems) -> datetime | None:
    """``text`` as an RFC 3339 time with a zone, or None after a problem under ``key``."""
    if _RFC3339_TIME.fullmatch(text):  # which requires the zone
        with contextlib.suppress(ValueError):  # a month 13, a day 32
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
    fix = (
        "quote it in the stack file (unquoted, YAML reads it as a timestamp, which Pulumi hands on as this text)"
        if _TIMESTAMP_AS_HANDED.match(text)
        else "write e.g. 2026-01-03T04:00:00Z"
    )
    problems.add(key, f"{text!r} is not an RFC 3339 time with a zone", fix)
    return None


def _validate_window(window: MaintenanceWindowConfig, problems: Problems) -> None:
    key = "cluster.maintenanceWindow"
    frequency = window.recurrence.split(";", 1)[0].removeprefix("FREQ=").upper()  # FREQ comes first: its pattern
    if refused := frequency in MAINTENANCE_FREQUENCIES_REFUSED:
        problems.add(
            f"{key}.recurrence",
            f"{window.recurrence!r} repeats the window {frequency}: GKE takes no FREQ of "
            f"{', '.join(MAINTENANCE_FREQUENCIES_REFUSED)}",
            "repeat it DAILY or less often, e.g. FREQ=DAILY or FREQ=WEEKLY;BYDAY=SA,SU",
        )
    length = _validate_time_range(key, window.start, window.end, problems)
    if length is None or refused:
        return
    begin = datetime.fromisoformat(window.start.replace("Z", "+00:00"))
    try:
        hours = _maintenance_hours(begin, length, window.recurrence)
    except (ValueError, TypeError) as error:
        problems.add(
            f"{key}.recurrence",
            f"{window.recurrence!r} is not an RFC 5545 RRULE ({error})",
            "write e.g. FREQ=WEEKLY;BYDAY=SA,SU",
        )
        return
    if hours is not None and hours < MAINTENANCE_MIN_HOURS:
        problems.add(
            f"{key}.end",
            f"the window ({window.recurrence}, {length} each) leaves {hours:g} hours of maintenance in some "
            f"{MAINTENANCE_PERIOD_DAYS} days, counting stretches of {MAINTENANCE_MIN_STRETCH_HOURS} hours or more only: "
            f"GKE refuses less than {MAINTENANCE_MIN_HOURS}",
            f"make each window {MAINTENANCE_MIN_STRETCH_HOURS} hours or longer and recur often enough, "
            "e.g. 02:00 to 08:00 with FREQ=WEEKLY;BYDAY=SA,SU",
        )


def _validate_time_range(prefix: str, start: str, end: str, problems: Problems) -> timedelta | None:
    begin, finish = _zoned_time(f"{prefix}.start", start, problems), _zoned_time(f"{prefix}.end", end, problems)
    if begin is None or finish is None:
        return None
    if finish <= begin:
        problems.add(f"{prefix}.end", "ends before it starts", "set an end after the start")
        return None
    return finish - begin


def _maintenance_hours(begin: datetime, length: timedelta, recurrence: str) -> float | None:
    """The fewest hours of maintenance a window of ``length`` recurring by ``recurrence`` from ``begin`` leaves in a
    period of MAINTENANCE_PERIOD_DAYS over its first year: occurrences run together where they touch, and a stretch
    shorter than MAINTENANCE_MIN_STRETCH_HOURS counts nothing. None: its occurrences are too many to follow."""
    # Day-of-the-week rules are read in UTC (the same page), so the rule starts from the first window's time in UTC.
    begin = begin.astimezone(UTC)
    year_end, period = begin + timedelta(days=366), timedelta(days=MAINTENANCE_PERIOD_DAYS)
    occurrences = itertools.takewhile(lambda s: s < year_end, rrule.rrulestr(recurrence, dtstart=begin))
    starts: list[datetime] = list(itertools.islice(occurrences, _MAINTENANCE_OCCURRENCES_MAX))
    horizon = year_end if len(starts) < _MAINTENANCE_OCCURRENCES_MAX else starts[-1]
    stretches: list[tuple[datetime, datetime]] = []
    for start in starts:  # in order, each as long: an occurrence that touches the last stretch ends it
        if stretches and start <= stretches[-1][1]:
            stretches[-1] = (stretches[-1][0], start + length)
        else:
            stretches.append((start, start + length))
    counted = [(s, e) for s, e in stretches if e - s >= timedelta(hours=MAINTENANCE_MIN_STRETCH_HOURS)]
    ends = [e for _, e in counted]

    def hours_from(first: datetime) -> float:
        last, total = first + period, timedelta()
        for start, end in counted[bisect.bisect_right(ends, first) :]:
            if start >= last:
                break
            total += min(end, last) - max(start, first)
        return total.total_seconds() / 3600

    # The hours in a period change direction only where its first or last moment meets a stretch's start or end.
    firsts = {begin, *(t for s, e in counted for t in (s, e, s - period, e - period))}
    hours = [hours_from(first) for first in firsts if begin <= first and first + period <= horizon]
    return min(hours) if hours else None


def _validate_maintenance(cluster: ClusterConfig, problems: Problems) -> None:
    window = cluster.maintenance_window
    if window:
        _validate_window(window, problems)
    if cluster.maintenance_exclusions and not window:
        problems.add(
            "cluster.maintenanceExclusions", "exclusions need a maintenance window", "set cluster.maintenanceWindow too"
        )
    no_upgrades = [i for i, exclusion in enumerate(cluster.maintenance_exclusions) if exclusion.scope == "NO_UPGRADES"]
    if len(no_upgrades) > NO_UPGRADES_EXCLUSIONS_MAX:
        problems.add(
            f"cluster.maintenanceExclusions[{no_upgrades[NO_UPGRADES_EXCLUSIONS_MAX]}].scope",
            f"makes {len(no_upgrades)} NO_UPGRADES exclusions (at {', '.join(map(str, no_upgrades))}): GKE takes "
            f"{NO_UPGRADES_EXCLUSIONS_MAX} at most",
            "use NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES for the others, or remove those that have ended",
        )
    # GKE keys the exclusions by name (the container API's MaintenanceWindow.maintenanceExclusions is a map of name to
    # time window), and the provider builds that map from the list (hashicorp/terraform-provider-google
    # google/services/container/resource_container_cluster.go, expandMaintenancePolicy): a second exclusion of one name
    # silently replaces the first.
    named: dict[str, int] = {}
    for i, exclusion in enumerate(cluster.maintenance_exclusions):
        prefix = f"cluster.maintenanceExclusions[{i}]"
        if (first := named.setdefault(exclusion.name, i)) != i:
            problems.add(
                f"{prefix}.name",
                f"{exclusion.name!r} names cluster.maintenanceExclusions[{first}] too: GKE keeps one exclusion of a name",
                "give each exclusion its own name",
            )
        length = _validate_time_range(prefix, exclusion.start, exclusion.end, problems)
        if exclusion.scope == "NO_UPGRADES" and length and length > timedelta(days=NO_UPGRADES_MAX_DAYS):
            problems.add(
                f"{prefix}.end",
                # in hours: whole days would say 30 of 30 days and 5 hours, which is refused
                f"a NO_UPGRADES exclusion may last {NO_UPGRADES_MAX_DAYS} days ({NO_UPGRADES_MAX_DAYS * 24} hours), "
                f"this one {length / timedelta(hours=1):g} hours",
                "shorten it or use NO_MINOR_UPGRADES",
            )


def validate_tpu(tpu: TpuConfig, region: str, problems: Problems) -> None:
    if not tpu.zone.startswith(f"{region}-") or not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+-[a-z0-9]+", tpu.zone):
        problems.add(
            "tpu.zone",
            f"{tpu.zone!r} is not a zone of region {region}",
            f"use a zone such as {region}-a, or change region",
        )
    machine = topology.MACHINE_CATALOG.get(tpu.machine_type)
    if machine is None:
        problems.add(
            "tpu.machineType",
            f"{tpu.machine_type!r} is not a known TPU machine type",
            f"use one of {', '.join(topology.MACHINE_CATALOG)}",
        )
        return
    shapes = _validate_slice_shapes(tpu, machine, problems)
    _validate_pools(tpu, machine, problems)
    _validate_reservation(tpu, machine, problems)
    for i, shape in shapes:  # none unless the machine slices dynamically
        if topology.is_super_slice(shape) and topology.cubes_in(shape) > tpu.cubes:
            problems.add(
                f"tpu.sliceShapes[{i}]",
                f"{shape} needs {topology.cubes_in(shape)} cubes; the stack has {tpu.cubes}",
                "add TPU pools (one per cube) or remove the shape",
            )


def _validate_slice_shapes(
    tpu: TpuConfig, machine: topology.MachineType, problems: Problems
) -> list[tuple[int, topology.Shape]]:
    """The valid shapes, each with its index: none for a machine without dynamic slicing (each a problem)."""
    shapes = []
    for i, text in enumerate(tpu.slice_shapes):
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


def _validate_pools(tpu: TpuConfig, machine: topology.MachineType, problems: Problems) -> None:
    if not tpu.pools:
        problems.add("tpu.pools", "is empty", "declare at least one TPU node pool")
    for i, pool in enumerate(tpu.pools):
        prefix = f"tpu.pools[{i}]"
        if pool.name in (earlier.name for earlier in tpu.pools[:i]):
            problems.add(f"{prefix}.name", f"{pool.name!r} is used by another pool", "give each pool its own name")
        if pool.name == naming.SYSTEM_POOL_NAME:
            problems.add(f"{prefix}.name", f"{pool.name!r} is the system node pool's name", "choose another name")
        # A TPU7x sub-block is one cube of 16 hosts, so it takes one node pool (GKE's All Capacity mode and dynamic
        # slicing pages): the second pool pinned to it would fail its create halfway through the `up`.
        if machine.dynamic_slicing and pool.sub_block:
            first = next(p.name for p in tpu.pools if p.sub_block == pool.sub_block)  # the first pool pinned to it
            if first != pool.name:
                problems.add(
                    f"{prefix}.subBlock",
                    f"sub-block {pool.sub_block!r} is taken by pool {first}: it holds one {topology.CUBE} cube, one pool",
                    "pin each pool to a sub-block of its own, or leave it empty for GKE to choose",
                )
        try:
            shape = topology.Shape.parse(pool.topology)
        except ValueError as error:
            problems.add(f"{prefix}.topology", str(error), "use e.g. 4x4x4")
            continue
        if machine.dynamic_slicing and shape != topology.CUBE:
            problems.add(
                f"{prefix}.topology",
                f"{machine.name} pools are provisioned as whole {topology.CUBE} cubes, not {shape}",
                f"set {topology.CUBE}",
            )
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


def _validate_reservation(tpu: TpuConfig, machine: topology.MachineType, problems: Problems) -> None:
    reservation = tpu.reservation
    if machine.dynamic_slicing:
        # PROVISION_ONLY workload policies only provision from a specific All Capacity reservation.
        for key, value, example in (
            ("name", reservation.name, "my-tpu7x-reservation"),
            ("block", reservation.block, "block-0"),
        ):
            if not value:
                problems.add(
                    f"tpu.reservation.{key}",
                    "is required: TPU7x dynamic-slicing pools consume a specific reservation block",
                    f"set it, e.g. {example}",
                )
    elif reservation.block and not reservation.name:
        problems.add("tpu.reservation.name", "a block is set without its reservation", "set the reservation name")
    if any(p.sub_block for p in tpu.pools) and not reservation.block:
        problems.add(
            "tpu.reservation.block",
            "pools name sub-blocks but no block is set",
            "set the block the sub-blocks belong to",
        )


def validate_images(images: ImagesConfig, problems: Problems) -> None:
    if not images.mirror:
        return
    example = "us-central1-docker.pkg.dev/my-project/mirror"
    repository = images.mirror_repository
    if repository is None:
        problems.add(
            "images.mirror",
            f"{images.mirror!r} is not an Artifact Registry Docker repository (no scheme, no trailing path)",
            f"write <location>-docker.pkg.dev/<project>/<repository>, e.g. {example}",
        )
        return
    if problem := naming.project_id_problem(repository.project):
        problems.add("images.mirror", f"its project: {problem}", f"name the mirror's project, e.g. {example}")
    if not _REPOSITORY_ID.fullmatch(repository.repository):
        problems.add(
            "images.mirror",
            f"{repository.repository!r} is not a repository id: a lowercase letter, then lowercase letters, digits or "
            "hyphens, at most 63",
            f"name the repository, e.g. {example}",
        )


def validate_pull_through(
    images: ImagesConfig,
    project: str,
    pull_through_on: bool,
    existing_cluster: bool,
    repositories: list[RemoteRepository],
    problems: Problems,
) -> None:
    """images.pullThrough: an alternative to the mirror, made only where the stack makes the cluster, with Docker Hub
    credentials that are a Docker ID and a Secret Manager version (never a value that may be the password itself:
    no message here shows it). ``pull_through_on``: whether the stack makes the repositories (``repositories``, none
    where it does not)."""
    pull_through = images.pull_through
    key = "images.pullThrough"
    if pull_through.enabled and images.mirror:
        problems.add(
            f"{key}.enabled",
            "is true and images.mirror is set: the nodes pull every image from the mirror, so pull-through "
            "repositories would cache nothing; the two are alternatives",
            "remove images.mirror to let the stack make the pull-through repositories, or set this false",
        )
    if pull_through.enabled and existing_cluster:
        problems.add(
            f"{key}.enabled",
            "is true on a cluster made elsewhere: the stack does not know its nodes' service account, so could not let "
            "them read the repositories",
            "remove the line, and give that cluster's nodes a mirror they may read (images.mirror)",
        )
    username, secret = pull_through.docker_hub_username, pull_through.docker_hub_password_secret_version
    if username and not _DOCKER_ID.fullmatch(username):
        problems.add(
            f"{key}.dockerHubUsername",
            "is not a Docker ID (4 to 30 lowercase letters and digits); its value is not shown, in case it is a "
            "password or an access token",
            "set the account's Docker ID here, and put its password or access token in Secret Manager "
            "(dockerHubPasswordSecretVersion)",
        )
    if secret:
        named = SECRET_VERSION.fullmatch(secret)
        if named is None:
            problems.add(
                f"{key}.dockerHubPasswordSecretVersion",
                "is not a Secret Manager secret version; its value is not shown, in case it is the password itself",
                f"store the password in a secret, `gcloud secrets create <secret> --project {project} --data-file=-`, "
                f"and write projects/{project}/secrets/<secret>/versions/<number> (or latest)",
            )
        elif named["project"] != project:
            problems.add(
                f"{key}.dockerHubPasswordSecretVersion",
                f"names a secret of project {named['project']!r}, not of the stack's project {project!r}: the stack "
                "enables Secret Manager and grants Artifact Registry's service agent on the secret in its own project "
                "only",
                f"name a secret of {project} by that id, "
                f"projects/{project}/secrets/<secret>/versions/<number> (or latest)",
            )
    if bool(username) != bool(secret):
        missing, given = ("dockerHubPasswordSecretVersion", "dockerHubUsername")[:: 1 if username else -1]
        problems.add(
            f"{key}.{missing}",
            f"is empty while {key}.{given} is set: Artifact Registry signs in to Docker Hub with both or neither",
            "set both, or neither to pull anonymously",
        )
    if (username or secret) and not pull_through_on:
        problems.add(
            f"{key}.dockerHubUsername" if username else f"{key}.dockerHubPasswordSecretVersion",
            "is set, but the stack makes no pull-through repository (images.mirror is set, the nodes are public, "
            "the cluster is made elsewhere, or images.pullThrough.enabled is false)",
            "remove the Docker Hub credentials, or turn pull-through on",
        )
    for repository in repositories:
        if len(repository.repository_id) > 63:
            problems.add(
                "cluster.name",
                f"makes the pull-through repository id {repository.repository_id!r} for {repository.registry} longer "
                "than Artifact Registry's 63 characters",
                "choose a shorter cluster name, or pull that registry's images through images.mirror",
            )


# One Cloud NAT address serves this many source ports (1024-65535), which the VMs' reserved ports share: with automatic
# allocation Cloud NAT adds addresses by the number of VMs and the ports each reserves ("IP addresses and ports",
# cloud.google.com/nat/docs/ports-and-addresses, stored copy docs.cloud.google.com/nat/docs/ports-and-addresses.md.txt).
NAT_PORTS_PER_ADDRESS = 64512


@dataclass(frozen=True)
class ImagePull:
    """Pods that pull one image of a registry when their workload starts."""

    image: str  # as the nodes pull it
    runs: str
    pods: int | None  # None: not counted here, ``unknown`` says why
    unknown: str = "a pod on each node"  # a DaemonSet's; a chart's own Deployment: "as many as its chart makes"


def nat_pull_warning(registry: str, pulls: list[ImagePull], nodes: int, nat: NatConfig) -> str | None:
    """What the preview says when private nodes pull from ``registry``, one with a published limit per address,
    through Cloud NAT: the pods that pull at once, against that limit."""
    if registry not in PULL_RATE_LIMITS or not pulls:
        return None
    limit, per, whom = PULL_RATE_LIMITS[registry]
    counted = sum(pull.pods or 0 for pull in pulls)
    each = "; ".join(
        f"{pull.runs}: {pull.pods if pull.pods is not None else pull.unknown} ({pull.image})" for pull in pulls
    )
    # the NAT addresses the nodes' reserved ports fill: what the registry sees them come from, at least
    addresses = max(1, -(-nodes * nat.min_ports_per_vm // NAT_PORTS_PER_ADDRESS))
    return (
        f"images.pullThrough: the private nodes pull {len(pulls)} image(s) from {registry} directly, through Cloud NAT, "
        f"whose automatic addresses follow the ports the nodes reserve (at least {nodes} nodes x "
        f"network.nat.minPortsPerVm {nat.min_ports_per_vm}: {addresses} address(es) of {NAT_PORTS_PER_ADDRESS} ports). "
        f"Their first `up` starts {counted}{'+' if any(pull.pods is None for pull in pulls) else ''} pods that pull "
        f"from it, each workload's at once ({each}), against its {limit} {whom} {per}; every repair or upgrade of a "
        "TPU pool pulls again. Those past the limit wait in ImagePullBackOff (429 toomanyrequests). Remove "
        "`images.pullThrough.enabled: false` (the stack then proxies the registry through Artifact Registry), or set "
        "images.mirror"
    )
