"""The rules of operating a stack: the TPU upgrade policy of a serving stack and the protections
of a production stack, each refused under the key that fixes it before any resource exists."""

import pytest

from components.config_base import ConfigError
from components.stack import load, parsed
from tests.conftest import assert_bad_input, run_stack, stack_config, stack_values, with_overrides
from tests.test_gcp_existing_cluster import LAB

NO_WINDOW = {"cluster.maintenanceWindow": None}

ALERTS_ON = {"alerts.enabled": True, "alerts.emails": ["oncall@example.com"]}


def pools_named(names: list[str]) -> dict[str, list[dict[str, object]]]:
    """TPU7x pools of one 4x4x4 cube each, named ``names``."""
    return {"tpu.pools": [{"name": name, "nodeCount": 16} for name in names]}


# 45 cubes (2,880 chips) in pools of 40-character names: the node-not-ready filter, which names every pool, is over
# Cloud Monitoring's 2048 characters; the same pools named tpu-001... fit.
LONG_POOL_NAMES = [f"tpu7x-serving-cube-{n:03d}-us-central1-ai1a" for n in range(1, 46)]
SHORT_POOL_NAMES = [f"tpu-{n:03d}" for n in range(1, 46)]

OPERATIONS_BAD_INPUTS = [
    pytest.param(
        {"alerts.enabled": False}, "prod", "alerts.enabled", "is false on a production stack", id="prod-no-alerts"
    ),
    pytest.param({"alerts.emails": []}, "prod", "alerts.emails", "no one is notified", id="alerts-to-no-one"),
    pytest.param(
        {"alerts.emails": ["oncall"]}, "prod", "alerts.emails[0]", "'oncall' is not an email address", id="bad-email"
    ),
    pytest.param(
        {"alerts.emails": ["x" * 600 + "@example.com"]},
        "prod",
        "alerts.emails[0]",
        "is 612 characters; the limit is 254",
        id="email-over-254",
    ),
    pytest.param(
        {"alerts.notificationChannels": ["pagerduty"]},
        "prod",
        "alerts.notificationChannels[0]",
        "is not a notification channel name",
        id="bad-channel",
    ),
    pytest.param(
        {"alerts.nodeNotReadyMinutes": 2}, "prod", "alerts.nodeNotReadyMinutes", "outside 5-1440", id="node-2min"
    ),
    pytest.param({"alerts.pendingMinutes": 0}, "prod", "alerts.pendingMinutes", "outside 5-10080", id="pending-0"),
    pytest.param(
        {"alerts.gatewayErrorRatio": 1.5}, "prod", "alerts.gatewayErrorRatio", "is not above 0 and below 1", id="ratio"
    ),
    pytest.param(
        {"alerts.modelServerRestarts": 0}, "prod", "alerts.modelServerRestarts", "0 is not 1 or more", id="restarts"
    ),
    pytest.param(
        {"alerts.sliceUnhealthyMinutes": 5},
        "prod",
        "alerts.sliceUnhealthyMinutes",
        "5 is outside 8-1440",
        id="slice-5min",
    ),
    pytest.param(
        {"alerts.runbookBaseUrl": "docs/runbooks"},
        "prod",
        "alerts.runbookBaseUrl",
        "is not a web address starting https://",
        id="runbooks",
    ),
    pytest.param(
        {**LAB, **ALERTS_ON}, "dev", "alerts.enabled", "a cluster made elsewhere", id="alerts-on-existing-cluster"
    ),
    pytest.param(
        pools_named(LONG_POOL_NAMES),
        "prod",
        "tpu.pools",
        "make alert policy tpu-node-not-ready longer than Cloud Monitoring takes: its filter is",
        id="alert-filter-over-2048",
    ),
    pytest.param(
        {"alerts.runbookBaseUrl": "https://example.com/" + "r" * 7000},
        "prod",
        "tpu.pools",
        "(at most 8192 characters and 10240 bytes)",
        id="alert-documentation-over-8192",
    ),
    pytest.param(
        NO_WINDOW, "dev", "cluster.maintenanceWindow", "is not set on a stack that serves", id="vllm-no-window"
    ),
    pytest.param(
        NO_WINDOW, "saxml", "cluster.maintenanceWindow", "is not set on a stack that serves", id="sax-no-window"
    ),
    pytest.param(
        {"cluster.deletionProtection": False},
        "prod",
        "cluster.deletionProtection",
        "is false on a production stack",
        id="prod-unprotected-cluster",
    ),
    pytest.param(
        {"tpu.protectPools": False}, "prod", "tpu.protectPools", "is false on a production stack", id="prod-pools"
    ),
    pytest.param(
        {"cluster.privateNodes": False},
        "prod",
        "cluster.privateNodes",
        "is false on a production stack: every node has an external address",
        id="prod-public-nodes",
    ),
    pytest.param(
        {
            "tpu.pools": [
                {"name": "tpu7-pool-1", "nodeCount": 16},
                {"name": "tpu7-pool-2", "nodeCount": 16, "privateNodes": False},
            ]
        },
        "prod",
        "tpu.pools[1].privateNodes",
        "the nodes of tpu7-pool-2 have external addresses",
        id="prod-public-tpu-pool",
    ),
    pytest.param(
        {"cluster.controlPlane": {"ipEndpoint": "public"}},
        "prod",
        "cluster.controlPlane.ipEndpoint",
        "any address on the internet reaches, no authorized network limiting it (CIS GKE 5.6.3)",
        id="prod-public-ip-open-to-all",
    ),
    pytest.param(
        {
            "cluster.controlPlane": {
                "ipEndpoint": "public",
                "authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": "vpn"}],
            }
        },
        "prod",
        "cluster.controlPlane.ipEndpoint",
        "public access to the control plane must be disabled (CIS GKE 5.6.4)",
        id="prod-public-ip-even-with-authorized-networks",
    ),
    pytest.param(
        {"serving.enabled": False, "cluster.maintenanceWindow": None, "cluster.maintenanceExclusions": []},
        "prod",
        "cluster.maintenanceWindow",
        "is not set on a production stack",
        id="prod-no-window",
    ),
    pytest.param(
        {"cluster.systemPool.nodesPerZone": 1},
        "prod",
        "cluster.systemPool.nodesPerZone",
        "1 on a production stack",
        id="prod-one-system-node",
    ),
    pytest.param(
        {"platform.kueueController.replicas": 1},
        "prod",
        "platform.kueueController.replicas",
        "its fail-closed webhooks refuse every workload create",
        id="prod-one-kueue",
    ),
    pytest.param(
        {"platform.sliceController.replicas": 1},
        "prod",
        "platform.sliceController.replicas",
        "1 on a production stack",
        id="prod-one-slice-controller",
    ),
    pytest.param(
        {"network.flowLogs.enabled": False},
        "prod",
        "network.flowLogs.enabled",
        "is false on a production stack",
        id="prod-no-flow-logs",
    ),
    pytest.param(
        {"cluster.secretsEncryptionKey": ""},
        "prod",
        "cluster.secretsEncryptionKey",
        "is empty on a production stack",
        id="prod-secrets-by-google-key-only",
    ),
    pytest.param(
        {"cluster.bootDiskEncryptionKey": ""},
        "prod",
        "cluster.bootDiskEncryptionKey",
        "is empty on a production stack: the nodes' boot disks",
        id="prod-boot-disks-by-google-key-only",
    ),
    pytest.param(
        {"tpu.secureBoot": False},
        "prod",
        "tpu.secureBoot",
        "is false on a production stack: the TPU nodes would boot without verifying",
        id="prod-tpu-nodes-without-secure-boot",
    ),
    pytest.param(
        {"production": True},
        "saxml",
        "tpu.secureBoot",
        "is unset on a production stack, and no source read here says GKE makes ct5lp-hightpu-4t nodes with secure "
        "boot",
        id="production-v5e-with-secure-boot-unset",
    ),
    pytest.param(
        {"cluster.binaryAuthorization": "DISABLED"},
        "prod",
        "cluster.binaryAuthorization",
        "is DISABLED on a production stack: the cluster would admit any image",
        id="prod-binary-authorization-off",
    ),
    pytest.param(
        {"cluster.rbacSecurityGroup": ""},
        "prod",
        "cluster.rbacSecurityGroup",
        "is empty on a production stack",
        id="prod-no-google-groups-for-rbac",
    ),
    pytest.param(
        {"cluster.intranodeVisibility": False},
        "prod",
        "cluster.intranodeVisibility",
        "is false on a production stack: traffic between pods on one node would never reach the VPC",
        id="prod-no-intranode-visibility",
    ),
    # The Hugging Face token: a production stack keeps it in Secret Manager, never as a Kubernetes Secret, on a
    # cluster of its own or one made elsewhere.
    pytest.param(
        {"serving.hfTokenSecretVersion": "", "serving.hfToken": "hf_abcdef"},
        "prod",
        "serving.hfToken",
        "is set on a production stack: the token would be a Kubernetes Secret of the cluster, handed to the pods as an "
        "environment variable, instead of staying in an external secret store (CIS GKE 4.4.2)",
        id="prod-token-as-a-kubernetes-secret",
    ),
    pytest.param(
        {
            "cluster.existing": {"name": "team-cluster", "location": "us-central1"},
            "serving.hfTokenSecretVersion": "",
            "serving.hfToken": "hf_abcdef",
        },
        "prod",
        "serving.hfToken",
        "(CIS GKE 4.4.2)",
        id="prod-token-as-a-kubernetes-secret-on-a-cluster-made-elsewhere",
    ),
    pytest.param(
        {"nodeAuditLogging.enabled": False},
        "prod",
        "nodeAuditLogging.enabled",
        "is false on a production stack: the nodes' audit logging would not be set up",
        id="prod-no-node-audit-logging",
    ),
    pytest.param(
        {**LAB, "nodeAuditLogging.enabled": True},
        "dev",
        "nodeAuditLogging.enabled",
        "a cluster made elsewhere (cluster.existing) has its node audit logging deployed by the stack that makes it",
        id="node-audit-on-existing-cluster",
    ),
    pytest.param(
        {"nodeAuditLogging.image": "docker.io/fluent/fluent-bit:latest"},
        "prod",
        "nodeAuditLogging.image",
        "uses the floating tag 'latest'",
        id="node-audit-agent-latest",
    ),
    pytest.param(
        {"nodeAuditLogging.enabled": True, "nodeAuditLogging.setupImage": "busybox"},
        "dev",
        "nodeAuditLogging.setupImage",
        "it has no tag, which means latest",
        id="node-audit-setup-untagged",
    ),
    pytest.param(
        {"queues.namespaces": ["node-audit"], "serving.namespace": "node-audit"},
        "prod",
        "queues.namespaces[0]",
        "'node-audit' is also the namespace of the node audit logging, which enforces Pod Security's privileged level",
        id="workloads-in-the-node-audit-namespace",
    ),
    pytest.param(
        {"platform.kueue.namespace": "node-audit"},
        "prod",
        "platform.kueue.namespace",
        "'node-audit' is also the namespace of the node audit logging",
        id="kueue-in-the-node-audit-namespace",
    ),
]


