"""Operations inside the running program: the alerting and dashboards (what the prod stack registers, what
each piece waits for, and that nothing of it exists where they are off), and the supply chain (every image the
render pulls is listed under the setting that pins it, and comes from the mirror when there is one)."""

from __future__ import annotations

import json
import re

import pytest

from components.config_base import NAMESPACE, ImageReference
from components.gcp.config import is_google_registry
from components.operations.config import email_channel_name
from harness.mock_engine import ProgramRun, Registration
from policy.images import deployed_images
from tests.conftest import FIXTURE_STACKS, as_pulumi_values, run_stack, stack_values, with_overrides
from tools import render

POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
PODMONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"


@pytest.fixture(scope="module")
def prod_run():
    return run_stack(stack="prod")


@pytest.fixture(scope="module")
def saxml_run():
    return run_stack(stack="saxml")


def test_prod_registers_a_policy_per_signal_notifying_its_channel(prod_run):
    policies = {r.name: r for r in prod_run.of_type(POLICY)}
    assert sorted(policies) == [
        "alert-gateway-5xx",
        "alert-kueue-pending",
        "alert-model-server-restarts",
        "alert-tpu-node-not-ready",
        "alert-tpu-partition-unhealthy",
        "alert-tpu-pool-unavailable",
        "alert-tpu-slice-unhealthy",
    ]
    (channel,) = prod_run.of_type(CHANNEL)
    assert channel.name == "alert-email-0"
    assert channel.input("labels") == {"email_address": "tpu-oncall@example.com"}
    for policy in policies.values():
        assert policy.input("project") == "my-tpu-prod-project"
        assert "alert-email-0" in policy.dependencies, f"{policy.name} notifies no channel"
        assert policy.input("displayName").startswith("qwen-prod-cluster: ")
    assert sorted(prod_run.outputs["alertPolicies"]) == sorted(n.removeprefix("alert-") for n in policies)


# --- alerts.emails as a secret: `pulumi config set --secret --path alerts.emails[0] <address>` marks the whole block ---
ADDRESSES = ["tpu-oncall@example.com", "Ops.Team@corp.example.com", "ops-team@corp.example.com"]


def test_no_address_of_a_secret_alerts_block_is_in_the_render_or_a_message(monkeypatch):
    """A resource name is in plain text in the URN, the state and the preview, whatever the program read it from
    (pulumi.com/docs/iac/concepts/resources/names); the address is an input, which a secret keeps encrypted. Two
    distinct addresses that an address-derived name would make one channel (`.` for `-`) are accepted too."""
    values = as_pulumi_values(with_overrides(stack_values("prod"), {"alerts.emails": ADDRESSES}))
    monkeypatch.setattr(render, "stack_config_values", lambda stack, stack_dir: (values, [f"{NAMESPACE}:alerts"]))
    files, run = render.render("prod", FIXTURE_STACKS)
    resources = json.loads(files["resources.json"])
    channels = [resource for resource in resources if resource["type"] == CHANNEL]
    for channel in channels:
        assert channel["inputs"]["displayName"] == channel["inputs"]["labels"]["email_address"] == "[secret]"
        channel.get("options", {}).pop("aliases", None)  # the running stack's channels' names (see below)
    assert sorted(channel["name"] for channel in channels) == ["alert-email-0", "alert-email-1", "alert-email-2"]
    files["resources.json"] = json.dumps(resources)
    shown = [*files.values(), *run.warnings, *run.infos]
    for address in ADDRESSES:
        for text in (address, address.lower(), email_channel_name(address)):
            assert not [part for part in shown if text in part], text


def claimed(run: ProgramRun, name: str) -> list[str]:
    """The channels that take over the running stack's channel ``name``, as the engine matches them: a resource's own
    name first, then its aliases (pulumi/pulumi@1b59498 pkg/resource/deploy/step_generator.go, getOldResource)."""
    return [
        c.input("labels")["email_address"]
        for c in run.of_type(CHANNEL)
        if name in [c.name, *c.options.get("aliases", [])]
    ]


