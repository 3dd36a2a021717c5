"""The harness's model of a Google Cloud project: which API each call goes through, and which are on.

A new project has almost no API enabled, and Google Cloud answers a call to a disabled API with
403 SERVICE_DISABLED naming it (the message below has the shape of Google's own, e.g. "Kubernetes
Engine API has not been used in project 88979237084 before or it is disabled ... accessNotConfigured",
banzaicloud/cloudinfo#378; the ErrorInfo reason SERVICE_DISABLED with the `service` and `consumer`
metadata is googleapis/googleapis@2f8d204b google/api/error_reason.proto). The mock engine (tools/mock_engine.py) asks this module, for every
Google Cloud resource it creates and every invoke it answers, whether the API is on at that point:
on from the start, or enabled by a `gcp:projects/service:Service` the call waits for (its
dependencies, followed transitively). Waiting is what counts, not the order in which the mocks
happen to register things: a real engine runs everything that does not wait in parallel.

This table is written apart from the program's own list of APIs (components/gcp/project_services.py)
on purpose: a call the program makes through an API it forgot to enable, or before enabling it,
is refused here instead of agreeing with the program's own mistake.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

SERVICE_USAGE = "serviceusage.googleapis.com"
SERVICE_RESOURCE = "gcp:projects/service:Service"

# The API behind each module of pulumi-gcp that the program uses (each resource's and data source's
# "API documentation" link in the provider's docs, terraform-provider-google website/docs/r and /d).
API_OF_MODULE = {
    "artifactregistry": "artifactregistry.googleapis.com",  # RepositoryIamMember: repositories.setIamPolicy
    "compute": "compute.googleapis.com",
    "container": "container.googleapis.com",
    "monitoring": "monitoring.googleapis.com",
    "organizations": "cloudresourcemanager.googleapis.com",  # getProject: projects.get
    "projects": "cloudresourcemanager.googleapis.com",  # IAMMember: projects.getIamPolicy / setIamPolicy
    "secretmanager": "secretmanager.googleapis.com",  # SecretIamMember: secrets.getIamPolicy / setIamPolicy
    "serviceaccount": "iam.googleapis.com",  # accounts and their IAM members
    "storage": "storage.googleapis.com",
}
# Calls whose API is not their module's: enabling an API, and generating a service's agent
# (services.generateServiceIdentity, the ServiceIdentity resource's "API documentation", Service Usage v1beta1), are
# Service Usage calls.
SERVICE_IDENTITY = "gcp:projects/serviceIdentity:ServiceIdentity"
API_OF_TOKEN = {SERVICE_RESOURCE: SERVICE_USAGE, SERVICE_IDENTITY: SERVICE_USAGE}
CLUSTER_RESOURCE = "gcp:container/cluster:Cluster"
BINARY_AUTHORIZATION_API = "binaryauthorization.googleapis.com"

# The titles Google's 403 gives each API.
API_TITLES = {
    "artifactregistry.googleapis.com": "Artifact Registry API",
    "binaryauthorization.googleapis.com": "Binary Authorization API",
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

    @classmethod
    def empty(cls, *already_on: str) -> CloudProject:
        """A new project: only Service Usage (which enabling anything needs), plus ``already_on``."""
        return cls(frozenset({SERVICE_USAGE, *already_on}), fresh=True)

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


def cluster_endpoints(inputs: dict[str, Any]) -> dict[str, Any]:
    """What GKE reports of a cluster's endpoints once it exists, from the inputs it was given: the DNS-based
    endpoint's name filled in; and as `endpoint`, the IP address, or with the IP endpoints off the DNS name
    (what the provider's `endpoint` then holds: gke-labs/kube-agents#1806, on a cluster with IP access
    disabled)."""
    endpoints = {key: dict(value) for key, value in (inputs.get("controlPlaneEndpointsConfig") or {}).items()}
    dns = gke_dns_endpoint(inputs["project"], inputs["location"], inputs["name"])
    endpoints.setdefault("dnsEndpointConfig", {})["endpoint"] = dns
    ip_on = (endpoints.get("ipEndpointsConfig") or {}).get("enabled", True)
    return {"endpoint": CLUSTER_IP_ENDPOINT if ip_on else dns, "controlPlaneEndpointsConfig": endpoints}


# --- Service agents ----------------------------------------------------------------------------------------------

# The service agent each API's ServiceIdentity answers with, as service-<project number>@<domain>: Artifact Registry's
# (its "Configure authentication to remote repository upstreams": service-PROJECT-NUMBER@gcp-sa-artifactregistry.
# iam.gserviceaccount.com).
SERVICE_AGENT_DOMAINS = {"artifactregistry.googleapis.com": "gcp-sa-artifactregistry.iam.gserviceaccount.com"}


def service_identity(service: str, project_number: str) -> dict[str, Any]:
    """What generateServiceIdentity answers for ``service``: its agent's email, and the IAM member the provider
    makes of it."""
    if service not in SERVICE_AGENT_DOMAINS:
        raise UnmodeledCall(f"the model of Google Cloud does not know {service}'s service agent: add it")
    email = f"service-{project_number}@{SERVICE_AGENT_DOMAINS[service]}"
    return {"email": email, "member": f"serviceAccount:{email}"}
