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
from harness.gcp_model import CloudProject
from harness.gke_network import EXISTING_CLUSTER_POD_RANGE
from tests.conftest import assert_bad_input, run_stack, stack_values

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
    run = run_stack(
        {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}, "dashboards.enabled": False}
    )
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