@pytest.mark.parametrize(
    ("emails", "running"),
    [
        pytest.param(["tpu-oncall@example.com"], {"tpu-oncall@example.com": "tpu-oncall@example.com"}, id="as-is"),
        pytest.param(
            ["c@example.com", "b@example.com", "a@example.com"],
            {"a@example.com": "a@example.com", "b@example.com": "b@example.com"},
            id="moved-and-one-more",
        ),
        # The old rule refused a-b@ beside a.b@ (one name): the running stack made one channel of that name.
        pytest.param(["a-b@example.com", "a.b@example.com"], {"a.b@example.com": "a-b@example.com"}, id="one-old-name"),
    ],
)
@pytest.mark.parametrize("secrets", [(), ("alerts",)])
def test_the_running_stack_s_channels_named_by_their_address_are_renamed_in_place(emails, running, secrets):
    """Each channel the stack made when it named them by their address (email_channel_name), ``running`` (its address
    -> the address of the channel that takes it over), is taken over by one channel, renamed in place and not
    replaced: the engine matches a name or an alias against its state and writes no alias back into it
    (pulumi/pulumi@1b59498 sdk/go/common/apitype/core.go, NormalizeURNReferences); an alias claimed twice fails."""
    run = run_stack({"alerts.emails": emails}, stack="prod", secrets=secrets)
    for address, taken_over_by in running.items():
        assert claimed(run, email_channel_name(address)) == [taken_over_by]


def test_the_gateway_policy_waits_for_the_gateway_it_measures(prod_run):
    policy = prod_run.one(POLICY, "alert-gateway-5xx")
    assert "inference-gateway" in policy.dependencies
    # Under the mocks the Gateway carries no GKE annotation: the policy covers GKE's Gateway URL maps.
    (condition,) = policy.input("conditions")
    assert "gkegw1-" in condition["conditionThreshold"]["filter"]


def test_channels_and_policies_wait_for_the_monitoring_api(prod_run):
    for resource in [*prod_run.of_type(POLICY), *prod_run.of_type(CHANNEL)]:
        assert "monitoring" in resource.dependencies, resource.name


def test_the_kueue_scrape_waits_for_kueue_and_its_token_for_its_account(prod_run):
    scrape = {r.type.rsplit(":", 1)[-1]: r for r in prod_run.registrations if r.name.startswith("kueue-metrics-")}
    assert sorted(scrape) == ["ClusterRoleBinding", "PodMonitoring", "Role", "RoleBinding", "Secret", "ServiceAccount"]
    for resource in scrape.values():
        assert "kueue" in resource.dependencies, f"{resource.name} does not wait for the Kueue release"
    # A token Secret created before its ServiceAccount is deleted by Kubernetes' token controller.
    assert scrape["ServiceAccount"].name in scrape["Secret"].dependencies
    assert {scrape["Secret"].name, scrape["RoleBinding"].name} <= set(scrape["PodMonitoring"].dependencies)


def test_no_alerting_where_alerts_are_off(dev_run):
    assert not dev_run.of_type(POLICY) and not dev_run.of_type(CHANNEL)
    assert "alertPolicies" not in dev_run.outputs
    # The dashboards (on by default) still read Kueue's metrics.
    assert [r.name for r in dev_run.registrations if r.name == "kueue-metrics-podmonitoring"]


def test_nothing_of_monitoring_where_alerts_and_dashboards_are_off():
    run = run_stack({"dashboards.enabled": False})
    assert not run.of_type(POLICY) and not run.of_type(DASHBOARD) and not run.of_type(PODMONITORING)
    assert not [r for r in run.registrations if r.name.startswith("kueue-metrics-")]
    assert "dashboards" not in run.outputs and "alertPolicies" not in run.outputs


def test_the_saxml_stack_alerts_on_its_tpu_nodes_and_pools_only():
    run = run_stack({"alerts": {"enabled": True, "emails": ["sax@example.com"]}}, stack="saxml")
    # Sorted: the policies register concurrently, in no fixed order.
    assert sorted(r.name for r in run.of_type(POLICY)) == ["alert-tpu-node-not-ready", "alert-tpu-pool-unavailable"]


def test_each_stack_makes_its_dashboards_and_links_them(dev_run, prod_run, saxml_run):
    for run, expected in (
        (dev_run, ["kueue", "router", "serving", "tpu"]),
        (prod_run, ["kueue", "router", "serving", "tpu"]),
        (saxml_run, ["saxml"]),
    ):
        boards = {r.name.removeprefix("dashboard-"): r for r in run.of_type(DASHBOARD)}
        assert sorted(boards) == expected
        assert sorted(run.outputs["dashboards"]) == expected
        project = run.outputs["project"]
        for key, board in boards.items():
            assert board.input("project") == project
            assert "monitoring" in board.dependencies, "the dashboard waits for the Monitoring API"
            assert re.fullmatch(
                rf"https://console\.cloud\.google\.com/monitoring/dashboards/builder/[^/?]+\?project={project}",
                run.outputs["dashboards"][key],
            )


