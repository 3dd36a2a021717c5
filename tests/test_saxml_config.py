"""The saxml block: every bad value refused under its key before any resource, and what it accepts."""

import pytest

from components.config_base import ConfigError
from tests.conftest import assert_bad_input, run_stack

STACK = "saxml"

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
        {"saxml.http": {"clusterClients": False, "sourceRanges": []}},
        "saxml.http.sourceRanges",
        "could publish models",
        id="no-source-ranges",
    ),
    pytest.param(
        {"cluster.existing": {"name": "elsewhere", "location": "us-west4"}},
        "saxml.http.clusterClients",
        "not the cluster made elsewhere",
        id="cluster-ranges-of-a-cluster-made-elsewhere",
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
        "is negative",
        id="negative-version-days",
    ),
    pytest.param(
        {"saxml.noncurrentVersions": {"newerVersions": -5}},
        "saxml.noncurrentVersions.newerVersions",
        "is negative",
        id="negative-newer-versions",
    ),
    pytest.param(
        {"saxml.adminServiceAccountName": "sax-sa"},
        "saxml.adminServiceAccountName",
        "would act as the admin server",
        id="admin-shares-the-readers-account",
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
