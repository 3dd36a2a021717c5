"""The VPC: jumbo-frame MTU, the node subnet with pod/service ranges, the proxy-only subnet, the firewall rules
(the VPC's own ranges; the control plane to the controllers' webhooks), and the Cloud Router and NAT that are the
private nodes' way out."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components import naming
from components.gcp.config import NAT_LOGGING_OFF, NetworkConfig
from components.resources import children_of


@dataclass(frozen=True)
class NetworkArgs:
    network: NetworkConfig  # the block
    project: str
    region: str
    nat: bool  # the Cloud NAT of network.nat: a node is private; false, the nodes have external addresses
    # The TCP ports the control plane calls on the pods of the releases the stack installs (their webhooks and
    # aggregated APIs: components/platform/config.py RELEASE_CONTROL_PLANE_PORTS), sorted, each once; empty: no rule
    control_plane_ports: tuple[int, ...] = ()


class Network(pulumi.ComponentResource):
    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:Network", name, None, opts)
        child = children_of(self, opts)
        names = naming.network_names(args.network.prefix)
        ranges = naming.secondary_range_names(args.network.prefix)

        self.vpc = gcp.compute.Network(
            "vpc",
            project=args.project,
            name=names["network"],
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            mtu=args.network.mtu,
            opts=child,
        )
        self.node_subnet = gcp.compute.Subnetwork(
            "node-subnet",
            project=args.project,
            region=args.region,
            name=names["nodeSubnet"],
            network=self.vpc.id,
            ip_cidr_range=args.network.node_cidr,
            private_ip_google_access=True,
            log_config=_flow_logs(args.network.flow_logs.sampling if args.network.flow_logs.enabled else None),
            secondary_ip_ranges=[
                {"range_name": ranges["pods"], "ip_cidr_range": args.network.pod_cidr},
                {"range_name": ranges["services"], "ip_cidr_range": args.network.service_cidr},
            ],
            opts=child,
        )
        # The regional Application Load Balancers of both Gateway classes the stack takes (gke-l7-rilb and
        # gke-l7-regional-external-managed) run their Envoys here.
        # GKE deletes a load balancer's endpoint groups after its Gateway or Service, and the
        # provider does not retry a subnet or VPC delete they still hold: the load-balancer drain
        # gate (components/platform/gates.py) waits for them, between these and their users.
        self.proxy_only_subnet = gcp.compute.Subnetwork(
            "proxy-only-subnet",
            project=args.project,
            region=args.region,
            name=names["proxyOnlySubnet"],
            network=self.vpc.id,
            ip_cidr_range=args.network.proxy_only_cidr,
            purpose="REGIONAL_MANAGED_PROXY",
            role="ACTIVE",
            opts=child,
        )
        # Only the VPC's own ranges: nodes (TPU hosts talk ICI/DCN-adjacent traffic on any port),
        # pods, and the load balancer proxies. The reference opened all of 10/8 and 172.16/12.
        self.internal_firewall = gcp.compute.Firewall(
            "allow-internal",
            project=args.project,
            name=names["internalFirewall"],
            network=self.vpc.id,
            direction="INGRESS",
            priority=1000,
            description="Traffic between the VPC's own node, pod and proxy-only ranges.",
            source_ranges=[args.network.node_cidr, args.network.pod_cidr, args.network.proxy_only_cidr],
            allows=[{"protocol": "all"}],
            opts=child,
        )

        # The control plane's calls into the cluster (admission and conversion webhooks, aggregated APIs: the API
        # server dials the serving pod on its port), which GKE's own rule does not cover: GKE's control-plane-to-node
        # rule admits tcp 443 and 10250 only (cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules,
        # gke-<cluster>-<hash>-master), and the releases serve on 9443 and 8082. Its sources are where the control
        # plane of this cluster kind (Private Service Connect, no masterIpv4CidrBlock) reaches a pod from, which
        # Google's pages leave unsaid; both candidates the sources name are admitted, to exactly those ports:
        # - the node subnet's primary range: the control plane's private endpoint is an address of the subnetwork
        #   it is provisioned in (pulumi-gcp 10.2.0 privateClusterConfig.privateEndpointSubnetwork, "Subnetwork in
        #   cluster's network where master's endpoint will be provisioned", never set here: the cluster's own), and
        #   the Terraform GKE module opens its webhook ports from that range for such a cluster
        #   (terraform-google-modules/terraform-google-kubernetes-engine 552b3f4, 2025-06-06, modules/private-cluster
        #   main.tf cluster_endpoint_for_nodes, firewall.tf master_webhooks);
        # - the Pod range: where GKE routes the API server through its konnectivity agents, a call arrives from an
        #   agent's pod in kube-system (tigera/operator f6dfc4b, 2026-08-18, "AKS and GKE route the apiserver
        #   through konnectivity agents").
        # allow-internal admits both ranges on every port already; this rule keeps the webhooks reachable however
        # allow-internal changes, and names the fact the preview of a cluster made elsewhere asks its owner to open
        # (components/gcp/existing_cluster.py). No target: every instance of this VPC is one of the cluster's nodes.
        # The releases wait for it, so `pulumi destroy` uninstalls them (their pods and webhooks) before deleting it
        # (components/platform/releases.py). A change of ports or ranges updates it in place; its name, network and
        # direction would replace it (hashicorp/terraform-provider-google 07fc865
        # google/services/compute/resource_compute_firewall.go: only name, direction and project are ForceNew).
        # What must admit the control plane before a release serves a webhook (these), and be deleted after it.
        self.control_plane_access: list[pulumi.Resource] = []
        if args.control_plane_ports:
            firewall = gcp.compute.Firewall(
                "allow-control-plane",
                project=args.project,
                name=names["controlPlaneFirewall"],
                network=self.vpc.id,
                direction="INGRESS",
                priority=1000,
                description="The GKE control plane's calls to the webhooks and aggregated APIs the stack installs.",
                source_ranges=[args.network.node_cidr, args.network.pod_cidr],
                allows=[{"protocol": "tcp", "ports": [str(port) for port in args.control_plane_ports]}],
                opts=child,
            )
            self.control_plane_access.append(firewall)

        # Private nodes reach what lies outside Google (Docker Hub, ghcr.io and registry.k8s.io images, Hugging
        # Face, the package index) through Cloud NAT; Google's APIs and Artifact Registry stay on Private Google
        # Access. The node subnet only (not the proxy-only one), every range of it: the nodes' and, for what GKE
        # does not masquerade to the node's address, the pods'. What must exist before anything on the nodes pulls
        # from outside Google (egress), and be deleted after it.
        self.egress: list[pulumi.Resource] = []
        if args.nat:
            router = gcp.compute.Router(
                "nat-router",  # not "router": that is the llm-d router's release
                project=args.project,
                region=args.region,
                name=names["router"],
                network=self.vpc.id,
                description="Cloud NAT of the private nodes.",
                opts=child,
            )
            nat = gcp.compute.RouterNat(
                "nat",
                project=args.project,
                region=args.region,
                name=names["nat"],
                router=router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[{"name": self.node_subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
                # A node gets ports as its connections need them (a vLLM image pull, the weights staging's
                # parallel downloads), not a fixed share; dynamic allocation excludes endpoint-independent mapping.
                enable_dynamic_port_allocation=True,
                enable_endpoint_independent_mapping=False,
                min_ports_per_vm=args.network.nat.min_ports_per_vm,
                max_ports_per_vm=args.network.nat.max_ports_per_vm,
                log_config=(
                    {"enable": False, "filter": "ERRORS_ONLY"}
                    if args.network.nat.logging == NAT_LOGGING_OFF
                    else {"enable": True, "filter": args.network.nat.logging}
                ),
                opts=child,
            )
            self.egress.append(nat)

        self.pods_range_name = ranges["pods"]
        self.services_range_name = ranges["services"]
        # The names the stack exports (__main__.py), by output: the component's outputs too.
        self.outputs = {
            "networkName": self.vpc.name,
            "nodeSubnetName": self.node_subnet.name,
            "proxyOnlySubnetName": self.proxy_only_subnet.name,
        }
        self.register_outputs(self.outputs)


def _flow_logs(sampling: float | None) -> gcp.compute.SubnetworkLogConfigArgsDict | None:
    """VPC Flow Logs of the node subnet, at the provider's defaults but for the sampling. The proxy-only
    subnet takes none: flow logging is not supported for a REGIONAL_MANAGED_PROXY subnet
    (hashicorp/terraform-provider-google v7.45.0, google/services/compute/resource_compute_subnetwork.go,
    log_config; the defaults are from there too)."""
    if sampling is None:
        return None
    return {"aggregation_interval": "INTERVAL_5_SEC", "flow_sampling": sampling, "metadata": "INCLUDE_ALL_METADATA"}
