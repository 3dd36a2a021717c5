"""A cluster made elsewhere, as the Kubernetes layer's target: its provider, nothing created.

Given a kubeconfig (a secret), the provider uses it as is. Given a GKE cluster's name and
location, the kubeconfig is built as for a cluster of this stack (credentials from
gke-gcloud-auth-plugin): by the cluster's DNS-based endpoint when it takes outside traffic, otherwise
by its IP endpoint and CA, all read from the GKE API. Either way the stack creates no network,
Cloud NAT, cluster or TPU pools; what it declares in the cluster is the same as on a cluster of its own.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.config_base import ConfigError, Problem
from components.gcp.cluster import Cluster, build_kubeconfig, kubernetes_provider
from components.gcp.config import ExistingClusterConfig
from components.gcp.review import refused_if_unread, say_review


@dataclass(frozen=True)
class ExistingClusterArgs:
    project: str
    name: str  # the GKE cluster's name, or the stack's name for the cluster of a kubeconfig
    existing: ExistingClusterConfig  # its kubeconfig (empty: look the GKE cluster up in its location)
    # The TCP ports the control plane calls on the pods of the releases the stack installs there (their webhooks and
    # aggregated APIs), sorted, each once; empty: it installs none
    control_plane_ports: tuple[int, ...] = ()
    # The range the serving NetworkPolicies admit the Gateway's proxies from (network.proxyOnlyCidr); empty: no serving
    proxy_only_cidr: str = ""
    # The node and Pod ranges the Saxml HTTP server admits the cluster's own clients from (network.nodeCidr and
    # network.podCidr, with saxml.http.clusterClients); empty: none
    client_cidrs: tuple[str, ...] = ()


class ExistingCluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-gke:gcp:ExistingCluster", name, None, opts)
        if args.existing.kubeconfig:
            self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(args.existing.kubeconfig)
            self.endpoint: pulumi.Output[str | None] = pulumi.Output.from_input(None)
            self.get_credentials_command: pulumi.Output[str] = pulumi.Output.from_input(
                "(the stack deploys onto the cluster of its cluster.existing.kubeconfig)"
            )
        else:
            location = args.existing.location
            found = refused_if_unread(
                gcp.container.get_cluster_output(
                    name=args.name, location=location, project=args.project, opts=pulumi.InvokeOptions(parent=self)
                ),
                "gcp:container/getCluster:getCluster",
                "cluster.existing.name",
                f"cluster {args.name} in {location}",
                f"name a cluster of `gcloud container clusters list --project {args.project}` and its location "
                "(cluster.existing.location: a region, or a zone for a zonal cluster)",
            )
            dns_endpoint = found.control_plane_endpoints_configs.apply(outside_dns_endpoint)
            reached = pulumi.Output.all(dns_endpoint, found.endpoint, found.master_auths).apply(
                lambda parts: reach(args, *parts)
            )
            self.kubeconfig = pulumi.Output.secret(
                pulumi.Output.all(found.name, reached).apply(lambda parts: build_kubeconfig(parts[0], *parts[1]))
            )
            self.endpoint = reached.apply(lambda pair: pair[0])
            command = f"gcloud container clusters get-credentials {args.name} --location {location}"
            self.get_credentials_command = dns_endpoint.apply(
                lambda dns: f"{command} --project {args.project}" + (" --dns-endpoint" if dns else "")
            )
            if args.proxy_only_cidr:
                # The active proxy-only subnets of the cluster's region, in its VPC's project (a Shared VPC's host
                # project): proxy_only_problems. The data source returns neither purpose nor role, so the filter of
                # subnetworks.list selects them, in its AIP-160 form of parenthesized comparisons, all of which hold
                # (the list's filter parameter, Compute Engine v1 REST reference; hashicorp/terraform-provider-google
                # 0a504cd google/services/compute/data_source_google_compute_subnetworks.go passes it on as it is).
                listed = refused_if_unread(
                    gcp.compute.get_subnetworks_output(
                        project=found.network.apply(lambda network: _project_of(network, args.project)),
                        region=_region_of(location),
                        filter='(purpose = "REGIONAL_MANAGED_PROXY") (role = "ACTIVE")',
                        opts=pulumi.InvokeOutputOptions(parent=self),
                    ),
                    "gcp:compute/getSubnetworks:getSubnetworks",
                    "network.proxyOnlyCidr",
                    f"the proxy-only subnets of cluster {args.name}'s region",
                )
                pulumi.Output.all(found.network, listed.subnetworks).apply(
                    lambda parts: say_review([], [], proxy_only_problems(args, *parts))
                )
            if args.client_cidrs:
                # The primary range of the cluster's subnetwork, its nodes' (subnetworks.get: the
                # google_compute_subnetwork data source reads it by name, region and project, a Shared VPC's host
                # project), and its Pod range (getCluster's clusterIpv4Cidr): client_range_problems.
                node_subnet = refused_if_unread(
                    gcp.compute.get_subnetwork_output(
                        name=found.subnetwork.apply(_last),
                        region=_region_of(location),
                        project=found.subnetwork.apply(lambda path: _project_of(path, args.project)),
                        opts=pulumi.InvokeOutputOptions(parent=self),
                    ),
                    "gcp:compute/getSubnetwork:getSubnetwork",
                    "network.nodeCidr",
                    f"cluster {args.name}'s subnetwork",
                )
                pulumi.Output.all(node_subnet.ip_cidr_range, found.cluster_ipv4_cidr).apply(
                    lambda ranges: say_review([], [], client_range_problems(args, ranges))
                )
        self.cluster_identifier = args.existing.identifier(args.project, args.name)
        self.provider = kubernetes_provider(
            self.kubeconfig, self.cluster_identifier, pulumi.ResourceOptions(parent=self)
        )
        self.name: pulumi.Output[str] = pulumi.Output.from_input(args.name)
        # GKE's pool is the project's: bindings to it are the same as on a cluster of this stack.
        self.workload_pool: pulumi.Output[str] = pulumi.Output.from_input(f"{args.project}.svc.id.goog")
        # The stack makes no firewall rule on a network it does not own: the preview says what to open there.
        if args.control_plane_ports:
            if args.existing.kubeconfig:
                pulumi.log.warn(control_plane_access_warning(args, None), self)
            else:
                found.apply(lambda cluster: pulumi.log.warn(control_plane_access_warning(args, cluster), self))
        self.register_outputs({"name": self.name})


# What the Kubernetes layer is deployed onto: a cluster of this stack, or one made elsewhere.
Target = Cluster | ExistingCluster


def outside_dns_endpoint(configs: list[gcp.container.outputs.GetClusterControlPlaneEndpointsConfigResult]) -> str:
    """The cluster's DNS-based endpoint if it takes traffic from outside Google Cloud, else ""."""
    for config in configs or []:
        for dns in config.dns_endpoint_configs or []:
            if dns.allow_external_traffic and dns.endpoint:
                return dns.endpoint
    return ""


