"""The saxml block: every bad value refused under its key before any resource, and what it accepts."""

import pytest

from components.config_base import ConfigError
from components.tpu.topology import MACHINE_CATALOG, Shape
from components.workloads.saxml.config import model_fit_problem
from tests.conftest import assert_bad_input, run_stack

STACK = "saxml"

SAXML_BAD_INPUTS = [
    pytest.param(
        {"saxml.model.parametersBillions": -175},
        "saxml.model.parametersBillions",
        "set a number above 0",
        id="model-of-negative-parameters",
    ),
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
        {"saxml.http": {"clusterClients": False, "sourceRanges": []}},
        "saxml.http.sourceRanges",
        "could publish models",
        id="no-source-ranges",
    ),
    # A GKE cluster named by cluster.existing.name has its ranges read instead (tests/test_gcp_existing_cluster.py)
    pytest.param(
        {"cluster.existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}},
        "saxml.http.clusterClients",
        "cannot check against a cluster given by its kubeconfig",
        id="cluster-ranges-of-a-kubeconfig-s-cluster",
    ),
    pytest.param(
        {"saxml.noncurrentVersions": {"days": 0}},
        "saxml.noncurrentVersions.days",
        "grows without bound",
        id="every-state-version-kept",
    ),
    pytest.param(
        {"saxml.noncurrentVersions": {"days": -1}},
        "saxml.noncurrentVersions.days",
        "-1 is not 0 or more",
        id="negative-version-days",
    ),
    pytest.param(
        {"saxml.noncurrentVersions": {"newerVersions": -5}},
        "saxml.noncurrentVersions.newerVersions",
        "-5 is not 0 or more",
        id="negative-newer-versions",
    ),
    pytest.param(
        {"saxml.adminServiceAccountName": "sax-sa"},
        "saxml.adminServiceAccountName",
        "would act as the admin server",
        id="admin-shares-the-readers-account",
    ),
    # Kubernetes makes `default` in every namespace: the stack's own ServiceAccount of that name is refused at create
    pytest.param(
        {"saxml.serviceAccountName": "default"},
        "saxml.serviceAccountName",
        "Kubernetes makes in every namespace",
        id="readers-as-the-namespace-default-account",
    ),
    pytest.param(
        {"saxml.adminServiceAccountName": "default"},
        "saxml.adminServiceAccountName",
        "refused as already existing",
        id="admin-as-the-namespace-default-account",
    ),
    pytest.param(
        {"saxml.adminServiceAccountName": "Sax Admin"},
        "saxml.adminServiceAccountName",
        "not a Kubernetes name",
        id="bad-admin-service-account",
    ),
    pytest.param(
        {"saxml.adminGoogleServiceAccountId": "sax-iam-sa"},
        "saxml.adminGoogleServiceAccountId",
        "the readers would write the cell's state",
        id="admin-shares-the-readers-google-account",
    ),
    pytest.param(
        {"cluster.nodeServiceAccountId": "shared-sa-1", "saxml.adminGoogleServiceAccountId": "shared-sa-1"},
        "saxml.adminGoogleServiceAccountId",
        "is the nodes' service account",
        id="admin-shares-the-nodes-google-account",
    ),
    pytest.param(
        {"cluster.nodeServiceAccountId": "shared-sa-1", "saxml.googleServiceAccountId": "shared-sa-1"},
        "saxml.googleServiceAccountId",
        "is the nodes' service account",
        id="readers-share-the-nodes-google-account",
    ),
    pytest.param(
        {"saxml.googleServiceAccountId": "1sax-iam-sa"},
        "saxml.googleServiceAccountId",
        "starting with a letter and ending with a letter or digit",
        id="google-account-starts-with-a-digit",
    ),
    pytest.param(
        {"saxml.adminGoogleServiceAccountId": "sax-admin-"},
        "saxml.adminGoogleServiceAccountId",
        "starting with a letter and ending with a letter or digit",
        id="admin-google-account-ends-with-a-hyphen",
    ),
    pytest.param(
        {"saxml.adminGoogleServiceAccountId": "adm"},
        "saxml.adminGoogleServiceAccountId",
        "6 to 30",
        id="short-admin-google-service-account",
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
    # Saxml's own cell names (saxml/common/naming.go): admin_config refuses the others, and the admin server never
    # starts
    pytest.param({"saxml.saxCell": "/sax/Test"}, "saxml.saxCell", "not a Sax cell", id="sax-cell-with-a-capital"),
    pytest.param(
        {"saxml.saxCell": "/sax/1test"}, "saxml.saxCell", "a lowercase letter, then", id="sax-cell-digit-first"
    ),
    pytest.param({"saxml.saxCell": "/sax/_test"}, "saxml.saxCell", "not a Sax cell", id="sax-cell-underscore-first"),
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
    # Cloud Storage refuses a bucket named like an IP address (cloud.google.com/storage/docs/buckets#naming)
    pytest.param(
        {"saxml.bucketName": "10.1.2.3"}, "saxml.bucketName", "may not be an IP address", id="bucket-named-like-an-ip"
    ),
    # a YAML block scalar (`|`) ends its value with a newline, which no bucket name or account id holds
    pytest.param(
        {"saxml.bucketName": "sax-state\n"}, "saxml.bucketName", "not a valid bucket name", id="bucket-with-a-newline"
    ),
    pytest.param(
        {"saxml.googleServiceAccountId": "sax-reader\n"},
        "saxml.googleServiceAccountId",
        "may hold only lowercase letters, digits and hyphens",
        id="google-account-with-a-newline",
    ),
]


@pytest.mark.parametrize("override, key, fragment", SAXML_BAD_INPUTS)
def test_bad_saxml_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment, stack=STACK)


