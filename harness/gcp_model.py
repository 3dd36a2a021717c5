"""The harness's model of a Google Cloud project: which API each call goes through, and which are on.

A new project has almost no API enabled, and Google Cloud answers a call to a disabled API with
403 SERVICE_DISABLED naming it (the message below has the shape of Google's own, e.g. "Kubernetes
Engine API has not been used in project 88979237084 before or it is disabled ... accessNotConfigured",
banzaicloud/cloudinfo#378; the ErrorInfo reason SERVICE_DISABLED with the `service` and `consumer`
metadata is googleapis/googleapis@2f8d204b google/api/error_reason.proto). The mock engine (harness/mock_engine.py) asks this module, for every
Google Cloud resource it creates and every invoke it answers, whether the API is on at that point:
on from the start, or enabled by a `gcp:projects/service:Service` the call waits for (its
dependencies, followed transitively). Waiting is what counts, not the order in which the mocks
happen to register things: a real engine runs everything that does not wait in parallel.

This table is written apart from the program's own list of APIs (components/gcp/project_services.py)
on purpose: a call the program makes through an API it forgot to enable, or before enabling it,
is refused here instead of agreeing with the program's own mistake.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc  # type: ignore[import-untyped]  # grpcio ships no type information (pulumi speaks it)

SERVICE_USAGE = "serviceusage.googleapis.com"
SERVICE_RESOURCE = "gcp:projects/service:Service"

# The API behind each module of pulumi-gcp that the program uses (each resource's and data source's
# "API documentation" link in the provider's docs, terraform-provider-google website/docs/r and /d).
API_OF_MODULE = {
    "artifactregistry": "artifactregistry.googleapis.com",  # RepositoryIamMember: repositories.setIamPolicy
    "compute": "compute.googleapis.com",
    "container": "container.googleapis.com",
    # CryptoKeyIAMMember: cryptoKeys.getIamPolicy / setIamPolicy (hashicorp/terraform-provider-google-beta v7.45.0
    # google-beta/services/kms/iam_kms_crypto_key.go), in the key's project
    "kms": "cloudkms.googleapis.com",
    "monitoring": "monitoring.googleapis.com",
    "organizations": "cloudresourcemanager.googleapis.com",  # getProject: projects.get
    "projects": "cloudresourcemanager.googleapis.com",  # IAMMember: projects.getIamPolicy / setIamPolicy
    "secretmanager": "secretmanager.googleapis.com",  # SecretIamMember: secrets.getIamPolicy / setIamPolicy
    "serviceaccount": "iam.googleapis.com",  # accounts and their IAM members
    "storage": "storage.googleapis.com",
}
SERVICE_IDENTITY_RESOURCE = "gcp:projects/serviceIdentity:ServiceIdentity"
# Calls whose API is not their module's: enabling an API is a Service Usage call, and so is asking for a service's
# agent (services.generateServiceIdentity, Service Usage v1beta1: the provider posts to
# {{ServiceUsageBasePath}}projects/{{project}}/services/{{service}}:generateServiceIdentity, v7.45.0
# google-beta/services/resourcemanager/resource_project_service_identity.go).
API_OF_TOKEN = {SERVICE_RESOURCE: SERVICE_USAGE, SERVICE_IDENTITY_RESOURCE: SERVICE_USAGE}
CLUSTER_RESOURCE = "gcp:container/cluster:Cluster"
NODE_POOL_RESOURCE = "gcp:container/nodePool:NodePool"
SUBNETWORK_RESOURCE = "gcp:compute/subnetwork:Subnetwork"
BINARY_AUTHORIZATION_API = "binaryauthorization.googleapis.com"

# The titles Google's 403 gives each API.
API_TITLES = {
    "artifactregistry.googleapis.com": "Artifact Registry API",
    "binaryauthorization.googleapis.com": "Binary Authorization API",
    "cloudkms.googleapis.com": "Cloud Key Management Service (KMS) API",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
    "compute.googleapis.com": "Compute Engine API",
    "container.googleapis.com": "Kubernetes Engine API",
    "iam.googleapis.com": "Identity and Access Management (IAM) API",
    "logging.googleapis.com": "Cloud Logging API",
    "monitoring.googleapis.com": "Cloud Monitoring API",
    "networkservices.googleapis.com": "Network Services API",
    "secretmanager.googleapis.com": "Secret Manager API",
    "serviceusage.googleapis.com": "Service Usage API",
    "storage.googleapis.com": "Cloud Storage API",
}


class UnmodeledCall(LookupError):
    """A Google Cloud call this model cannot place: add its module to API_OF_MODULE."""


class ServiceDisabled(Exception):
    """Google Cloud's answer to a call of an API the project has not enabled (HTTP 403)."""

    def __init__(self, api: str, project: str, call: str):
        self.api, self.project, self.call = api, project, call
        title = API_TITLES.get(api, api)
        super().__init__(
            f"{call}: googleapi: Error 403: {title} has not been used in project {project} before or it is "
            f"disabled. Enable it by visiting https://console.developers.google.com/apis/api/{api}/overview"
            f"?project={project} then retry. If you enabled this API recently, wait a few minutes for the action "
            f"to propagate to our systems and retry., accessNotConfigured (reason SERVICE_DISABLED, service {api})"
        )


def api_of(token: str) -> str | None:
    """The API a resource type or invoke token goes through; None for what is not Google Cloud's."""
    if not token.startswith("gcp:"):
        return None
    if token in API_OF_TOKEN:
        return API_OF_TOKEN[token]
    module = token.split(":", 2)[1].split("/", 1)[0]
    if module not in API_OF_MODULE:
        raise UnmodeledCall(
            f"the model of Google Cloud does not know which API {token} calls: add {module!r} to API_OF_MODULE"
        )
    return API_OF_MODULE[module]


def input_apis(token: str, inputs: dict[str, Any]) -> list[str]:
    """The APIs a resource needs on because of what its inputs ask, beyond its module's own.

    A cluster that enforces the project's Binary Authorization policy: Binary Authorization's guides have the
    Binary Authorization API enabled before a cluster enforces it, at create and on an existing cluster
    (https://cloud.google.com/binary-authorization/docs/enable-cluster, .../creating-cluster, "Before you begin").
    """
    if token == CLUSTER_RESOURCE:
        mode = (inputs.get("binaryAuthorization") or {}).get("evaluationMode")
        if mode == "PROJECT_SINGLETON_POLICY_ENFORCE":
            return [BINARY_AUTHORIZATION_API]
    return []


# --- Service agents, as generateServiceIdentity answers for them ---------------------------------------

# The agent generateServiceIdentity makes for each service the harness has seen asked, by its address's domain
# (service-<project number>@<domain>.iam.gserviceaccount.com: Google's list of service agents,
# cloud.google.com/iam/docs/service-agents, as GoogleCloudPlatform/cloud-foundation-fabric@11c1d248
# modules/project/service-agents.yaml copies it, 2026-07-21). Written apart from the program's own table
# (components/gcp/config.py) on purpose, like API_OF_MODULE.
SERVICE_IDENTITY_DOMAINS = {
    "container.googleapis.com": "container-engine-robot",
    # Artifact Registry's "Configure authentication to remote repository upstreams": service-PROJECT-NUMBER@
    # gcp-sa-artifactregistry.iam.gserviceaccount.com
    "artifactregistry.googleapis.com": "gcp-sa-artifactregistry",
}
# Services Google answers INVALID_ARGUMENT for: their agents are not made on request (Compute Engine's:
# terraform-google-modules/terraform-google-project-factory#628, 2021-10-09; the error's wording as gcloud prints it
# for another such service, hashicorp/terraform-provider-google#18649, 2024-09-30).
NO_SERVICE_IDENTITY = frozenset({"compute.googleapis.com"})


class ServiceIdentityRefused(Exception):
    """Google Cloud's answer to generateServiceIdentity for a service whose agent is not made on request."""

    def __init__(self, service: str):
        self.service = service
        super().__init__(
            f"{SERVICE_IDENTITY_RESOURCE}: Error creating Service Identity: googleapi: Error 400: Service {service} "
            "has not been configured for service identities., INVALID_ARGUMENT"
        )


