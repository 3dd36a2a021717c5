"""Deploying the Kubernetes layer onto a cluster made elsewhere, with its platform installed elsewhere.

The integration lab's stack (make itest): a kubeconfig for the cluster, no Google Cloud resource at
all (so no gcp plugin is needed), no Helm release, no wait for workloads that nothing runs.
"""

from __future__ import annotations

import pulumi
import pytest
import yaml
from pulumi_gcp.container.outputs import (
    GetClusterControlPlaneEndpointsConfigDnsEndpointConfigResult,
    GetClusterControlPlaneEndpointsConfigResult,
)

from components.gcp.config import ExistingClusterConfig
from components.gcp.existing_cluster import ExistingClusterArgs, outside_dns_endpoint, reach
from harness.gcp_model import CloudProject, Holdings, Subnetwork
from harness.gke_network import (
    EXISTING_CLUSTER_POD_RANGE,
    EXISTING_CLUSTER_SUBNET_RANGE,
    Sender,
    admits,
)
from policy.network import Pod
from tests.conftest import assert_bad_input, run_stack, stack_values
from tools.render import kubernetes_objects

DEV = stack_values("dev")  # the tests' dev stack
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: lab\n"
LAB = {
    "cluster.existing": {"kubeconfig": KUBECONFIG, "skipAwait": True},
    "platform.install": False,
    "serving.router.install": False,
    "serving.weightsBucket": {"name": "my-model-weights", "create": False, "grantAccess": False},
}


@pytest.fixture(scope="module")
def lab_run():
    return run_stack(LAB, secrets=("cluster",))


def test_the_lab_stack_creates_nothing_in_google_cloud(lab_run):
    assert [r.name for r in lab_run.registrations if r.type.startswith("gcp:")] == []
    assert not lab_run.of_type("kubernetes:helm.sh/v3:Release")


def test_the_provider_uses_the_given_kubeconfig_with_a_stable_identifier(lab_run):
    (provider,) = lab_run.of_type("pulumi:providers:kubernetes")
    assert provider.input("kubeconfig") == KUBECONFIG
    assert provider.input("clusterIdentifier") == f"kubeconfig/{DEV['cluster']['name']}"
    assert lab_run.outputs["kubeconfig"] == "[secret]"


def test_the_kubernetes_layer_is_the_dev_stack_s(lab_run, dev_run):
    """Every Kubernetes object the dev stack declares, but the controllers' charts and the Pod Security labels of
    their namespaces, the router and the scrapes of its
    dashboards (a stack on a cluster made elsewhere makes no dashboards: the cluster's own stack does)."""

    def objects(run):
        return {
            r.name
            for r in run.registrations
            if r.type.startswith("kubernetes:")
            and "helm.sh" not in r.type
            and r.type != "kubernetes:core/v1:NamespacePatch"
            and r.parent != "operations"
        }

    assert objects(dev_run) == objects(lab_run)
    assert {"tpu-drain-gate", "load-balancer-drain-gate"} <= {r.name for r in lab_run.registrations}
    assert "slice-controller-webhook" not in {r.name for r in lab_run.registrations}  # not our controller
    patches = {r.name for r in dev_run.registrations if r.type == "kubernetes:core/v1:NamespacePatch"}
    assert patches and not patches & {r.name for r in lab_run.registrations}  # the installer's namespaces


@pytest.mark.parametrize(
    "kind, name",
    [
        ("kubernetes:gateway.networking.k8s.io/v1:Gateway", "inference-gateway"),
        ("kubernetes:batch/v1:Job", "stage-model-weights"),
    ],
)
def test_nothing_waits_for_workloads_no_node_runs(lab_run, dev_run, kind, name):
    assert lab_run.one(kind, name).input("metadata.annotations")["pulumi.com/skipAwait"] == "true"
    assert "pulumi.com/skipAwait" not in dev_run.one(kind, name).input("metadata.annotations")


def test_a_gke_cluster_by_name_is_looked_up_not_created():
    # the stack the next tests run (a stack on a cluster made elsewhere makes no dashboards, whatever
    # dashboards.enabled says), so one run serves them
    run = run_stack({"cluster.existing": {"name": "team-cluster", "location": "us-central1"}})
    assert not run.of_type("gcp:container/cluster:Cluster") and not run.of_type("gcp:compute/network:Network")
    # Its network, and its way out, are its owner's: no Cloud Router or NAT, whatever cluster.privateNodes says.
    assert not run.of_type("gcp:compute/router:Router") and not run.of_type("gcp:compute/routerNat:RouterNat")
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert (
        provider.input("clusterIdentifier") == f"projects/{DEV['project']}/locations/us-central1/clusters/team-cluster"
    )


