"""The saxml stack: the same program on TPU v5e, with a Saxml cell instead of dynamic slicing."""

import pytest

from components.config_base import ConfigError
from tests.conftest import assert_bad_input, run_stack
from tests.crd_schemas import core_errors, crd_errors, is_custom
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


def test_state_bucket_is_private_versioned_and_protected(saxml_run):
    bucket = saxml_run.one("gcp:storage/bucket:Bucket", "admin-state")
    assert bucket.parent == "saxml"
    assert bucket.input("name") == "my-tpu-project-sax-admin"
    assert bucket.input("uniformBucketLevelAccess") is True
    assert bucket.input("publicAccessPrevention") == "enforced"
    assert bucket.input("versioning") == {"enabled": True}
    assert bucket.input("forceDestroy") is False
    assert bucket.protect is True


def test_identity_is_least_privilege_workload_identity(saxml_run):
    email = "sax-iam-sa@my-tpu-project.iam.gserviceaccount.com"
    assert saxml_run.one("gcp:serviceaccount/account:Account", "sax-gsa").input("accountId") == "sax-iam-sa"
    (bucket_role,) = [r for r in saxml_run.registrations if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"]
    assert (bucket_role.input("bucket"), bucket_role.input("role"), bucket_role.input("member")) == (
        "my-tpu-project-sax-admin",
        "roles/storage.objectUser",
        f"serviceAccount:{email}",
    )
    project_roles = [r.input("role") for r in saxml_run.registrations if r.type == "gcp:projects/iAMMember:IAMMember"]
    assert not [role for role in project_roles if role.startswith("roles/storage.")]  # never project-wide storage
    binding = saxml_run.one("gcp:serviceaccount/iAMMember:IAMMember", "sax-ksa-workload-identity")
    assert binding.input("role") == "roles/iam.workloadIdentityUser"
    assert binding.input("member") == "serviceAccount:my-tpu-project.svc.id.goog[sax/sax-sa]"
    ksa = objects_by_name(saxml_run)[("ServiceAccount", "sax-sa")]
    assert ksa["metadata"] == {
        "name": "sax-sa",
        "namespace": "sax",
        "annotations": {"iam.gke.io/gcp-service-account": email},
    }


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
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.10.0.0/18"]


def test_workloads_wait_for_identity_and_the_jobset_release(saxml_run):
    jobset = saxml_run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "model-servers")
    assert {"jobset", "sax-sa", "sax-gsa-object-user", "sax-ksa-workload-identity", "admin-server"} <= set(
        jobset.dependencies
    )
    admin = saxml_run.one("kubernetes:apps/v1:Deployment", "admin-server")
    assert {"sax-sa", "sax-gsa-object-user", "sax-ksa-workload-identity", "sax"} <= set(admin.dependencies)
    assert jobset.provider.split("::")[-2] == "gke"


def test_every_object_validates_strictly(saxml_run):
    objects = kubernetes_objects(saxml_run.registrations)
    errors = [e for o in objects for e in (crd_errors(o) if is_custom(o) else core_errors(o))]
    assert errors == []


def test_outputs_name_the_bucket_and_the_http_address(saxml_run):
    assert saxml_run.outputs["saxBucketName"] == "my-tpu-project-sax-admin"
    assert saxml_run.outputs["saxHttpAddress"] == "[unknown]"  # known once the load balancer exists


def test_external_load_balancer_only_when_asked():
    run = run_stack({"saxml.http.external": True, "saxml.http.sourceRanges": ["203.0.113.0/24"]}, stack=STACK)
    service = objects_by_name(run)[("Service", "sax-http-lb")]
    assert "networking.gke.io/load-balancer-type" not in service["metadata"].get("annotations", {})
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


