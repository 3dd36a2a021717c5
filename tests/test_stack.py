"""The typed stack config: reference defaults, and every bad value caught before any resource."""

import pytest

from components import config_base
from components import stack as stack_config
from components.config_base import ConfigError
from tests.conftest import assert_bad_input, stack_values, with_overrides

MINIMAL = {"project": "my-tpu-project", "tpu": {"reservation": {"name": "res", "block": "block-0"}}}


def test_defaults_are_the_reference_deployment():
    config = stack_config.parse(MINIMAL)
    assert config.region == "us-central1"
    assert (config.network.prefix, config.network.mtu) == ("qwen-serving", 8896)
    assert (config.network.node_cidr, config.network.proxy_only_cidr) == ("10.10.0.0/18", "172.16.0.0/26")
    assert (config.cluster.name, config.cluster.release_channel) == ("qwen-serving-cluster", "RAPID")
    assert config.cluster.system_pool.machine_type == "n2-standard-32"
    assert config.cluster.system_pool.nodes_per_zone == 1
    assert (config.tpu.zone, config.tpu.machine_type) == ("us-central1-ai1a", "tpu7x-standard-4t")
    assert [(p.name, p.node_count, p.topology) for p in config.tpu.pools] == [
        ("tpu7-pool-1", 16, "4x4x4"),
        ("tpu7-pool-2", 16, "4x4x4"),
    ]
    assert config.tpu.workload_policy_name == "superslice-policy"
    assert (config.tpu.total_chips, config.tpu.cubes) == (128, 2)


def test_dev_stack_is_the_reference_deployment():
    config = stack_config.parse(stack_values("dev"))
    assert config.project == "my-tpu-project"
    assert config.cluster.deletion_protection is False
    assert config.tpu.reservation.block == "block-0"
    assert config.reservation_path(config.tpu.pools[0]) == (
        "projects/my-tpu-project/reservations/my-tpu7x-reservation/reservationBlocks/block-0"
    )
    assert config.tpu_zone_is_ai_zone


LONG_NAME = "a" * 41