# --- The supply chain: a production stack pulls every image by digest ---------------------------------------------

# What the committed prod stack runs, each image under the setting that pins it.
PROD_IMAGE_SETTINGS = [
    "platform.jobset.image",
    "platform.kueue.image",
    "platform.leaderWorkerSet.image",
    "platform.sliceController.digest",
    "checks.image",
    "serving.weightsStaging.image",
    "serving.router.eppImage",
    "serving.image",
    "serving.routingSidecarImage",
    "serving.benchmarkImage",  # `make bench`'s Job: the digest rule and the mirror hold it too (R3-3)
    "nodeAuditLogging.setupImage",
    "nodeAuditLogging.image",
]
# Those of them that come by their tag: the JobSet controller's, the staging image's and the node audit setup image's
# defaults carry their digest (components/platform, components/workloads/serving, components/operations).
PROD_BY_DIGEST = ["platform.jobset.image", "serving.weightsStaging.image", "nodeAuditLogging.setupImage"]
PROD_TAG_ONLY = [key for key in PROD_IMAGE_SETTINGS if key not in PROD_BY_DIGEST]
REQUIRE_AS_PRODUCTION = {"images.requireDigests": None}  # the prod stack without its `requireDigests: false`
DIGEST = "sha256:" + "e" * 64  # test data: no registry was asked

