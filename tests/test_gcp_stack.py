"""The Google Cloud layer as the program registers it for the dev stack (mocks, preview)."""

import copy
import dataclasses
import functools
import ipaddress
import os
import re

import pulumi
import pytest
import yaml

from components.gcp.cluster import UPSERT_EXISTING_ENV, upsert_switch_warning
from components.gcp.config import ImagesConfig
from components.gcp.project_services import ARTIFACT_REGISTRY_API, REQUIRED_APIS, SECRET_MANAGER_API
from harness.gcp_model import CloudProject, GkeServerConfig, ReleaseChannel
from harness.mock_engine import run_program, stack_holdings
from tests.conftest import (
    FIXTURE_STACK_NAMES,
    FIXTURE_STACKS,
    as_pulumi_values,
    assert_bad_input,
    run_stack,
    stack_config,
    stack_values,
    with_overrides,
)
from tools import render
from tools.stack_file import stack_config_values

NODE_POOL = "gcp:container/nodePool:NodePool"
# The tests' dev stack as the program reads it: what each resource must carry is said from it, not restated.
DEV = stack_config("dev")
NETWORK, CLUSTER_CONFIG, TPU = DEV.network, DEV.cluster, DEV.tpu
TPU_POOLS = [pool.name for pool in TPU.pools]
GET_CREDENTIALS = (
    f"gcloud container clusters get-credentials {CLUSTER_CONFIG.name} --region {DEV.region} --project {DEV.project}"
)


@pytest.fixture(scope="module")
def stack_run(dev_run):
    """The run of one of the tests' stacks as it is, once for this module: run_stack keeps only its latest runs, and
    the dev run, a session fixture, is never asked of it again."""
    return functools.cache(lambda stack: dev_run if stack == "dev" else run_stack(stack=stack))


def test_every_resource_sits_under_a_named_component(dev_run):
    components = {r.name for r in dev_run.registrations if r.type.startswith("tpu-gke:")}
    assert components >= {"project-services", "network", "cluster", "tpu-capacity", "platform", "queues"}
    for r in dev_run.registrations:
        if r.type.startswith("tpu-gke:"):
            assert r.parent is None, f"{r.name} should be top level"
        else:
            assert r.parent in components, f"{r.type} {r.name} has parent {r.parent}"


def test_apis_are_enabled_and_never_disabled_on_destroy(dev_run):
    services = dev_run.of_type("gcp:projects/service:Service")
    # dev's private nodes pull through the stack's own Artifact Registry repositories (images.pullThrough)
    assert sorted(s.input("service") for s in services) == sorted((*REQUIRED_APIS, ARTIFACT_REGISTRY_API))
    assert {
        "container.googleapis.com",
        "compute.googleapis.com",
        "iam.googleapis.com",
        "cloudresourcemanager.googleapis.com",
        "networkservices.googleapis.com",
        "storage.googleapis.com",
        "monitoring.googleapis.com",
        "logging.googleapis.com",  # GKE's logs and the nodes' audit records are written there
    } == set(REQUIRED_APIS)
    for service in services:
        assert service.input("disableOnDestroy") is False
        assert service.input("project") == DEV.project


def test_ai_zone_preview_feature_only_for_ai_zones(dev_run):
    (feature,) = dev_run.of_type("gcp:compute/previewFeature:PreviewFeature")
    assert feature.input("name") == "ai-zones-visibility"
    assert feature.input("activationStatus") == "ENABLED"
    ordinary_zone = run_stack({"tpu.zone": "us-central1-b"})
    assert ordinary_zone.of_type("gcp:compute/previewFeature:PreviewFeature") == []


def test_vpc(dev_run):
    vpc = dev_run.one("gcp:compute/network:Network", "vpc")
    assert vpc.input("name") == f"{NETWORK.prefix}-main"
    assert vpc.input("mtu") == NETWORK.mtu
    assert vpc.input("autoCreateSubnetworks") is False
    assert vpc.input("routingMode") == "REGIONAL"


def test_node_subnet_has_private_access_and_named_secondary_ranges(dev_run):
    subnet = dev_run.one("gcp:compute/subnetwork:Subnetwork", "node-subnet")
    assert subnet.input("name") == f"{NETWORK.prefix}-tpu"
    assert subnet.input("ipCidrRange") == NETWORK.node_cidr
    assert subnet.input("region") == DEV.region
    assert subnet.input("privateIpGoogleAccess") is True
    assert subnet.input("secondaryIpRanges") == [
        {"rangeName": f"{NETWORK.prefix}-pods", "ipCidrRange": NETWORK.pod_cidr},
        {"rangeName": f"{NETWORK.prefix}-services", "ipCidrRange": NETWORK.service_cidr},
    ]


def test_proxy_only_subnet_serves_the_internal_gateway(dev_run):
    subnet = dev_run.one("gcp:compute/subnetwork:Subnetwork", "proxy-only-subnet")
    assert subnet.input("name") == f"{NETWORK.prefix}-proxy"
    assert subnet.input("ipCidrRange") == NETWORK.proxy_only_cidr
    assert (subnet.input("purpose"), subnet.input("role")) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")


def test_firewall_admits_only_the_vpcs_own_ranges(dev_run):
    rule = dev_run.one("gcp:compute/firewall:Firewall", "allow-internal")
    assert rule.input("name") == f"{NETWORK.prefix}-allow-internal"
    assert rule.input("direction") == "INGRESS"
    own = [NETWORK.node_cidr, NETWORK.pod_cidr, NETWORK.proxy_only_cidr]
    assert sorted(rule.input("sourceRanges")) == sorted(own)
    assert "10.0.0.0/8" not in rule.input("sourceRanges") and "172.16.0.0/12" not in rule.input("sourceRanges")


