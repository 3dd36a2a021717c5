"""The harness's model of how GKE's control plane reaches a cluster's pods: from where, through which firewall.

The API server calls admission and conversion webhooks and aggregated APIs on the serving pod's own address and
port (GKE routes to a Service's endpoints, never its cluster IP: kubernetes/kubernetes#79739, liggitt,
2019-07-03). A call reaches the pod only if a VPC firewall rule admits its source to the node on that port, and the
NetworkPolicies of the pod's namespace admit it too (GKE Dataplane V2 enforces them).

Written apart from the program (components/gcp/network.py, existing_cluster.py) on purpose, as harness/gcp_model.py
is: the program's rule is held against this model, not against itself. tests/test_webhook_reach.py applies it.

What GKE documents and what it leaves unsaid (2026-12):
- GKE's own control-plane rule, gke-<cluster>-<hash>-master, admits tcp 443 and 10250 only, from the control
  plane's /28 of a VPC-peering cluster (https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules,
  "GKE cluster firewall rules"). Projects that serve webhooks elsewhere report the same limit: gke-labs/kube-agents
  pull request #633 (merged 2026-08-11), GoogleCloudPlatform/prometheus-engine #212.
- A Private Service Connect cluster (no masterIpv4CidrBlock, the kind the stack makes) has no such /28
  (telepresenceio/telepresence.io#303, 2026-08-16). Google's pages say its private endpoint is an internal address
  in the cluster's network (https://cloud.google.com/kubernetes-engine/docs/concepts/private-service-connect:
  "Google Cloud assigns an internal IP address to the control plane"; "The PSC endpoint is located entirely within
  the cluster network"), provisioned in the subnetwork privateEndpointSubnetwork names, else the cluster's own
  (pulumi-gcp 10.2.0 container ClusterPrivateClusterConfig.private_endpoint_subnetwork), and no page found says from
  which address its calls into the cluster arrive. The model takes both sources the upstream code names, and a
  call must be admitted from each:
  - the range of the private endpoint's subnetwork, as the Terraform GKE module takes it for such a cluster
    (terraform-google-modules/terraform-google-kubernetes-engine 552b3f4, 2025-06-06, modules/private-cluster
    main.tf cluster_endpoint_for_nodes: the private endpoint subnetwork's range, else masterIpv4CidrBlock, else the
    cluster subnetwork's range);
  - the konnectivity agents' pods in kube-system, through which GKE routes the API server's calls into the cluster
    (tigera/operator f6dfc4b, 2026-08-18: "AKS and GKE route the apiserver through konnectivity agents, so the
    admission call arrives with a pod source IP"), labelled k8s-app or app konnectivity-agent (the same commit's
    KonnectivityAgentEntityRule: "AKS and GKE label them differently").
- GKE's other automatic rules (-vms, -all) exist for traffic between nodes and pods; the model does not count
  them for the control plane, whose only rule GKE documents is -master.

VPC firewall semantics used (hashicorp/terraform-provider-google 07fc865
google/services/compute/resource_compute_firewall.go, the API fields' descriptions): an ingress rule applies to
traffic whose source is in its sourceRanges (source tags and service accounts match instances, never the control
plane); with no target tags or service accounts it applies to every instance of its network; a lower priority
number wins and a deny beats an allow of equal priority; what no rule allows is denied (the implied ingress deny).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.network import Pod, isolates, policy_namespace, selects

# gke-<cluster>-<hash>-master: tcp 443 (metrics-server) and 10250 (kubelet), from the control plane.
GKE_CONTROL_PLANE_RULE_PORTS = frozenset({443, 10250})
KONNECTIVITY_NAMESPACE = "kube-system"
KONNECTIVITY_LABELS = ({"k8s-app": "konnectivity-agent"}, {"app": "konnectivity-agent"})
# The label the API server gives every namespace, its name (kubernetes/api d1ba325 core/v1/well_known_labels.go).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Network = ipaddress.IPv4Network


@dataclass(frozen=True)
class ControlPlaneSource:
    """Where a call of the control plane may come from: any address of ``addresses``, and when it is a pod, that
    pod's namespace and labels (NetworkPolicies select pods by them)."""

    name: str
    addresses: Network
    pod_namespace: str | None = None
    pod_labels: tuple[Mapping[str, str], ...] = ()  # each label set it may carry

    @property
    def senders(self) -> list[Sender]:
        """What a NetworkPolicy sees of it: a pod of each label set it may carry, or its addresses."""
        if self.pod_namespace is None:
            return [Sender(address=str(self.addresses))]
        return [Sender(pod=Pod(self.pod_namespace, labels)) for labels in self.pod_labels]


