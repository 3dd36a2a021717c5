"""The saxml stack: the same program on TPU v5e, with a Saxml cell instead of dynamic slicing."""

import pytest

from components import stack as stack_config
from components.resources import APPLY_ANNOTATIONS
from components.tpu.topology import ACCELERATOR_NODE_LABEL, TOPOLOGY_NODE_LABEL, Shape
from components.workloads.saxml.config import bucket_name
from components.workloads.saxml.objects import INTERNAL_LB_ANNOTATION, sax_root
from tests.conftest import run_stack, stack_values
from tests.crd_schemas import HALVES, strict_errors
from tools.render import kubernetes_objects

STACK = "saxml"


@pytest.fixture(scope="module")
def saxml_run():
    return run_stack(stack=STACK)


# The saxml fixture stack's validated config: what each expectation below comes from.
CONFIG = stack_config.load(stack_values(STACK)).config
BUCKET = bucket_name(CONFIG.saxml, CONFIG.project)


def objects_by_name(run):
    return {(o["kind"], o["metadata"]["name"]): o for o in kubernetes_objects(run.registrations)}


def test_each_tpu_pool_is_a_compact_slice_of_its_topology(saxml_run):
    pools = {
        r.name: r
        for r in saxml_run.registrations
        if r.type == "gcp:container/nodePool:NodePool" and r.parent == "tpu-capacity"
    }
    assert set(pools) == {pool.name for pool in CONFIG.tpu.pools}
    for declared in CONFIG.tpu.pools:
        pool = pools[declared.name]
        # a multi-host v5e slice: its hosts, placed together, in the TPU zone
        assert (
            pool.input("nodeCount") == declared.node_count == CONFIG.tpu.machine.hosts(Shape.parse(declared.topology))
        )
        assert pool.input("nodeConfig.machineType") == CONFIG.tpu.machine_type
        assert pool.input("placementPolicy") == {"type": "COMPACT", "tpuTopology": declared.topology}
        assert pool.input("nodeLocations") == [CONFIG.tpu.zone]


def test_single_host_pools_are_made_without_a_placement_topology():
    """A 2x2 v5e pool is one host, a single-host slice: GKE refuses a tpu_topology on such a pool (the harness's model
    answers its 400, harness/gcp_model.refuse_invalid), so the `up` makes it with no placement policy at all."""
    pools = [{"name": f"tpu{i}", "nodeCount": 1, "topology": "2x2"} for i in (1, 2)]
    run = run_stack({"tpu.pools": pools, "saxml.model.parametersBillions": 7}, stack=STACK, preview=False)
    made = [r for r in run.registrations if r.type == "gcp:container/nodePool:NodePool" and r.parent == "tpu-capacity"]
    assert sorted((r.name, r.input("nodeCount"), "placementPolicy" in r.inputs) for r in made) == [
        ("tpu1", 1, False),
        ("tpu2", 1, False),
    ]


def test_no_dynamic_slicing_objects(saxml_run):
    types = {r.type for r in saxml_run.registrations}
    assert "gcp:compute/resourcePolicy:ResourcePolicy" not in types  # no workload policy
    assert not {"tpu-gke:k8s:KueueQueues", "tpu-gke:k8s:SliceChecks", "kubernetes:yaml/v2:ConfigGroup"} & types
    releases = [r.name for r in saxml_run.registrations if r.type == "kubernetes:helm.sh/v3:Release"]
    assert releases == ["jobset"]
    assert saxml_run.one("gcp:container/cluster:Cluster", "gke-cluster").input("addonsConfig")  # still a GKE cluster
    cluster = saxml_run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("addonsConfig").get("sliceControllerConfig", {}).get("enabled") is not True
    kinds = {o["kind"] for o in kubernetes_objects(saxml_run.registrations)}
    assert not {"ClusterQueue", "LocalQueue", "Topology", "ResourceFlavor", "WorkloadPriorityClass"} & kinds
    assert not {"admissionPlan", "workloadPolicyName", "sliceCheckJobSets"} & set(saxml_run.outputs)


def test_state_bucket_is_private_versioned_and_kept_on_destroy(saxml_run):
    bucket = saxml_run.one("gcp:storage/bucket:Bucket", "admin-state")
    assert bucket.input("name") == BUCKET
    assert bucket.input("uniformBucketLevelAccess") is True
    assert bucket.input("publicAccessPrevention") == "enforced"
    assert bucket.input("versioning") == {"enabled": True}
    assert bucket.input("forceDestroy") is False
    assert bucket.options == {"retainOnDelete": True}  # destroy forgets it, never fails on it