def service_identity(service: str, project_number: str) -> dict[str, str]:
    """What generateServiceIdentity answers for ``service`` (the provider's ``email``, and ``member`` made from it):
    ServiceIdentityRefused where Google refuses; UnmodeledCall for a service the model has not been told of."""
    if service in NO_SERVICE_IDENTITY:
        raise ServiceIdentityRefused(service)
    if service not in SERVICE_IDENTITY_DOMAINS:
        raise UnmodeledCall(
            f"the model of Google Cloud does not know what generateServiceIdentity answers for {service}: add it to "
            "SERVICE_IDENTITY_DOMAINS (or NO_SERVICE_IDENTITY) with its source"
        )
    email = f"service-{project_number}@{SERVICE_IDENTITY_DOMAINS[service]}.iam.gserviceaccount.com"
    return {"email": email, "member": f"serviceAccount:{email}"}


class AlreadyExists(Exception):
    """Google Cloud's answer to a create of a name the project holds already (HTTP 409, alreadyExists)."""


# The inputs that name a resource where Google Cloud refuses a second create of one name, and its refusal (googleapi's
# 409 as the provider prints it, formatted with those inputs): where the stack could make two of one name.
NAMED_BY: dict[str, tuple[tuple[str, ...], str]] = {
    # A service account's id in its project (IAM's 409 as terraform-provider-google prints it, quoted in
    # hashicorp/terraform-provider-google#19112).
    "gcp:serviceaccount/account:Account": (
        ("project", "accountId"),
        "Error creating service account: googleapi: Error 409: Service account {accountId} already exists within "
        "project projects/{project}., alreadyExists",
    ),
    # A node pool's name in its cluster: the system pool's and each of tpu.pools' (GKE's 409 as the provider prints it,
    # quoted in terraform-google-modules/terraform-google-kubernetes-engine#367).
    "gcp:container/nodePool:NodePool": (
        ("project", "location", "cluster", "name"),
        "error creating NodePool: googleapi: Error 409: Already exists: projects/{project}/locations/{location}/"
        "clusters/{cluster}/nodePools/{name}., alreadyExists",
    ),
    # A repository's id in its project and location: each pull-through repository's ("For each location in a project,
    # repository names must be unique", Artifact Registry REST reference, projects.locations.repositories `name`;
    # the 409's wording as Terraform's create of a repository that exists prints it in users' reports).
    "gcp:artifactregistry/repository:Repository": (
        ("project", "location", "repositoryId"),
        "Error creating Repository: googleapi: Error 409: the repository already exists., alreadyExists",
    ),
}


def claim_name(token: str, inputs: dict[str, Any], held: set[tuple[Any, ...]]) -> None:
    """Record the name a create of ``token`` takes in ``held`` (what the run made so far); AlreadyExists if taken."""
    if token not in NAMED_BY:
        return
    fields, refusal = NAMED_BY[token]
    name = {field: inputs.get(field) for field in fields}
    claim = (token, *name.values())
    if claim in held:
        raise AlreadyExists(f"{token}: {refusal.format(**name)}")
    held.add(claim)


class NotFound(Exception):
    """Google Cloud's answer to a call on a resource that does not exist (HTTP 404, notFound)."""


class BadRequest(Exception):
    """Google Cloud's answer to a create it finds invalid (HTTP 400, badRequest)."""


def refuse_invalid(token: str, inputs: dict[str, Any]) -> None:
    """BadRequest for a node pool whose placement names the topology of a single-host TPU slice: one host's chips or
    fewer, a machine type's chips being its name's -<n>t (ct5lp-hightpu-4t, tpu7x-standard-4t). GKE's 400 as gcloud
    printed it, quoted in AI-Hypercomputer/xpk#825 (the provider prints googleapi's error after its own words)."""
    if token != "gcp:container/nodePool:NodePool":
        return
    topology = (inputs.get("placementPolicy") or {}).get("tpuTopology")
    host_chips = re.search(r"-([0-9]+)t$", (inputs.get("nodeConfig") or {}).get("machineType", ""))
    if topology and host_chips and math.prod(int(d) for d in topology.split("x")) <= int(host_chips[1]):
        raise BadRequest(
            "error creating NodePool: googleapi: Error 400: TPU topology can't be specified with single-host TPU "
            "slice pool; please remove the tpu_topology from the node pool creation request if the node pool is "
            "intented to run with single-host TPU slice nodes., badRequest"
        )


@dataclass(frozen=True)
class CloudProject:
    """The project a run goes to.

    ``enabled``: the APIs on before the program runs; None means every one (a project prepared by
    hand, the model of the ordinary render). ``fresh``: nothing of the stack exists yet, so in a
    preview an invoke that waits for one of the stack's resources is not run (the engine answers it
    as unknown until that resource is created).
    """

    enabled: frozenset[str] | None = None
    fresh: bool = False
    # The reservations and buckets there; None: what the stack names, ready (harness/mock_engine.py stack_holdings)
    holdings: Holdings | None = None
    # The GKE cluster made elsewhere that the stack looks up (cluster.existing.name) is still being created, its answer
    # without its IP endpoint and masterAuth. mondoohq/mql#858 says such an answer lacks some fields, not which: that
    # these are among them is assumed here, not read from Google's documentation.
    existing_cluster_provisioning: bool = False
    # That cluster is not there (a name or location that names none): GKE's 404, which the provider's data source
    # answers as "projects/<p>/locations/<l>/clusters/<name> not found" (hashicorp/terraform-provider-google
    # google/services/container/data_source_google_container_cluster.go, datasourceContainerClusterRead: the read's
    # 404 clears the id)
    existing_cluster_missing: bool = False
    # The project whose Shared VPC that cluster is on (empty: its own project's default network)
    existing_cluster_host_project: str = ""
    # The permissions the deployer holds (a custom role's); None: every one. A read it lacks one for fails as Google
    # Cloud fails it (permission_denied).
    grants: frozenset[str] | None = None

    @classmethod
    def empty(cls, *already_on: str) -> CloudProject:
        """A new project: only Service Usage (which enabling anything needs), plus ``already_on``."""
        return cls(frozenset({SERVICE_USAGE, *already_on}), fresh=True)

    def holding(self, holdings: Holdings) -> CloudProject:
        """This project, holding ``holdings`` (a reservation's state, a bucket)."""
        return dataclasses.replace(self, holdings=holdings)

    def describe(self) -> str:
        if self.enabled is None:
            return "every API enabled"
        return "only " + ", ".join(sorted(self.enabled)) + " enabled"

    def refusal(
        self, token: str, enabled_by_dependencies: set[str], project: str, inputs: dict[str, Any] | None = None
    ) -> ServiceDisabled | None:
        """What Google Cloud answers a call that waited for the Services that enable ``enabled_by_dependencies``
        (a resource's ``inputs`` may need more APIs than its module's: ``input_apis``)."""
        api = api_of(token)
        if api is None or self.enabled is None:
            return None
        for needed in (api, *input_apis(token, inputs or {})):
            if needed not in self.enabled and needed not in enabled_by_dependencies:
                return ServiceDisabled(needed, project, token)
        return None


@dataclass(frozen=True)
class ReleaseChannel:
    default: str  # the version a new cluster on the channel gets without asking
    valid: tuple[str, ...]  # the versions a new cluster on the channel may ask for, newest first


@dataclass(frozen=True)
class GkeServerConfig:
    """What GKE's getServerConfig answers for one location: the versions each release channel offers."""

    channels: dict[str, ReleaseChannel]

    def engine_versions(self, version_prefix: str) -> dict[str, Any]:
        """get_engine_versions' answer, computed as the provider computes it from getServerConfig
        (hashicorp/terraform-provider-google@0262be69 google/services/container/
        data_source_google_container_engine_versions.go): each channel's default version, and its
        newest valid version that starts with ``version_prefix`` (absent when none does)."""
        latest = {}
        for name, channel in self.channels.items():
            matching = [v for v in channel.valid if v.startswith(version_prefix)]
            if matching:
                latest[name] = matching[0]
        return {
            "releaseChannelDefaultVersion": {name: c.default for name, c in self.channels.items()},
            "releaseChannelLatestVersion": latest,
            "validMasterVersions": sorted(
                {v for c in self.channels.values() for v in c.valid if v.startswith(version_prefix)}, reverse=True
            ),
        }