def test_saxml_on_tpu7x_is_refused():
    with pytest.raises(ConfigError) as raised:
        run_stack({"saxml.enabled": True})
    assert any(p.key == "saxml.enabled" and "ct5lp-hightpu-4t" in str(p) for p in raised.value.problems)


def test_service_accounts_of_their_own_names_are_accepted():
    run = run_stack(
        {"saxml.serviceAccountName": "default-reader", "saxml.adminServiceAccountName": "sax-default"}, stack=STACK
    )
    accounts = {r.name for r in run.of_type("kubernetes:core/v1:ServiceAccount")}
    assert {"default-reader", "sax-default"} <= accounts


@pytest.mark.parametrize("cell", ["/sax/test", "/sax/t", "/sax/prod-cell_2"])
def test_sax_cells_saxml_takes_are_accepted(cell):
    admin = run_stack({"saxml.saxCell": cell}, stack=STACK).one("kubernetes:apps/v1:Deployment", "admin-server")
    env = admin.input("spec.template.spec.containers")[0]["env"]
    assert {"name": "SAX_CELL", "value": cell} in env


def test_images_pinned_by_digest_are_accepted():
    digest = "us-docker.pkg.dev/cloud-tpu-images/inference/sax-http@sha256:" + "0" * 64
    run = run_stack({"saxml.httpImage": digest}, stack=STACK)
    assert (
        run.one("kubernetes:apps/v1:Deployment", "http-server").input("spec.template.spec.containers")[0]["image"]
        == digest
    )


# --- The sizing rule: the model's weights against the HBM of one slice of the pools ----------------------

V5E = MACHINE_CATALOG["ct5lp-hightpu-4t"]
TPU7X = MACHINE_CATALOG["tpu7x-standard-4t"]


@pytest.mark.parametrize(
    "parameters, dtype, topology, machine",
    [
        (175, "bf16", "4x8", V5E),  # the tutorial: 350 GB in 512 GB
        (256, "bf16", "4x8", V5E),  # 512 GB: exactly the HBM of 4x8
        (175, "int8", "4x4", V5E),  # 175 GB in 256 GB
        (7, "bf16", "2x2", V5E),  # 14 GB on one host
        (175, "bf16", "2x2x1", TPU7X),  # 350 GB in 4 x 192 GiB
        (700, "bf16", "2x2x2", TPU7X),
    ],
)
def test_models_that_fit(parameters, dtype, topology, machine):
    assert model_fit_problem(parameters, dtype, Shape.parse(topology), machine) is None


@pytest.mark.parametrize(
    "parameters, dtype, topology, machine, fragments",
    [
        (
            175,
            "bf16",
            "4x4",
            V5E,
            [
                "175B-parameter model at bf16 (2 bytes per parameter) needs 350 GB",
                "at least 22 chips of ct5lp-hightpu-4t (16 GB each)",
                "4x4 has 16 chips, 256 GB",
                "smallest ct5lp-hightpu-4t topology that fits is 4x8 (32 chips, 512 GB)",
            ],
        ),
        (
            175,
            "fp32",
            "4x8",
            V5E,
            [
                "needs 700 GB",
                "at least 44 chips",
                "4x8 has 32 chips, 512 GB",
                "fits is 8x8 (64 chips, 1,024 GB)",
            ],
        ),
        (257, "bf16", "4x8", V5E, ["needs 514 GB", "at least 33 chips", "fits is 8x8"]),
        (
            150,
            "int4",
            "2x2",
            V5E,
            [
                "150B-parameter model at int4 (0.5 bytes per parameter) needs 75 GB",
                "2x2 has 4 chips, 64 GB",
                "fits is 2x4 (8 chips, 128 GB)",
            ],
        ),
        (
            2000,
            "fp32",
            "16x16",
            V5E,
            [
                "needs 8,000 GB",
                "at least 500 chips",
                "No ct5lp-hightpu-4t topology holds it",
                "the largest, 16x16, has 256 chips, 4,096 GB",
            ],
        ),
        (
            1000,
            "bf16",
            "2x2x1",
            TPU7X,
            [
                "needs 2,000 GB",
                "at least 10 chips of tpu7x-standard-4t (206.2 GB each)",
                "2x2x1 has 4 chips, 824.6 GB",
                "fits is 2x2x4 (16 chips, 3,298.5 GB)",
            ],
        ),
    ],
)
def test_models_too_large(parameters, dtype, topology, machine, fragments):
    problem = model_fit_problem(parameters, dtype, Shape.parse(topology), machine)
    assert problem is not None
    for fragment in fragments:
        assert fragment in problem, problem


@pytest.mark.parametrize(
    "parameters, dtype, fragment",
    [
        (0, "bf16", "must be a positive number of billions"),
        (float("nan"), "bf16", "must be a positive number of billions"),
        (175, "bf17", "'bf17' is not a known dtype"),
        (175, "bfloat16", "'bfloat16' is not a known dtype"),
    ],
)
def test_bad_inputs_are_problems_not_exceptions(parameters, dtype, fragment):
    problem = model_fit_problem(parameters, dtype, Shape.parse("4x8"), V5E)
    assert problem is not None and fragment in problem, problem