def test_after_up_each_dashboard_link_names_the_id_cloud_monitoring_gave_it():
    """The dashboard's id is the name Cloud Monitoring answers, projects/<number>/dashboards/<generated UUID>
    (harness/gcp_model.py dashboard_id): the console link names the UUID alone."""
    run = run_stack(preview=False)
    project = run.outputs["project"]
    for key, url in run.raw_outputs["dashboards"].items():
        assert re.fullmatch(
            rf"https://console\.cloud\.google\.com/monitoring/dashboards/builder/"
            rf"[0-9a-f]{{8}}-[0-9a-f]{{4}}-4[0-9a-f]{{3}}-[89ab][0-9a-f]{{3}}-[0-9a-f]{{12}}\?project={project}",
            url,
        ), (key, url)


def test_after_up_the_alert_policies_notify_the_channels_the_stack_made_by_their_names():
    """A notification channel's name is computed, projects/<project>/notificationChannels/<number> (harness/gcp_model.py
    notification_channel_name): each alert policy of the prod stack (alerts.emails) notifies its channel by it."""
    run = run_stack(stack="prod", preview=False)
    project = run.outputs["project"]
    assert run.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
    policies = run.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert policies
    for policy in policies:
        channels = policy.input("notificationChannels")
        assert channels and all(
            re.fullmatch(rf"projects/{project}/notificationChannels/[0-9]+", str(name)) for name in channels
        ), (policy.name, channels)


def test_the_vllm_scrapes_wait_for_the_serving_namespace(dev_run):
    scrapes = {r.name: r for r in dev_run.of_type(PODMONITORING) if r.name.startswith("metrics-")}
    assert sorted(scrapes) == ["metrics-vllm-decode", "metrics-vllm-prefill"]
    for scrape in scrapes.values():
        assert "queues" in scrape.dependencies or "llm-d-pd-disaggregation" in scrape.dependencies


# --- The supply chain ---------------------------------------------------------------------------------------------


def pulled(run) -> list[str]:
    """Every image the render's objects and Helm values name (as the policy pack finds them), with repeats."""
    return [image for r in run.registrations for _, image, _ in deployed_images(r.type, r.name, r.inputs)]


BENCHMARK_IMAGE = "serving.benchmarkImage"  # `make bench`'s Job: listed, pulled the same way, not in the render


@pytest.mark.parametrize("stack", ["dev", "prod", "saxml"])
def test_every_image_the_stack_pulls_is_listed_with_the_setting_that_pins_it(stack, request):
    run = request.getfixturevalue(f"{stack}_run")
    listed = run.raw_outputs["images"]
    assert {image["pull"] for image in listed if image["setting"] != BENCHMARK_IMAGE} == set(pulled(run))
    assert len({image["setting"] for image in listed}) == len(listed), "one setting per image"
    serves = stack_values(stack).get("serving", {}).get("enabled", False)
    assert serves == any(image["setting"] == BENCHMARK_IMAGE for image in listed), "`make bench`'s image is listed"


def test_the_mirror_serves_every_image_under_its_registry_and_path(prod_run):
    mirror = "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror"
    for image in prod_run.raw_outputs["images"]:
        source = ImageReference.parse(image["source"])
        assert image["pull"] == f"{mirror}/{source.qualified_name}{source.tag_and_digest}", image
    assert all(image.startswith(mirror + "/") for image in pulled(prod_run))
    assert "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror/docker.io/tpuongke/kueue-slice-controller" in {
        ImageReference.parse(image).name for image in pulled(prod_run)
    }