OPERATIONS_BAD_INPUTS += [
    pytest.param(
        REQUIRE_AS_PRODUCTION,
        "prod",
        key,
        "has no digest, and a production stack pulls by digest: its tag can be moved under it",
        id=f"prod-tag-only-{key}",
    )
    for key in PROD_TAG_ONLY
]
OPERATIONS_BAD_INPUTS += [
    pytest.param(
        {**REQUIRE_AS_PRODUCTION, "serving.weightsStaging.image": "docker.io/library/python:3.12.14-slim-bookworm"},
        "prod",
        "serving.weightsStaging.image",
        "has no digest, and a production stack pulls by digest",
        id="prod-staging-image-set-by-tag",
    ),
    pytest.param(
        {**REQUIRE_AS_PRODUCTION, "nodeAuditLogging.setupImage": "docker.io/library/busybox:1.37.0"},
        "prod",
        "nodeAuditLogging.setupImage",
        "has no digest, and a production stack pulls by digest",
        id="prod-node-audit-setup-image-set-by-tag",
    ),
]
OPERATIONS_BAD_INPUTS += [
    pytest.param(
        {"images.requireDigests": True},
        "dev",
        "serving.image",
        "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@$(crane digest",
        id="required-digests-say-how",
    ),
    pytest.param(
        {"images.requireDigests": True},
        "saxml",
        "saxml.httpImage",
        "images.requireDigests is true",
        id="saxml-required-digests",
    ),
    pytest.param(
        {"images.requireDigests": True},
        "dev",
        "platform.sliceController.digest",
        "pulumi config set --path platform.sliceController.tag v0.8.0-200 && "
        "pulumi config set --path platform.sliceController.digest $(crane digest "
        "tpuongke/kueue-slice-controller:v0.8.0-200)",
        id="slice-controller-digest-alone",
    ),
    pytest.param(
        {"serving.router.replicas": 1},
        "prod",
        "serving.router.replicas",
        "1 on a production stack: while that one endpoint picker restarts",
        id="prod-one-endpoint-picker",
    ),
]


