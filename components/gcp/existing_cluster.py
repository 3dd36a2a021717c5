"""A cluster made elsewhere, as the Kubernetes layer's target: its provider, nothing created.

Given a kubeconfig (a secret), the provider uses it as is. Given a GKE cluster's name and
location, the kubeconfig is built as for a cluster of this stack (credentials from
gke-gcloud-auth-plugin): by the cluster's DNS-based endpoint when it takes outside traffic, otherwise
by its IP endpoint and CA, all read from the GKE API. Either way the stack creates no network,
Cloud NAT, cluster or TPU pools; what it declares in the cluster is the same as on a cluster of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.cluster import build_kubeconfig, cluster_identifier, kubernetes_provider


@dataclass(frozen=True)
class ExistingClusterArgs:
    project: str
    name: str  # the GKE cluster's name, or the stack's name for the cluster of a kubeconfig
    location: str  # empty with a kubeconfig
    kubeconfig: str  # empty: look the GKE cluster up


class ExistingCluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ExistingCluster", name, None, opts)
        if args.kubeconfig:
            kubeconfig: pulumi.Output[str] = pulumi.Output.secret(args.kubeconfig)
            identifier = f"kubeconfig/{args.name}"
            self.endpoint: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        else:
            found = gcp.container.get_cluster_output(
                name=args.name, location=args.location, project=args.project, opts=pulumi.InvokeOptions(parent=self)
            )
            dns_endpoint = found.control_plane_endpoints_configs.apply(outside_dns_endpoint)
            ca_certificate = found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)
            reached = pulumi.Output.all(dns_endpoint, found.endpoint, ca_certificate).apply(
                lambda parts: (parts[0], None) if parts[0] else (parts[1], parts[2])
            )
            kubeconfig = pulumi.Output.secret(
                pulumi.Output.all(found.name, reached).apply(
                    lambda parts: build_kubeconfig(parts[0], parts[1][0], parts[1][1])
                )
            )
            identifier = cluster_identifier(args.project, args.location, args.name)
            self.endpoint = reached.apply(lambda pair: pair[0])
        self.kubeconfig = kubeconfig
        self.cluster_identifier = identifier
        self.provider = kubernetes_provider(kubeconfig, identifier, pulumi.ResourceOptions(parent=self))
        self.name: pulumi.Output[str] = pulumi.Output.from_input(args.name)
        # GKE's pool is the project's: bindings to it are the same as on a cluster of this stack.
        self.workload_pool: pulumi.Output[str] = pulumi.Output.from_input(f"{args.project}.svc.id.goog")
        self.node_service_account_email: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        if args.kubeconfig:
            self.get_credentials_command: pulumi.Output[str] = pulumi.Output.from_input(
                "(the stack deploys onto the cluster of its cluster.existing.kubeconfig)"
            )
        else:
            command = (
                f"gcloud container clusters get-credentials {args.name} --location {args.location} "
                f"--project {args.project}"
            )
            self.get_credentials_command = dns_endpoint.apply(
                lambda dns: f"{command} --dns-endpoint" if dns else command
            )
        self.register_outputs({"name": self.name})


def outside_dns_endpoint(configs: list[gcp.container.outputs.GetClusterControlPlaneEndpointsConfigResult]) -> str:
    """The cluster's DNS-based endpoint if it takes traffic from outside Google Cloud, else ""."""
    for config in configs or []:
        for dns in config.dns_endpoint_configs or []:
            if dns.allow_external_traffic and dns.endpoint:
                return dns.endpoint
    return ""
