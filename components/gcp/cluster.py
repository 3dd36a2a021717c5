"""The GKE Standard cluster, its system node pool and identity, and the Kubernetes provider."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from components.gcp.config import MaintenanceExclusionConfig, MaintenanceWindowConfig
from components.resources import children_of

# Least privilege for nodes: GKE's node role (logs, metrics, metadata) plus image pulls.
NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
NODE_OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@dataclass(frozen=True)
class ClusterArgs:
    project: str
    region: str
    name: str
    version: str
    release_channel: str
    deletion_protection: bool
    slice_controller: bool
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str
    system_machine_type: str
    system_nodes_per_zone: int
    node_service_account_id: str
    maintenance_window: MaintenanceWindowConfig | None
    maintenance_exclusions: list[MaintenanceExclusionConfig]


class Cluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:Cluster", name, None, opts)
        child = children_of(self, opts)

        self.node_service_account = gcp.serviceaccount.Account(
            "node-sa",
            project=args.project,
            account_id=args.node_service_account_id,
            display_name=f"GKE nodes of {args.name}",
            opts=child,
        )
        self.node_service_account_roles = [
            gcp.projects.IAMMember(
                f"node-sa-{role.split('/')[1].replace('.', '-').lower()}",
                project=args.project,
                role=role,
                member=self.node_service_account.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=child,
            )
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]

        self.cluster = gcp.container.Cluster(
            "gke-cluster",
            project=args.project,
            name=args.name,
            location=args.region,
            network=args.network,
            subnetwork=args.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={
                "cluster_secondary_range_name": args.pods_range_name,
                "services_secondary_range_name": args.services_range_name,
            },
            # The default pool runs under the default compute account; replace it with our own.
            remove_default_node_pool=True,
            initial_node_count=1,
            release_channel={"channel": args.release_channel},
            min_master_version=args.version,
            deletion_protection=args.deletion_protection,
            datapath_provider="ADVANCED_DATAPATH",
            monitoring_config={
                "managed_prometheus": {"enabled": True},
                "advanced_datapath_observability_config": {"enable_metrics": True, "enable_relay": False},
            },
            addons_config={
                "http_load_balancing": {"disabled": False},
                "horizontal_pod_autoscaling": {"disabled": False},
                "gcs_fuse_csi_driver_config": {"enabled": True},
                "dns_cache_config": {"enabled": True},
                "slice_controller_config": {"enabled": args.slice_controller},
            },
            gateway_api_config={"channel": "CHANNEL_STANDARD"},
            workload_identity_config={"workload_pool": f"{args.project}.svc.id.goog"},
            maintenance_policy=_maintenance_policy(args.maintenance_window, args.maintenance_exclusions),
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(
                    depends_on=self.node_service_account_roles,
                    custom_timeouts=pulumi.CustomTimeouts(create="45m", update="60m", delete="45m"),
                ),
            ),
        )

        self.system_pool = gcp.container.NodePool(
            "system-pool",
            project=args.project,
            cluster=self.cluster.name,
            location=args.region,
            name="system",
            node_count=args.system_nodes_per_zone,
            node_config={
                "machine_type": args.system_machine_type,
                "service_account": self.node_service_account.email,
                "oauth_scopes": NODE_OAUTH_SCOPES,
                "workload_metadata_config": {"mode": "GKE_METADATA"},
                "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
            },
            management={"auto_repair": True, "auto_upgrade": True},
            opts=child,
        )

        kubeconfig: pulumi.Output[str] = pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
        ).apply(lambda parts: build_kubeconfig(*parts))
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(kubeconfig)
        # Kubernetes objects wait for the system pool: their controllers need somewhere to run.
        self.provider = k8s.Provider(
            "gke",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
        )

        self.name = self.cluster.name
        self.endpoint = self.cluster.endpoint
        self.node_service_account_email = self.node_service_account.email
        self.get_credentials_command = self.cluster.name.apply(
            lambda cluster: (
                f"gcloud container clusters get-credentials {cluster} --region {args.region} --project {args.project}"
            )
        )
        self.register_outputs({"name": self.name, "endpoint": self.endpoint, "kubeconfig": self.kubeconfig})


def _maintenance_policy(
    window: MaintenanceWindowConfig | None, exclusions: list[MaintenanceExclusionConfig]
) -> gcp.container.ClusterMaintenancePolicyArgsDict | None:
    if window is None:
        return None
    return {
        "recurring_window": {"start_time": window.start, "end_time": window.end, "recurrence": window.recurrence},
        "maintenance_exclusions": [
            {
                "exclusion_name": e.name,
                "start_time": e.start,
                "end_time": e.end,
                "exclusion_options": {"scope": e.scope},
            }
            for e in exclusions
        ],
    }


def build_kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin (no static token)."""
    context = f"gke_{cluster_name}"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
                }
            ],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "users": [
                {
                    "name": context,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
                            "provideClusterInfo": True,
                        }
                    },
                }
            ],
        },
        sort_keys=False,
    )