# (override of the dev stack, config key named in the error, fragment of the message)
BAD_INPUTS = [
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 16, "topology": "4x4x"}]},
        "tpu.pools[0].topology",
        "not a TPU topology",
        id="malformed-pool-topology",
    ),
    pytest.param({"tpu.sliceShapes": ["2by2"]}, "tpu.sliceShapes[0]", "not a TPU topology", id="malformed-slice-shape"),
    pytest.param(
        {"tpu.sliceShapes": ["2x2x3"]}, "tpu.sliceShapes[0]", "neither a sub-slice", id="shape-outside-allowed-set"
    ),
    pytest.param(
        {"tpu.sliceShapes": ["4x8x8"]}, "tpu.sliceShapes[0]", "needs 4 cubes", id="super-slice-beyond-capacity"
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 15}]},
        "tpu.pools[0].nodeCount",
        "set 16",
        id="node-count-not-a-cube",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "tpu7-pool-1", "nodeCount": 8, "topology": "2x4x4"}]},
        "tpu.pools[0].topology",
        "whole 4x4x4 cubes",
        id="tpu7x-pool-not-a-cube",
    ),
    pytest.param(
        {"tpu.machineType": "tpu7x-standard-8t"},
        "tpu.machineType",
        "not a known TPU machine type",
        id="unknown-machine-type",
    ),
    pytest.param({"tpu.zone": "us-east5-a"}, "tpu.zone", "not a zone of region us-central1", id="zone-outside-region"),
    pytest.param(
        {"cluster.version": "1.36.0-gke.2459000"},
        "cluster.version",
        "below 1.36.0-gke.3712000, the minimum for sub-slicing",
        id="below-sub-slicing-floor",
    ),
    pytest.param(
        {"cluster.version": "1.35.1-gke.1000", "tpu.sliceShapes": ["4x4x8"]},
        "cluster.version",
        "below 1.35.2-gke.1842000, the minimum for super-slicing",
        id="below-super-slicing-floor",
    ),
    pytest.param({"cluster.version": "1.36"}, "cluster.version", "not a full GKE version", id="partial-version"),
    pytest.param({"cluster.releaseChannel": "STABLE"}, "cluster.releaseChannel", "RAPID", id="slicing-off-rapid"),
    pytest.param(
        {"tpu.reservation": {"block": "block-0"}}, "tpu.reservation.name", "is required", id="reservation-without-name"
    ),
    pytest.param(
        {"tpu.reservation": {"name": "res"}}, "tpu.reservation.block", "is required", id="reservation-without-block"
    ),
    pytest.param(
        {"network.podCidr": "10.10.32.0/20"}, "network.podCidr", "overlaps network.nodeCidr", id="pods-overlap-nodes"
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "10.16.0.0/26"},
        "network.proxyOnlyCidr",
        "overlaps network.serviceCidr",
        id="proxy-overlaps-services",
    ),
    pytest.param(
        {"network.serviceCidr": "10.12.0.0/20"},
        "network.serviceCidr",
        "overlaps network.podCidr",
        id="services-overlap-pods",
    ),
    pytest.param(
        {"network.proxyOnlyCidr": "172.16.0.0/27"},
        "network.proxyOnlyCidr",
        "smaller than /26",
        id="proxy-only-too-small",
    ),
    pytest.param(
        {"network.nodeCidr": "10.10.0.1/18"}, "network.nodeCidr", "not an IPv4 CIDR", id="cidr-with-host-bits"
    ),
    pytest.param({"network.mtu": 9000}, "network.mtu", "outside 1300-8896", id="mtu-too-large"),
    pytest.param({"network.mtu": 1200}, "network.mtu", "outside 1300-8896", id="mtu-too-small"),
    pytest.param({"network.mtu": "jumbo"}, "network.mtu", "not an integer", id="mtu-not-a-number"),
    pytest.param({"cluster.name": LONG_NAME}, "cluster.name", "the limit is 40", id="cluster-name-too-long"),
    pytest.param(
        {"cluster.name": "Qwen_Cluster"}, "cluster.name", "not a valid name", id="cluster-name-bad-characters"
    ),
    pytest.param({"network.prefix": "-qwen"}, "network.prefix", "not a valid name", id="network-prefix-bad-characters"),
    pytest.param({"network.prefix": "q" * 60}, "network.prefix", "the limit is 63", id="network-prefix-too-long"),
    pytest.param(
        {"tpu.pools": [{"name": "TPU-Pool", "nodeCount": 16}]},
        "tpu.pools[0].name",
        "not a valid name",
        id="pool-name-bad-characters",
    ),
    pytest.param(
        {"tpu.pools": [{"name": "p", "nodeCount": 16}, {"name": "p", "nodeCount": 16}]},
        "tpu.pools[1].name",
        "used by another pool",
        id="duplicate-pool-name",
    ),
    pytest.param(
        {"tpu.workloadPolicyName": "Policy!"}, "tpu.workloadPolicyName", "not a valid name", id="policy-name-bad"
    ),
    pytest.param({"project": "My_Project"}, "project", "not a project ID", id="project-id-bad"),
    pytest.param(
        {"cluster.name": "a-thirty-char-cluster-name-xyz"},
        "cluster.name",
        "IAM allows 6 to 30",
        id="derived-service-account-too-long",
    ),
    pytest.param({"tpu.zoen": "us-central1-a"}, "tpu.zoen", "did you mean 'zone'", id="misspelled-key"),
    pytest.param(
        {
            "cluster.maintenanceExclusions": [
                {"name": "freeze", "start": "2026-12-01T00:00:00Z", "end": "2026-12-10T00:00:00Z"}
            ]
        },
        "cluster.maintenanceExclusions",
        "need a maintenance window",
        id="exclusion-without-window",
    ),
    pytest.param(
        {
            "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
            "cluster.maintenanceExclusions": [
                {
                    "name": "freeze",
                    "start": "2026-12-01T00:00:00Z",
                    "end": "2027-02-01T00:00:00Z",
                    "scope": "NO_UPGRADES",
                }
            ],
        },
        "cluster.maintenanceExclusions[0].end",
        "may last 30 days",
        id="no-upgrades-exclusion-too-long",
    ),
]