@pytest.mark.parametrize("override, stack, key, fragment", OPERATIONS_BAD_INPUTS)
def test_bad_operations_input_names_its_key_and_registers_nothing(override, stack, key, fragment):
    assert_bad_input(override, key, fragment, stack=stack)


CHANNELS = [
    pytest.param("projects/my-project/notificationChannels/1", id="by-project-id"),
    # AlertPolicy.notification_channels: projects/[PROJECT_ID_OR_NUMBER]/notificationChannels/[CHANNEL_ID]
    # (googleapis google/monitoring/v3/alert.proto)
    pytest.param("projects/123456789012/notificationChannels/4567", id="by-project-number"),
]


@pytest.fixture(scope="module")
def channels_run():
    """The prod stack notifying every channel of CHANNELS: one run, in which each case finds its own channel."""
    return run_stack({"alerts.notificationChannels": [c.values[0] for c in CHANNELS]}, stack="prod")


@pytest.mark.parametrize("channel", CHANNELS)
def test_an_existing_channel_named_by_project_id_or_number_is_notified(channel, channels_run):
    stack_config("prod", {"alerts.notificationChannels": [channel]})  # the config takes it alone
    policies = channels_run.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert policies
    assert all(channel in policy.input("notificationChannels") for policy in policies)


def test_many_pools_of_short_names_fit_the_alert_policies():
    """The recovery of alert-filter-over-2048: the same 45 pools with shorter names."""
    run = run_stack(pools_named(SHORT_POOL_NAMES), stack="prod")
    (policy,) = [
        p for p in run.of_type("gcp:monitoring/alertPolicy:AlertPolicy") if p.name == "alert-tpu-node-not-ready"
    ]
    (condition,) = policy.input("conditions")
    assert "tpu-045" in condition["conditionThreshold"]["filter"]