SAXML_BAD_INPUTS = [
    pytest.param(
        {"saxml.model.parametersBillions": 300},
        "saxml.model.parametersBillions",
        "smallest ct5lp-hightpu-4t topology that fits is 8x8",
        id="model-too-large-for-4x8",
    ),
    pytest.param(
        {"saxml.model.precision": "fp64"},
        "saxml.model.precision",
        "not a known dtype (use one of fp32, bf16, fp16, fp8, int8, int4)",
        id="unknown-precision",
    ),
    # One dtype table for serving and Saxml: the long names Saxml once took are refused, with the list.
    pytest.param(
        {"saxml.model.precision": "bfloat16"},
        "saxml.model.precision",
        "'bfloat16' is not a known dtype",
        id="long-dtype-name",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu1", "nodeCount": 16, "topology": "4x8"}]},
        "tpu.pools[0].nodeCount",
        "set 8",
        id="pool-with-wrong-node-count",
    ),
    pytest.param(
        {
            "tpu.pools": [
                {"name": "tpu1", "nodeCount": 8, "topology": "4x8"},
                {"name": "tpu2", "nodeCount": 4, "topology": "4x4"},
            ]
        },
        "tpu.pools",
        "different topologies",
        id="pools-of-different-topologies",
    ),
    pytest.param(
        {"saxml.http.sourceRanges": []}, "saxml.http.sourceRanges", "could publish models", id="no-source-ranges"
    ),
    pytest.param(
        {"saxml.http.sourceRanges": ["0.0.0.0/0"]},
        "saxml.http.sourceRanges[0]",
        "admits everyone",
        id="open-to-everyone",
    ),
    pytest.param(
        {"saxml.http.sourceRanges": ["10.0.0.300/8"]}, "saxml.http.sourceRanges[0]", "not a CIDR", id="bad-cidr"
    ),
    pytest.param(
        {"saxml.modelServerImage": "us-docker.pkg.dev/cloud-tpu-images/inference/sax-model-server:latest"},
        "saxml.modelServerImage",
        "not pinned",
        id="unpinned-image",
    ),
    pytest.param({"saxml.saxCell": "test"}, "saxml.saxCell", "not a Sax cell", id="bad-sax-cell"),
    pytest.param(
        {"saxml.bucketName": "Sax_Bucket"}, "saxml.bucketName", "not a valid bucket name", id="bad-bucket-name"
    ),
    pytest.param({"saxml.namespace": "Sax"}, "saxml.namespace", "not a Kubernetes name", id="bad-namespace"),
    pytest.param(
        {"tpu.pools": [{"name": "tpu1", "nodeCount": 6, "topology": "4x6"}]},
        "tpu.pools[0].topology",
        "4x6 is not a ct5lp-hightpu-4t slice topology",
        id="no-such-v5e-topology",
    ),
    pytest.param(
        {"saxml.serviceAccountName": "Sax SA"},
        "saxml.serviceAccountName",
        "not a Kubernetes name",
        id="bad-service-account",
    ),
    pytest.param(
        {"saxml.googleServiceAccountId": "sax"},
        "saxml.googleServiceAccountId",
        "6 to 30",
        id="short-google-service-account",
    ),
    pytest.param({"saxml.adminImage": ""}, "saxml.adminImage", "is empty", id="empty-image"),
    pytest.param(
        {"saxml.httpImage": "registry.example:5000/sax-http"}, "saxml.httpImage", "has no tag", id="untagged-image"
    ),
    pytest.param(
        {"saxml.http": {"external": True, "sourceRanges": ["::/0"]}},
        "saxml.http.sourceRanges[0]",
        "admits everyone",
        id="external-open-to-everyone-v6",
    ),
    pytest.param(
        {"saxml.bucketName": "gs://sax-state"}, "saxml.bucketName", "not a valid bucket name", id="bucket-given-as-uri"
    ),
]


@pytest.mark.parametrize("override, key, fragment", SAXML_BAD_INPUTS)
def test_bad_saxml_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment, stack=STACK)


def test_saxml_on_tpu7x_is_refused():
    with pytest.raises(ConfigError) as raised:
        run_stack({"saxml.enabled": True})
    assert any(p.key == "saxml.enabled" and "ct5lp-hightpu-4t" in str(p) for p in raised.value.problems)


def test_images_pinned_by_digest_are_accepted():
    digest = "us-docker.pkg.dev/cloud-tpu-images/inference/sax-http@sha256:" + "0" * 64
    run = run_stack({"saxml.httpImage": digest}, stack=STACK)
    assert (
        run.one("kubernetes:apps/v1:Deployment", "http-server").input("spec.template.spec.containers")[0]["image"]
        == digest
    )
