"""The checks block: every bad value refused under its key before any resource, and what it accepts."""

import pytest

from components import stack as stack_config
from components.config_base import ConfigError
from tests.conftest import assert_bad_input, cubes, stack_values, with_overrides

CHECKS_BAD_INPUTS = [
    pytest.param(
        {"checks.subslicing.name": "tpu-check", "checks.superslicing.name": "tpu-check"},
        "checks.superslicing.name",
        "is also checks.subslicing.name",
        id="two-checks-of-one-name",
    ),
    pytest.param(
        {"checks.subslicing.shape": "4x4x8"},
        "checks.subslicing.shape",
        "4x4x8 is not a sub-slice",
        id="sub-slice-check-of-a-super-slice",
    ),
    pytest.param(
        cubes(2) | {"checks.superslicing.slices": 2},
        "checks.superslicing.slices",
        "needs 4 cube(s) of 4x4x4 at once; the stack has 2",
        id="super-slice-check-beyond-capacity",
    ),
    pytest.param(
        cubes(2) | {"checks.subslicing.slices": 17},
        "checks.subslicing.slices",
        "136 chips",
        id="sub-slice-check-beyond-capacity",
    ),
    pytest.param(
        {
            "tpu.pools": [{"name": "only", "nodeCount": 16}],
            "tpu.sliceShapes": ["2x2x2"],
            "checks.superslicing.shape": "2x2x2",
        },
        "checks.superslicing.shape",
        "2x2x2 is not a super-slice",
        id="super-slicing-check-on-a-sub-slice",
    ),
    pytest.param(
        {"checks.subslicing.shape": "2x2x4"},
        "checks.subslicing.shape",
        "not one of tpu.sliceShapes",
        id="check-shape-outside-allowed-set",
    ),
    pytest.param(
        {"checks.subslicing.shape": "2x2x3"},
        "checks.subslicing.shape",
        "not one of tpu.sliceShapes",
        id="check-shape-not-a-slice",
    ),
    pytest.param(
        {"tpu.sliceShapes": ["2by2", "4x4x8"], "checks.subslicing.shape": "2by2", "serving.sliceShape": "2by2"},
        "tpu.sliceShapes[0]",
        "not a TPU topology",
        id="malformed-shape-shared-by-workloads",
    ),
    pytest.param(
        {"checks.subslicing.name": "kueue-jobset-simple-subslicing"},
        "checks.subslicing.name",
        "the budget is 49",
        id="check-name-over-slice-budget",
    ),
    pytest.param(
        {"checks.subslicing.name": "model-servers"},
        "checks.subslicing.name",
        "also the name of a NetworkPolicy the stack makes in llm-d-pd-disaggregation",
        id="check-name-of-a-serving-network-policy",
    ),
    pytest.param(
        {"checks.superslicing.name": "endpoint-picker"},
        "checks.superslicing.name",
        "also the name of a NetworkPolicy",
        id="check-name-of-the-pickers-network-policy",
    ),
    pytest.param(
        {"checks.namespace": "n" * 30},
        "checks.superslicing.name",
        "within 12 characters",
        id="namespace-over-slice-budget",
    ),
    pytest.param(
        {"checks.superslicing.name": "Super_Check"},
        "checks.superslicing.name",
        "'Super_Check' is not a Kubernetes name",
        id="check-name-bad-characters",
    ),
    pytest.param(
        {"checks.subslicing.name": "1-check"},
        "checks.subslicing.name",
        "the JobSet and LeaderWorkerSet webhooks take only names that start with a letter",
        id="check-name-starting-with-a-digit",
    ),
    pytest.param(
        {"checks.namespace": "elsewhere"}, "checks.namespace", "has no LocalQueue", id="check-namespace-without-queue"
    ),
    pytest.param(
        {"checks.image": "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest"},
        "checks.image",
        "not pinned",
        id="image-latest",
    ),
    pytest.param({"checks.image": "registry.example:5000/jax"}, "checks.image", "not pinned", id="image-without-tag"),
    pytest.param(
        {"checks.subslicing.priority": "urgent"},
        "checks.subslicing.priority",
        "not a priority level",
        id="unknown-priority-level",
    ),
    pytest.param(
        {"checks.superslicing.holdSeconds": -1},
        "checks.superslicing.holdSeconds",
        "-1 is outside 0-2147483647",
        id="negative-hold",
    ),
    pytest.param(
        {"checks.superslicing.holdSeconds": 10**10},
        "checks.superslicing.holdSeconds",
        "10000000000 is outside 0-2147483647",
        id="hold-beyond-what-the-script-can-sleep",
    ),
    pytest.param({"checks.subslicing.slices": 0}, "checks.subslicing.slices", "0 is not 1 or more", id="no-slices"),
    pytest.param(
        {"checks.subslicing.holdSecs": 5},
        "checks.subslicing.holdSecs",
        "did you mean 'holdSeconds'",
        id="misspelled-check-key",
    ),
]


@pytest.mark.parametrize("override, key, fragment", CHECKS_BAD_INPUTS)
def test_bad_check_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_checks_on_a_machine_without_dynamic_slicing_are_refused():
    raw = with_overrides(stack_values("dev"), {"tpu.machineType": "ct5lp-hightpu-4t", "tpu.sliceShapes": []})
    with pytest.raises(ConfigError) as raised:
        stack_config.load(raw)
    keys = {p.key for p in raised.value.problems}
    assert {"checks.subslicing.enabled", "checks.superslicing.enabled"} <= keys


def test_the_longest_hold_is_accepted():
    """The recovery of hold-beyond-what-the-script-can-sleep: 2**31 - 1 seconds still renders a check that holds."""
    stack_config.load(with_overrides(stack_values("dev"), {"checks.superslicing.holdSeconds": 2**31 - 1}))


def test_check_image_pinned_by_digest_is_accepted():
    stack_config.load(with_overrides(stack_values("dev"), {"checks.image": "registry.example/jax@sha256:" + "ab" * 32}))


def test_workload_names_with_digits_after_their_first_letter_are_accepted():
    """The JobSet and LeaderWorkerSet webhooks' rule is on the first character only (a digit there is refused:
    check-name-starting-with-a-digit, and lws-name-starting-with-a-digit in tests/test_serving_config.py)."""
    renamed = {"checks.subslicing.name": "check-1", "serving.decode.name": "decode-2"}
    stack_config.load(with_overrides(stack_values("dev"), renamed))