def pinned(stack: str) -> dict[str, str]:
    """Overrides that pin every image of ``stack`` by a digest, each under its own setting."""
    config = load(stack_values(stack)).config
    return {
        image.key: DIGEST if image.key == "platform.sliceController.digest" else f"{image.image}@{DIGEST}"
        for image in config.stack_images()
        if "@" not in image.image
    }


def test_the_prod_stack_lists_its_images_under_the_settings_that_pin_them():
    assert [image.key for image in load(stack_values("prod")).config.stack_images()] == PROD_IMAGE_SETTINGS


def test_a_production_stack_refuses_every_tag_only_image_at_once():
    with pytest.raises(ConfigError) as raised:
        load(with_overrides(stack_values("prod"), REQUIRE_AS_PRODUCTION))
    assert [p.key for p in raised.value.problems] == PROD_TAG_ONLY


def test_a_production_stack_with_every_image_pinned_by_digest_deploys_them_by_digest():
    run = run_stack({**REQUIRE_AS_PRODUCTION, **pinned("prod")}, stack="prod")
    pulled = [image["pull"] for image in run.raw_outputs["images"]]
    assert len(pulled) == len(PROD_IMAGE_SETTINGS)
    assert all("@sha256:" in image for image in pulled), pulled
    assert sum(image.endswith(f"@{DIGEST}") for image in pulled) == len(PROD_TAG_ONLY), pulled
    assert not [w for w in run.warnings if "pulled by its tag" in w]


def test_a_production_stack_that_turned_digests_off_is_warned_of_each_image_at_every_preview():
    run = run_stack(stack="prod")
    warned = [w for w in run.warnings if "is pulled by its tag on a production stack" in w]
    assert [w.split(":")[0] for w in warned] == PROD_TAG_ONLY
    assert all("(images.requireDigests is false); pin it: pulumi config set --path " in w for w in warned)
    # what the preview warns of is the config's preview_warnings(), which the run above holds the program to
    partly = stack_config("prod", {"serving.image": pinned("prod")["serving.image"]}).preview_warnings()
    assert len([w for w in partly if "pulled by its tag" in w]) == len(PROD_TAG_ONLY) - 1


@pytest.mark.parametrize("stack", ["dev", "saxml"])
def test_a_stack_that_is_not_production_pulls_by_tag_without_a_word(stack, dev_run):
    run = dev_run if stack == "dev" else run_stack(stack=stack)
    assert not [w for w in run.warnings if "pulled by its tag" in w]


def test_every_protection_off_is_listed_at_once():
    raw = with_overrides(stack_values("dev"), {"production": True, "platform.sliceController.replicas": 1})
    with pytest.raises(ConfigError) as raised:
        load(raw)
    keys = {p.key for p in raised.value.problems}
    assert {
        "cluster.deletionProtection",
        "tpu.protectPools",
        "cluster.systemPool.nodesPerZone",
        "platform.sliceController.replicas",
        "cluster.controlPlane.ipEndpoint",  # dev's public IP admits every address
    } <= keys, raised.value