def test_cluster_features(dev_run):
    cluster = dev_run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("name") == CLUSTER_CONFIG.name
    assert cluster.input("location") == DEV.region  # regional
    assert cluster.input("releaseChannel") == {"channel": CLUSTER_CONFIG.release_channel}
    # The minor, never a patch that leaves the channel: GKE picks its newest offered patch.
    assert cluster.input("minMasterVersion") == ".".join(CLUSTER_CONFIG.version.split(".")[:2])
    assert cluster.input("removeDefaultNodePool") is True
    # the create's default pool runs as the stack's node account, not the project's default compute account
    assert cluster.input("nodeConfig.oauthScopes") == ["https://www.googleapis.com/auth/cloud-platform"]
    assert "serviceAccount" in cluster.input("nodeConfig") and "node-sa" in cluster.dependencies
    assert cluster.options["ignoreChanges"] == ["nodeConfig"]  # read at create only: never a replacement
    assert cluster.input("addonsConfig.sliceControllerConfig.enabled") is True
    assert cluster.input("gatewayApiConfig") == {"channel": "CHANNEL_STANDARD"}
    assert cluster.input("workloadIdentityConfig") == {"workloadPool": f"{DEV.project}.svc.id.goog"}
    assert cluster.input("datapathProvider") == "ADVANCED_DATAPATH"
    assert cluster.input("monitoringConfig.advancedDatapathObservabilityConfig.enableMetrics") is True
    assert cluster.input("monitoringConfig.managedPrometheus.enabled") is True
    addons = cluster.input("addonsConfig")
    assert addons["httpLoadBalancing"] == {"disabled": False}
    assert addons["horizontalPodAutoscaling"] == {"disabled": False}
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert addons["dnsCacheConfig"] == {"enabled": True}
    assert cluster.input("ipAllocationPolicy") == {
        "clusterSecondaryRangeName": f"{NETWORK.prefix}-pods",
        "servicesSecondaryRangeName": f"{NETWORK.prefix}-services",
    }
    assert cluster.input("deletionProtection") is CLUSTER_CONFIG.deletion_protection
    # The window of the stack file, recurring; no exclusion with hard-coded dates that would expire.
    window = CLUSTER_CONFIG.maintenance_window
    assert window is not None and not CLUSTER_CONFIG.maintenance_exclusions
    assert cluster.input("maintenancePolicy") == {
        "recurringWindow": {"startTime": window.start, "endTime": window.end, "recurrence": window.recurrence},
        "maintenanceExclusions": [],
    }


def test_deletion_protection_and_maintenance_come_from_config():
    run = run_stack(
        {
            "cluster.deletionProtection": True,
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": "launch",
                    "start": "2026-12-01T00:00:00Z",
                    "end": "2026-12-20T00:00:00Z",
                    "scope": "NO_UPGRADES",
                }
            ],
        }
    )
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("deletionProtection") is True
    policy = cluster.input("maintenancePolicy")
    assert policy["recurringWindow"]["recurrence"] == "FREQ=WEEKLY;BYDAY=SA,SU"
    assert policy["maintenanceExclusions"] == [
        {
            "exclusionName": "launch",
            "startTime": "2026-12-01T00:00:00Z",
            "endTime": "2026-12-20T00:00:00Z",
            "exclusionOptions": {"scope": "NO_UPGRADES"},
        }
    ]


def test_system_pool_runs_as_a_least_privilege_node_account(dev_run):
    account = dev_run.one("gcp:serviceaccount/account:Account", "node-sa")
    assert account.input("accountId") == f"{CLUSTER_CONFIG.name}-nodes"  # none set: the cluster's name
    roles = sorted(m.input("role") for m in dev_run.of_type("gcp:projects/iAMMember:IAMMember"))
    # No project-wide image read: the nodes read each repository they pull from, alone (below)
    assert roles == ["roles/container.defaultNodeServiceAccount"]
    pool = dev_run.one(NODE_POOL, "system-pool")
    assert pool.input("nodeCount") == CLUSTER_CONFIG.system_pool.nodes_per_zone  # per zone of the regional cluster
    assert pool.input("nodeConfig.machineType") == CLUSTER_CONFIG.system_pool.machine_type
    assert pool.input("nodeConfig.workloadMetadataConfig.mode") == "GKE_METADATA"
    assert "node-sa" in pool.dependencies  # the pool's service account is ours, not the default


MIRROR_GRANT = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"


def test_the_nodes_may_read_the_mirror_repository_and_nothing_else_of_it(stack_run):
    """images.mirror: the node account reads that one repository (another project's here), and every Kubernetes
    object waits for the grant (the provider does)."""
    run = stack_run("prod")
    (grant,) = run.of_type(MIRROR_GRANT)
    assert (grant.input("project"), grant.input("location"), grant.input("repository")) == (
        "my-org-artifacts",
        "us-central1",
        "tpu-gke-mirror",
    )
    assert grant.input("role") == "roles/artifactregistry.reader"
    assert grant.parent == "cluster" and "node-sa" in grant.dependencies
    assert "condition" not in grant.inputs
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert grant.name in provider.dependencies


# The project of the prod stack's runs, holding its mirror (harness/mock_engine.py stack_holdings)
PROD_HOLDINGS = stack_holdings(as_pulumi_values(stack_values("prod")), {})


@pytest.mark.parametrize(
    "mirror",
    [
        "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirorr",
        "us-central1-docker.pkg.dev/my-tpu-prod-project/tpu-gke-mirror",
        "us-east1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror",
    ],
    ids=["a-typo-in-the-id", "the-wrong-project", "the-wrong-location"],
)
def test_a_mirror_that_does_not_exist_is_refused_at_preview_before_its_grant(mirror):
    """The preview reads images.mirror (getRepository): a repository Artifact Registry does not hold is refused with
    the command that makes it, and no grant is made on it (the grant reads its policy first, and Artifact Registry's
    404 would fail the `up` there, halfway through, after the cluster)."""
    repository = ImagesConfig(mirror=mirror).mirror_repository
    assert repository is not None
    registrations: list = []
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(
            {"images.mirror": mirror},
            stack="prod",
            cloud=CloudProject().holding(PROD_HOLDINGS),
            registrations=registrations,
        )
    message = str(raised.value)
    assert f"  - images.mirror: Artifact Registry repository {repository.name} does not exist (make it (" in message
    make = f"`gcloud artifacts repositories create {repository.repository} --repository-format=docker --location "
    assert make + f"{repository.location} --project {repository.project}`" in message, message
    assert not [r for r in registrations if r.type == MIRROR_GRANT], "no grant on it"


