"""Every read of the cloud the program makes has its deployer permissions written down (DEPLOYER_READS), and only
those: each of the tests' stacks, previewed and brought up, and the paths that read more (an existing weights bucket,
a cluster made elsewhere with serving's proxy-only range and Saxml's cluster clients)."""

from __future__ import annotations

import pulumi
import pytest

from components.gcp.config import DEPLOYER_READS
from harness.gcp_model import CloudProject
from harness.gke_network import EXISTING_CLUSTER_POD_RANGE, EXISTING_CLUSTER_SUBNET_RANGE
from tests.conftest import FIXTURE_STACK_NAMES, run_stack

ELSEWHERE = {"name": "team-cluster", "location": "us-central1"}
# (stack, overrides): the same paths as tests/test_gcp_existing_cluster.py and tests/test_serving_stack.py take
READING_PATHS = [
    *((stack, {}) for stack in FIXTURE_STACK_NAMES),
    ("dev", {"serving.weightsBucket": {"name": "my-model-weights", "create": False}}),
    ("dev", {"cluster.existing": ELSEWHERE}),
    (
        "saxml",
        {
            "cluster.existing": {**ELSEWHERE, "location": "us-west4"},
            "network.nodeCidr": EXISTING_CLUSTER_SUBNET_RANGE,
            "network.podCidr": EXISTING_CLUSTER_POD_RANGE,
        },
    ),
]


def reads(stack, overrides, preview):
    # a deployer holding the table's permissions only: a read needing one more fails the run
    held = CloudProject(grants=EVERY_GRANT)
    return {i.token for i in run_stack(overrides, stack=stack, preview=preview, cloud=held).invocations if i.api}


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
@pytest.mark.parametrize("stack, overrides", READING_PATHS)
def test_every_read_has_its_deployer_permissions_written_down(stack, overrides, preview):
    unwritten = reads(stack, overrides, preview) - set(DEPLOYER_READS)
    assert not unwritten, f"add each read's permissions to DEPLOYER_READS (components/gcp/config.py): {unwritten}"


def test_every_written_read_is_one_the_program_makes():
    made = set().union(*(reads(stack, overrides, False) for stack, overrides in READING_PATHS))
    assert set(DEPLOYER_READS) <= made, set(DEPLOYER_READS) - made


# Each read, the key its refusal is under, and a path whose preview makes it (READING_PATHS' index)
READ_KEYS = {
    "gcp:organizations/getProject:getProject": ("project", 0),
    "gcp:container/getEngineVersions:getEngineVersions": ("cluster.version", 0),
    "gcp:compute/getReservation:getReservation": ("tpu.reservation.name", 0),
    "gcp:compute/getReservationBlock:getReservationBlock": ("tpu.reservation.name", 0),
    "gcp:compute/getReservationSubBlock:getReservationSubBlock": ("tpu.reservation.name", 0),
    "gcp:storage/getBucket:getBucket": ("serving.weightsBucket.name", 3),
    "gcp:secretmanager/getSecretVersion:getSecretVersion": ("serving.hfTokenSecretVersion", 1),
    "gcp:kms/getKMSCryptoKey:getKMSCryptoKey": ("cluster.bootDiskEncryptionKey", 1),
    "gcp:artifactregistry/getRepository:getRepository": ("images.mirror", 1),
    "gcp:container/getCluster:getCluster": ("cluster.existing.name", 4),
    "gcp:compute/getSubnetworks:getSubnetworks": ("network.proxyOnlyCidr", 4),
    "gcp:compute/getSubnetwork:getSubnetwork": ("network.nodeCidr", 5),
}
EVERY_GRANT = frozenset(p for permissions, _, _ in DEPLOYER_READS.values() for p in permissions)
LACKING = [(token, permission) for token, (permissions, _, _) in DEPLOYER_READS.items() for permission in permissions]


def test_each_read_has_its_refusal_key():
    assert set(READ_KEYS) == set(DEPLOYER_READS)


@pytest.mark.parametrize("token, permission", LACKING, ids=[p for _, p in LACKING])
def test_a_deployer_lacking_a_read_s_permission_is_refused_under_its_key_with_the_grant(token, permission):
    """Google Cloud answers the read with its 403 (harness/gcp_model.py permission_denied): the preview refuses it under
    the key that names the read and says what to grant, never a traceback (the invoke's own exception) nor a pass."""
    key, path = READ_KEYS[token]
    stack, overrides = READING_PATHS[path]
    lacking = CloudProject(grants=EVERY_GRANT - {permission})
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(overrides, stack=stack, cloud=lacking)
    message = str(raised.value)
    refusal = message.split(f"  - {key}: ", 1)[-1]
    assert f"  - {key}: " in message and "grant the deployer " in refusal and permission in refusal, message