@pytest.mark.parametrize("override, key, fragment", BAD_INPUTS)
def test_bad_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_every_problem_is_reported_in_one_error():
    raw = with_overrides(
        stack_values("dev"),
        {"network.mtu": 9000, "tpu.zone": "europe-west4-a", "cluster.version": "1.30.0-gke.1", "tpu.reservation": {}},
    )
    with pytest.raises(ConfigError) as raised:
        stack_config.parse(raw)
    keys = {p.key for p in raised.value.problems}
    assert {"network.mtu", "tpu.zone", "cluster.version", "tpu.reservation.name", "tpu.reservation.block"} <= keys
    message = str(raised.value)
    assert message.count("\n  - ") == len(raised.value.problems)
    assert "network.mtu: 9000 is outside 1300-8896 (use 8896 for TPU hosts)" in message


def test_a_value_that_fails_to_parse_gets_no_follow_on_complaints():
    with pytest.raises(ConfigError) as raised:
        stack_config.parse(
            with_overrides(
                MINIMAL, {"tpu.pools": [{"name": "p", "nodeCount": "sixteen"}, {"name": "q", "nodeCount": 16}]}
            )
        )
    assert [p.key for p in raised.value.problems] == ["tpu.pools[0].nodeCount"]


@pytest.mark.parametrize(
    "override",
    [
        pytest.param(
            {
                "tpu.sliceShapes": ["4x4x8"],
                "cluster.version": "1.35.2-gke.1842000",
                "checks.subslicing.enabled": False,
                "serving.enabled": False,
            },
            id="super-slicing-floor-exactly",
        ),
        pytest.param(
            {
                "tpu.pools": [{"name": "only", "nodeCount": 16, "subBlock": "sub-block-3"}],
                "tpu.sliceShapes": ["2x2x1"],
                "checks.subslicing.shape": "2x2x1",
                "checks.superslicing.enabled": False,
                "serving.enabled": False,
            },
            id="one-cube-with-sub-block",
        ),
        pytest.param({"network.proxyOnlyCidr": "172.16.0.0/23"}, id="larger-proxy-only-range"),
        pytest.param({"network.mtu": "1460"}, id="integer-given-as-text"),
        pytest.param(
            {
                "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
                "cluster.maintenanceExclusions": [
                    {
                        "name": "launch",
                        "start": "2026-12-01T00:00:00Z",
                        "end": "2026-12-20T00:00:00Z",
                        "scope": "NO_UPGRADES",
                    }
                ],
            },
            id="maintenance-window-and-exclusion",
        ),
    ],
)
def test_good_variations_parse(override):
    stack_config.parse(with_overrides(stack_values("dev"), override))


def test_secret_values_are_never_echoed():
    problems = config_base.Problems()
    config_base.coerce(int, "hf_abcdefSECRET", "serving.token", True, problems)
    assert problems.items and "hf_abcdefSECRET" not in str(problems.items[0])


def test_structured_config_that_is_not_json_is_reported():
    with pytest.raises(ConfigError) as raised:
        stack_config.parse_pulumi_values(
            {"tpu-dynamic-slicing:project": "my-tpu-project", "tpu-dynamic-slicing:tpu": "{not json"}
        )
    assert any(p.key == "tpu" for p in raised.value.problems)