def test_a_gke_cluster_by_name_is_reached_as_its_owner_opened_it():
    """The model's cluster (harness/mock_engine.py) keeps GKE's default: a DNS endpoint that takes no outside traffic,
    so its IP endpoint and CA; one whose DNS endpoint takes outside traffic is reached by it, without the CA."""
    run = run_stack({"cluster.existing": {"name": "team-cluster", "location": "us-central1"}})
    (cluster,) = yaml.safe_load(run.raw_outputs["kubeconfig"])["clusters"]
    assert cluster["cluster"] == {
        "server": "https://EXISTING_CLUSTER_ENDPOINT",
        "certificate-authority-data": "EXISTING_CLUSTER_CA",
    }
    assert not run.outputs["getCredentialsCommand"].endswith("--dns-endpoint")
    opened = [
        GetClusterControlPlaneEndpointsConfigResult(
            dns_endpoint_configs=[
                GetClusterControlPlaneEndpointsConfigDnsEndpointConfigResult(
                    allow_external_traffic=True,
                    enable_k8s_certs_via_dns=False,
                    enable_k8s_tokens_via_dns=False,
                    endpoint="gke-0123.us-central1.gke.goog",
                )
            ],
            ip_endpoints_configs=[],
        )
    ]
    assert outside_dns_endpoint(opened) == "gke-0123.us-central1.gke.goog"
    assert outside_dns_endpoint([]) == ""
    # reached by its DNS endpoint, the kubeconfig trusts the system's CAs: the cluster's CA is not needed, nor read
    existing = ExistingClusterConfig(name="team-cluster", location="us-central1")
    args = ExistingClusterArgs(project="p", name="team-cluster", existing=existing)
    assert reach(args, "gke-0123.us-central1.gke.goog", "", []) == ("gke-0123.us-central1.gke.goog", None)


def test_the_preview_says_what_to_open_on_the_network_getcluster_reports():
    """The warning reads GKE's answer for the cluster (the model's: a Private Service Connect cluster on the project's
    default network), so the rule it asks for names that network and the Pod range as a source."""
    run = run_stack({"cluster.existing": {"name": "team-cluster", "location": "us-central1"}})
    (warning,) = [w for w in run.warnings if w.startswith("cluster.existing: ")]
    assert f"--project {DEV['project']} --network default " in warning
    assert f",{EXISTING_CLUSTER_POD_RANGE}" in warning
    assert "subnets describe default --region us-central1" in warning


def test_a_gke_cluster_still_being_created_is_refused_until_gke_reports_how_to_reach_it():
    """GKE's answer for a cluster being created lacks its IP endpoint and CA (harness/gcp_model.py): the preview names
    the key and says what to wait for, instead of a kubeconfig that reaches nothing; once the cluster runs, the same
    stack file goes through."""
    existing = {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}}
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(existing, cloud=CloudProject(existing_cluster_provisioning=True))
    message = str(raised.value)
    assert "  - cluster.existing.name: " in message, message
    assert "team-cluster" in message and "says RUNNING, then run again" in message, message
    (cluster,) = yaml.safe_load(run_stack(existing).raw_outputs["kubeconfig"])["clusters"]
    assert cluster["cluster"]["server"] == "https://EXISTING_CLUSTER_ENDPOINT"


def test_a_gke_cluster_that_is_not_there_is_refused_naming_where_it_was_looked_for():
    """A name or location that names no cluster: GKE's 404, which the read's data source answers as '<cluster> not
    found'. The preview says that it does not exist and how to find the right one, not that the deployer lacks a
    permission; the same stack file goes through once the cluster is there."""
    existing = {"cluster.existing": {"name": "team-clustr", "location": "us-central1"}}
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(existing, cloud=CloudProject(existing_cluster_missing=True))
    message = str(raised.value)
    assert message.endswith(
        "  - cluster.existing.name: cluster team-clustr in us-central1 does not exist (name a cluster of "
        f"`gcloud container clusters list --project {DEV['project']}` and its location (cluster.existing.location: a "
        "region, or a zone for a zonal cluster))"
    ), message
    assert "grant the deployer" not in message, message
    assert run_stack(existing).outputs["kubeconfig"] == "[secret]"