# --- GKE's control-plane endpoints -------------------------------------------------------------

# A cluster's IP endpoint as the model answers it: an address of the documentation range (RFC 5737).
CLUSTER_IP_ENDPOINT = "203.0.113.10"


def gke_dns_endpoint(project: str, location: str, name: str) -> str:
    """The DNS-based endpoint GKE gives every cluster (ControlPlaneEndpointsConfig.DNSEndpointConfig.endpoint,
    output only and "always present", googleapis/googleapis@f8291d2b google/container/v1/cluster_service.proto,
    whose example is `uid.us-central1.gke.goog`). GKE's names are `gke-` and 36 hex characters, then the
    location (`gke-94fc1769e0c844e99793ee485d88c68c0b39.europe-west1.gke.goog` in kubectl's error quoted by
    GoogleCloudPlatform/gcpdiag#115); the hex here is derived from the cluster's path, so it is stable."""
    unique = hashlib.sha256(f"projects/{project}/locations/{location}/clusters/{name}".encode()).hexdigest()[:36]
    return f"gke-{unique}.{location}.gke.goog"


def cluster_endpoints(inputs: dict[str, Any], subnet_ranges: Mapping[str, str]) -> dict[str, Any]:
    """What GKE reports of a cluster's endpoints once it exists, from the inputs it was given: the DNS-based
    endpoint's name filled in; and as `endpoint`, the public IP address, the private one when the public endpoint
    is off, or with the IP endpoints off the DNS name (what the provider's `endpoint` then holds:
    gke-labs/kube-agents#1806, on a cluster with IP access disabled). ``subnet_ranges``: the primary range of each
    subnetwork the run made, by the id it was given (the private endpoint is an address of one)."""
    endpoints = {key: dict(value) for key, value in (inputs.get("controlPlaneEndpointsConfig") or {}).items()}
    dns = gke_dns_endpoint(inputs["project"], inputs["location"], inputs["name"])
    endpoints.setdefault("dnsEndpointConfig", {})["endpoint"] = dns
    ip_endpoints = endpoints.get("ipEndpointsConfig") or {}
    private = inputs.get("privateClusterConfig") or {}
    if not ip_endpoints.get("enabled", True):
        endpoint = dns
    elif private.get("enablePrivateEndpoint") or ip_endpoints.get("enablePublicEndpoint") is False:
        subnetwork = (
            private.get("privateEndpointSubnetwork")
            or ip_endpoints.get("privateEndpointSubnetwork")
            or inputs.get("subnetwork", "")
        )
        endpoint = cluster_private_endpoint(inputs["name"], subnetwork, subnet_ranges)
    else:
        endpoint = CLUSTER_IP_ENDPOINT
    return {"endpoint": endpoint, "controlPlaneEndpointsConfig": endpoints}


def cluster_private_endpoint(name: str, subnetwork: str, subnet_ranges: Mapping[str, str]) -> str:
    """The cluster's endpoint with its public endpoint off: "the master's internal IP address is used as the cluster
    endpoint" (PrivateClusterConfig.enable_private_endpoint, googleapis/googleapis@f8291d2b
    google/container/v1/cluster_service.proto; the `endpoint` GKE reports is "sometimes the public IP, sometimes
    the private IP", GoogleCloudPlatform/k8s-config-connector#5837). A Private Service Connect cluster's private
    endpoint is an internal address of privateEndpointSubnetwork, else of the cluster's own subnetwork (Google's
    "Private Service Connect" concepts page, harness/gke_network.py); the model gives it the first address of that
    range Google leaves to instances (.0 and .1 are the network's and its gateway's), as it does the cluster made
    elsewhere (harness/gke_network.py, 10.128.0.2)."""
    if subnetwork not in subnet_ranges:
        raise UnmodeledCall(
            f"the model of Google Cloud does not know the range of subnetwork {subnetwork!r}, where the private "
            f"endpoint of cluster {name} would be: make the subnetwork in the same run"
        )
    return str(ipaddress.IPv4Network(subnet_ranges[subnetwork])[2])


# --- The addresses a cluster's nodes take ------------------------------------------------------------


class IpSpaceExhausted(Exception):
    """GKE's failure of a node pool (or a cluster's default pool) whose nodes get no address: the pool's operation
    ends in IP_SPACE_EXHAUSTED (Google Cloud's blog "GKE and the dreaded IP_SPACE_EXHAUSTED error",
    cloud.google.com/blog/products/containers-kubernetes/avoiding-the-gke-ip_space_exhausted-error), each node's
    instance failing as "Instance '<name>' creation failed: IP space of '<subnetwork>' is exhausted."
    (kubernetes/kube-state-metrics#963 quotes it)."""


@dataclass
class NodeAddresses:
    """What the nodes the run made take of the subnetworks it made. Each node takes an address of its subnetwork's
    primary range, of which Google Cloud keeps 4 ("Reserved IPv4 addresses in subnets",
    cloud.google.com/vpc/docs/subnets), and a block of the Pod range: the smallest that holds twice its pool's
    maximum Pods per node, 110 unless the pool or the cluster says otherwise (a /24; GKE's "Configure maximum Pods
    per node", cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr). A pool's nodes are its nodeCount in
    each of its zones: its nodeLocations, else its cluster's, else three of a regional cluster's region (GKE's
    "Regional clusters", cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters), or a zonal one's zone."""

    subnets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # the id each was given -> inputs
    clusters: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # by name, as a pool names its own
    taken: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)  # (subnetwork id, range) -> addresses

    def create(self, token: str, resource_id: str, inputs: dict[str, Any]) -> None:
        """Take the addresses of the nodes a create of ``token`` makes; IpSpaceExhausted if they are not there."""
        if token == SUBNETWORK_RESOURCE:
            self.subnets[resource_id] = inputs
        elif token == CLUSTER_RESOURCE:
            self.clusters[inputs["name"]] = inputs
            # The default pool: the provider deletes it once the cluster exists when asked to, its addresses freed
            # before any other pool is made (removeDefaultNodePool).
            self._take(inputs, inputs, "Cluster", "default-pool", keep=not inputs.get("removeDefaultNodePool"))
        elif token == NODE_POOL_RESOURCE and inputs.get("cluster") in self.clusters:
            self._take(self.clusters[inputs["cluster"]], inputs, "NodePool", inputs["name"], keep=True)

    def _take(self, cluster: dict[str, Any], pool: dict[str, Any], made: str, pool_name: str, keep: bool) -> None:
        subnet = self.subnets.get(cluster.get("subnetwork", ""))
        if subnet is None:  # a subnetwork the run did not make: its other tenants are unknown
            return
        zones = (
            pool.get("nodeLocations")
            or cluster.get("nodeLocations")
            or [cluster["location"]] * (3 if re.fullmatch(r"[a-z]+-[a-z]+[0-9]+", cluster["location"]) else 1)
        )
        nodes = int(pool.get("nodeCount", pool.get("initialNodeCount", 0))) * len(zones)
        max_pods = int(pool.get("maxPodsPerNode") or cluster.get("defaultMaxPodsPerNode") or 110)
        pod_range = (pool.get("networkConfig") or {}).get("podRange") or (cluster.get("ipAllocationPolicy") or {}).get(
            "clusterSecondaryRangeName", ""
        )
        secondary = {r["rangeName"]: r["ipCidrRange"] for r in subnet.get("secondaryIpRanges") or []}
        wanted = {("", subnet["ipCidrRange"]): nodes}
        if pod_range in secondary:
            wanted[(pod_range, secondary[pod_range])] = nodes * (1 << (2 * max_pods - 1).bit_length())
        for (range_name, cidr), addresses in wanted.items():
            key = (cluster["subnetwork"], range_name)
            room = ipaddress.IPv4Network(cidr).num_addresses - (0 if range_name else 4)
            if self.taken.get(key, 0) + addresses > room:
                path = f"projects/{subnet['project']}/regions/{subnet['region']}/subnetworks/{subnet['name']}"
                # The instance's name without the hash and suffix GKE adds; the range named after it is the model's.
                raise IpSpaceExhausted(
                    f"error creating {made} {pool['name']}: IP_SPACE_EXHAUSTED: Instance 'gke-{cluster['name']}-"
                    f"{pool_name}' creation failed: IP space of '{path}' is exhausted. (range: "
                    f"{range_name or 'primary'} {cidr})"
                )
            if keep:
                self.taken[key] = self.taken.get(key, 0) + addresses