PLATFORM_BAD_INPUTS = [
    pytest.param(
        {
            "platform.kueue": {
                "chart": "oci://registry.k8s.io/kueue/charts/kueue",
                "version": "v0",
                "namespace": "kueue-system",
            }
        },
        "platform.kueue.version",
        "not an exact version",
        id="floating-chart-version",
    ),
    pytest.param(
        {"platform.jobset": {"chart": "registry.k8s.io/jobset", "version": "0.11.1", "namespace": "jobset-system"}},
        "platform.jobset.chart",
        "not an oci://",
        id="chart-without-scheme",
    ),
    pytest.param(
        {
            "platform.leaderWorkerSet": {
                "chart": "oci://registry.k8s.io/lws/charts/lws",
                "version": "0.8.0",
                "namespace": "lws",
            }
        },
        "platform.leaderWorkerSet.namespace",
        "lws-system",
        id="lws-outside-lws-system",
    ),
    pytest.param(
        {"platform.kueueController": {"replicas": 0}},
        "platform.kueueController.replicas",
        "runs no controller",
        id="no-kueue-replicas",
    ),
    pytest.param(
        {"platform.kueueController": {"requests": {"cpu": "two", "memory": "4Gi"}}},
        "platform.kueueController.requests.cpu",
        "not a Kubernetes quantity",
        id="bad-quantity",
    ),
    pytest.param(
        {"platform.sliceController": {"digest": "sha256:abc"}},
        "platform.sliceController.digest",
        "sha256:<64 hex digits>",
        id="short-digest",
    ),
    pytest.param(
        {"queues.namespaces": ["Serving_NS"]}, "queues.namespaces[0]", "not a namespace name", id="bad-namespace"
    ),
    pytest.param(
        {"queues.clusterQueueName": "CQ"},
        "queues.clusterQueueName",
        "not a Kubernetes object name",
        id="bad-queue-name",
    ),
    pytest.param(
        {"queues.priorityClasses": {"medium": {"name": "medium", "value": 500}}},
        "queues.priorityClasses.medium.value",
        "not above low",
        id="priorities-out-of-order",
    ),
]


@pytest.mark.parametrize("override, key, fragment", PLATFORM_BAD_INPUTS)
def test_bad_platform_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


CHECKS_BAD_INPUTS = [
    pytest.param(
        {"checks.superslicing.slices": 2},
        "checks.superslicing.slices",
        "needs 4 cube(s) of 4x4x4 at once; the stack has 2",
        id="super-slice-check-beyond-capacity",
    ),
    pytest.param(
        {"checks.subslicing.slices": 17}, "checks.subslicing.slices", "136 chips", id="sub-slice-check-beyond-capacity"
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
        {"checks.namespace": "n" * 30},
        "checks.superslicing.name",
        "within 12 characters",
        id="namespace-over-slice-budget",
    ),
    pytest.param(
        {"checks.superslicing.name": "Super_Check"},
        "checks.superslicing.name",
        "not a Kubernetes object name",
        id="check-name-bad-characters",
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
        {"checks.superslicing.holdSeconds": -1}, "checks.superslicing.holdSeconds", "negative", id="negative-hold"
    ),
    pytest.param({"checks.subslicing.slices": 0}, "checks.subslicing.slices", "checks nothing", id="no-slices"),
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
        stack_config.parse(raw)
    keys = {p.key for p in raised.value.problems}
    assert {"checks.subslicing.enabled", "checks.superslicing.enabled"} <= keys


def test_check_image_pinned_by_digest_is_accepted():
    stack_config.parse(
        with_overrides(stack_values("dev"), {"checks.image": "registry.example/jax@sha256:" + "ab" * 32})
    )


def test_a_partial_object_keeps_the_defaults_of_the_keys_it_leaves_out():
    config = stack_config.parse(
        with_overrides(
            MINIMAL, {"checks": {"subslicing": {"enabled": False}}, "platform": {"kueue": {"version": "0.17.5"}}}
        )
    )
    assert config.checks.subslicing.enabled is False
    assert (config.checks.subslicing.name, config.checks.subslicing.shape, config.checks.subslicing.slices) == (
        "subslice-check",
        "2x2x2",
        6,
    )
    assert config.checks.superslicing.enabled is True
    assert (config.platform.kueue.chart, config.platform.kueue.version) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.17.5",
    )