def reach(
    args: ExistingClusterArgs,
    dns_endpoint: str,
    endpoint: str | None,
    auths: list[Any] | None,
) -> tuple[str, str | None]:
    """The endpoint the kubeconfig names, and the CA it trusts there (None: the DNS endpoint's public CA).

    ``auths``: getCluster's masterAuths, typed or as mappings (``_field``); empty when GKE's answer has no masterAuth
    (hashicorp/terraform-provider-google, flattenMasterAuth). The answer for a cluster still being created may lack
    the IP endpoint and its CA (mondoohq/mql#858: "some of the properties are not set"): refused under the key that
    names the cluster, rather than a kubeconfig that reaches nothing."""
    if dns_endpoint:
        return dns_endpoint, None
    ca_certificate = _field(auths[0], "cluster_ca_certificate") if auths else ""
    if endpoint and ca_certificate:
        return endpoint, ca_certificate
    problem = Problem(
        "cluster.existing.name",
        f"GKE reports no endpoint or CA certificate of cluster {args.name} in {args.existing.location} yet, so no "
        "kubeconfig can reach it",
        f"wait until `gcloud container clusters describe {args.name} --location {args.existing.location} "
        f"--project {args.project} --format='value(status)'` says RUNNING, then run again",
    )
    raise pulumi.RunError(str(ConfigError([problem])))


def _field(result: Any, name: str) -> str:
    """A string field of an invoke's nested result: the SDK hands some over typed, others as mappings of the same
    (snake_case) keys (pulumi 3 under pulumi-gcp 10.2.0's getCluster: privateClusterConfigs came as a dict); None,
    where there is no such result, has none of the fields either."""
    value = result.get(name) if isinstance(result, dict) else getattr(result, name, None)
    return str(value or "")