# --- Cloud Monitoring dashboards -------------------------------------------------------------------

DASHBOARD_RESOURCE = "gcp:monitoring/dashboard:Dashboard"


def dashboard_id(project_number: str, resource_name: str) -> str:
    """A dashboard's id once it exists: the provider makes it the name projects.dashboards.create answers
    (hashicorp/terraform-provider-google v7.45.0 google/services/monitoring/resource_monitoring_dashboard.go,
    d.SetId(res["name"]); its docs give the id's format, projects/{project_id_or_number}/dashboards/{dashboard_id},
    the API's pattern projects/{project}/dashboards/{dashboard}, googleapis/googleapis@f8291d2b
    google/monitoring/dashboard/v1/dashboard.proto). A dashboard made without a name, as the stack makes them, gets
    one Cloud Monitoring generates, a UUID (the console's links to such dashboards, .../dashboards/builder/
    992bbe3f-17e6-49c4-a9e8-8f1925d4ec24); the model's is derived from the resource's name, so it is stable."""
    digest = hashlib.sha256(resource_name.encode()).digest()[:16]
    return f"projects/{project_number}/dashboards/{uuid.UUID(bytes=digest, version=4)}"


NOTIFICATION_CHANNEL_RESOURCE = "gcp:monitoring/notificationChannel:NotificationChannel"


def notification_channel_name(project: str, resource_name: str) -> str:
    """A notification channel's name (and the provider's id: "{{name}}") once it exists: computed, "The full REST
    resource name for this channel. The syntax is: projects/[PROJECT_ID]/notificationChannels/[CHANNEL_ID] The
    [CHANNEL_ID] is automatically assigned by the server on creation" (hashicorp/terraform-provider-google v7.45.0
    google/services/monitoring/resource_monitoring_notification_channel.go), a number (the form the stack's own
    alerts.notificationChannels takes, components/operations/config.py). The model's number is derived from the
    resource's name, so it is stable."""
    channel_id = int.from_bytes(hashlib.sha256(resource_name.encode()).digest()[:8]) % (9 * 10**18) + 10**18
    return f"projects/{project}/notificationChannels/{channel_id}"


# --- What the project holds: TPU reservations and Cloud Storage buckets ------------------------------
#
# The reads the preview makes (gcp:compute/getReservation, getReservationBlock, getReservationSubBlock,
# gcp:storage/getBucket) are answered from this declared state, as pulumi-gcp 10.2.0 answers them: the
# data sources of hashicorp/terraform-provider-google v7.45.0 (the release it carries), each field under the
# wire name of its result type (pulumi_gcp/compute/get_reservation*.py, storage/get_bucket.py: camelCase, every
# nested block a list of one), filled from the Compute Engine and Cloud Storage APIs' fields (googleapis
# discovery documents compute/v1 revision 20261106 and storage/v1 revision 20261111, in
# google.golang.org/api v0.316.0: ReservationBlock, ReservationSubBlock, GroupMaintenanceInfo, Bucket).

HEALTHY, DEGRADED = "HEALTHY", "DEGRADED"  # ReservationBlockHealthInfo / ReservationSubBlockHealthInfo.healthStatus


@dataclass(frozen=True)
class SubBlock:
    """A reservation sub-block: for TPU7x one 4x4x4 cube of 16 hosts (GKE "Deploy TPUs in All Capacity mode")."""

    name: str
    hosts: int  # `count`: "the number of hosts that are allocated in this reservation subBlock"
    in_use: int = 0  # `inUseCount`: instances running on it
    health: str = HEALTHY
    degraded_hosts: int = 0
    maintenance_pending: int = 0  # hosts with pending maintenance (reservationSubBlockMaintenance)
    status: str = "READY"  # CREATING, DELETING, INVALID, READY
    readable: bool = True  # false: the deployer lacks compute.reservationSubBlocks.get (a custom role)

    def answer(self, reservation: Reservation, block: Block) -> dict[str, Any]:
        """getReservationSubBlock's result (dataSourceGoogleComputeReservationSubBlockRead, v7.45.0)."""
        return {
            **reservation.scope(),
            "name": self.name,
            "reservation": reservation.name,
            "reservationBlock": block.name,
            "id": f"{reservation.path()}/reservationBlocks/{block.name}/reservationSubBlocks/{self.name}",
            "kind": "compute#reservationSubBlock",
            "status": self.status,
            "subBlockCount": self.hosts,
            "inUseCount": self.in_use,
            "healthInfos": [
                {
                    "healthStatus": self.health,
                    "healthyHostCount": self.hosts - self.degraded_hosts,
                    "degradedHostCount": self.degraded_hosts,
                    "healthyInfraCount": 0,
                    "degradedInfraCount": 0,
                }
            ],
            "reservationSubBlockMaintenances": [_maintenance_counts(self.maintenance_pending)],
            "physicalTopologies": [{"cluster": "cluster-a", "block": block.name, "subBlock": self.name}],
        }


@dataclass(frozen=True)
class Block:
    name: str
    sub_blocks: tuple[SubBlock, ...]
    status: str = "READY"

    def answer(self, reservation: Reservation) -> dict[str, Any]:
        """getReservationBlock's result (dataSourceGoogleComputeReservationBlockRead, v7.45.0): the block's counts
        are its sub-blocks' (a block "contains 144 sub-blocks", GKE "Deploy TPUs in All Capacity mode"), its health
        DEGRADED when one of them is."""
        degraded = [s for s in self.sub_blocks if s.health != HEALTHY]
        return {
            **reservation.scope(),
            "name": self.name,
            "reservation": reservation.name,
            "id": f"{reservation.path()}/reservationBlocks/{self.name}",
            "kind": "compute#reservationBlock",
            "status": self.status,
            "blockCount": sum(s.hosts for s in self.sub_blocks),
            "inUseCount": sum(s.in_use for s in self.sub_blocks),
            "reservationSubBlockCount": len(self.sub_blocks),
            "reservationSubBlockInUseCount": sum(1 for s in self.sub_blocks if s.in_use),
            "healthInfos": [
                {
                    "healthStatus": DEGRADED if degraded else HEALTHY,
                    "healthySubBlockCount": len(self.sub_blocks) - len(degraded),
                    "degradedSubBlockCount": len(degraded),
                }
            ],
            "reservationMaintenances": [_maintenance_counts(sum(s.maintenance_pending for s in self.sub_blocks))],
            "physicalTopologies": [{"cluster": "cluster-a", "block": self.name}],
            "subBlockNames": [s.name for s in self.sub_blocks],
        }


@dataclass(frozen=True)
class MaintenanceWindow:
    """An upcoming maintenance of the reservation (GroupMaintenanceInfo.upcomingGroupMaintenance)."""

    start: str  # RFC 3339
    end: str
    type: str = "SCHEDULED"  # SCHEDULED, UNSCHEDULED, MULTIPLE
    status: str = "PENDING"  # PENDING, ONGOING