def control_plane_sources(
    private_cluster_config: Mapping[str, Any] | None, endpoint_subnetwork_range: str, pod_range: str
) -> list[ControlPlaneSource]:
    """The sources of a cluster's control plane calls: a VPC-peering cluster's /28; otherwise (Private Service
    Connect) the range of its private endpoint's subnetwork and the konnectivity agents' pods."""
    peering = (private_cluster_config or {}).get("masterIpv4CidrBlock")
    if peering:
        return [ControlPlaneSource("the control plane's range (VPC peering)", ipaddress.IPv4Network(peering))]
    return [
        ControlPlaneSource("the private endpoint's subnetwork", ipaddress.IPv4Network(endpoint_subnetwork_range)),
        ControlPlaneSource(
            "the konnectivity agents' pods",
            ipaddress.IPv4Network(pod_range),
            pod_namespace=KONNECTIVITY_NAMESPACE,
            pod_labels=KONNECTIVITY_LABELS,
        ),
    ]


# --- The model's cluster made elsewhere ------------------------------------------------------------------------------

EXISTING_CLUSTER_POD_RANGE = "10.4.0.0/14"
# The primary range of that cluster's subnetwork (what `gcloud compute networks subnets describe` would print of it):
# its private endpoint is an address of it.
EXISTING_CLUSTER_SUBNET_RANGE = "10.128.0.0/20"


def existing_cluster_network(project: str, location: str, host_project: str = "") -> dict[str, Any]:
    """What getCluster answers of the network of the model's cluster made elsewhere: GKE's defaults for a new cluster
    with private nodes on the project's default network (or on a Shared VPC's, named by its ``host_project``), a
    Private Service Connect one (no masterIpv4CidrBlock, its private endpoint in the cluster's subnetwork)."""
    region = "-".join(location.split("-")[:2]) if location.count("-") == 2 else location
    vpc_project = host_project or project
    return {
        "network": f"projects/{vpc_project}/global/networks/default",
        "subnetwork": f"projects/{vpc_project}/regions/{region}/subnetworks/default",
        "clusterIpv4Cidr": EXISTING_CLUSTER_POD_RANGE,
        "privateClusterConfigs": [
            {
                "enablePrivateNodes": True,
                "enablePrivateEndpoint": False,
                "masterIpv4CidrBlock": "",
                "privateEndpointSubnetwork": "",
                "privateEndpoint": "10.128.0.2",
                "peeringName": "",
                "publicEndpoint": "",
                "masterGlobalAccessConfigs": [],
            }
        ],
    }


# --- VPC firewall rules ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PortRule:
    protocol: str  # "all", "tcp", ...
    ports: tuple[str, ...]  # "9443", "8000-9000"; empty: every port

    def covers(self, protocol: str, port: int) -> bool:
        if self.protocol.lower() not in ("all", protocol):
            return False
        if not self.ports:
            return True
        for item in self.ports:
            low, _, high = item.partition("-")
            if int(low) <= port <= int(high or low):
                return True
        return False


@dataclass(frozen=True)
class FirewallRule:
    """A VPC firewall rule as the stack registers it (its Pulumi inputs)."""

    name: str
    network: str
    direction: str = "INGRESS"
    priority: int = 1000
    disabled: bool = False
    source_ranges: tuple[Network, ...] = ()
    has_source_identities: bool = False  # source tags or service accounts: instances, never the control plane
    target_tags: tuple[str, ...] = ()
    target_service_accounts: tuple[str, ...] = ()
    allows: tuple[PortRule, ...] = ()
    denies: tuple[PortRule, ...] = ()

    @classmethod
    def from_inputs(cls, name: str, inputs: Mapping[str, Any]) -> FirewallRule:
        def port_rules(key: str) -> tuple[PortRule, ...]:
            return tuple(
                PortRule(str(r["protocol"]), tuple(str(p) for p in r.get("ports") or ())) for r in inputs.get(key) or ()
            )

        return cls(
            name=name,
            network=str(inputs.get("network", "")),
            direction=str(inputs.get("direction") or "INGRESS"),
            priority=int(inputs.get("priority", 1000)),
            disabled=bool(inputs.get("disabled", False)),
            source_ranges=tuple(ipaddress.IPv4Network(r) for r in inputs.get("sourceRanges") or ()),
            has_source_identities=bool(inputs.get("sourceTags") or inputs.get("sourceServiceAccounts")),
            target_tags=tuple(inputs.get("targetTags") or ()),
            target_service_accounts=tuple(inputs.get("targetServiceAccounts") or ()),
            allows=port_rules("allows"),
            denies=port_rules("denies"),
        )

    def targets(self, node_service_accounts: Iterable[str]) -> bool:
        """Whether the rule applies to the cluster's nodes: no target, or one of their service accounts (their
        network tags are GKE's, unknown to the model: a rule that targets tags is taken not to reach them)."""
        if self.target_tags:
            return False
        return not self.target_service_accounts or bool(set(self.target_service_accounts) & set(node_service_accounts))


