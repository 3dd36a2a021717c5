"""Google Cloud APIs and preview features the deployment needs, enabled once per project."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

REQUIRED_APIS = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "networkservices.googleapis.com",
    "storage.googleapis.com",
    "monitoring.googleapis.com",  # GKE's system metrics and managed Prometheus write there; the alert policies
)
AI_ZONES_FEATURE = "ai-zones-visibility"


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str
    enable_ai_zones: bool


class ProjectServices(pulumi.ComponentResource):
    """Enables the APIs (never disabling them on destroy: other workloads may use them)."""

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ProjectServices", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.apis = [
            gcp.projects.Service(
                api.split(".")[0],
                project=args.project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=child,
            )
            for api in REQUIRED_APIS
        ]
        self.preview_features = []
        if args.enable_ai_zones:
            self.preview_features.append(
                gcp.compute.PreviewFeature(
                    "ai-zones-visibility",
                    project=args.project,
                    name=AI_ZONES_FEATURE,
                    activation_status="ENABLED",
                    rollout_operation={"rollout_input": {"predefined_rollout_plan": "ROLLOUT_PLAN_FAST_ROLLOUT"}},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=self.apis),
                )
            )
        self.register_outputs({"apis": list(REQUIRED_APIS), "aiZones": args.enable_ai_zones})