def control_plane_access_warning(args: ExistingClusterArgs, found: gcp.container.GetClusterResult | None) -> str:
    """What the owner of a cluster made elsewhere must open for the webhooks the stack installs there, with the
    sources Network (components/gcp/network.py) admits on a cluster of the stack's own: a VPC-peering cluster's
    control plane range, the one GKE's own control-plane rule admits (tcp 443 and 10250 only,
    cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules); on a Private Service Connect cluster the range
    of the subnetwork its private endpoint is in, and the Pod range (the konnectivity agents). ``found``: GKE's answer
    for the cluster (getCluster), None for a cluster given by its kubeconfig."""
    rules = ",".join(f"tcp:{port}" for port in args.control_plane_ports)
    name = args.name
    if found is None:
        project, network = args.project, "<the cluster's network>"
        sources = (
            "<privateClusterConfig.masterIpv4CidrBlock of `gcloud container clusters describe`, or on a Private "
            "Service Connect cluster the range of its private endpoint's subnetwork and its clusterIpv4Cidr>"
        )
    else:
        # The network's own project: a Shared VPC's host project holds the network and its firewall rules.
        project, network = _project_of(found.network, args.project), _last(found.network)
        private = found.private_cluster_configs[0] if found.private_cluster_configs else None
        # A VPC-peering cluster's control plane range (privateClusterConfig.masterIpv4CidrBlock, a /28), else the
        # range of its private endpoint's subnetwork (privateEndpointSubnetwork, else the cluster's) and the Pod range
        sources = _field(private, "master_ipv4_cidr_block")
        if not sources:
            subnetwork = _field(private, "private_endpoint_subnetwork") or found.subnetwork
            endpoint_range = (
                f"$(gcloud compute networks subnets describe {_last(subnetwork)} "
                f"--region {_region_of(args.existing.location)} "
                f"--project {_project_of(subnetwork, project)} --format='value(ipCidrRange)')"
            )
            sources = ",".join(s for s in (endpoint_range, found.cluster_ipv4_cidr) if s)
    return (
        f"cluster.existing: the stack installs webhooks and aggregated APIs the control plane calls on {rules} of their "
        f"pods, and makes no firewall rule on {name}'s network; GKE's own control-plane rule admits tcp 443 and 10250 "
        "only. Unless a rule there admits them, every create of a JobSet, Kueue or LeaderWorkerSet object fails with "
        f"'failed calling webhook'. Open them: gcloud compute firewall-rules create {name}-allow-control-plane "
        f"--project {project} --network {network} --direction INGRESS --action ALLOW --rules {rules} "
        f"--source-ranges {sources} (docs/network.md, Network isolation)"
    )


def proxy_only_problems(args: ExistingClusterArgs, network: str, active: list[Any]) -> list[Problem]:
    """What is wrong with network.proxyOnlyCidr, given the cluster's ``network`` (getCluster's) and the ``active``
    proxy-only subnets of its project and region (getSubnetworks' items, of any VPC there). The serving
    NetworkPolicies admit the Gateway's proxies from that range alone: both GatewayClasses the stack takes are
    regional Envoy-based load balancers, whose proxies connect from the one ACTIVE subnet of purpose
    REGIONAL_MANAGED_PROXY of their VPC and region, and cannot run without one
    (cloud.google.com/load-balancing/docs/proxy-only-subnets; a BACKUP one is "ready to be promoted to ACTIVE or is
    currently draining", Compute Engine v1 Subnetwork.Role)."""
    project, name, region = _project_of(network, args.project), _last(network), _region_of(args.existing.location)
    ranges = [_field(subnet, "ip_cidr_range") for subnet in active if _field(subnet, "network_name") == name]
    if not ranges:
        what = f"network {name} of cluster {args.name} has no active proxy-only subnet in {region}"
        fix = (
            f"create one: gcloud compute networks subnets create {name}-proxy-only --purpose REGIONAL_MANAGED_PROXY "
            f"--role ACTIVE --region {region} --network {name} --range {args.proxy_only_cidr} --project {project}"
        )
        return [Problem("network.proxyOnlyCidr", f"{what}: the serving Gateway never gets an address", fix)]
    whose = f"the range of the active proxy-only subnet of network {name} in {region}"
    drops = "the serving NetworkPolicies would drop every connection of the Gateway's proxies"
    return _other_range("network.proxyOnlyCidr", args.proxy_only_cidr, ranges[0], whose, drops)


def client_range_problems(args: ExistingClusterArgs, ranges: list[str]) -> list[Problem]:
    """What is wrong with network.nodeCidr and network.podCidr (``args.client_cidrs``), given the cluster's node and
    Pod ranges (``ranges``: its subnetwork's primary range, getCluster's clusterIpv4Cidr, "the IP address range of the
    container pods in this cluster", GKE API Cluster). saxml.http.clusterClients admits them to the Saxml HTTP load
    balancer, which sees a pod with its own address (docs/saxml.md): another range drops the cluster's own clients
    there and admits addresses that are not the cluster's. Pods of a node pool's or a cluster's additional Pod ranges
    are not read."""
    node, pod = args.client_cidrs
    drops = "the Saxml HTTP load balancer (saxml.http.clusterClients) would drop that cluster's own clients"
    return [
        *_other_range("network.nodeCidr", node, ranges[0], f"cluster {args.name}'s node range", drops),
        *_other_range("network.podCidr", pod, ranges[1], f"cluster {args.name}'s Pod range", drops),
    ]


def _other_range(key: str, given: str, real: str, whose: str, drops: str) -> list[Problem]:
    """The problem of ``key``'s range ``given`` where the cluster's (``real``, ``whose`` it is) is another: what the
    rules admitting that range ``drops``."""
    if ipaddress.ip_network(given) == ipaddress.ip_network(real):
        return []
    return [Problem(key, f"{given} is not {whose}, {real}: {drops}", f"set it to {real}")]


def _project_of(path: str, default: str) -> str:
    """The project of a `projects/<project>/...` resource path, else ``default``."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "projects" else default


def _region_of(location: str) -> str:
    """The region of a cluster's location (a zone's region)."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) == 3 else location


def _last(path: str) -> str:
    return path.rsplit("/", 1)[-1]