@pytest.mark.parametrize(
    "override, key, fragment",
    [
        (
            {"cluster.existing": {"name": "a-cluster"}},
            "cluster.existing.location",
            "is required with cluster.existing.name",
        ),
        (
            {"cluster.existing": {"name": "c", "location": "us-central1", "kubeconfig": KUBECONFIG}},
            "cluster.existing.name",
            "set one of them",
        ),
        ({"cluster.existing": {"skipAwait": True}}, "cluster.existing.skipAwait", "a cluster the stack creates"),
        # a control plane that runs no workloads: what the up would wait for never becomes Ready
        ({**LAB, "platform.install": True}, "platform.install", "wait for the controllers' Helm releases"),
        ({**LAB, "serving.router.install": True}, "serving.router.install", "wait for an endpoint picker"),
    ],
)
def test_bad_existing_cluster_settings(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_a_kubeconfig_in_plain_text_is_refused():
    assert_bad_input({"cluster.existing": {"kubeconfig": KUBECONFIG}}, "cluster.existing.kubeconfig", "plain text")


# --- The proxy-only range of a cluster made elsewhere, read by the preview --------------------------------------------

ELSEWHERE = {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}}
VPC = f"projects/{DEV['project']}/global/networks/default"  # the model's cluster's (harness/gke_network.py)
PROXY = "REGIONAL_MANAGED_PROXY"


def run_in_vpc(subnetworks, overrides=None, host_project=""):
    """The dev stack on the model's cluster made elsewhere, on its project's VPC or on ``host_project``'s Shared VPC,
    where ``subnetworks`` exist."""
    held = Holdings(subnetworks=tuple(Subnetwork(*s) for s in subnetworks))
    cloud = CloudProject(existing_cluster_host_project=host_project).holding(held)
    return run_stack({**ELSEWHERE, **(overrides or {})}, cloud=cloud)


# (case, the region's subnetworks: network, region, name, range, purpose, role; what the refusal says)
PROXY_ONLY_CASES = [
    (
        "another active range",
        [(VPC, "us-central1", "proxy", "10.129.0.0/23", PROXY, "ACTIVE")],
        "172.16.0.0/26 is not the range of the active proxy-only subnet of network default in us-central1, "
        "10.129.0.0/23",
    ),
    (
        "the stack's range is the backup one (promoted from, or draining)",
        [
            (VPC, "us-central1", "proxy-new", "10.129.0.0/23", PROXY, "ACTIVE"),
            (VPC, "us-central1", "proxy-old", "172.16.0.0/26", PROXY, "BACKUP"),
        ],
        "set it to 10.129.0.0/23",
    ),
    (
        "no proxy-only subnet in the cluster's region: only another region's, and another VPC's in this one",
        [
            (VPC, "us-east1", "proxy", "172.16.0.0/26", PROXY, "ACTIVE"),
            (
                f"projects/{DEV['project']}/global/networks/other",
                "us-central1",
                "proxy",
                "172.16.0.0/26",
                PROXY,
                "ACTIVE",
            ),
            (VPC, "us-central1", "default", "10.128.0.0/20", "PRIVATE", ""),
        ],
        "network default of cluster team-cluster has no active proxy-only subnet in us-central1",
    ),
]


@pytest.mark.parametrize(
    "subnetworks, fragment", [c[1:] for c in PROXY_ONLY_CASES], ids=[c[0] for c in PROXY_ONLY_CASES]
)
def test_a_proxy_only_range_other_than_the_vpc_s_active_one_is_refused(subnetworks, fragment):
    with pytest.raises(pulumi.RunError) as raised:
        run_in_vpc(subnetworks, {"network.proxyOnlyCidr": "172.16.0.0/26"})
    message = str(raised.value)
    assert "  - network.proxyOnlyCidr: " in message and fragment in message, message


def test_the_vpc_s_active_proxy_only_range_is_taken_and_admitted_by_the_serving_policies():
    subnetworks = [
        (VPC, "us-central1", "proxy-new", "10.129.0.0/23", PROXY, "ACTIVE"),
        (VPC, "us-central1", "proxy-old", "172.16.0.0/26", PROXY, "BACKUP"),
    ]
    run = run_in_vpc(subnetworks, {"network.proxyOnlyCidr": "10.129.0.0/23"})
    servers = run.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "model-servers-network-policy")
    assert "10.129.0.0/23" in str(servers.input("spec"))


