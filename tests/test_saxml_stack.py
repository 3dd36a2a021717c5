"""The saxml stack: the same program on TPU v5e, with a Saxml cell instead of dynamic slicing."""

import pytest

from components.resources import APPLY_ANNOTATIONS
from tests.conftest import run_stack
from tests.crd_schemas import HALVES, strict_errors
from tools.render import kubernetes_objects

STACK = "saxml"


@pytest.fixture(scope="module")
def saxml_run():
    return run_stack(stack=STACK)


def objects_by_name(run):
    return {(o["kind"], o["metadata"]["name"]): o for o in kubernetes_objects(run.registrations)}


def test_two_compact_4x8_v5e_pools(saxml_run):
    pools = [
        r for r in saxml_run.registrations if r.type == "gcp:container/nodePool:NodePool" and r.parent == "tpu-capacity"
    ]
    assert sorted(p.name for p in pools) == ["tpu1", "tpu2"]
    for pool in pools:
        assert pool.input("nodeCount") == 8
        assert pool.input("nodeConfig.machineType") == "ct5lp-hightpu-4t"
        assert pool.input("placementPolicy") == {"type": "COMPACT", "tpuTopology": "4x8"}
        assert pool.input("nodeLocations") == ["us-west4-a"]


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
    assert bucket.parent == "saxml"
    assert bucket.input("name") == "my-tpu-project-sax-admin"
    assert bucket.input("uniformBucketLevelAccess") is True
    assert bucket.input("publicAccessPrevention") == "enforced"
    assert bucket.input("versioning") == {"enabled": True}
    assert bucket.input("forceDestroy") is False
    assert bucket.options == {"retainOnDelete": True}  # destroy forgets it, never fails on it