def test_without_a_mirror_private_nodes_pull_from_outside_google_only_through_the_stack_s_repositories(dev_run):
    """dev: each image of a registry outside Google through the remote repository the stack makes for that registry,
    under the path the registry serves it at; Google's own registries' images as written."""
    made = {upstream_registry(r): r for r in dev_run.of_type("gcp:artifactregistry/repository:Repository")}
    for image in dev_run.raw_outputs["images"]:
        source = ImageReference.parse(image["source"])
        if is_google_registry(source.registry):
            assert image["pull"] == image["source"], image
            continue
        repository = made[source.registry]
        path = f"{repository.input('location')}-docker.pkg.dev/{repository.input('project')}/{repository.input('repositoryId')}"
        assert image["pull"] == f"{path}/{source.path}{source.tag_and_digest}", image
    official = [i["pull"] for i in dev_run.raw_outputs["images"] if i["source"].startswith("docker.io/library/")]
    assert official and all("-docker-io/library/" in pull for pull in official), "Docker Hub's official images"
    assert all(is_google_registry(ImageReference.parse(image).registry) for image in pulled(dev_run)), (
        "a pod pulls from outside Google"
    )


def upstream_registry(repository: Registration) -> str:
    """The registry a remote repository proxies: Docker Hub's preset, or the registry its URL names."""
    upstream = repository.input("remoteRepositoryConfig")
    if upstream.get("dockerRepository", {}).get("publicRepository") == "DOCKER_HUB":
        return "docker.io"
    return str(upstream["commonRepository"]["uri"]).removeprefix("https://")


def test_with_public_nodes_each_image_comes_from_its_own_registry():
    run = run_stack({"cluster.privateNodes": False})
    assert all(image["pull"] == image["source"] for image in run.raw_outputs["images"])


# --- Node audit logging (CIS GKE 5.7.2) ---------------------------------------------------------------------------

NODE_AUDIT = "tpu-gke:operations:NodeAuditLogging"
NODE_AUDIT_OBJECTS = {
    "kubernetes:core/v1:Namespace": "node-audit-namespace",
    "kubernetes:core/v1:ServiceAccount": "node-audit-account",
    "kubernetes:core/v1:ConfigMap": "node-audit-config",
    "kubernetes:apps/v1:DaemonSet": "node-audit-logging",
}


def node_audit_registrations(run: ProgramRun) -> dict[str, Registration]:
    """The component's objects by type."""
    return {r.type: r for r in run.registrations if r.parent == "node-audit-logging" and r.type != NODE_AUDIT}


def test_prod_deploys_the_node_audit_logging_on_the_cluster_in_its_own_namespace(prod_run):
    (component,) = prod_run.of_type(NODE_AUDIT)
    assert component.name == "node-audit-logging"
    made = node_audit_registrations(prod_run)
    assert {kind: r.name for kind, r in made.items()} == NODE_AUDIT_OBJECTS
    for resource in made.values():
        assert resource.provider_name == "gke", f"{resource.name} is not applied with the cluster's provider"
    namespace = made["kubernetes:core/v1:Namespace"]
    daemonset = made["kubernetes:apps/v1:DaemonSet"]
    assert namespace.input("metadata.name") == "node-audit"
    # The one namespace of the stack that enforces privileged (tests/test_pod_security.py holds the others).
    assert namespace.input("metadata.labels")["pod-security.kubernetes.io/enforce"] == "privileged"
    # The DaemonSet after its namespace, account and configuration, so its pods find all three.
    assert {"node-audit-namespace", "node-audit-account", "node-audit-config"} <= set(daemonset.dependencies)
    for kind in ("kubernetes:core/v1:ServiceAccount", "kubernetes:core/v1:ConfigMap"):
        assert "node-audit-namespace" in made[kind].dependencies
    env = {e["name"]: e.get("value") for e in daemonset.input("spec.template.spec.containers.0.env")}
    assert (env["CLUSTER_NAME"], env["CLUSTER_LOCATION"]) == ("qwen-prod-cluster", "us-central1")
    assert made["kubernetes:core/v1:ServiceAccount"].input("automountServiceAccountToken") is False


def test_no_node_audit_logging_where_it_is_off(dev_run):
    assert not dev_run.of_type(NODE_AUDIT) and not node_audit_registrations(dev_run)
    assert not [i for i in dev_run.raw_outputs["images"] if i["setting"].startswith("nodeAuditLogging.")]


def test_a_stack_that_is_not_production_may_turn_it_on():
    run = run_stack({"nodeAuditLogging.enabled": True})
    assert {r.name for r in node_audit_registrations(run).values()} == set(NODE_AUDIT_OBJECTS.values())
    settings = [i["setting"] for i in run.raw_outputs["images"]]
    assert settings[-2:] == ["nodeAuditLogging.setupImage", "nodeAuditLogging.image"]
