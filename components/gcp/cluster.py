"""The GKE Standard cluster, its system node pool and identity, and the Kubernetes provider.

How the control plane is reached (GKE's DNS-based endpoint, its IP-based endpoints, authorized networks)
and whether nodes have external addresses are set here; each field used is updated in place by the
provider (hashicorp/terraform-provider-google v7.45.0, google/services/container/resource_container_cluster.go:
`control_plane_endpoints_config`, `master_authorized_networks_config` and
`private_cluster_config.enable_private_endpoint` through one DesiredControlPlaneEndpointsConfig update,
`private_cluster_config.enable_private_nodes` through DesiredDefaultEnablePrivateNodes since v7.13.0, before
which it was ForceNew; resource_container_node_pool.go: `network_config.enable_private_nodes` through
NodePools.update). The fields that would replace the cluster (`master_ipv4_cidr_block`,
`private_endpoint_subnetwork`) are never set.

The hardening of CIS GKE 5.1.4, 5.8.2 and 5.6.1 updates in place too (same file, v7.45.0: none of
`binary_authorization`, `authenticator_groups_config`, `enable_intranode_visibility` is ForceNew; each changes by
one UpdateCluster call, DesiredBinaryAuthorization, DesiredAuthenticatorGroupsConfig and
DesiredIntraNodeVisibilityConfig).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from components import naming
from components.config_base import Problem
from components.gcp.config import (
    ClusterConfig,
    GkeVersion,
    MaintenanceExclusionConfig,
    MaintenanceWindowConfig,
    MirrorRepository,
    NodeBoot,
    channel_floor_problem,
    cluster_identifier,
)
from components.gcp.network import Network
from components.gcp.review import read_mirror, refused_if_unread, say_review
from components.resources import NEW_ACCOUNT_FIRST, children_of, waiting_for

# A pool's network_config is written for enable_private_nodes alone. Two of its other fields are ForceNew
# without being read back as computed (resource_container_node_pool.go, v7.45.0): a value GKE reported
# for one of them, unasked, would plan the pool's replacement, and a TPU pool's replacement gives up its
# reservation cube. The program never sets them, so it never diffs on them.
NETWORK_CONFIG_NOT_OURS = ["networkConfig.acceleratorNetworkProfile", "networkConfig.additionalPodNetworkConfigs"]

# A pool's node config, or the cluster's (its first default pool's): what every node's identity and boot add to either.
NodeConfig = TypeVar("NodeConfig", gcp.container.NodePoolNodeConfigArgsDict, gcp.container.ClusterNodeConfigArgsDict)


def node_config(config: NodeConfig, email: pulumi.Input[str], boot: NodeBoot) -> NodeConfig:
    """``config`` with what its nodes run as (the node account ``email``, its pods behind GKE's metadata server) and
    how they boot: the Cloud KMS key of their boot disks (CIS GKE 5.9.2) and Shielded GKE
    Nodes' secure boot with integrity monitoring (CIS GKE 5.5.6, 5.5.7). Neither is sent when off, as before the
    stack set them: the provider takes secure boot as off and integrity monitoring as on unless told, and reads
    Google's encryption back as no key, so a pool made without them plans no change. Both replace a pool (ForceNew,
    see NodeBoot)."""
    config["service_account"] = email
    config["oauth_scopes"] = ["https://www.googleapis.com/auth/cloud-platform"]
    # Pods reach Google Cloud as their Kubernetes service account through GKE's metadata server, never as the node's
    # account (CIS GKE 5.4.1).
    config["workload_metadata_config"] = {"mode": "GKE_METADATA"}
    if boot.boot_disk_key:
        config["boot_disk_kms_key"] = boot.boot_disk_key
    if boot.secure_boot:
        config["shielded_instance_config"] = {"enable_secure_boot": True, "enable_integrity_monitoring": True}
    return config


@dataclass(frozen=True)
class RepositoryRead:
    """A repository the nodes pull from, and so may read."""

    name: str  # the grant's resource name
    project: str
    location: str
    repository: pulumi.Input[str]
    # A repository the stack makes (a pull-through one): deleting it deletes its IAM policy, so the grant is made
    # again whenever it is replaced (Pulumi's replaceWith, pulumi/docs content/docs/iac/concepts/resources/options/
    # replacewith.md). None for the mirror, which the stack does not make.
    made_by_stack: pulumi.Resource | None = None
    # The mirror (images.mirror), made elsewhere: read at preview before the grant
    mirror: MirrorRepository | None = None


@dataclass(frozen=True)
class ClusterArgs:
    cluster: ClusterConfig
    project: str
    region: str
    slice_controller: bool  # GKE's slice controller add-on: the pools are sliced dynamically (tpu.machineType)
    # The VPC the cluster is made on: its node subnet and that subnet's secondary ranges, and the Cloud NAT private
    # nodes pull through (its egress), which every node pool waits for
    network: Network
    # The grants the cluster's create needs first (components/gcp/service_agents.py): GKE's agent on the Secrets' key,
    # Compute Engine's on the boot disks' key (its first default pool boots with it); empty where the stack makes none
    secrets_key_grants: list[pulumi.Resource]
    boot_key_grants: list[pulumi.Resource]
    container_api: pulumi.Resource  # the Kubernetes Engine API's enablement: the version lookup waits for it
    # The repositories the nodes pull from: images.mirror, or the pull-through repositories (none: each image from
    # its own registry). Every Kubernetes object waits for the nodes' read on each.
    image_repositories: list[RepositoryRead]
    # Whether this `up` creates the cluster (a new stack, or a cluster fact changed: components/lifecycle.py); None:
    # not known, the last `up` exported no lifecycle facts
    creates_cluster: pulumi.Output[bool | None]


class Cluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:Cluster", name, None, opts)
        child = children_of(self, opts)
        cluster = args.cluster
        control_plane = cluster.control_plane
        authorized_networks = control_plane.authorized_networks

        self.node_service_account = gcp.serviceaccount.Account(
            "node-sa",
            project=args.project,
            account_id=cluster.node_account_id,
            display_name=f"GKE nodes of {cluster.name}",
            # A new id: the new account and its grants first, the pools replaced onto it, the old account last
            opts=pulumi.ResourceOptions.merge(child, NEW_ACCOUNT_FIRST),
        )
        member = self.node_service_account.email.apply(lambda email: f"serviceAccount:{email}")
        # Least privilege for nodes: GKE's node role (logs and metrics: roles/container.defaultNodeServiceAccount grants
        # logging.logEntries.create, monitoring.* and autoscaling.sites.writeMetrics, darkbitio/gcp-iam-role-permissions
        # at 8ab2a6ff, 2026-08-22), and no project-wide image read: the nodes read the repositories they pull from, each
        # alone (below). A role on this project reaches no other project's repository anyway (IAM policies are inherited
        # down the resource hierarchy only: cloud.google.com/iam/docs/resource-hierarchy-access-control), so it never
        # served the JAX and Saxml images, which are in Google's cloud-tpu-images project, public.
        self.node_service_account_role = gcp.projects.IAMMember(
            "node-sa-container-defaultnodeserviceaccount",
            project=args.project,
            role="roles/container.defaultNodeServiceAccount",
            member=member,
            opts=child,
        )

        email = self.node_service_account.email
        default_pool: gcp.container.ClusterNodeConfigArgsDict = {}
        floor_reviewed = self._review_floor(args).apply(lambda _: self.node_service_account_role)
        self.cluster = gcp.container.Cluster(
            "gke-cluster",
            project=args.project,
            name=cluster.name,
            location=args.region,
            network=args.network.vpc.id,
            subnetwork=args.network.node_subnet.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={
                "cluster_secondary_range_name": args.network.pods_range_name,
                "services_secondary_range_name": args.network.services_range_name,
            },
            # GKE creates a default pool with the cluster; the provider deletes it right after
            # (remove_default_node_pool) for the pools below. That pool runs as our node account
            # too: by default it would run as the project's default compute account, and a project
            # whose org policy disables or removes that account cannot create the cluster at all.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=node_config(default_pool, email, cluster.system_pool_boot),
            release_channel={"channel": cluster.release_channel},
            # The minor alias, never a patch: a patch leaves the channel within weeks and the create
            # would then fail. GKE starts the cluster at the newest patch of the minor the channel
            # offers (checked against the floor below), and the provider only ever upgrades a
            # master below it, so later previews leave the channel's auto-upgrades alone.
            min_master_version=GkeVersion.parse(cluster.version).minor_alias,
            deletion_protection=cluster.deletion_protection,
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
            # No client certificate (CIS GKE 5.8.1): kubectl authenticates with Google credentials only. GKE
            # issues none unless asked, and the provider records false for a cluster without one, so a cluster
            # made before this line plans no change (the field is ForceNew; hashicorp/terraform-provider-google
            # v7.45.0 google/services/container/resource_container_cluster.go, flattenMasterAuth).
            master_auth={"client_certificate_config": {"issue_client_certificate": False}},
            database_encryption=(
                {"state": "ENCRYPTED", "key_name": cluster.secrets_encryption_key}
                if cluster.secrets_encryption_key
                else None
            ),
            # Sent whichever way it is set, so that turning enforcement off sends DISABLED itself: for a block left
            # out the provider sends only the deprecated `enabled: false` (expandBinaryAuthorization, v7.45.0).
            binary_authorization={"evaluation_mode": cluster.binary_authorization},
            # Google Groups for RBAC, or None: left out, never sent empty. The provider creates a cluster with the
            # feature on whenever the block is there, an empty group included (expandAuthenticatorGroupsConfig,
            # v7.45.0), and reads a missing block back from GKE (Optional and Computed): emptied on a running cluster,
            # GKE keeps its group, which the preview says (components/stack.py).
            authenticator_groups_config=(
                {"security_group": cluster.rbac_security_group} if cluster.rbac_security_group else None
            ),
            # Sent either way: the provider reads a missing value back from GKE (Optional and Computed), so a true
            # turned false again must reach GKE to turn it off.
            enable_intranode_visibility=cluster.intranode_visibility,
            # GKE's Secret Manager add-on, updated in place either way: the provider sends a change as one
            # DesiredSecretManagerConfig update (hashicorp/terraform-provider-google v7.45.0
            # google/services/container/resource_container_cluster.go, no ForceNew; its acceptance test turns it on
            # and off on one cluster). Sent false too: the provider records false for a cluster GKE reports without
            # it (flattenSecretManagerConfig), so a stack made before this line plans no change, and a true turned
            # false must reach GKE (SecretManagerCfgSuppress hides the block's removal only when it was false).
            # rotation_config is left to GKE: a pod has the secret version it mounted at its start, or a newer one
            # if GKE rotates the files.
            secret_manager_config={"enabled": cluster.secret_manager},
            maintenance_policy=_maintenance_policy(cluster.maintenance_window, cluster.maintenance_exclusions),
            # The cluster's default for new nodes (private or not) and whether its public IP endpoint is off. Sent
            # whichever way it is set: the provider suppresses a false it never saw as true, and a true turned false
            # again must reach GKE (the block is read back from GKE, so leaving it out keeps it).
            # ``enable_private_endpoint`` is GKE's `enable_public_endpoint` reversed (cluster_service.proto); with the
            # IP endpoints off there is no public one either, so it is true then too, as GKE reports it.
            private_cluster_config={
                "enable_private_nodes": cluster.private_nodes,
                "enable_private_endpoint": control_plane.ip_endpoint != "public",
            },
            # Only IAM tokens over the DNS-based endpoint: Kubernetes service-account tokens and client certificates
            # (enable_k8s_tokens_via_dns, enable_k8s_certs_via_dns) stay refused there.
            control_plane_endpoints_config={
                "dns_endpoint_config": {"allow_external_traffic": control_plane.dns_endpoint},
                "ip_endpoints_config": {"enabled": control_plane.ip_endpoint != "off"},
            },
            # The ranges the public IP admits, and no other Google Cloud address (every project's VMs would be in
            # GKE's `gcp_public_cidrs_access`). None: the public IP admits every address, or there is none.
            master_authorized_networks_config=(
                {
                    "cidr_blocks": [{"cidr_block": n.cidr, "display_name": n.name} for n in authorized_networks],
                    "gcp_public_cidrs_access_enabled": False,
                }
                if control_plane.ip_endpoint == "public" and authorized_networks
                else None
            ),
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(
                    depends_on=[floor_reviewed, *args.secrets_key_grants, *args.boot_key_grants],
                    custom_timeouts=pulumi.CustomTimeouts(create="45m", update="60m", delete="45m"),
                    # only the create's default pool reads it, and that pool is gone: a change later (or
                    # a stack made before the field was set) must not plan a replacement of the cluster
                    ignore_changes=["nodeConfig"],
                ),
            ),
        )

        # The nodes pull from the mirror or the pull-through repositories: read on each repository alone, which may be
        # another project's (an organisation's mirror). Every Kubernetes object waits for them (the provider), and a
        # destroy deletes them once the objects are gone. Every node pool waits for them too: on a new node account
        # (cluster.nodeServiceAccountId) the pools are replaced onto it while the objects stay, and the pods that come
        # back on the new nodes pull as it. (The account's project role comes first through the cluster, which waits
        # for it at every `up`, replaced or not.) The grant on the mirror waits for the preview's read of it, which
        # refuses a mirror that is not there.
        self.repository_readers = [
            gcp.artifactregistry.RepositoryIamMember(
                read.name,
                project=read.project,
                location=read.location,
                repository=read.repository,
                role="roles/artifactregistry.reader",
                member=member,
                opts=pulumi.ResourceOptions.merge(
                    child,
                    pulumi.ResourceOptions(
                        replace_with=[read.made_by_stack] if read.made_by_stack else None,
                        depends_on=[read_mirror(read.mirror, self.node_service_account, self)] if read.mirror else None,
                    ),
                ),
            )
            for read in args.image_repositories
        ]

        # What every node pool (the system pool, TpuCapacity's) takes: it waits for (and is deleted before) the Cloud
        # NAT its private nodes pull through and the node account's read on each repository they pull from; it leaves
        # to GKE the network_config fields it never sets; and a change that replaces it deletes it first, as the new
        # pool keeps its name, which GKE would refuse beside the old one.
        self.node_pool_options = pulumi.ResourceOptions(
            depends_on=[*args.network.egress, *self.repository_readers],
            ignore_changes=NETWORK_CONFIG_NOT_OURS,
            delete_before_replace=True,
        )
        system_pool: gcp.container.NodePoolNodeConfigArgsDict = {"machine_type": cluster.system_pool.machine_type}
        self.system_pool = gcp.container.NodePool(
            "system-pool",
            project=args.project,
            cluster=self.cluster.name,
            location=args.region,
            name=naming.SYSTEM_POOL_NAME,
            node_count=cluster.system_pool.nodes_per_zone,
            node_config=node_config(system_pool, email, cluster.system_pool_boot),
            # Set on every pool, either way: the cluster's default reaches only nodes created after it changes
            # (ClusterUpdate.desired_default_enable_private_nodes), so a running pool changes only by its own update.
            network_config={"enable_private_nodes": cluster.private_nodes},
            management={"auto_repair": True, "auto_upgrade": True},
            # Its controllers pull from outside Google (the charts' images): private nodes need the NAT first, and its
            # boot disks the grant on their key. A change that replaces it (its service account, its boot) deletes it
            # first.
            opts=pulumi.ResourceOptions.merge(waiting_for(child, *args.boot_key_grants), self.node_pool_options),
        )

        # The control plane as the stack reaches it: by its DNS name whenever the DNS-based endpoint takes outside
        # traffic (it works from anywhere IAM lets the caller in, whatever the IP endpoints allow, and its certificate
        # is publicly signed, so no cluster CA goes with it), or by the IP GKE gives as the cluster's endpoint (the
        # private one when the public IP is off); and the gcloud flag that writes a kubeconfig for it.
        if control_plane.dns_endpoint:
            self.endpoint: pulumi.Output[str] = self.cluster.control_plane_endpoints_config.apply(_dns_endpoint)
            ca_certificate: pulumi.Output[str | None] = pulumi.Output.from_input(None)
            flag = " --dns-endpoint"
        else:
            self.endpoint = self.cluster.endpoint
            ca_certificate = self.cluster.master_auth.cluster_ca_certificate
            flag = " --internal-ip" if control_plane.ip_endpoint == "private" else ""
        kubeconfig: pulumi.Output[str] = pulumi.Output.all(self.cluster.name, self.endpoint, ca_certificate).apply(
            lambda parts: build_kubeconfig(*parts)
        )
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(kubeconfig)
        # Kubernetes objects wait for the system pool: their controllers need somewhere to run.
        # The cluster's own identity, not its endpoint or CA: a control-plane IP or credential
        # rotation changes the kubeconfig, and without a fixed identifier the provider (and with it
        # every in-cluster object, Kueue's CRDs and queue state included) would be replaced.
        self.cluster_identifier = cluster_identifier(args.project, args.region, cluster.name)
        self.provider = kubernetes_provider(
            self.kubeconfig,
            self.cluster_identifier,
            pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool, *self.repository_readers]),
        )

        self.name = self.cluster.name
        # GKE creates the project's identity pool with the first Workload Identity cluster: members
        # built from this output make every binding wait for the cluster.
        self.workload_pool: pulumi.Output[str] = self.cluster.workload_identity_config.apply(_workload_pool)
        where = f"--region {args.region} --project {args.project}{flag}"
        self.get_credentials_command = self.cluster.name.apply(
            lambda name: f"gcloud container clusters get-credentials {name} {where}"
        )

        self.register_outputs({"name": self.name, "endpoint": self.endpoint, "kubeconfig": self.kubeconfig})

    def _review_floor(self, args: ClusterArgs) -> pulumi.Output[None]:
        """Compare the floor with what the cluster's release channel offers, at preview: a new cluster asks for the
        floor's minor and gets the channel's newest patch of it, and GKE refuses a minor the channel does not offer (the
        location's list is not the channel's: a minor can be valid here and gone from the channel). Refused where this
        `up` creates the cluster; a warning on a running cluster, which is past its floor already."""
        cluster = args.cluster
        offered = refused_if_unread(
            gcp.container.get_engine_versions_output(
                location=args.region,
                project=args.project,
                version_prefix=f"{GkeVersion.parse(cluster.version).minor_alias}.",
                # Its own wait: the component's depends_on is not an invoke's (on an empty project the
                # lookup would run at program start and fail with the API's 403 SERVICE_DISABLED).
                opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[args.container_api]),
            ),
            "gcp:container/getEngineVersions:getEngineVersions",
            "cluster.version",
            f"the GKE versions offered in {args.region}",
        )

        def review(answer: list[Any]) -> None:
            latest, defaults, creates = answer
            if latest is None:  # not looked up (the offline render, or a first preview before the API is on)
                return
            newest = latest.get(cluster.release_channel)
            default = (defaults or {}).get(cluster.release_channel)
            if problem := channel_floor_problem(cluster.version, cluster.release_channel, newest, default):
                if creates:
                    say_review([], [], [Problem("cluster.version", *problem)])
                pulumi.log.warn(f"cluster.version: {problem[0]}; {problem[1]}", self)

        latest, defaults = offered.release_channel_latest_version, offered.release_channel_default_version
        return pulumi.Output.all(latest, defaults, args.creates_cluster).apply(review)


def _dns_endpoint(config: gcp.container.outputs.ClusterControlPlaneEndpointsConfig | None) -> str:
    if config is None or config.dns_endpoint_config is None or not config.dns_endpoint_config.endpoint:
        raise ValueError("GKE gave the cluster no DNS-based endpoint")
    return config.dns_endpoint_config.endpoint


# The Kubernetes provider's switch that makes a create take over an object of the same name the cluster already holds
# (server-side apply) instead of refusing it, as pulumi-kubernetes 4.29.0 and later do (CHANGELOG.md 4.29.0, #2926).
# The program never sets it: the variable decides, read by the SDK into the provider's config (as Go's strconv reads
# a bool: pulumi_kubernetes/_utilities.py get_env_bool). It belongs to the recoveries of docs/recovery.md only.
UPSERT_EXISTING_ENV = "PULUMI_K8S_UPSERT_EXISTING_OBJECTS"


def upsert_switch_warning(environ: Mapping[str, str]) -> str | None:
    """What the preview says while the switch is on: every create then takes over what it finds."""
    if environ.get(UPSERT_EXISTING_ENV) not in ("1", "t", "T", "true", "TRUE", "True"):
        return None
    return (
        f"{UPSERT_EXISTING_ENV} is on: every Kubernetes object this `up` creates takes over an object of the same name "
        "that the cluster already holds, where the provider would refuse it. Keep it to the recovery `up` of "
        "docs/recovery.md (When an operation fails halfway), then run a plain `pulumi up`, which turns it off in "
        "the state"
    )


def kubernetes_provider(kubeconfig: pulumi.Input[str], identifier: str, opts: pulumi.ResourceOptions) -> k8s.Provider:
    """The provider of the Kubernetes layer: server-side apply, a fixed cluster identifier (a new kubeconfig updates
    it in place, never replacing every object), and the refusal of existing objects unless the switch is on."""
    if warning := upsert_switch_warning(os.environ):
        pulumi.log.warn(warning)
    return k8s.Provider(
        "gke", kubeconfig=kubeconfig, cluster_identifier=identifier, enable_server_side_apply=True, opts=opts
    )


def _workload_pool(config: gcp.container.outputs.ClusterWorkloadIdentityConfig | None) -> str:
    if config is None or not config.workload_pool:
        raise ValueError("the cluster has no Workload Identity pool")
    return config.workload_pool


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


def build_kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin (no static token).

    ``ca_certificate`` None: the endpoint is the DNS-based one, whose certificate a public CA signs, not the
    cluster's root CA (GKE's "About network isolation"); giving the cluster CA would make it the only trust
    anchor and fail every handshake, so the client keeps the system's trust store, as after
    `gcloud container clusters get-credentials --dns-endpoint`."""
    context = f"gke_{cluster_name}"
    cluster: dict[str, str] = {"server": f"https://{endpoint}"}
    if ca_certificate is not None:
        cluster["certificate-authority-data"] = ca_certificate
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "gke-gcloud-auth-plugin",
        "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
        "provideClusterInfo": True,
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "users": [{"name": context, "user": {"exec": plugin}}],
    }
    return yaml.safe_dump(config, sort_keys=False)