def test_the_mirror_there_is_read_and_granted():
    """The recovery: once the repository exists (the project holds it), the same stack is read and granted."""
    mirror = "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirorr"
    held = dataclasses.replace(PROD_HOLDINGS, repositories=(ImagesConfig(mirror=mirror).mirror_repository.name,))
    run = run_stack({"images.mirror": mirror}, stack="prod", cloud=CloudProject().holding(held))
    (read,) = [i for i in run.invocations if i.token == "gcp:artifactregistry/getRepository:getRepository"]
    assert read.answer == "answered"
    (grant,) = run.of_type(MIRROR_GRANT)
    assert grant.input("repository") == "tpu-gke-mirorr"


def test_without_a_mirror_the_nodes_read_the_pull_through_repositories_alone(dev_run):
    """dev (private nodes, no mirror): one grant per repository the stack makes, on it, waited for by the provider;
    with public nodes there is no repository and no grant."""
    repositories = {r.input("repositoryId"): r for r in dev_run.of_type("gcp:artifactregistry/repository:Repository")}
    grants = dev_run.of_type(MIRROR_GRANT)
    assert repositories and sorted(g.input("repository") for g in grants) == sorted(repositories)
    (provider,) = dev_run.of_type("pulumi:providers:kubernetes")
    for grant in grants:
        made = repositories[grant.input("repository")]
        assert (grant.input("project"), grant.input("location")) == (made.input("project"), made.input("location"))
        assert grant.input("role") == "roles/artifactregistry.reader" and "condition" not in grant.inputs
        assert made.name in grant.dependencies and grant.name in provider.dependencies
    public = run_stack({"cluster.privateNodes": False})
    assert not public.of_type(MIRROR_GRANT) and not public.of_type("gcp:artifactregistry/repository:Repository")


def test_workload_policy(dev_run):
    policy = dev_run.one("gcp:compute/resourcePolicy:ResourcePolicy", "workload-policy")
    assert policy.input("name") == TPU.workload_policy_name
    assert policy.input("region") == DEV.region
    assert policy.input("workloadPolicy") == {
        "type": "HIGH_THROUGHPUT",
        "acceleratorTopology": "4x4x4",
        "acceleratorTopologyMode": "PROVISION_ONLY",
    }


@pytest.mark.parametrize("config", TPU.pools, ids=lambda p: p.name)
def test_tpu_pool_is_a_reserved_cube(dev_run, config):
    pool = dev_run.one(NODE_POOL, config.name)
    assert pool.parent == "tpu-capacity"
    assert pool.input("name") == config.name
    assert pool.input("nodeCount") == config.node_count == 16  # a 4x4x4 cube of 4-chip hosts
    assert pool.input("nodeLocations") == [TPU.zone]
    assert pool.input("nodeConfig.machineType") == TPU.machine_type
    assert pool.input("nodeConfig.workloadMetadataConfig.mode") == "GKE_METADATA"
    assert pool.input("nodeConfig.gvnic.enabled") is True
    assert pool.input("nodeConfig.reservationAffinity") == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [
            f"projects/{DEV.project}/reservations/{TPU.reservation.name}/reservationBlocks/{TPU.reservation.block}"
        ],
    }
    # What GKE stores: policy name and topology, no type; anything else diffs on every preview.
    placement = {"type": "", "policyName": TPU.workload_policy_name, "tpuTopology": "4x4x4"}
    assert pool.input("placementPolicy") == placement
    assert pool.options["deleteBeforeReplace"] is True  # the new pool needs the old one's cube
    assert pool.options["replaceOnChanges"] == ["nodeConfig.machineType", "nodeLocations"]
    assert pool.input("upgradeSettings") == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 16}
    assert pool.custom_timeouts["create"] == "90m"
    assert "workload-policy" in pool.dependencies


def test_tpu_pools_are_created_in_parallel(dev_run):
    for name in TPU_POOLS:
        assert not set(TPU_POOLS) & set(dev_run.one(NODE_POOL, name).dependencies)


def test_sub_blocks_and_reservation_project_shape_the_path():
    run = run_stack(
        {
            "tpu.reservation": {"name": "shared-res", "block": "block-7", "project": "capacity-host"},
            "tpu.pools": [
                {"name": "cube-a", "nodeCount": 16, "subBlock": "sub-1"},
                {"name": "cube-b", "nodeCount": 16},
            ],
        }
    )
    assert run.one(NODE_POOL, "cube-a").input("nodeConfig.reservationAffinity.values") == [
        "projects/capacity-host/reservations/shared-res/reservationBlocks/block-7/reservationSubBlocks/sub-1"
    ]
    assert run.one(NODE_POOL, "cube-b").input("nodeConfig.reservationAffinity.values") == [
        "projects/capacity-host/reservations/shared-res/reservationBlocks/block-7"
    ]


def test_protected_pools_on_request(dev_run):
    assert not any(p.protect for p in dev_run.of_type(NODE_POOL))
    protected = run_stack({"tpu.protectPools": True})
    assert [protected.one(NODE_POOL, name).protect for name in TPU_POOLS] == [True] * len(TPU_POOLS)


