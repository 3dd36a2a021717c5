"""Every read of the cloud the program makes has its deployer permissions written down (DEPLOYER_READS), and only
those: each of the tests' stacks, previewed and brought up, and the paths that read more (an existing weights bucket,
a cluster made elsewhere with serving's proxy-only range and Saxml's cluster clients)."""

from __future__ import annotations

import pytest

from components.gcp.config import DEPLOYER_READS
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
    return {i.token for i in run_stack(overrides, stack=stack, preview=preview).invocations if i.api}


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
@pytest.mark.parametrize("stack, overrides", READING_PATHS)
def test_every_read_has_its_deployer_permissions_written_down(stack, overrides, preview):
    unwritten = reads(stack, overrides, preview) - set(DEPLOYER_READS)
    assert not unwritten, f"add each read's permissions to DEPLOYER_READS (components/gcp/config.py): {unwritten}"


def test_every_written_read_is_one_the_program_makes():
    made = set().union(*(reads(stack, overrides, False) for stack, overrides in READING_PATHS))
    assert set(DEPLOYER_READS) <= made, set(DEPLOYER_READS) - made