def test_on_a_shared_vpc_the_proxy_only_range_is_read_in_the_host_project():
    """The host project holds the VPC and its subnets (the service project has its own default VPC here, whose proxy
    range is another)."""
    shared = "projects/net-host/global/networks/default"
    subnetworks = [
        (shared, "us-central1", "proxy", "10.129.0.0/23", PROXY, "ACTIVE"),
        (VPC, "us-central1", "proxy", "172.16.0.0/26", PROXY, "ACTIVE"),
    ]
    with pytest.raises(pulumi.RunError) as raised:
        run_in_vpc(subnetworks, {"network.proxyOnlyCidr": "172.16.0.0/26"}, host_project="net-host")
    assert "set it to 10.129.0.0/23" in str(raised.value)
    run_in_vpc(subnetworks, {"network.proxyOnlyCidr": "10.129.0.0/23"}, host_project="net-host")
    with pytest.raises(pulumi.RunError) as raised:
        run_in_vpc(subnetworks[1:], {"network.proxyOnlyCidr": "172.16.0.0/26"}, host_project="net-host")
    assert "--network default --range 172.16.0.0/26 --project net-host" in str(raised.value)


def test_a_vpc_without_a_proxy_only_subnet_is_told_how_to_make_one_of_the_stack_s_range():
    with pytest.raises(pulumi.RunError) as raised:
        run_in_vpc([], {"network.proxyOnlyCidr": "10.129.0.0/23"})
    assert (
        "gcloud compute networks subnets create default-proxy-only --purpose REGIONAL_MANAGED_PROXY --role ACTIVE "
        f"--region us-central1 --network default --range 10.129.0.0/23 --project {DEV['project']}"
    ) in str(raised.value)


def test_no_proxy_only_range_is_read_where_nothing_admits_the_gateway_s_proxies_or_nothing_can_be_read(lab_run):
    """No serving (no Gateway, no policies), or a cluster given by its kubeconfig (the preview knows no network)."""
    # in a VPC with no proxy-only subnet: a read would refuse it, and its invocations would hold the read
    run = run_in_vpc([], {"serving.enabled": False})
    assert "gcp:compute/getSubnetworks:getSubnetworks" not in {i.token for i in run.invocations}
    assert "gcp:compute/getSubnetworks:getSubnetworks" not in {i.token for i in lab_run.invocations}


# --- The node and Pod ranges of a cluster made elsewhere, which Saxml's HTTP server admits --------------------------

SAX_ELSEWHERE = {"cluster.existing": {"name": "team-cluster", "location": "us-west4"}}
CLUSTER_RANGES = {"network.nodeCidr": EXISTING_CLUSTER_SUBNET_RANGE, "network.podCidr": EXISTING_CLUSTER_POD_RANGE}


@pytest.mark.parametrize("key", CLUSTER_RANGES)
def test_saxml_cluster_clients_on_a_cluster_made_elsewhere_take_its_node_and_pod_ranges(key):
    """The saxml stack's network block (10.10.0.0/18, 10.12.0.0/14) is the VPC it would make: the model's cluster's
    subnetwork and Pod range are others, read at preview and named as the fix."""
    other = {k: v for k, v in CLUSTER_RANGES.items() if k != key}
    with pytest.raises(pulumi.RunError) as raised:
        run_stack({**SAX_ELSEWHERE, **other}, stack="saxml")
    message = str(raised.value)
    assert f"  - {key}: " in message and f"set it to {CLUSTER_RANGES[key]}" in message, message
    assert next(iter(other)) not in message


def test_saxml_on_a_cluster_made_elsewhere_admits_that_cluster_s_pods_and_ranges():
    run = run_stack({**SAX_ELSEWHERE, **CLUSTER_RANGES}, stack="saxml")
    objects = kubernetes_objects(run.registrations)
    (service,) = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "sax-http-lb"]
    assert service["spec"]["loadBalancerSourceRanges"] == list(CLUSTER_RANGES.values())
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    client = Sender(pod=Pod("apps", {"app": "sax-client"}))  # a pod of any namespace of that cluster
    assert admits(policies, Pod("sax", {"app": "sax-http"}), client, 8888)