def test_old_versions_of_the_state_are_deleted_after_a_week(saxml_run):
    """R9 of the December review: the admin server writes its state every 10 s, each write a new version."""
    rules = saxml_run.one("gcp:storage/bucket:Bucket", "admin-state").input("lifecycleRules")
    assert rules == [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": 7, "withState": "ARCHIVED"}}
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
    admin = "sax-admin-sa@my-tpu-project.iam.gserviceaccount.com"
    reader = "sax-iam-sa@my-tpu-project.iam.gserviceaccount.com"
    accounts = {r.name: r.input("accountId") for r in saxml_run.of_type("gcp:serviceaccount/account:Account")}
    assert (accounts["sax-admin-gsa"], accounts["sax-gsa"]) == ("sax-admin-sa", "sax-iam-sa")
    bucket_roles = {
        (r.input("bucket"), r.input("role"), r.input("member"))
        for r in saxml_run.registrations
        if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"
    }
    assert bucket_roles == {
        ("my-tpu-project-sax-admin", "roles/storage.objectUser", f"serviceAccount:{admin}"),
        ("my-tpu-project-sax-admin", "roles/storage.objectViewer", f"serviceAccount:{reader}"),
    }
    project_roles = [r.input("role") for r in saxml_run.registrations if r.type == "gcp:projects/iAMMember:IAMMember"]
    assert not [role for role in project_roles if role.startswith("roles/storage.")]  # never project-wide storage
    bindings = {r.name: r.input("member") for r in saxml_run.of_type("gcp:serviceaccount/iAMMember:IAMMember")}
    assert bindings == {
        "sax-admin-ksa-workload-identity": "serviceAccount:my-tpu-project.svc.id.goog[sax/sax-admin]",
        "sax-ksa-workload-identity": "serviceAccount:my-tpu-project.svc.id.goog[sax/sax-sa]",
    }
    found = objects_by_name(saxml_run)
    for ksa, email in (("sax-admin", admin), ("sax-sa", reader)):
        assert found[("ServiceAccount", ksa)]["metadata"] == {
            "name": ksa,
            "namespace": "sax",
            "annotations": {"iam.gke.io/gcp-service-account": email, **APPLY_ANNOTATIONS},
        }
    admin_pod = found[("Deployment", "sax-admin-server")]["spec"]["template"]["spec"]
    http_pod = found[("Deployment", "sax-http")]["spec"]["template"]["spec"]
    (job,) = found[("JobSet", "sax-model-server-set")]["spec"]["replicatedJobs"]
    model_pod = job["template"]["spec"]["template"]["spec"]
    assert (admin_pod["serviceAccountName"], http_pod["serviceAccountName"], model_pod["serviceAccountName"]) == (
        "sax-admin",
        "sax-sa",
        "sax-sa",
    )


def test_three_workloads_and_an_internal_service(saxml_run):
    found = objects_by_name(saxml_run)
    admin, jobset = found[("Deployment", "sax-admin-server")], found[("JobSet", "sax-model-server-set")]
    http, service = found[("Deployment", "sax-http")], found[("Service", "sax-http-lb")]
    assert {o["metadata"]["namespace"] for o in (admin, jobset, http, service)} == {"sax"}
    (job,) = jobset["spec"]["replicatedJobs"]
    assert job["replicas"] == 2 and job["template"]["spec"]["parallelism"] == 8
    pod = job["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "4x8",
    }
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["SAX_ROOT"] == "gs://my-tpu-project-sax-admin/sax-root"
    admin_env = {e["name"]: e.get("value") for e in admin["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert admin_env["GSBUCKET"] == "my-tpu-project-sax-admin"
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"]["networking.gke.io/load-balancer-type"] == "Internal"
    # R8 of the December review: the cluster's nodes and pods (network.nodeCidr, network.podCidr).
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.10.0.0/18", "10.12.0.0/14"]


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
    assert saxml_run.outputs["saxBucketName"] == "my-tpu-project-sax-admin"
    assert saxml_run.outputs["saxHttpAddress"] == "[unknown]"  # known once the load balancer exists


def test_external_load_balancer_only_when_asked():
    run = run_stack({"saxml.http.external": True, "saxml.http.sourceRanges": ["203.0.113.0/24"]}, stack=STACK)
    service = objects_by_name(run)[("Service", "sax-http-lb")]
    assert "networking.gke.io/load-balancer-type" not in service["metadata"].get("annotations", {})
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.10.0.0/18", "10.12.0.0/14", "203.0.113.0/24"]


@pytest.mark.parametrize(
    "http, ranges",
    [
        ({"sourceRanges": ["10.128.0.0/20"]}, ["10.10.0.0/18", "10.12.0.0/14", "10.128.0.0/20"]),
        ({"sourceRanges": ["10.10.0.0/18"]}, ["10.10.0.0/18", "10.12.0.0/14"]),  # each range once
        ({"clusterClients": False, "sourceRanges": ["10.128.0.0/20"]}, ["10.128.0.0/20"]),
    ],
)
def test_the_load_balancer_admits_the_cluster_and_the_listed_clients(http, ranges):
    run = run_stack({"saxml.http": http}, stack=STACK)
    assert objects_by_name(run)[("Service", "sax-http-lb")]["spec"]["loadBalancerSourceRanges"] == ranges


def test_the_cluster_ranges_follow_the_network_block():
    run = run_stack({"network.podCidr": "10.64.0.0/14", "network.nodeCidr": "10.20.0.0/20"}, stack=STACK)
    service = objects_by_name(run)[("Service", "sax-http-lb")]
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.20.0.0/20", "10.64.0.0/14"]


def test_a_new_admin_account_leaves_the_model_servers_alone(saxml_run):
    """The admin server restarts as the new account; the JobSet, which a change would replace, is untouched."""
    changed = run_stack({"saxml.adminServiceAccountName": "sax-admin-2"}, stack=STACK)
    jobset = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    assert changed.one(jobset, "model-servers").inputs == saxml_run.one(jobset, "model-servers").inputs
    admin = objects_by_name(changed)[("Deployment", "sax-admin-server")]
    assert admin["spec"]["template"]["spec"]["serviceAccountName"] == "sax-admin-2"
    assert admin["spec"]["strategy"] == {"type": "Recreate"}