@pytest.mark.parametrize(
    "control_plane",
    [
        {"ipEndpoint": "private"},
        {"ipEndpoint": "off"},
    ],
)
def test_a_production_control_plane_has_no_public_ip(control_plane):
    override = {"cluster.controlPlane": control_plane}
    # the prod stack's own control plane (ipEndpoint off) is the prod run (run_stack caches a run by the config as
    # written, not as the program reads it)
    run = (
        run_stack(stack="prod")
        if stack_config("prod", override) == stack_config("prod")
        else run_stack(override, stack="prod")
    )
    assert run.one("gcp:container/cluster:Cluster", "gke-cluster")


def test_a_production_stack_that_serves_without_a_window_is_told_once_under_its_key():
    """Serving and production each require the window: one missing value is one problem, the one saying more."""
    with pytest.raises(ConfigError) as raised:
        load(with_overrides(stack_values("prod"), NO_WINDOW | {"cluster.maintenanceExclusions": []}))
    told = [p for p in raised.value.problems if p.key == "cluster.maintenanceWindow"]
    assert len(told) == 1 and "a stack that serves" in told[0].what, raised.value


def test_a_stack_that_serves_nothing_needs_no_window():
    run = run_stack({**NO_WINDOW, "serving.enabled": False})
    assert "maintenancePolicy" not in run.one("gcp:container/cluster:Cluster", "gke-cluster").inputs


def test_a_cluster_made_elsewhere_keeps_its_own_maintenance_policy():
    run = run_stack({**LAB, **NO_WINDOW}, secrets=("cluster",))
    assert not [r for r in run.registrations if r.type.startswith("gcp:")]


def test_the_prod_stack_has_every_protection_on():
    run = run_stack(stack="prod")
    prod = stack_values("prod")
    cluster = run.one("gcp:container/cluster:Cluster", "gke-cluster")
    assert cluster.input("deletionProtection") is True
    assert (
        cluster.input("maintenancePolicy.recurringWindow.recurrence")
        == (prod["cluster"]["maintenanceWindow"]["recurrence"])
    )
    (freeze,) = cluster.input("maintenancePolicy.maintenanceExclusions")
    assert freeze["exclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES"}
    pools = [r for r in run.of_type("gcp:container/nodePool:NodePool") if r.name != "system-pool"]
    assert len(pools) == len(prod["tpu"]["pools"]) and all(pool.protect for pool in pools)
    system_pool = run.one("gcp:container/nodePool:NodePool", "system-pool")
    assert system_pool.input("nodeCount") == prod["cluster"]["systemPool"]["nodesPerZone"]
    key = prod["cluster"]["secretsEncryptionKey"]
    assert cluster.input("databaseEncryption") == {"state": "ENCRYPTED", "keyName": key}
    boot_key = prod["cluster"]["bootDiskEncryptionKey"]
    assert boot_key != key  # two keys, so that each resource below shows which it has
    assert cluster.input("nodeConfig.bootDiskKmsKey") == boot_key
    for pool in run.of_type("gcp:container/nodePool:NodePool"):
        assert pool.input("nodeConfig.bootDiskKmsKey") == boot_key, pool.name
        assert pool.input("nodeConfig.shieldedInstanceConfig.enableSecureBoot") is True, pool.name
    subnet = run.one("gcp:compute/subnetwork:Subnetwork", "node-subnet")
    assert subnet.input("logConfig.flowSampling") == 0.5


def test_flow_logs_off_and_no_key_leave_the_resources_without_them():
    run = run_stack({"network.flowLogs.enabled": False})
    assert "logConfig" not in run.one("gcp:compute/subnetwork:Subnetwork", "node-subnet").inputs
    assert "databaseEncryption" not in run.one("gcp:container/cluster:Cluster", "gke-cluster").inputs


