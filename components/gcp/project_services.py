"""Google Cloud APIs and preview features the deployment needs, enabled once per project."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pulumi
import pulumi_gcp as gcp

from components.gcp.review import refused_if_unread

CONTAINER_API = "container.googleapis.com"
COMPUTE_API = "compute.googleapis.com"
IAM_API = "iam.googleapis.com"
RESOURCE_MANAGER_API = "cloudresourcemanager.googleapis.com"  # project IAM, and the project number lookup
STORAGE_API = "storage.googleapis.com"
# What a stack that makes its own network and cluster needs, in the order they are listed to a reader.
REQUIRED_APIS = (
    CONTAINER_API,
    COMPUTE_API,
    IAM_API,
    RESOURCE_MANAGER_API,
    "networkservices.googleapis.com",
    STORAGE_API,
    # GKE's system metrics and managed Prometheus write there; the alert policies
    "monitoring.googleapis.com",
    # GKE's system and workload logs are written there, and the nodes' audit records (nodeAuditLogging): an API no
    # call of the stack goes through, enabled so that what the nodes write is not refused.
    "logging.googleapis.com",
)
# A cluster that enforces Binary Authorization's policy (cluster.binaryAuthorization) needs this API on first
# (Binary Authorization's "Enable enforcement on an existing cluster" and "Create a cluster" guides list enabling it
# before the cluster, https://cloud.google.com/binary-authorization/docs/enable-cluster).
BINARY_AUTHORIZATION_API = "binaryauthorization.googleapis.com"
# The Hugging Face token's secret (serving.hfTokenSecretVersion): the stack's grants on it, and the reads of GKE's
# Secret Manager add-on, go through it; so do the grant on Docker Hub's password (images.pullThrough) and Artifact
# Registry's reads of it. Enabled only for a stack with the add-on (cluster.secretManager), the token or the password
# there.
SECRET_MANAGER_API = "secretmanager.googleapis.com"
# The pull-through repositories (images.pullThrough) and the nodes' read grants on them go through it; enabled only
# for a stack that makes them (a mirror is in a project where it is on already).
ARTIFACT_REGISTRY_API = "artifactregistry.googleapis.com"


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str
    # REQUIRED_APIS (Binary Authorization's too where the cluster enforces it, Artifact Registry's with pull-through
    # repositories, Secret Manager's with its add-on, the Hugging Face token or Docker Hub's password there), or on a
    # cluster made elsewhere those the stack's own calls need
    apis: tuple[str, ...]
    enable_ai_zones: bool


class ProjectServices(pulumi.ComponentResource):
    """Enables the APIs (never disabling them on destroy: other workloads may use them).

    Every Google Cloud call of the stack waits for the API it goes through: resources through their
    component's ``depends_on`` (the whole component), and each invoke through ``api(name)`` in its
    own ``InvokeOutputOptions(depends_on=...)``: a parent's dependencies are not an invoke's, and an
    invoke that waits for nothing runs when the program starts, before any API is enabled.
    """

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ProjectServices", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self._by_api = {
            api: gcp.projects.Service(
                api.split(".")[0],
                project=args.project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=child,
            )
            for api in args.apis
        }
        self.apis = list(self._by_api.values())
        if args.enable_ai_zones:
            gcp.compute.PreviewFeature(
                "ai-zones-visibility",
                project=args.project,
                name="ai-zones-visibility",
                activation_status="ENABLED",
                rollout_operation={"rollout_input": {"predefined_rollout_plan": "ROLLOUT_PLAN_FAST_ROLLOUT"}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=self.apis),
            )
        self._project = args.project
        self.register_outputs({"apis": list(args.apis), "aiZones": args.enable_ai_zones})

    @cached_property
    def project_number(self) -> pulumi.Output[str]:
        """The project's number, read once (on first use) after the Cloud Resource Manager API is on: the stack's
        Workload Identity principals and Google's service agents are named by it."""
        read = gcp.organizations.get_project_output(
            project_id=self._project,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[self.api(RESOURCE_MANAGER_API)]),
        )
        return refused_if_unread(read, "gcp:organizations/getProject:getProject", "project", self._project).number

    def api(self, name: str) -> gcp.projects.Service:
        """The enablement of one API, for a call through it to wait for."""
        if name not in self._by_api:
            raise KeyError(f"{name} is not among the APIs this stack enables ({', '.join(self._by_api)})")
        return self._by_api[name]