def firewall_admits(
    rules: Sequence[FirewallRule],
    network: str,
    source: Network,
    port: int,
    node_service_accounts: Iterable[str] = (),
    protocol: str = "tcp",
) -> FirewallRule | None:
    """The rule that admits every address of ``source`` to a node of ``network`` on ``protocol``/``port``, or None.

    An allow counts when its ranges hold all of ``source`` and no deny of its priority or a better one overlaps it."""
    accounts = list(node_service_accounts)
    applying = [
        r for r in rules if r.network == network and r.direction == "INGRESS" and not r.disabled and r.targets(accounts)
    ]

    def denied_at(priority: int) -> bool:
        return any(
            r.priority <= priority
            and any(d.covers(protocol, port) for d in r.denies)
            and any(source.overlaps(s) for s in r.source_ranges)
            for r in applying
        )

    for rule in sorted(applying, key=lambda r: r.priority):
        if any(a.covers(protocol, port) for a in rule.allows) and any(source.subnet_of(s) for s in rule.source_ranges):
            return None if denied_at(rule.priority) else rule
    return None


# --- NetworkPolicies -------------------------------------------------------------------------------------------------
# What a set of NetworkPolicies admits, as Kubernetes defines it (kubernetes/website a799505
# content/en/docs/concepts/services-networking/network-policies.md) and GKE Dataplane V2 (Cilium) judges a sender: a
# pod of the cluster by its namespace and labels, anything else by its address. An ipBlock never matches a pod of the
# cluster (cilium/cilium 012a3bf Documentation/security/policy/language.rst, "IP/CIDR based": CIDR rules do not apply
# where both ends are managed by Cilium), and the pod's own node is always admitted, so neither is a sender here.
# Which policies isolate a pod, and label selectors, are the policy pack's rule (policy/network.py), held against the
# API's definition in tests/test_policy_network.py.


@dataclass(frozen=True)
class Sender:
    """Who opens a connection: a pod of the cluster, or an address outside it (or a range: each of its addresses)."""

    pod: Pod | None = None
    address: str = ""

    def __post_init__(self) -> None:
        if (self.pod is None) == (not self.address):
            raise ValueError("a sender is a pod or an address")


def peer_admits(peer: Mapping[str, Any], namespace: str, sender: Sender) -> bool:
    """One entry of a rule's ``from`` (of a policy in ``namespace``) admits the sender."""
    if "ipBlock" in peer:
        if sender.pod is not None:
            return False
        block, addresses = peer["ipBlock"], ipaddress.ip_network(sender.address)
        if not addresses.subnet_of(ipaddress.ip_network(block["cidr"])):  # type: ignore[arg-type]  # both IPv4 here
            return False
        return not any(addresses.overlaps(ipaddress.ip_network(cidr)) for cidr in block.get("except") or [])
    if sender.pod is None:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {NAMESPACE_NAME_LABEL: sender.pod.namespace}):
            return False
    elif sender.pod.namespace != namespace:
        return False
    return selects(peer.get("podSelector"), sender.pod.labels)


def port_admits(ports: Sequence[Mapping[str, Any]] | None, pod: Pod, port: int, protocol: str = "TCP") -> bool:
    """A rule's ``ports`` admit ``port``/``protocol`` on the pod: none listed admits every port; a named port is
    the pod's container port of that name; endPort makes a range."""
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        value = entry.get("port")
        if value is None:
            return True
        number = pod.ports.get(value) if isinstance(value, str) else int(value)
        if number is not None and number <= port <= int(entry.get("endPort", number)):
            return True
    return False


def admits(policies: Sequence[Mapping[str, Any]], pod: Pod, sender: Sender, port: int, protocol: str = "TCP") -> bool:
    """Whether the pod accepts the connection: not isolated, or some ingress rule of a policy isolating it admits
    it (its ``from``, none meaning every sender, and its ``ports``). Policies are additive: their order never
    matters."""
    isolating = [p for p in policies if isolates(p, pod)]
    if not isolating:
        return True
    for policy in isolating:
        for rule in (policy.get("spec") or {}).get("ingress") or []:
            peers = rule.get("from")
            if peers and not any(peer_admits(peer, policy_namespace(policy), sender) for peer in peers):
                continue
            if port_admits(rule.get("ports"), pod, port, protocol):
                return True
    return False


def policies_admit(policies: Sequence[Mapping[str, Any]], pod: Pod, port: int, source: ControlPlaneSource) -> bool:
    """Whether the NetworkPolicies admit a call of the control plane from ``source`` to ``pod`` on tcp ``port``: from
    each sender it may be."""
    return all(admits(policies, pod, sender, port) for sender in source.senders)