@dataclass(frozen=True)
class Reservation:
    project: str
    zone: str
    name: str
    machine_type: str
    blocks: tuple[Block, ...]
    maintenance: tuple[MaintenanceWindow, ...] = ()
    readable: bool = True  # false: the deployer may not read it (no compute.reservations.get there)

    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/reservations/{self.name}"

    def scope(self) -> dict[str, str]:
        return {"project": self.project, "zone": self.zone}

    def answer(self) -> dict[str, Any]:
        """getReservation's result: resourceComputeReservationRead and its flatteners (v7.45.0), and the names of
        its blocks, which that read lists (reservationBlocks.list) into `blockNames`."""
        sub_blocks = [s for b in self.blocks for s in b.sub_blocks]
        degraded = [b for b in self.blocks if any(s.health != HEALTHY for s in b.sub_blocks)]
        maintenance = _maintenance_counts(sum(s.maintenance_pending for s in sub_blocks))
        maintenance["upcomingGroupMaintenances"] = [
            {
                "type": w.type,
                "maintenanceStatus": w.status,
                "windowStartTime": w.start,
                "windowEndTime": w.end,
                "latestWindowStartTime": w.start,
                "canReschedule": True,
                "maintenanceOnShutdown": False,
                "maintenanceReasons": [],
            }
            for w in self.maintenance[:1]  # the API holds one upcoming group maintenance
        ]
        return {
            **self.scope(),
            "name": self.name,
            "id": self.path(),
            "status": "READY",
            "creationTimestamp": "2026-10-01T00:00:00.000-07:00",
            "selfLink": f"https://www.googleapis.com/compute/v1/{self.path()}",
            "specificReservationRequired": True,
            "specificReservations": [
                {
                    "count": sum(s.hosts for s in sub_blocks),
                    "inUseCount": sum(s.in_use for s in sub_blocks),
                    "assuredCount": sum(s.hosts for s in sub_blocks),
                    "instanceProperties": [{"machineType": self.machine_type}],
                }
            ],
            "resourceStatuses": [
                {
                    "reservationBlockCount": len(self.blocks),
                    "healthInfos": [
                        {
                            "healthStatus": DEGRADED if degraded else HEALTHY,
                            "healthyBlockCount": len(self.blocks) - len(degraded),
                            "degradedBlockCount": len(degraded),
                        }
                    ],
                    "reservationMaintenances": [maintenance],
                }
            ],
            "blockNames": [b.name for b in self.blocks],
        }


def _maintenance_counts(pending: int) -> dict[str, Any]:
    return {
        "maintenancePendingCount": pending,
        "maintenanceOngoingCount": 0,
        "instanceMaintenancePendingCount": 0,
        "instanceMaintenanceOngoingCount": 0,
        "subblockInfraMaintenancePendingCount": 0,
        "subblockInfraMaintenanceOngoingCount": 0,
        "schedulingType": "INDEPENDENT",
    }


@dataclass(frozen=True)
class Bucket:
    name: str
    location: str  # as the API reports it: upper case (`US-CENTRAL1`, `US`, `NAM4`)
    uniform_access: bool = True  # iamConfiguration.uniformBucketLevelAccess.enabled
    data_locations: tuple[str, ...] = ()  # a configurable dual-region's regions (customPlacementConfig)
    readable: bool = True  # False: the deployer lacks storage.buckets.get on it (a bucket of another team's project)
    project: str = ""  # the project holding it; empty: the stack's

    def answer(self, project: str) -> dict[str, Any]:
        """getBucket's result (dataSourceGoogleStorageBucketRead -> setStorageBucket, v7.45.0)."""
        return {
            "name": self.name,
            "project": project,
            "location": self.location,
            "uniformBucketLevelAccess": self.uniform_access,
            "customPlacementConfigs": [{"dataLocations": list(self.data_locations)}] if self.data_locations else [],
            "storageClass": "STANDARD",
            "url": f"gs://{self.name}",
            "selfLink": f"https://www.googleapis.com/storage/v1/b/{self.name}",
            "publicAccessPrevention": "enforced" if self.uniform_access else "inherited",
        }


@dataclass(frozen=True)
class Secret:
    """A Secret Manager secret and its versions (googleapis/googleapis 02838cf google/cloud/secretmanager/v1/
    resources.proto: versions are numbered from 1, each ENABLED, DISABLED or DESTROYED; `latest` names the newest;
    an alias names the version it maps to, in GetSecretVersion and AccessSecretVersion)."""

    name: str  # projects/<project id>/secrets/<secret id>
    states: tuple[str, ...] = ("ENABLED",)  # its versions' states, version 1 first
    aliases: tuple[tuple[str, int], ...] = ()  # Secret.version_aliases
    readable: bool = True  # False: the deployer lacks secretmanager.versions.get on it

    def answer(self, token: str, version: str, project_number: str) -> dict[str, Any]:
        """getSecretVersion's result with fetchSecretData false: the GET of the version (magic-modules f54f369
        data_source_secret_manager_secret_version.go), which names the project by its number, and sets `enabled` true
        and destroyTime as the API answers it whatever the state."""
        secret_id = self.name.rpartition("/")[2]
        by_number = f"projects/{project_number}/secrets/{secret_id}"
        if not self.readable:
            denied = f"Permission 'secretmanager.versions.get' denied for resource '{self.name}/versions/{version}'"
            raise ProviderError(
                token, f"{SECRET_VERSION_READ_ERROR}: googleapi: Error 403: {denied} (or it may not exist)., forbidden"
            )
        number = len(self.states) if version == "latest" else int(version) if version.isdigit() else 0
        number = dict(self.aliases).get(version, number)
        if not 1 <= number <= len(self.states):
            missing = (
                f"Secret Version [{by_number}/versions/{version}] not found"
                if self.states
                else f"Secret [{by_number}] not found or has no versions"
            )
            raise ProviderError(token, f"{SECRET_VERSION_READ_ERROR}: googleapi: Error 404: {missing}., notFound")
        destroyed = self.states[number - 1] == "DESTROYED"
        return {
            "name": f"{by_number}/versions/{number}",
            "project": self.name.split("/")[1],
            "secret": secret_id,
            "version": str(number),
            "createTime": "2026-01-05T10:00:00.000000Z",
            "enabled": True,
            "fetchSecretData": False,
            **({"destroyTime": "2026-02-01T09:30:00.000000Z"} if destroyed else {}),
        }


# How the data source prefixes the GET's error (magic-modules f54f369 data_source_secret_manager_secret_version.go);
# the missing version's 404 is Secret Manager's NOT_FOUND as the add-on's provider quotes it
# (secrets-store-csi-driver-provider-gcp@0077988 docs/debugging.md: "Secret Version [projects/.../secrets/testsecret/
# versions/100] not found."); the missing secret's and the 403's words are Secret Manager's NOT_FOUND and
# IAM_PERMISSION_DENIED as gcloud prints them (seen in users' output, no reference page): the review keys on the
# HTTP code only.
SECRET_VERSION_READ_ERROR = "error retrieving available secret manager secret versions"


class ProviderError(grpc.RpcError):  # type: ignore[misc]  # grpc untyped
    """A data source's error as the engine returns it to the program: the provider's error, wrapped by the engine
    ("invocation of <token> returned an error: ...", pulumi/pulumi v3.259.0 pkg/resource/deploy/source_eval.go,
    ResourceMonitor.Invoke), over gRPC; the Python SDK turns it into the invoke's failure ("invoke of <token>
    failed: ...", pulumi 3.272.0 runtime/invoke.py), which only the invoke's Output carries."""

    def __init__(self, token: str, message: str):
        super().__init__()
        self.message = f"invocation of {token} returned an error: {message}"

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self.message

    def __str__(self) -> str:
        return self.message


def compute_not_found(path: str) -> str:
    """Compute Engine's 404 as googleapi prints it (`googleapi: Error 404: The resource 'projects/.../instances/x'
    was not found, notFound`, quoted in cloud-barista/cb-spider#340)."""
    return f"googleapi: Error 404: The resource '{path}' was not found, notFound"


# Cloud Storage's 404 for a bucket (its JSON error: code 404, "The specified bucket does not exist.", reason
# notFound, quoted in GoogleCloudPlatform/gcsfuse#733), as googleapi prints it.
BUCKET_NOT_FOUND = "googleapi: Error 404: The specified bucket does not exist., notFound"
# Cloud Storage's 403 for a bucket the caller may not get (its message quoted in ansible-collections/google.cloud#575:
# "<account> does not have storage.buckets.get access to the Google Cloud Storage bucket. Permission
# 'storage.buckets.get' denied on resource (or it may not exist)."; reason forbidden), as googleapi prints it.
BUCKET_FORBIDDEN = (
    "googleapi: Error 403: deployer@example.iam.gserviceaccount.com does not have storage.buckets.get access to the "
    "Google Cloud Storage bucket. Permission 'storage.buckets.get' denied on resource (or it may not exist)., forbidden"
)