def test_old_versions_of_the_state_are_deleted_after_the_blocks_days(saxml_run):
    """R9 of the December review: the admin server writes its state every 10 s, each write a new version."""
    rules = saxml_run.one("gcp:storage/bucket:Bucket", "admin-state").input("lifecycleRules")
    versions = CONFIG.saxml.noncurrent_versions
    assert versions.days and not versions.newer_versions  # one rule: by age alone
    assert rules == [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": versions.days, "withState": "ARCHIVED"}}
    ]


@pytest.mark.parametrize(
    "versions, conditions",
    [
        ({"days": 3}, [{"daysSinceNoncurrentTime": 3}]),
        ({"days": 0, "newerVersions": 100}, [{"numNewerVersions": 100}]),
        ({"days": 30, "newerVersions": 1000}, [{"daysSinceNoncurrentTime": 30}, {"numNewerVersions": 1000}]),
    ],
)
def test_each_limit_on_old_versions_is_a_rule_of_its_own(versions, conditions):
    """The conditions of one rule must all hold: two rules make either limit enough."""
    bucket = run_stack({"saxml.noncurrentVersions": versions}, stack=STACK).one(
        "gcp:storage/bucket:Bucket", "admin-state"
    )
    assert bucket.input("lifecycleRules") == [
        {"action": {"type": "Delete"}, "condition": {**condition, "withState": "ARCHIVED"}} for condition in conditions
    ]


def test_the_state_bucket_is_deleted_with_its_objects_only_when_asked():
    bucket = run_stack({"saxml.keepBucketOnDestroy": False}, stack=STACK).one(
        "gcp:storage/bucket:Bucket", "admin-state"
    )
    assert bucket.input("forceDestroy") is True
    assert "retainOnDelete" not in bucket.options


def test_only_the_admin_server_writes_the_state_and_the_other_servers_read_it(saxml_run):
    """google/saxml v1.1.0: the admin server writes sax-root and sax-fs-root; the model servers and the HTTP
    server only read the admin server's address. Neither is granted anything on the project."""
    saxml, project = CONFIG.saxml, CONFIG.project
    admin = f"{saxml.admin_google_service_account_id}@{project}.iam.gserviceaccount.com"
    reader = f"{saxml.google_service_account_id}@{project}.iam.gserviceaccount.com"
    accounts = {r.input("accountId") for r in saxml_run.of_type("gcp:serviceaccount/account:Account")}
    assert {saxml.admin_google_service_account_id, saxml.google_service_account_id} <= accounts
    bucket_roles = {
        (r.input("bucket"), r.input("role"), r.input("member"))
        for r in saxml_run.registrations
        if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"
    }
    assert bucket_roles == {
        (BUCKET, "roles/storage.objectUser", f"serviceAccount:{admin}"),
        (BUCKET, "roles/storage.objectViewer", f"serviceAccount:{reader}"),
    }
    project_roles = [r.input("role") for r in saxml_run.registrations if r.type == "gcp:projects/iAMMember:IAMMember"]
    assert not [role for role in project_roles if role.startswith("roles/storage.")]  # never project-wide storage
    # each Kubernetes account of the cell acts as its Google one, and no other account does
    members = {r.input("member") for r in saxml_run.of_type("gcp:serviceaccount/iAMMember:IAMMember")}
    ksas = {saxml.admin_service_account_name: admin, saxml.service_account_name: reader}
    assert members == {f"serviceAccount:{project}.svc.id.goog[{saxml.namespace}/{ksa}]" for ksa in ksas}
    found = objects_by_name(saxml_run)
    for ksa, email in ksas.items():
        assert found[("ServiceAccount", ksa)]["metadata"] == {
            "name": ksa,
            "namespace": saxml.namespace,
            "annotations": {"iam.gke.io/gcp-service-account": email, **APPLY_ANNOTATIONS},
        }
    admin_pod = found[("Deployment", "sax-admin-server")]["spec"]["template"]["spec"]
    http_pod = found[("Deployment", "sax-http")]["spec"]["template"]["spec"]
    (job,) = found[("JobSet", "sax-model-server-set")]["spec"]["replicatedJobs"]
    model_pod = job["template"]["spec"]["template"]["spec"]
    assert admin_pod["serviceAccountName"] == saxml.admin_service_account_name
    assert http_pod["serviceAccountName"] == model_pod["serviceAccountName"] == saxml.service_account_name