def test_a_cluster_made_elsewhere_is_not_asked_for_the_production_security_keys():
    raw = with_overrides(
        stack_values("prod"),
        {
            **LAB,
            "network.flowLogs.enabled": False,
            "cluster.secretsEncryptionKey": "",
            "cluster.bootDiskEncryptionKey": "",
            "tpu.secureBoot": False,
            "alerts.enabled": False,
        },
    )
    with pytest.raises(ConfigError) as raised:
        load(raw)
    keys = {p.key for p in raised.value.problems}
    production_security = {
        "network.flowLogs.enabled",
        "cluster.secretsEncryptionKey",
        "cluster.bootDiskEncryptionKey",
        "tpu.secureBoot",
    }
    assert not keys & production_security, raised.value


STAGED = [{"name": "tpu7-pool-1", "nodeCount": 16}, {"name": "tpu7-pool-2", "nodeCount": 16, "hardenedBoot": False}]


def test_a_production_pool_kept_unhardened_is_allowed_and_warned_of_at_every_preview():
    """A running production stack replaces its cubes one per `up` and keeps serving on the others: the pools it has
    not reached yet boot as before, and every preview says so (CIS GKE 5.9.2 and 5.5.7 wait on them)."""
    run = run_stack({"tpu.pools": STAGED}, stack="prod")
    assert [w for w in run.warnings if w.startswith("tpu.pools[")] == [
        "tpu.pools[1].hardenedBoot: tpu7-pool-2 boots from a disk Google's key encrypts, without secure boot, on a "
        "production stack (CIS GKE 5.9.2, 5.5.7); remove the line when its cube can be replaced, one pool per `up` "
        "(docs/operations.md, What a change does)"
    ]
    assert "bootDiskKmsKey" not in run.one("gcp:container/nodePool:NodePool", "tpu7-pool-2").input("nodeConfig")
    assert not [w for w in run_stack(stack="prod").warnings if "hardenedBoot" in w]
    # dev: not production (the config's preview_warnings(), which the first run holds the program to)
    assert not [w for w in stack_config("dev", {"tpu.pools": STAGED}).preview_warnings() if "hardenedBoot" in w]


def test_secure_boot_unset_on_a_production_tpu7x_stack_is_on():
    run = run_stack({"tpu.secureBoot": None}, stack="prod")
    for pool in run.of_type("gcp:container/nodePool:NodePool"):
        assert pool.input("nodeConfig.shieldedInstanceConfig.enableSecureBoot") is True, pool.name


def test_a_production_stack_may_serve_a_public_model_with_no_token_at_all():
    """4.4.2 asks that a secret the stack has be kept outside the cluster, not that it have one."""
    run = run_stack({"serving.hfTokenSecretVersion": ""}, stack="prod")
    assert [r.type for r in run.registrations if r.name.startswith("hf-token")] == []


# --- Node audit logging: on where production, off elsewhere, never on a cluster made elsewhere -------------------


@pytest.mark.parametrize(
    "stack, override, on",
    [
        ("prod", {"nodeAuditLogging.enabled": None}, True),  # unset: a production stack deploys it
        ("prod", {}, True),  # the committed file writes it out
        ("dev", {}, False),
        ("saxml", {}, False),
        ("dev", {"nodeAuditLogging.enabled": True}, True),
        ("dev", {"production": True, "nodeAuditLogging.enabled": None, **LAB}, False),
        ("dev", {**LAB}, False),
    ],
    ids=["prod-unset", "prod", "dev", "saxml", "dev-turned-on", "production-on-existing-cluster", "lab"],
)
def test_node_audit_logging_is_on_for_production_unless_the_cluster_is_made_elsewhere(stack, override, on):
    """Read off the parsed config (a production stack on a cluster made elsewhere fails other rules)."""
    config = parsed(with_overrides(stack_values(stack), override))
    assert config is not None
    assert config.node_audit_logging_on is on
    keys = [image.key for image in config.stack_images()]
    assert ("nodeAuditLogging.image" in keys) is on and ("nodeAuditLogging.setupImage" in keys) is on


def test_node_audit_images_are_checked_only_where_it_is_deployed():
    load(with_overrides(stack_values("dev"), {"nodeAuditLogging.image": "fluent-bit"}))