# Cloud Storage's 409 for a create of a bucket name that exists: bucket names are one namespace shared by every
# project (cloud.google.com/storage/docs/buckets#naming), so the create fails whoever holds it. As the provider prints
# it for a bucket of another project (quoted in terraform-google-modules/terraform-example-foundation#716) and of the
# caller's own (quoted in terraform-google-modules/terraform-google-cloud-storage#238).
BUCKET_TAKEN = (
    "googleapi: Error 409: The requested bucket name is not available. The bucket namespace is shared by all users of "
    "the system. Please select a different name and try again., conflict"
)
BUCKET_OWNED = (
    "googleapi: Error 409: Your previous request to create the named bucket succeeded and you already own it., conflict"
)
BUCKET_RESOURCE = "gcp:storage/bucket:Bucket"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
SECRET_RESOURCE = "gcp:secretmanager/secret:Secret"
SECRET_GRANT = "gcp:secretmanager/secretIamMember:SecretIamMember"
KEY_RESOURCE = "gcp:kms/cryptoKey:CryptoKey"
KEY_GRANT = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
REPOSITORY_RESOURCE = "gcp:artifactregistry/repository:Repository"
REPOSITORY_GRANT = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"

GET_RESERVATION = "gcp:compute/getReservation:getReservation"
GET_RESERVATION_BLOCK = "gcp:compute/getReservationBlock:getReservationBlock"
GET_RESERVATION_SUB_BLOCK = "gcp:compute/getReservationSubBlock:getReservationSubBlock"
GET_BUCKET = "gcp:storage/getBucket:getBucket"
GET_SECRET_VERSION = "gcp:secretmanager/getSecretVersion:getSecretVersion"
GET_KEY = "gcp:kms/getKMSCryptoKey:getKMSCryptoKey"
GET_REPOSITORY = "gcp:artifactregistry/getRepository:getRepository"
GET_SUBNETWORKS = "gcp:compute/getSubnetworks:getSubnetworks"
GET_SUBNETWORK = "gcp:compute/getSubnetwork:getSubnetwork"
HOLDINGS_READS = (
    GET_SUBNETWORK,
    GET_RESERVATION,
    GET_RESERVATION_BLOCK,
    GET_RESERVATION_SUB_BLOCK,
    GET_BUCKET,
    GET_SUBNETWORKS,
    GET_SECRET_VERSION,
    GET_KEY,
    GET_REPOSITORY,
)

GET_PROJECT = "gcp:organizations/getProject:getProject"
GET_ENGINE_VERSIONS = "gcp:container/getEngineVersions:getEngineVersions"
GET_CLUSTER = "gcp:container/getCluster:getCluster"

# --- The deployer's grants ----------------------------------------------------------------------------------------
#
# Each read's calls whose refusal fails the read, in the order the data source makes them (hashicorp/terraform-provider-
# google v7.45.0, what pulumi-gcp 10.2.0 runs), each as (the permission its method's reference names, the resource it is
# checked on, the data source's words before Google's 403). Written apart from the program's DEPLOYER_READS on purpose,
# as API_OF_MODULE is from its list of APIs: a wrong row there is a read refused here. Calls that fail soft are left out
# (getBucket's GET of the bucket's project; getProject's billing read is checked on the same permission as its GET).
_RESERVATION = "projects/{project}/zones/{zone}/reservations/{reservation}"
_BLOCK = _RESERVATION + "/reservationBlocks/{block}"
_REPOSITORY = "projects/{project}/locations/{location}/repositories/{repositoryId}"
READ_CALLS: dict[str, tuple[tuple[str, str, str], ...]] = {
    # resourceGoogleProjectRead: projects.get, then Cloud Billing's projects.getBillingInfo (both
    # resourcemanager.projects.get: cloud.google.com/billing/docs/reference/rest/v1/projects/getBillingInfo)
    GET_PROJECT: (("resourcemanager.projects.get", "projects/{projectId}", ""),),
    # data_source_google_container_engine_versions.go: projects.locations.getServerConfig
    GET_ENGINE_VERSIONS: (
        (
            "container.clusters.list",
            "projects/{project}/locations/{location}",
            "Error retrieving available container cluster versions: ",
        ),
    ),
    # resource_compute_reservation.go: reservations.get, then reservationBlocks.list ("Error listing ReservationBlocks")
    GET_RESERVATION: (
        ("compute.reservations.get", _RESERVATION, 'Error when reading or editing ComputeReservation "": '),
        ("compute.reservationBlocks.list", _RESERVATION, "Error listing ReservationBlocks: "),
    ),
    # data_source_google_compute_reservation_block.go: reservationBlocks.get, then reservationSubBlocks.list
    GET_RESERVATION_BLOCK: (
        ("compute.reservationBlocks.get", _BLOCK, "Error reading ReservationBlock: "),
        ("compute.reservationSubBlocks.list", _BLOCK, "Error listing ReservationSubBlocks: "),
    ),
    GET_RESERVATION_SUB_BLOCK: (
        (
            "compute.reservationSubBlocks.get",
            _BLOCK + "/reservationSubBlocks/{name}",
            "Error reading ReservationSubBlock: ",
        ),
    ),
    GET_BUCKET: (("storage.buckets.get", "{name}", ""),),  # data_source_google_storage_bucket.go: buckets.get
    GET_SECRET_VERSION: (("secretmanager.versions.get", "{secret}/versions/{version}", ""),),
    # data_source_google_kms_crypto_key.go: the key's GET, its error wrapped by resourceKMSCryptoKeyRead
    GET_KEY: (
        (
            "cloudkms.cryptoKeys.get",
            "{keyRing}/cryptoKeys/{name}",
            'Error when reading or editing KMSCryptoKey "{keyRing}/cryptoKeys/{name}": ',
        ),
    ),
    # data_source_artifact_registry_repository.go: the repository's GET, its error wrapped by
    # resourceArtifactRegistryRepositoryRead through HandleNotFoundError
    GET_REPOSITORY: (
        (
            "artifactregistry.repositories.get",
            _REPOSITORY,
            f'Error when reading or editing ArtifactRegistryRepository "{_REPOSITORY}": ',
        ),
    ),
    # resourceContainerClusterRead: projects.locations.clusters.get, through HandleNotFoundError
    GET_CLUSTER: (
        (
            "container.clusters.get",
            "projects/{project}/locations/{location}/clusters/{name}",
            'Error when reading or editing Container Cluster "{name}": ',
        ),
    ),
    # data_source_google_compute_subnetworks.go: subnetworks.list, through HandleNotFoundError
    GET_SUBNETWORKS: (
        (
            "compute.subnetworks.list",
            "projects/{project}/regions/{region}",
            "Error when reading or editing Subnetworks : {project} {region}: ",
        ),
    ),
    # data_source_google_compute_subnetwork.go: subnetworks.get, through HandleDataSourceNotFoundError
    GET_SUBNETWORK: (
        (
            "compute.subnetworks.get",
            "projects/{project}/regions/{region}/subnetworks/{name}",
            "Error when reading or editing Subnetwork Not Found : {name}: ",
        ),
    ),
}


def permission_denied(token: str, args: dict[str, Any], project: str, grants: frozenset[str]) -> ProviderError | None:
    """The read's failure where the deployer, holding ``grants``, lacks the permission of one of its calls: Google
    Cloud's 403 for that call, as the data source returns it."""
    for permission, resource, before in READ_CALLS.get(token, ()):
        if permission in grants:
            continue
        named = {"project": project, "projectId": project, **{k: v for k, v in args.items() if isinstance(v, str)}}
        named.setdefault("version", "latest")
        named.setdefault("block", named.get("reservationBlock") or named.get("name", ""))
        named.setdefault("reservation", named.get("name", ""))
        on, before = resource.format_map(named), before.format_map(named)
        if token == GET_PROJECT:  # Resource Manager's 403 names no permission, and the provider words it anew
            return ProviderError(
                token, f'the user does not have permission to access Project "{named["projectId"]}" or it may not exist'
            )
        if token == GET_BUCKET:
            return ProviderError(token, BUCKET_FORBIDDEN)
        if token == GET_KEY:  # IAM's PERMISSION_DENIED as googleapi prints it for another service
            denied = f"Permission '{permission}' denied on resource '{on}' (or it may not exist)."
            return ProviderError(token, f"{before}googleapi: Error 403: {denied}, forbidden")
        if token == GET_REPOSITORY:  # Artifact Registry's, as cloud.google.com/assured-open-source-software/docs/
            # troubleshooting quotes it (the repository by its full resource name)
            denied = f"Permission '{permission}' denied on resource '//artifactregistry.googleapis.com/{on}'"
            return ProviderError(token, f"{before}googleapi: Error 403: {denied} (or it may not exist).")
        if token == GET_SECRET_VERSION:
            denied = f"Permission '{permission}' denied for resource '{on}' (or it may not exist)."
            return ProviderError(token, f"{SECRET_VERSION_READ_ERROR}: googleapi: Error 403: {denied}, forbidden")
        if token.startswith("gcp:container/"):  # GKE's 403 (quoted in 2i2c-org/infrastructure#488)
            return ProviderError(
                token, f'{before}googleapi: Error 403: Required "{permission}" permission(s) for "{on}"., forbidden'
            )
        return ProviderError(
            token, f"{before}googleapi: Error 403: Required '{permission}' permission for '{on}', forbidden"
        )
    return None