def test_three_workloads_and_an_internal_service(saxml_run):
    found = objects_by_name(saxml_run)
    admin, jobset = found[("Deployment", "sax-admin-server")], found[("JobSet", "sax-model-server-set")]
    http, service = found[("Deployment", "sax-http")], found[("Service", "sax-http-lb")]
    assert {o["metadata"]["namespace"] for o in (admin, jobset, http, service)} == {CONFIG.saxml.namespace}
    (job,) = jobset["spec"]["replicatedJobs"]
    (topology,) = {pool.topology for pool in CONFIG.tpu.pools}
    # a model server per pool, a pod on every host of its slice, on the nodes of the pools
    assert job["replicas"] == len(CONFIG.tpu.pools)
    assert job["template"]["spec"]["parallelism"] == CONFIG.tpu.machine.hosts(Shape.parse(topology))
    pod = job["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        ACCELERATOR_NODE_LABEL: CONFIG.tpu.machine.accelerator_label,
        TOPOLOGY_NODE_LABEL: topology,
    }
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["SAX_ROOT"] == sax_root(BUCKET)
    admin_env = {e["name"]: e.get("value") for e in admin["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert admin_env["GSBUCKET"] == BUCKET  # the bucket the model servers' SAX_ROOT is in
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"][INTERNAL_LB_ANNOTATION] == "Internal"
    # R8 of the December review: the cluster's nodes and pods (network.nodeCidr, network.podCidr).
    assert not CONFIG.saxml.http.source_ranges and CONFIG.saxml.http.cluster_clients
    assert service["spec"]["loadBalancerSourceRanges"] == [CONFIG.network.node_cidr, CONFIG.network.pod_cidr]


def test_workloads_wait_for_identity_and_the_jobset_release(saxml_run):
    jobset = saxml_run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "model-servers")
    assert {"jobset", "sax-sa", "sax-gsa-object-viewer", "sax-ksa-workload-identity", "admin-server"} <= set(
        jobset.dependencies
    )
    admin = saxml_run.one("kubernetes:apps/v1:Deployment", "admin-server")
    assert {"sax-admin", "sax-admin-gsa-object-user", "sax-admin-ksa-workload-identity", "sax"} <= set(
        admin.dependencies
    )
    assert not {"sax-sa", "sax-gsa-object-viewer"} & set(admin.dependencies)
    assert jobset.provider.split("::")[-2] == "gke"


@pytest.mark.parametrize("half", HALVES)
def test_every_object_validates_strictly(saxml_run, half):
    objects = kubernetes_objects(saxml_run.registrations)
    errors = [e for o in objects for e in strict_errors(o, half)]
    assert errors == []


def test_outputs_name_the_bucket_and_the_http_address(saxml_run):
    assert saxml_run.outputs["saxBucketName"] == BUCKET
    assert saxml_run.outputs["saxHttpAddress"] == "[unknown]"  # known once the load balancer exists


CLUSTER = [CONFIG.network.node_cidr, CONFIG.network.pod_cidr]  # the cluster's nodes and pods


def test_external_load_balancer_only_when_asked():
    clients = ["203.0.113.0/24"]
    run = run_stack({"saxml.http.external": True, "saxml.http.sourceRanges": clients}, stack=STACK)
    service = objects_by_name(run)[("Service", "sax-http-lb")]
    assert INTERNAL_LB_ANNOTATION not in service["metadata"].get("annotations", {})
    assert service["spec"]["loadBalancerSourceRanges"] == CLUSTER + clients


@pytest.mark.parametrize(
    "http, ranges",
    [
        ({"sourceRanges": ["10.128.0.0/20"]}, [*CLUSTER, "10.128.0.0/20"]),
        ({"sourceRanges": [CONFIG.network.node_cidr]}, CLUSTER),  # each range once
        ({"clusterClients": False, "sourceRanges": ["10.128.0.0/20"]}, ["10.128.0.0/20"]),
    ],
)
def test_the_load_balancer_admits_the_cluster_and_the_listed_clients(http, ranges):
    run = run_stack({"saxml.http": http}, stack=STACK)
    assert objects_by_name(run)[("Service", "sax-http-lb")]["spec"]["loadBalancerSourceRanges"] == ranges


def test_the_cluster_ranges_follow_the_network_block():
    pods, nodes = "10.64.0.0/14", "10.20.0.0/20"
    run = run_stack({"network.podCidr": pods, "network.nodeCidr": nodes}, stack=STACK)
    service = objects_by_name(run)[("Service", "sax-http-lb")]
    assert service["spec"]["loadBalancerSourceRanges"] == [nodes, pods]


def test_a_new_admin_account_leaves_the_model_servers_alone(saxml_run):
    """The admin server restarts as the new account; the JobSet, which a change would replace, is untouched."""
    account = "sax-admin-2"
    changed = run_stack({"saxml.adminServiceAccountName": account}, stack=STACK)
    jobset = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    assert changed.one(jobset, "model-servers").inputs == saxml_run.one(jobset, "model-servers").inputs
    admin = objects_by_name(changed)[("Deployment", "sax-admin-server")]
    assert admin["spec"]["template"]["spec"]["serviceAccountName"] == account