SECURE_BOOT = {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
BOOT_KEY = "projects/my-keys/locations/global/keyRings/gke/cryptoKeys/boot-disks"


def boot(pool) -> tuple[str | None, dict | None]:
    """(the key of a pool's boot disks, its shielded-instance block): what its nodes boot with, None where not sent."""
    config = pool.input("nodeConfig")
    return config.get("bootDiskKmsKey"), config.get("shieldedInstanceConfig")


def test_tpu7x_pools_boot_with_secure_boot_and_the_stack_s_key_on_every_pool(dev_run):
    """Unset, tpu.secureBoot follows the machine catalog (GKE is known to make TPU7x nodes with it); the key of the
    boot disks goes to every pool and to the cluster's first default pool, and may be a global one."""
    assert {p.name: boot(p) for p in dev_run.of_type(NODE_POOL)} == dict.fromkeys(
        ("system-pool", *TPU_POOLS), (None, SECURE_BOOT)
    )
    run = run_stack({"cluster.bootDiskEncryptionKey": BOOT_KEY})
    assert {p.name: boot(p) for p in run.of_type(NODE_POOL)} == dict.fromkeys(
        ("system-pool", *TPU_POOLS), (BOOT_KEY, SECURE_BOOT)
    )
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("nodeConfig.bootDiskKmsKey") == BOOT_KEY
    assert cluster.input("nodeConfig.shieldedInstanceConfig") == SECURE_BOOT


def test_v5e_pools_boot_without_secure_boot_unless_the_stack_asks(stack_run):
    """No source read here says GKE makes ct5lp nodes with secure boot: they send no shielded block, as before."""
    saxml = stack_run("saxml")
    tpu_pools = [pool["name"] for pool in stack_values("saxml")["tpu"]["pools"]]
    assert {p.name: boot(p) for p in saxml.of_type(NODE_POOL)} == {
        "system-pool": (None, SECURE_BOOT),
        **dict.fromkeys(tpu_pools, (None, None)),
    }
    asked = run_stack({"tpu.secureBoot": True}, stack="saxml")
    assert [boot(p) for p in asked.of_type(NODE_POOL)] == [(None, SECURE_BOOT)] * (1 + len(tpu_pools))


def test_a_pool_kept_unhardened_boots_as_pools_did_before_and_the_others_as_the_stack_says():
    """What the provider read back from a pool made before: no key, no shielded block (secure boot off, integrity
    monitoring on by its default), so a kept pool plans no change."""
    pools = [{"name": "tpu7-pool-1", "nodeCount": 16}, {"name": "tpu7-pool-2", "nodeCount": 16, "hardenedBoot": False}]
    run = run_stack({"tpu.pools": pools, "cluster.bootDiskEncryptionKey": BOOT_KEY})
    assert boot(run.one(NODE_POOL, "tpu7-pool-1")) == (BOOT_KEY, SECURE_BOOT)
    assert boot(run.one(NODE_POOL, "tpu7-pool-2")) == (None, None)
    assert boot(run.one(NODE_POOL, "system-pool")) == (BOOT_KEY, SECURE_BOOT)


def test_secure_boot_off_leaves_the_tpu_pools_without_it_and_the_system_pool_with_it():
    run = run_stack({"tpu.secureBoot": False})
    assert {p.name: boot(p)[1] for p in run.of_type(NODE_POOL)} == {"system-pool": SECURE_BOOT} | dict.fromkeys(
        TPU_POOLS
    )


def test_the_system_pool_is_deleted_before_it_is_made_again(dev_run):
    """It keeps its name through a replacement (its account, its boot), which GKE would refuse beside the old pool."""
    assert dev_run.one(NODE_POOL, "system-pool").options["deleteBeforeReplace"] is True


def test_cube_count_follows_the_pool_list():
    run = run_stack({"tpu.pools": [{"name": f"cube-{i}", "nodeCount": 16} for i in range(4)]})
    assert len([p for p in run.of_type(NODE_POOL) if p.name.startswith("cube-")]) == 4
    assert run.outputs["tpuChips"] == 256


def test_kubernetes_provider_uses_the_cluster_kubeconfig(dev_run):
    (provider,) = dev_run.of_type("pulumi:providers:kubernetes")
    assert provider.parent == "cluster"
    assert provider.inputs["kubeconfig"] is not None
    assert {"gke-cluster", "system-pool"} <= set(provider.dependencies)


EXISTING_CLUSTER = {
    "cluster.existing": {"name": "team-cluster", "location": "us-central1"},
    "dashboards.enabled": False,
}


@pytest.mark.parametrize("override", [{}, EXISTING_CLUSTER], ids=["own-cluster", "existing-cluster"])
def test_the_kubernetes_provider_refuses_existing_objects_unless_a_recovery_turns_the_switch_on(dev_run, override):
    """The program never sets the provider's upsertExistingObjects: a create refuses an object the cluster already
    holds (the pinned provider's default), and the switch of docs/recovery.md's recoveries,
    PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true, reaches the provider's config through the SDK, said at every preview."""
    # Not the monkeypatch fixture, for which run_stack runs again what it ran already (it caches a run by the
    # environment it ran in); without the switch in the environment, the dev stack's run is the dev run.
    switch_unset = UPSERT_EXISTING_ENV not in os.environ
    with pytest.MonkeyPatch.context() as environment:
        environment.delenv(UPSERT_EXISTING_ENV, raising=False)
        run = dev_run if switch_unset and not override else run_stack(override)
        (provider,) = run.of_type("pulumi:providers:kubernetes")
        assert "upsertExistingObjects" not in provider.inputs
        assert not [w for w in run.warnings if UPSERT_EXISTING_ENV in w]
        environment.setenv(UPSERT_EXISTING_ENV, "true")
        run = run_stack(override)
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    # Provider config travels as strings, and the provider takes exactly "true" (provider.go, upsertExistingObjects).
    assert provider.input("upsertExistingObjects") == "true"
    (warned,) = [w for w in run.warnings if UPSERT_EXISTING_ENV in w]
    assert "then run a plain `pulumi up`" in warned


# The program's Kubernetes provider alone, as the stack makes it (the test above runs it within the whole program).
PROVIDER_PROGRAM = """
import pulumi
from components.gcp.cluster import kubernetes_provider
kubernetes_provider("kubeconfig", "kubeconfig/cluster", pulumi.ResourceOptions())
"""


@pytest.mark.parametrize("value", ["true", "1", "T", "True", "false", "0", "yes", "on", ""])
def test_the_preview_warns_of_the_switch_exactly_when_the_sdk_turns_it_on(value, monkeypatch, tmp_path):
    """The warning reads the variable as the SDK does: warned if and only if the provider gets the switch on."""
    monkeypatch.setenv(UPSERT_EXISTING_ENV, value)
    program = tmp_path / "__main__.py"
    program.write_text(PROVIDER_PROGRAM)
    run = run_program({}, program_path=program)
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    switched_on = provider.inputs.get("upsertExistingObjects") == "true"
    assert bool([w for w in run.warnings if UPSERT_EXISTING_ENV in w]) == switched_on
    assert (upsert_switch_warning({UPSERT_EXISTING_ENV: value}) is not None) == switched_on


def test_kubeconfig_authenticates_with_the_gke_plugin_and_stays_secret():
    run = run_stack(preview=False)
    assert run.outputs["kubeconfig"] == "[secret]"
    kubeconfig = yaml.safe_load(run.raw_outputs["kubeconfig"])
    (user,) = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user["user"]


# GKE's DNS-based endpoint of a cluster: gke-, 36 hex characters, the location (harness/gcp_model.py).
DNS_ENDPOINT = re.compile(r"^gke-[0-9a-f]{36}\.us-central1\.gke\.goog$")


def kubeconfig_cluster(run) -> dict:
    (cluster,) = yaml.safe_load(run.raw_outputs["kubeconfig"])["clusters"]
    return cluster["cluster"]


def test_the_stack_reaches_the_control_plane_by_its_dns_endpoint_without_the_cluster_ca():
    """The DNS-based endpoint's certificate is publicly signed: the cluster CA as the only trust anchor would
    fail every handshake, so the kubeconfig leaves the system's trust store to the client."""
    run = run_stack(preview=False)
    cluster = kubeconfig_cluster(run)
    assert DNS_ENDPOINT.match(cluster["server"].removeprefix("https://")), cluster
    assert "certificate-authority-data" not in cluster
    assert run.raw_outputs["clusterEndpoint"] == cluster["server"].removeprefix("https://")
    assert run.outputs["getCredentialsCommand"] == f"{GET_CREDENTIALS} --dns-endpoint"
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert provider.input("kubeconfig") == run.raw_outputs["kubeconfig"]


@pytest.mark.parametrize(
    "ip_endpoint, flag", [("public", ""), ("private", " --internal-ip")], ids=["public-ip", "private-ip"]
)
def test_without_the_dns_endpoint_the_stack_reaches_the_ip_with_the_cluster_ca(ip_endpoint, flag):
    """With the public endpoint off, the endpoint GKE reports is the private one, an address of the node subnet
    (harness/gcp_model.py cluster_private_endpoint): the kubeconfig names it, and the gcloud command says so too."""
    run = run_stack({"cluster.controlPlane": {"dnsEndpoint": False, "ipEndpoint": ip_endpoint}}, preview=False)
    cluster = kubeconfig_cluster(run)
    address = ipaddress.ip_address(cluster.pop("server").removeprefix("https://"))
    assert cluster == {"certificate-authority-data": "LS0tLS1CRUdJTi1DQS0tLS0t"}
    node_range = ipaddress.ip_network(run.one("gcp:compute/subnetwork:Subnetwork", "node-subnet").input("ipCidrRange"))
    if ip_endpoint == "public":
        assert address == ipaddress.ip_address("203.0.113.10")
    else:
        assert address in node_range, (address, node_range)
    assert run.raw_outputs["clusterEndpoint"] == str(address)
    assert run.outputs["getCredentialsCommand"] == f"{GET_CREDENTIALS}{flag}"


def test_with_no_ip_endpoint_gke_gives_the_dns_name_as_the_cluster_endpoint():
    """What the provider's `endpoint` holds then (the model, harness/gcp_model.py): the stack never reads it."""
    run = run_stack(stack="prod", preview=False)
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("controlPlaneEndpointsConfig.ipEndpointsConfig.enabled") is False
    assert kubeconfig_cluster(run)["server"].startswith("https://gke-")


def test_the_dns_endpoint_is_unknown_until_the_cluster_exists(dev_run):
    assert dev_run.outputs["clusterEndpoint"] == "[unknown]"
    assert dev_run.outputs["kubeconfig"] == "[secret]"


# --- Network isolation: private nodes, Cloud NAT, the control plane's endpoints ---------------------------


def test_the_cluster_defaults_new_nodes_to_private_and_opens_the_dns_endpoint(dev_run):
    cluster = dev_run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("privateClusterConfig") == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    assert cluster.input("controlPlaneEndpointsConfig") == {
        "dnsEndpointConfig": {"allowExternalTraffic": True},  # IAM tokens only: no k8s tokens or certs over DNS
        "ipEndpointsConfig": {"enabled": True},
    }
    assert "masterAuthorizedNetworksConfig" not in cluster.inputs  # dev's public IP admits every address
    # The fields that would replace the cluster are never set.
    assert not {"masterIpv4CidrBlock", "privateEndpointSubnetwork"} & set(cluster.input("privateClusterConfig"))


def test_the_prod_control_plane_answers_on_its_dns_endpoint_only(stack_run):
    cluster = stack_run("prod").one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("privateClusterConfig") == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster.input("controlPlaneEndpointsConfig") == {
        "dnsEndpointConfig": {"allowExternalTraffic": True},
        "ipEndpointsConfig": {"enabled": False},
    }
    assert "masterAuthorizedNetworksConfig" not in cluster.inputs


def test_authorized_networks_are_the_only_ranges_the_public_ip_admits():
    networks = [{"cidr": "203.0.113.0/24", "name": "office-vpn"}, {"cidr": "198.51.100.16/28", "name": "ci"}]
    run = run_stack({"cluster.controlPlane": {"authorizedNetworks": networks}})
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("masterAuthorizedNetworksConfig") == {
        "cidrBlocks": [
            {"cidrBlock": "203.0.113.0/24", "displayName": "office-vpn"},
            {"cidrBlock": "198.51.100.16/28", "displayName": "ci"},
        ],
        "gcpPublicCidrsAccessEnabled": False,  # not every Google Cloud VM of every project
    }
    assert cluster.input("privateClusterConfig.enablePrivateEndpoint") is False


def test_a_private_ip_endpoint_turns_the_public_one_off():
    run = run_stack({"cluster.controlPlane": {"ipEndpoint": "private"}})
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("privateClusterConfig.enablePrivateEndpoint") is True
    assert cluster.input("controlPlaneEndpointsConfig.ipEndpointsConfig.enabled") is True


def test_cloud_nat_serves_the_node_subnet_in_the_cluster_s_region(dev_run):
    router = dev_run.one("gcp:compute/router:Router", "nat-router")
    assert (router.parent, router.input("name"), router.input("region")) == (
        "network",
        f"{NETWORK.prefix}-router",
        DEV.region,
    )
    assert "vpc" in router.dependencies
    nat = dev_run.one("gcp:compute/routerNat:RouterNat", "nat")
    assert nat.parent == "network"
    assert (nat.input("name"), nat.input("router"), nat.input("region")) == (
        f"{NETWORK.prefix}-nat",
        f"{NETWORK.prefix}-router",
        DEV.region,
    )
    assert nat.input("natIpAllocateOption") == "AUTO_ONLY"
    # The node subnet and its pod range, not the proxy-only subnet of the internal load balancer.
    assert nat.input("sourceSubnetworkIpRangesToNat") == "LIST_OF_SUBNETWORKS"
    assert nat.input("subnetworks") == [{"name": "node-subnet-id", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]
    assert {"nat-router", "node-subnet"} <= set(nat.dependencies)
    assert (nat.input("enableDynamicPortAllocation"), nat.input("enableEndpointIndependentMapping")) == (True, False)
    assert (nat.input("minPortsPerVm"), nat.input("maxPortsPerVm")) == (64, 4096)
    assert nat.input("logConfig") == {"enable": True, "filter": "ERRORS_ONLY"}


def test_nat_settings_come_from_the_network_block():
    run = run_stack({"network.nat": {"logging": "OFF", "minPortsPerVm": 128, "maxPortsPerVm": 65536}})
    nat = run.one("gcp:compute/routerNat:RouterNat", "nat")
    assert nat.input("logConfig") == {"enable": False, "filter": "ERRORS_ONLY"}
    assert (nat.input("minPortsPerVm"), nat.input("maxPortsPerVm")) == (128, 65536)


@pytest.mark.parametrize("stack", ["dev", "prod", "saxml"])
def test_every_node_pool_is_private_and_never_diffs_on_network_fields_it_does_not_set(stack_run, stack):
    pools = stack_run(stack).of_type(NODE_POOL)
    assert len(pools) >= 3
    for pool in pools:
        assert pool.input("networkConfig") == {"enablePrivateNodes": True}, pool.name
        assert pool.options["ignoreChanges"] == [
            "networkConfig.acceleratorNetworkProfile",
            "networkConfig.additionalPodNetworkConfigs",
        ], pool.name


def test_public_nodes_get_no_nat_and_say_so_to_gke():
    run = run_stack({"cluster.privateNodes": False})
    assert not run.of_type("gcp:compute/routerNat:RouterNat") and not run.of_type("gcp:compute/router:Router")
    assert run.one("gcp:container/cluster:Cluster", "gke-cluster").input("privateClusterConfig.enablePrivateNodes") is (
        False
    )
    for pool in run.of_type(NODE_POOL):
        assert pool.input("networkConfig") == {"enablePrivateNodes": False}, pool.name
        assert "nat" not in pool.dependencies


def test_one_pool_can_move_apart_from_the_others():
    """The way to move a running stack's cubes one `up` at a time: each TPU pool may override the cluster."""
    pools = [{"name": "tpu7-pool-1", "nodeCount": 16, "privateNodes": True}, {"name": "tpu7-pool-2", "nodeCount": 16}]
    run = run_stack({"cluster.privateNodes": False, "tpu.pools": pools})
    assert run.one(NODE_POOL, "tpu7-pool-1").input("networkConfig") == {"enablePrivateNodes": True}
    assert run.one(NODE_POOL, "tpu7-pool-2").input("networkConfig") == {"enablePrivateNodes": False}
    assert run.one(NODE_POOL, "system-pool").input("networkConfig") == {"enablePrivateNodes": False}
    assert run.one("gcp:compute/routerNat:RouterNat", "nat")  # a private pool needs it


# --- The cluster's CIS GKE settings of 5.1.4, 5.8.2 and 5.6.1 -----------------------------------------------------

CLUSTER = "gcp:container/cluster:Cluster"
SERVICE = "gcp:projects/service:Service"
BINARY_AUTHORIZATION_API = "binaryauthorization.googleapis.com"


def test_the_dev_cluster_says_each_setting_is_off_and_enables_no_binary_authorization_api(dev_run):
    """Binary Authorization and intranode visibility are sent off, so a stack that turns them off again reaches
    GKE; an empty group is left out, since the provider would create a cluster with the feature on for it."""
    cluster = dev_run.one(CLUSTER, "gke-cluster")
    assert cluster.input("binaryAuthorization") == {"evaluationMode": "DISABLED"}
    assert cluster.input("enableIntranodeVisibility") is False
    assert "authenticatorGroupsConfig" not in cluster.inputs
    assert BINARY_AUTHORIZATION_API not in {s.input("service") for s in dev_run.of_type(SERVICE)}


def test_the_prod_cluster_enforces_the_project_s_policy_names_its_group_and_sees_intranode_traffic(stack_run):
    run = stack_run("prod")
    cluster = run.one(CLUSTER, "gke-cluster")
    assert cluster.input("binaryAuthorization") == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    assert cluster.input("authenticatorGroupsConfig") == {"securityGroup": "gke-security-groups@example.com"}
    assert cluster.input("enableIntranodeVisibility") is True
    (api,) = [s for s in run.of_type(SERVICE) if s.input("service") == BINARY_AUTHORIZATION_API]
    assert api.input("disableOnDestroy") is False  # the organisation's policy lives on after the stack
    assert api.name in cluster.dependencies  # the cluster enforces a policy read through it


def test_an_enforcing_cluster_without_its_api_is_refused_by_a_new_project(monkeypatch):
    """The model of Google Cloud knows the cluster needs the Binary Authorization API: were the stack to forget to
    enable it, the first `up` of a new project would fail at the cluster, as the real one would."""
    from components import wiring
    from harness.gcp_model import ServiceDisabled

    values, secret_keys = stack_config_values("prod", FIXTURE_STACKS)
    monkeypatch.setattr(
        wiring, "project_apis", lambda stack: tuple(a for a in REQUIRED_APIS if a != BINARY_AUTHORIZATION_API)
    )
    with pytest.raises(ServiceDisabled) as refused:
        render.empty_project_runs("prod", values, secret_keys)
    assert (refused.value.api, refused.value.call) == (BINARY_AUTHORIZATION_API, CLUSTER)
    assert "Binary Authorization API has not been used in project my-tpu-prod-project" in str(refused.value)


def test_on_a_cluster_made_elsewhere_the_hardening_settings_are_not_the_stack_s_to_set():
    """The cluster's owner sets them where it is made: the stack registers no cluster and enables no API for them,
    and the production rules do not ask a cluster made elsewhere for them."""

    from components.config_base import Problems
    from components.gcp.config import ClusterConfig, ExistingClusterConfig, NetworkConfig, TpuConfig
    from components.hardening.rules import validate_production
    from components.operations.config import NodeAuditLoggingConfig
    from components.platform.config import PlatformConfig
    from components.workloads.serving.config import ServingConfig

    hardened = {
        "cluster.existing": {"name": "team-cluster", "location": "us-central1"},
        "cluster.binaryAuthorization": "PROJECT_SINGLETON_POLICY_ENFORCE",
        "cluster.rbacSecurityGroup": "gke-security-groups@example.com",
        "cluster.intranodeVisibility": True,
    }
    run = run_stack(hardened)
    assert not run.of_type(CLUSTER)
    assert BINARY_AUTHORIZATION_API not in {s.input("service") for s in run.of_type(SERVICE)}
    assert "hardening" not in run.raw_outputs["lifecycle"]  # nothing of it changes with this stack's `up`
    elsewhere = ClusterConfig(existing=ExistingClusterConfig(name="team-cluster", location="us-central1"))
    own = elsewhere.model_copy(update={"existing": ExistingClusterConfig()})
    for cluster, refused in (
        (elsewhere, []),
        (
            own,
            [
                "tpu.protectPools",
                "cluster.controlPlane.ipEndpoint",
                "cluster.systemPool.nodesPerZone",
                "cluster.secretsEncryptionKey",
                "cluster.bootDiskEncryptionKey",
                "cluster.binaryAuthorization",
                "cluster.rbacSecurityGroup",
                "cluster.intranodeVisibility",
                "nodeAuditLogging.enabled",
            ],
        ),
    ):
        problems = Problems()
        validate_production(
            True,
            NetworkConfig(),
            cluster,
            TpuConfig(),
            PlatformConfig(),
            ServingConfig(),
            NodeAuditLoggingConfig(enabled=False),
            problems,
        )
        assert [p.key for p in problems.items] == refused


def test_stack_outputs(dev_run):
    outputs = dev_run.outputs
    assert outputs["project"] == DEV.project and outputs["region"] == DEV.region
    assert (outputs["networkName"], outputs["nodeSubnetName"], outputs["proxyOnlySubnetName"]) == (
        f"{NETWORK.prefix}-main",
        f"{NETWORK.prefix}-tpu",
        f"{NETWORK.prefix}-proxy",
    )
    assert outputs["clusterName"] == CLUSTER_CONFIG.name
    assert outputs["clusterEndpoint"] == "[unknown]"  # known only after apply
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["getCredentialsCommand"] == f"{GET_CREDENTIALS} --dns-endpoint"
    assert outputs["workloadPolicyName"] == TPU.workload_policy_name
    assert outputs["tpuPoolNames"] == [pool.name for pool in TPU.pools]
    assert outputs["tpuChips"] == 64 * len(TPU.pools)  # a 4x4x4 cube each


def test_the_saxml_cluster_asks_for_its_minor_too(stack_run):
    (cluster,) = stack_run("saxml").of_type("gcp:container/cluster:Cluster")
    assert cluster.input("minMasterVersion") == "1.35"


def gke(channels: dict[str, tuple[str, list[str]]]) -> GkeServerConfig:
    return GkeServerConfig({name: ReleaseChannel(default, tuple(valid)) for name, (default, valid) in channels.items()})


# What GKE offered in us-central1 in September 2026, roughly (release notes): RAPID 1.34-1.37, REGULAR 1.34-1.36.
SEPTEMBER_2026 = {
    "RAPID": ("1.36.4-gke.1391000", ["1.37.0-gke.1500000", "1.36.4-gke.1391000", "1.35.8-gke.1036000"]),
    "REGULAR": ("1.35.8-gke.1036000", ["1.36.1-gke.1200000", "1.35.8-gke.1036000", "1.34.9-gke.1000000"]),
}


@pytest.mark.parametrize(
    "stack, channels, warning",
    [
        ("dev", SEPTEMBER_2026, None),
        ("saxml", SEPTEMBER_2026, None),
        # The REGULAR channel offers 1.36, but below the floor: a new cluster would start there.
        (
            "dev",
            {**SEPTEMBER_2026, "RAPID": ("1.36.0-gke.2459000", ["1.36.0-gke.2459000"])},
            "the newest 1.36 version the RAPID channel offers here is 1.36.0-gke.2459000, below the floor 1.36.0-gke.3712000",
        ),
        # The location offers 1.36 (on RAPID) but the saxml stack's channel does not: the channel's list decides.
        (
            "saxml",
            {**SEPTEMBER_2026, "REGULAR": ("1.34.9-gke.1000000", ["1.34.9-gke.1000000"])},
            "the REGULAR channel offers no 1.35 version here (its default is 1.34.9-gke.1000000)",
        ),
    ],
)
def test_the_floor_is_checked_against_the_stack_s_own_channel(stack_run, stack, channels, warning):
    """A running cluster is past its floor already: the preview warns. A new one would start below the floor, or not
    at all (GKE refuses a minor its channel does not offer): the preview refuses it, before the cluster is created."""
    previous = {
        "lifecycle": copy.deepcopy(stack_run(stack).raw_outputs["lifecycle"])
    }  # the running stack's last `up`'s
    run = run_stack(stack=stack, engine_versions=gke(channels), previous_outputs=previous)
    found = [w for w in run.warnings if w.startswith("cluster.version: ")]
    if warning is None:
        assert found == []
        run_stack(stack=stack, engine_versions=gke(channels))  # a new cluster the channel offers its floor
        return
    assert len(found) == 1 and warning in found[0], found
    with pytest.raises(pulumi.RunError, match=r"cluster\.version: ") as refused:
        run_stack(stack=stack, engine_versions=gke(channels))
    assert warning in str(refused.value)
    if stack != "dev":
        return
    # a new cluster name replaces the running cluster: a new cluster too
    with pytest.raises(pulumi.RunError, match=r"cluster\.version: "):
        run_stack(
            {"cluster.name": "other-cluster"}, stack=stack, engine_versions=gke(channels), previous_outputs=previous
        )


def test_the_old_saxml_floor_is_refused_before_anything_is_registered():
    """R2: GKE ended standard support of 1.33 on 2026-08-03; its REGULAR channel offers it no more."""
    assert_bad_input(
        {"cluster.version": "1.33.5-gke.1162000"}, "cluster.version", "GKE ended standard support of 1.33", "saxml"
    )


def test_nothing_is_compared_where_nothing_was_looked_up(dev_run):
    assert not any(w.startswith("cluster.version") for w in dev_run.warnings)


# --- A new project: every Google Cloud call waits for the API it goes through -----------------------

STACKS = FIXTURE_STACK_NAMES


@pytest.mark.parametrize("stack", STACKS)
def test_the_first_preview_and_up_of_every_stack_pass_in_a_new_project(stack):
    """Every invoke the program makes waits for the Service of its API (so the next one added without
    that wait fails here), but one of an API on before the first `up` (Cloud KMS's, where the stack's keys were
    made: render.new_project), which both steps answer; and every Google Cloud resource is created after the API
    it goes through."""
    values, secret_keys = stack_config_values(stack, FIXTURE_STACKS)
    runs = render.empty_project_runs(stack, values, secret_keys)  # raises ServiceDisabled on a refusal
    assert runs["up"].invocations, "the stack reads nothing from the cloud: nothing here is tested"
    on_already = render.new_project(values, secret_keys).enabled or frozenset()
    for step, run in runs.items():
        for invocation in run.invocations:
            assert invocation.api is not None, invocation.token
            if invocation.api in on_already:
                assert invocation.answer == "answered", (step, invocation)
                continue
            assert invocation.api.split(".")[0] in invocation.waited_for, (step, invocation)
            # The first preview cannot run a read whose API is not on yet; the up runs it after.
            assert invocation.answer == ("unknown" if step == "preview" else "answered"), (step, invocation)


def test_on_a_cluster_made_elsewhere_the_stack_enables_only_what_its_own_calls_need():
    existing = {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}}
    run = run_stack(existing)
    services = sorted(s.input("service") for s in run.of_type("gcp:projects/service:Service"))
    # The weights bucket and its grants (which read the project number); GKE's own APIs are on already.
    assert services == ["cloudresourcemanager.googleapis.com", "storage.googleapis.com"]
    assert not run.of_type("gcp:compute/previewFeature:PreviewFeature")
    (lookup,) = [i for i in run.invocations if i.token == "gcp:organizations/getProject:getProject"]
    assert lookup.waited_for == ["cloudresourcemanager"]
    values = as_pulumi_values(with_overrides(stack_values("dev"), existing))
    runs = render.empty_project_runs("dev", values, [])  # a project with a cluster: GKE's APIs on, no others
    # getProject, getCluster and getSubnetworks (the VPC's proxy-only range: Compute Engine's, on with GKE's)
    assert [i.answer for i in runs["up"].invocations] == ["answered"] * 3


def test_on_a_cluster_made_elsewhere_a_token_in_secret_manager_enables_its_api_and_the_project_lookup():
    existing = {
        "cluster.existing": {"name": "team-cluster", "location": "us-central1"},
        "serving.weightsBucket": {"name": "my-model-weights", "create": False, "grantAccess": False},
        "serving.hfTokenSecretVersion": f"projects/{DEV.project}/secrets/hf-token/versions/1",
    }
    run = run_stack(existing)
    services = sorted(s.input("service") for s in run.of_type("gcp:projects/service:Service"))
    assert services == ["cloudresourcemanager.googleapis.com", SECRET_MANAGER_API]  # the grants' principals, the grants
    assert len(run.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")) == 2


def test_secret_manager_is_enabled_and_the_add_on_on_only_where_the_token_is_kept_there(dev_run, stack_run):
    def services(run):
        return sorted(s.input("service") for s in run.of_type("gcp:projects/service:Service"))

    assert SECRET_MANAGER_API not in services(dev_run)
    # Sent either way, so that turning it off reaches GKE (the provider keeps a block it is no longer sent)
    assert dev_run.one("gcp:container/cluster:Cluster", "gke-cluster").input("secretManagerConfig") == {
        "enabled": False
    }
    prod = stack_run("prod")
    assert SECRET_MANAGER_API in services(prod) and set(REQUIRED_APIS) <= set(services(prod))
    assert prod.one("gcp:container/cluster:Cluster", "gke-cluster").input("secretManagerConfig") == {"enabled": True}
    # The add-on alone (no pod mounts anything yet): the API is on before the cluster gets the add-on.
    add_on_only = run_stack({"cluster.secretManager": True})
    assert SECRET_MANAGER_API in services(add_on_only)
    assert "secretmanager" in add_on_only.one("gcp:container/cluster:Cluster", "gke-cluster").dependencies


def test_a_stack_that_makes_nothing_in_google_cloud_enables_no_api():
    lab = {
        "cluster.existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"},
        "serving.weightsBucket": {"name": "my-model-weights", "create": False, "grantAccess": False},
    }
    run = run_stack(lab, secrets=("cluster",))
    assert not [r for r in run.registrations if r.type.startswith("gcp:")]
    assert run.invocations == []