COMPUTE_URL = "https://www.googleapis.com/compute/v1/"
# A filter of subnetworks.list as the model evaluates it: AIP-160 comparisons, each in parentheses, all of which must
# hold ("To filter on multiple expressions, provide each separate expression within parentheses ... By default, each
# expression is an AND expression": the filter parameter of Compute Engine v1 subnetworks.list, its REST reference and
# ListSubnetworksRequest.filter in the client libraries). Its other forms (OR, regular expressions with eq/ne, :) are
# not modelled.
_FILTER_TERM = re.compile(r'\(\s*(\w+)\s*(!?=)\s*"?([^"()]*?)"?\s*\)')


@dataclass(frozen=True)
class Subnetwork:
    """A subnetwork of a VPC (Compute Engine v1 Subnetwork): its VPC (projects/<project>/global/networks/<name>),
    region, name and primary range; a proxy-only one has the purpose REGIONAL_MANAGED_PROXY and the role ACTIVE or
    BACKUP ("ready to be promoted to ACTIVE or is currently draining": Subnetwork.Role), and only one ACTIVE per VPC
    and region (cloud.google.com/load-balancing/docs/proxy-only-subnets)."""

    network: str
    region: str
    name: str
    ip_cidr_range: str
    purpose: str = "PRIVATE"
    role: str = ""  # set on a proxy-only subnet only

    def matches(self, filter_text: str) -> bool:
        """Whether subnetworks.list's ``filter`` keeps this subnetwork (_FILTER_TERM)."""
        terms = _FILTER_TERM.findall(filter_text)
        if _FILTER_TERM.sub("", filter_text).strip():
            raise UnmodeledCall(f"the model of subnetworks.list evaluates (field = value) terms only: {filter_text!r}")
        fields = {
            "name": self.name,
            "network": COMPUTE_URL + self.network,
            "ipCidrRange": self.ip_cidr_range,
            "purpose": self.purpose,
            "role": self.role,
        }
        return all((fields.get(field, "") == value) == (operator == "=") for field, operator, value in terms)

    def answer(self) -> dict[str, Any]:
        """An item of getSubnetworks' result: what the data source keeps of subnetworks.list's item
        (hashicorp/terraform-provider-google 0a504cd google/services/compute/data_source_google_compute_subnetworks.go:
        the network as its URL, and its last part as networkName)."""
        network_name = self.network.rsplit("/", 1)[-1]
        project = self.network.split("/")[1]
        return {
            "description": "",
            "ipCidrRange": self.ip_cidr_range,
            "name": self.name,
            "network": COMPUTE_URL + self.network,
            "networkName": network_name,
            "networkSelfLink": network_name,
            "privateIpGoogleAccess": True,
            "selfLink": f"{COMPUTE_URL}projects/{project}/regions/{self.region}/subnetworks/{self.name}",
        }


def _secret_name(inputs: dict[str, Any], project: str) -> str:
    """projects/<project>/secrets/<id> of a Secret's or a secret grant's inputs: the grant's provider takes the
    secret's ID, in its project, or its whole name (v7.45.0 iam_secret_manager_secret.go)."""
    secret = inputs["secretId"]
    return secret if "/" in secret else f"projects/{inputs.get('project') or project}/secrets/{secret}"


def _repository_name(inputs: dict[str, Any], project: str) -> str:
    """projects/<project>/locations/<location>/repositories/<id> of a Repository's, a repository grant's or
    getRepository's inputs (the grant names the repository by its id, in its project and location)."""
    repository = inputs.get("repositoryId") or inputs["repository"]
    return f"projects/{inputs.get('project') or project}/locations/{inputs['location']}/repositories/{repository}"


@dataclass(frozen=True)
class CryptoKey:
    """A Cloud KMS key (googleapis/googleapis google/cloud/kms/v1/resources.proto: CryptoKey.purpose; CryptoKey.primary,
    the version Encrypt uses, which only an ENCRYPT_DECRYPT key has and a key made with no version lacks)."""

    name: str  # projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>
    purpose: str = "ENCRYPT_DECRYPT"
    primary: str = "ENABLED"  # the primary version's state (ENABLED, DISABLED, DESTROYED...); "": none

    def answer(self) -> dict[str, Any]:
        """getKMSCryptoKey's result: the resource's read of the GET sets purpose and primary (name and state)
        (hashicorp/terraform-provider-google-beta@07a6fa4 google-beta/services/kms/resource_kms_crypto_key.go
        resourceKMSCryptoKeyRead, flattenKMSCryptoKeyPrimary; pulumi_gcp 10.2.0 GetKMSCryptoKeyResult.primaries)."""
        ring, _, key = self.name.partition("/cryptoKeys/")
        version = {"name": f"{self.name}/cryptoKeyVersions/1", "state": self.primary}
        return {
            "id": self.name,
            "keyRing": ring,
            "name": key,
            "purpose": self.purpose,
            "primaries": [version] if self.primary else [],
        }


@dataclass(frozen=True)
class Holdings:
    """The reservations, buckets, secrets, subnetworks, keys and repositories that exist (any project: a reservation
    may be shared from another, a Shared VPC's subnetworks are its host project's, an image mirror is the
    organisation's)."""

    reservations: tuple[Reservation, ...] = ()
    buckets: tuple[Bucket, ...] = ()
    secrets: tuple[Secret, ...] = ()
    subnetworks: tuple[Subnetwork, ...] = ()
    keys: tuple[CryptoKey, ...] = ()
    repositories: tuple[str, ...] = ()  # Artifact Registry repositories, projects/<p>/locations/<l>/repositories/<r>

    def refuse_create(
        self, token: str, inputs: dict[str, Any], project: str, waited_for: list[tuple[str, dict[str, Any]]]
    ) -> None:
        """AlreadyExists where the `up` creates a bucket of a name one of ``buckets`` holds, in any project; NotFound
        where it grants a role on a bucket, secret, Cloud KMS key or Artifact Registry repository that neither the
        holdings hold nor a create it ``waited_for`` (the type and inputs of each) made: the grant reads the policy
        first, and each service answers that read of what is not there with its 404 (v7.45.0 tpgiamresource/iam.go
        iamPolicyReadModifyWrite, the updaters' "Error retrieving IAM policy for %s"; Cloud Storage's as printed in
        SygniaLabs/ScallOps#23, Secret Manager's and Cloud KMS's NOT_FOUND ("CryptoKey <name> not found.") in users'
        output, no reference page; Artifact Registry's below)."""
        held = (
            next((b for b in self.buckets if b.name == inputs.get("name")), None) if token == BUCKET_RESOURCE else None
        )
        if held is not None:
            owned = (held.project or project) == (inputs.get("project") or project)
            raise AlreadyExists(f"{token}: {BUCKET_OWNED if owned else BUCKET_TAKEN}")
        if token == BUCKET_GRANT:
            bucket = inputs["bucket"]
            made = {i.get("name") for t, i in waited_for if t == BUCKET_RESOURCE}
            if bucket not in {b.name for b in self.buckets} | made:
                raise NotFound(
                    f'{token}: Error retrieving IAM policy for storage bucket "b/{bucket}": {BUCKET_NOT_FOUND}'
                )
        if token == SECRET_GRANT:
            secret = _secret_name(inputs, project)
            made = {_secret_name(i, project) for t, i in waited_for if t == SECRET_RESOURCE}
            if secret not in {s.name for s in self.secrets} | made:
                by_number = f"projects/PROJECT_NUMBER/secrets/{secret.rpartition('/')[2]}"  # as getProject answers
                raise NotFound(
                    f'{token}: Error retrieving IAM policy for secretmanager secret "{secret}": googleapi: Error 404: '
                    f"Secret [{by_number}] not found."
                )
        if token == REPOSITORY_GRANT:
            # Artifact Registry's NOT_FOUND for a repository that is not there, "Requested entity was not found." (as
            # k8s-config-connector's mock of the API answers GetRepository: GoogleCloudPlatform/k8s-config-connector
            # @13d73dd mockgcp/mockartifactregistry/repository.go; no reference page), after the updater's words
            # (v7.45.0 artifactregistry/iam_artifact_registry_repository.go GetResourceIamPolicy)
            repository = _repository_name(inputs, project)
            made = {_repository_name(i, project) for t, i in waited_for if t == REPOSITORY_RESOURCE}
            if repository not in {*self.repositories, *made}:
                raise NotFound(
                    f'{token}: Error retrieving IAM policy for artifactregistry repository "{repository}": googleapi: '
                    "Error 404: Requested entity was not found., notFound"
                )
        if token == KEY_GRANT:
            key = inputs["cryptoKeyId"]
            made = {f"{i.get('keyRing')}/cryptoKeys/{i.get('name')}" for t, i in waited_for if t == KEY_RESOURCE}
            if key not in {*(k.name for k in self.keys), *made}:
                raise NotFound(
                    f'{token}: Error retrieving IAM policy for KMS CryptoKey "{key}": googleapi: Error 404: CryptoKey '
                    f"{key} not found., notFound"
                )

    def answer(self, token: str, args: dict[str, Any], default_project: str) -> dict[str, Any]:
        """The provider's answer to one of HOLDINGS_READS; ProviderError where the provider fails the read."""
        project = args.get("project") or default_project
        if token == GET_SECRET_VERSION:
            if args.get("fetchSecretData") is not False:
                raise UnmodeledCall(f"{token} reads the payload unless fetchSecretData is false: a preview must not")
            named = args["secret"]
            secret = next((s for s in self.secrets if s.name == named), Secret(named, states=()))
            return secret.answer(token, args.get("version") or "latest", "PROJECT_NUMBER")  # as getProject answers
        if token == GET_KEY:
            # getKMSCryptoKey: the GET of the key, whose 404 the data source answers with "<key> not found" and any
            # other error as the resource's read wraps it (v7.45.0 google-beta/services/kms/
            # data_source_google_kms_crypto_key.go, resource_kms_crypto_key.go resourceKMSCryptoKeyRead); the
            # deployer's 403 is permission_denied's
            name = f"{args['keyRing']}/cryptoKeys/{args['name']}"
            if (key := next((k for k in self.keys if k.name == name), None)) is None:
                raise ProviderError(token, f"{name} not found")
            return key.answer()
        if token == GET_REPOSITORY:
            # getRepository: the GET of the repository, whose 404 the data source answers with "<name> not found"
            # (v7.45.0 google-beta/services/artifactregistry/data_source_artifact_registry_repository.go: the read's
            # HandleNotFoundError clears the id); the deployer's 403 is permission_denied's
            repository = _repository_name(args, project)
            if repository not in self.repositories:
                raise ProviderError(token, f"{repository} not found")
            return {**args, "id": repository, "name": repository, "format": "DOCKER", "mode": "STANDARD_REPOSITORY"}
        if token == GET_SUBNETWORK:
            # subnetworks.get of the project, region and name; the data source fails the read on its 404
            # (hashicorp/terraform-provider-google data_source_google_compute_subnetwork.go: the Get's error through
            # HandleDataSourceNotFoundError)
            path = f"projects/{project}/regions/{args['region']}/subnetworks/{args['name']}"
            held = [
                s
                for s in self.subnetworks
                if (s.network.split("/")[1], s.region, s.name) == (project, args["region"], args["name"])
            ]
            if not held:
                raise ProviderError(token, compute_not_found(path))
            network, cidr = COMPUTE_URL + held[0].network, held[0].ip_cidr_range
            fields = {"name": args["name"], "project": project, "region": args["region"], "network": network}
            return fields | {"id": path, "ipCidrRange": cidr, "selfLink": COMPUTE_URL + path}
        if token == GET_SUBNETWORKS:
            # subnetworks.list of the project and region, through the filter (an empty list where none is kept); the
            # data source's id names the listing (the same data source)
            region, filter_text = args["region"], args.get("filter") or ""
            listed = [
                s.answer()
                for s in self.subnetworks
                if s.network.split("/")[1] == project and s.region == region and s.matches(filter_text)
            ]
            path = f"projects/{project}/regions/{region}/subnetworks"
            return {"id": path, "project": project, "region": region, "filter": filter_text, "subnetworks": listed}
        if token == GET_BUCKET:
            bucket = next((b for b in self.buckets if b.name == args["name"]), None)
            if bucket is None:
                raise ProviderError(token, BUCKET_NOT_FOUND)  # the data source returns the Get's error as it is
            if not bucket.readable:
                raise ProviderError(token, BUCKET_FORBIDDEN)
            return bucket.answer(project)
        reservation = next(
            (
                r
                for r in self.reservations
                if (r.project, r.zone, r.name) == (project, args.get("zone"), args.get("reservation", args["name"]))
            ),
            None,
        )
        if token == GET_RESERVATION:
            if reservation is None:
                # resourceComputeReservationRead hands a 404 to HandleNotFoundError, which clears the id and returns
                # no error; the data source then sets its id anyway (v7.45.0): no error, and no field of the API.
                path = f"projects/{project}/zones/{args.get('zone')}/reservations/{args['name']}"
                return {"name": args["name"], "zone": args.get("zone"), "project": project, "id": path}
            if not reservation.readable:
                # Compute Engine's 403 as googleapi prints it (`googleapi: Error 403: Required 'compute.zones.get'
                # permission for 'projects/.../zones/us-central1-a', forbidden`, quoted in
                # udacity/devops-intro-project#77), which HandleNotFoundError wraps (v7.45.0 transport.go; the data
                # source's id is still empty then)
                denied = f"Required 'compute.reservations.get' permission for '{reservation.path()}', forbidden"
                raise ProviderError(
                    token, f'Error when reading or editing ComputeReservation "": googleapi: Error 403: {denied}'
                )
            return reservation.answer()
        path = f"projects/{project}/zones/{args.get('zone')}/reservations/{args['reservation']}"
        block_name = args["name"] if token == GET_RESERVATION_BLOCK else args["reservationBlock"]
        block = next((b for b in reservation.blocks if b.name == block_name), None) if reservation else None
        if reservation is None or block is None:
            # Both block data sources fail the read on the GET's error ("Error reading ReservationBlock: %s"): the
            # 404 names the first missing part of the path
            missing = path if reservation is None else f"{path}/reservationBlocks/{block_name}"
            what = "ReservationBlock" if token == GET_RESERVATION_BLOCK else "ReservationSubBlock"
            raise ProviderError(token, f"Error reading {what}: {compute_not_found(missing)}")
        if token == GET_RESERVATION_BLOCK:
            return block.answer(reservation)
        sub_block = next((s for s in block.sub_blocks if s.name == args["name"]), None)
        if sub_block is None:
            missing = f"{path}/reservationBlocks/{block_name}/reservationSubBlocks/{args['name']}"
            raise ProviderError(token, f"Error reading ReservationSubBlock: {compute_not_found(missing)}")
        if not sub_block.readable:  # Compute Engine's 403 as for the reservation above
            named = f"{path}/reservationBlocks/{block_name}/reservationSubBlocks/{sub_block.name}"
            denied = f"Required 'compute.reservationSubBlocks.get' permission for '{named}', forbidden"
            raise ProviderError(token, f"Error reading ReservationSubBlock: googleapi: Error 403: {denied}")
        return sub_block.answer(reservation, block)
