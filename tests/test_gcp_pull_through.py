"""images.pullThrough: the Artifact Registry remote repositories the stack makes so that private nodes never pull from a
registry outside Google through Cloud NAT (review 3, R3-2), and the one rewrite of every image (R3-3).

What is held: when the stack makes them (private nodes without a mirror, never on a cluster made elsewhere), one per
registry outside Google its images come from, `make bench`'s included; the nodes read each alone; their whole life on
the recorded graph (the API first, each repository before the nodes' read on it, that read before any Kubernetes object,
deleted in the reverse order; a replaced repository deleted first and its read made again); Docker Hub's credentials
from Secret Manager only, read by Artifact Registry's service agent; and what the preview says when the nodes would
pull from Docker Hub through the NAT after all.
"""

from __future__ import annotations

from typing import Any

import pytest

from components import lifecycle as lifecycle_review
from components import stack as stack_config
from components.config_base import ConfigError, PullPath
from components.gcp.config import is_google_registry
from harness.gcp_model import CloudProject
from harness.mock_engine import ProgramRun, Registration, run_program
from harness.twin_nodes import twin_nodes
from tests.conftest import as_pulumi_values, assert_bad_input, run_stack, stack_values, with_overrides
from tests.test_gcp_existing_cluster import LAB
from tests.test_lifecycle import closure, kubernetes_objects, previous_of
from tools.render import destroy_waves

REPOSITORY = "gcp:artifactregistry/repository:Repository"
READ = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
SECRET_GRANT = "gcp:secretmanager/secretIamMember:SecretIamMember"
AGENT = "gcp:projects/serviceIdentity:ServiceIdentity"
DEV = stack_values("dev")  # the tests' dev stack
SECRET = f"projects/{DEV['project']}/secrets/docker-hub/versions/1"
CREDENTIALS = {"images.pullThrough": {"dockerHubUsername": "myorgbot", "dockerHubPasswordSecretVersion": SECRET}}
OFF = {"images.pullThrough": {"enabled": False}}


def config_of(overrides: dict[str, Any], stack: str = "dev", secrets: tuple[str, ...] = ()) -> Any:
    raw = with_overrides(stack_values(stack), overrides)
    keys = [f"tpu-dynamic-slicing:{key}" for key in secrets]
    return stack_config.load_pulumi_values(as_pulumi_values(raw), keys)


@pytest.fixture(scope="module")
def credentialed() -> ProgramRun:
    return run_stack(CREDENTIALS)


def upstream(repository: Registration) -> str:
    remote = repository.input("remoteRepositoryConfig")
    if "dockerRepository" in remote:
        return str(remote["dockerRepository"]["publicRepository"])
    return str(remote["commonRepository"]["uri"])


# --- Which repositories, and where the nodes pull each image from --------------------------------------------------


@pytest.mark.parametrize(
    "image, pull_path, pulled",
    [
        # Docker Hub's short names are its own registry's: official images under library/, as Docker asks for them
        ("python:3.12", PullPath(remotes=(("docker.io", "r/hub"),)), "r/hub/library/python:3.12"),
        ("docker.io/library/python:3.12@sha256:" + "a" * 64, PullPath(remotes=(("docker.io", "r/hub"),)), None),
        (
            "tpuongke/kueue-slice-controller:v1",
            PullPath(remotes=(("docker.io", "r/hub"),)),
            "r/hub/tpuongke/kueue-slice-controller:v1",
        ),
        (
            "ghcr.io/llm-d/x:v0.10.0",
            PullPath(remotes=(("docker.io", "r/hub"), ("ghcr.io", "r/gh"))),
            "r/gh/llm-d/x:v0.10.0",
        ),
        # Docker Hub's domain, written: docker.io/python is its official image, and index.docker.io is docker.io
        # (distribution/reference normalize.go)
        ("docker.io/busybox:1.37.0", PullPath(remotes=(("docker.io", "r/hub"),)), "r/hub/library/busybox:1.37.0"),
        (
            "index.docker.io/vllm/vllm-tpu:v0.10.0",
            PullPath(remotes=(("docker.io", "r/hub"),)),
            "r/hub/vllm/vllm-tpu:v0.10.0",
        ),
        ("docker.io/busybox:1.37.0", PullPath(mirror="m"), "m/docker.io/library/busybox:1.37.0"),
        # a registry without a repository (Google's) keeps the image as written
        ("us-docker.pkg.dev/cloud-tpu-images/jax/tpu:1.0.0", PullPath(remotes=(("docker.io", "r/hub"),)), "same"),
        ("localhost:5000/a/b:1.0.0", PullPath(remotes=(("localhost:5000", "r/local"),)), "r/local/a/b:1.0.0"),
        # the mirror keeps the whole qualified name, registry included
        ("python:3.12", PullPath(mirror="m"), "m/docker.io/library/python:3.12"),
        ("ghcr.io/a/b:1.0.0", PullPath(), "same"),
    ],
)
def test_one_rewrite_serves_the_mirror_and_the_pull_through_repositories(image, pull_path, pulled):
    expected = {
        None: "r/hub/library/python:3.12@sha256:" + "a" * 64,
        "same": image,
    }.get(pulled, pulled)
    assert pull_path.image(image) == expected


@pytest.mark.parametrize(
    "overrides, made",
    [
        ({}, True),  # dev: private nodes, no mirror
        ({"cluster.privateNodes": False}, False),  # public nodes leave by their own addresses
        ({"images.mirror": "us-central1-docker.pkg.dev/my-org-artifacts/mirror"}, False),  # the mirror serves all
        (OFF, False),
        ({"cluster.privateNodes": False, "images.pullThrough": {"enabled": True}}, True),  # asked for: made
    ],
)
def test_the_stack_makes_them_where_private_nodes_have_no_mirror_unless_told(overrides, made):
    config = config_of(overrides).config
    assert config.pull_through_on is made
    assert bool(config.pull_through_repositories()) is made


def test_one_repository_per_registry_outside_google_the_stack_pulls_from(dev_run):
    config = config_of({}).config
    outside = {i.registry for i in config.stack_images() if not is_google_registry(i.registry)}
    assert "quay.io" in outside, "`make bench`'s registry is among them"
    made = dev_run.of_type(REPOSITORY)
    assert sorted(upstream(r) for r in made) == sorted(
        "DOCKER_HUB" if registry == "docker.io" else f"https://{registry}" for registry in outside
    )
    for repository in made:
        assert (repository.input("format"), repository.input("mode")) == ("DOCKER", "REMOTE_REPOSITORY")
        assert (repository.input("project"), repository.input("location")) == (config.project, config.region)
        assert repository.input("repositoryId").startswith(f"{config.cluster.name}-"), "two stacks of a project apart"
        assert "upstreamCredentials" not in repository.input("remoteRepositoryConfig"), "dev pulls anonymously"


def test_docker_hub_written_by_its_legacy_domain_is_docker_hub():
    """index.docker.io is Docker Hub (distribution/reference normalize.go): its images go through the one Docker Hub
    repository, with its credentials, never through a second remote repository of https://index.docker.io."""
    dev = config_of({}).config
    assert dev.serving.image.startswith("docker.io/")
    config = config_of({"serving.image": "index." + dev.serving.image}).config
    assert [r.registry for r in config.pull_through_repositories()] == [
        r.registry for r in dev.pull_through_repositories()
    ]


def test_saxml_needs_one_for_its_jobset_controller_only():
    """Its Saxml and JAX images are in Google's public repositories, reached over Private Google Access."""
    run = run_stack(stack="saxml")
    assert [upstream(r) for r in run.of_type(REPOSITORY)] == ["https://registry.k8s.io"]


# --- Grants ------------------------------------------------------------------------------------------------------


def test_the_nodes_may_read_each_repository_alone_and_nothing_project_wide(dev_run):
    made = {r.input("repositoryId"): r for r in dev_run.of_type(REPOSITORY)}
    reads = dev_run.of_type(READ)
    assert sorted(r.input("repository") for r in reads) == sorted(made)
    node_roles = [m.input("role") for m in dev_run.of_type("gcp:projects/iAMMember:IAMMember")]
    assert not [role for role in node_roles if role.startswith("roles/artifactregistry.")]


def test_docker_hub_s_password_is_read_by_artifact_registry_s_agent_alone(credentialed):
    (agent,) = credentialed.of_type(AGENT)
    assert agent.input("service") == "artifactregistry.googleapis.com"
    (grant,) = credentialed.of_type(SECRET_GRANT)
    assert grant.input("secretId") == SECRET.partition("/versions/")[0]
    assert grant.input("role") == "roles/secretmanager.secretAccessor"
    assert agent.name in grant.dependencies, "its member is the agent the ServiceIdentity made"
    (hub,) = [r for r in credentialed.of_type(REPOSITORY) if upstream(r) == "DOCKER_HUB"]
    credentials = hub.input("remoteRepositoryConfig.upstreamCredentials.usernamePasswordCredentials")
    assert credentials == {"username": "myorgbot", "passwordSecretVersion": SECRET}
    others = [r for r in credentialed.of_type(REPOSITORY) if r is not hub]
    assert others and all("upstreamCredentials" not in r.input("remoteRepositoryConfig") for r in others)


def test_the_apis_of_the_repositories_and_the_secret_are_enabled(dev_run, credentialed):
    services = {s.input("service") for s in credentialed.of_type("gcp:projects/service:Service")}
    assert {"artifactregistry.googleapis.com", "secretmanager.googleapis.com"} <= services
    assert "secretmanager.googleapis.com" not in {
        s.input("service") for s in dev_run.of_type("gcp:projects/service:Service")
    }
    public = run_stack({"cluster.privateNodes": False})
    assert "artifactregistry.googleapis.com" not in {
        s.input("service") for s in public.of_type("gcp:projects/service:Service")
    }


def test_docker_hub_s_credentials_enable_nothing_where_no_image_comes_from_docker_hub():
    """The Saxml stack pulls through from no Docker Hub repository: no repository signs in, so nothing reads the
    password, and Secret Manager's API stays off as it is without the credentials."""
    saxml = {"project": stack_values("saxml")["project"]}
    secret = f"projects/{saxml['project']}/secrets/docker-hub/versions/1"
    credentials = {"images.pullThrough": {"dockerHubUsername": "myorgbot", "dockerHubPasswordSecretVersion": secret}}
    run = run_stack(credentials, stack="saxml")
    assert run.of_type(REPOSITORY) and not [r for r in run.of_type(REPOSITORY) if upstream(r) == "DOCKER_HUB"]
    assert not run.of_type(SECRET_GRANT)
    apis = {s.input("service") for s in run.of_type("gcp:projects/service:Service")}
    assert apis == {s.input("service") for s in run_stack(stack="saxml").of_type("gcp:projects/service:Service")}


# --- Their life on the recorded graph ---------------------------------------------------------------------------


def test_first_up_the_api_then_each_repository_then_the_read_then_every_kubernetes_object(credentialed):
    run = credentialed
    objects = [r.name for r in kubernetes_objects(run) if not r.type.startswith("pulumi:providers:")]
    assert objects
    for repository in run.of_type(REPOSITORY):
        assert "artifactregistry" in closure(run, repository.name), f"{repository.name} before its API"
        if upstream(repository) == "DOCKER_HUB":
            assert {"secretmanager", "artifact-registry-agent-docker-hub-password"} <= closure(run, repository.name)
    for read in run.of_type(READ):
        (repository,) = [r for r in run.of_type(REPOSITORY) if r.input("repositoryId") == read.input("repository")]
        assert {repository.name, "node-sa"} <= closure(run, read.name)
        assert all(read.name in closure(run, name) for name in objects), f"a pod may pull before {read.name}"


def test_the_agent_s_read_of_the_password_outlives_the_stack(credentialed):
    """Destroy drops it from the state and leaves the binding, as the agents' key grants: its delete would remove the
    project-wide agent from the secret whoever granted it, and another repository signing in with it would stop."""
    (read,) = credentialed.of_type(SECRET_GRANT)
    assert read.options.get("retainOnDelete") is True


def test_destroy_deletes_the_objects_then_the_reads_then_the_repositories(credentialed):
    run = credentialed
    wave = {name: i for i, names in enumerate(destroy_waves(run.registrations)) for name in names}
    objects = [r.name for r in kubernetes_objects(run) if not r.type.startswith("pulumi:providers:")]
    for read in run.of_type(READ):
        assert all(wave[name] < wave[read.name] for name in objects)
    for repository in run.of_type(REPOSITORY):
        reads = [r.name for r in run.of_type(READ) if r.input("repository") == repository.input("repositoryId")]
        assert reads and all(wave[name] < wave[repository.name] for name in reads)
        assert wave[repository.name] < wave["artifactregistry"], "the API outlives them (and is never disabled)"
    (grant,) = run.of_type(SECRET_GRANT)
    hub = next(r for r in run.of_type(REPOSITORY) if upstream(r) == "DOCKER_HUB")
    assert wave[hub.name] < wave[grant.name], "Artifact Registry reads the password until its repository is gone"


def test_a_replaced_repository_goes_first_and_takes_the_nodes_read_with_it(dev_run):
    """Every input of a remote repository's upstream and credentials is ForceNew, and its id is taken once per project
    and location: the old one is deleted first. Its IAM policy goes with it, so the read is made again with it."""
    for repository in dev_run.of_type(REPOSITORY):
        assert repository.options.get("deleteBeforeReplace") is True
    for read in dev_run.of_type(READ):
        (repository,) = [r for r in dev_run.of_type(REPOSITORY) if r.input("repositoryId") == read.input("repository")]
        assert read.options.get("replaceWith") == [repository.name]


def test_a_new_project_enables_each_api_before_each_call(credentialed):
    """The first `up` of a fresh project (only Service Usage on) creates them without a refusal: the model of Google
    Cloud refuses a call of an API not yet enabled (harness/gcp_model.py)."""
    raw = with_overrides(stack_values(), CREDENTIALS)
    run = run_program(as_pulumi_values(raw), [], stack="dev", preview=False, cloud=CloudProject.empty())
    assert {r.type for r in run.registrations} >= {REPOSITORY, READ, SECRET_GRANT, AGENT}


# --- What the preview says ---------------------------------------------------------------------------------------


def test_an_up_that_turns_them_on_says_every_pod_rolls_and_a_credential_change_keeps_the_hub_repository(dev_run):
    public = run_stack({"cluster.privateNodes": False})
    before = previous_of(public)["lifecycle"]
    current = lifecycle_review.lifecycle_facts(config_of({}).config)
    review = lifecycle_review.review_changes(before, current, str)
    (line,) = [w for w in review.in_place if w.startswith("images.pullThrough: the Artifact Registry remote")]
    assert "each pod template naming one changes and its workload rolls" in line
    changed = lifecycle_review.lifecycle_facts(config_of(CREDENTIALS).config)
    review = lifecycle_review.review_changes(previous_of(dev_run)["lifecycle"], changed, str)
    assert not review.replaced, review.replaced
    (credentials,) = [w for w in review.in_place if "upstream credentials" in w]
    assert f"{DEV['cluster']['name']}-docker-io (docker.io) change in place" in credentials
    assert "cache stay" in credentials
    unchanged = previous_of(dev_run)["lifecycle"]
    assert not lifecycle_review.review_changes(unchanged, unchanged, str).replaced
    # A running stack whose last `up` predates the fact (this change's first `up`): announced the same way.
    older = {key: value for key, value in unchanged.items() if key != "pullThrough"}
    assert [w for w in lifecycle_review.review_changes(older, current, str).in_place if "remote repositories" in w]
    # And back: public nodes need none, the repositories and their caches go after the pods moved off them.
    back = lifecycle_review.review_changes(unchanged, previous_of(public)["lifecycle"], str)
    (gone,) = [w for w in back.in_place if w.startswith("images.pullThrough: the repositories")]
    assert "deleted once no pod template names them" in gone and "docker.io" in gone


def test_pulling_from_docker_hub_through_the_nat_is_warned_with_the_numbers():
    """R3-2: dev's sixteen vLLM pods start at once, over Docker Hub's ten anonymous pulls an hour per address."""
    run = run_stack(OFF)
    (warning,) = [w for w in run.warnings if w.startswith("images.pullThrough:")]
    lws = [r.inputs for r in run.registrations if r.type.endswith(":LeaderWorkerSet")]
    vllm = sum(int(o["spec"]["replicas"] * o["spec"]["leaderWorkerTemplate"]["size"]) for o in lws)
    assert vllm == 16
    assert f"the vLLM model servers: {vllm} (docker.io/vllm/vllm-tpu:" in warning
    assert "from docker.io directly, through Cloud NAT" in warning and "10 anonymous pulls an hour" in warning
    # every node GKE makes, the system pool's in each of its zones
    assert f"at least {len(twin_nodes(config_of(OFF).config))} nodes x" in warning
    assert not [w for w in run_stack().warnings if w.startswith("images.pullThrough:")], "dev pulls through"


def test_a_charts_own_controller_is_not_said_to_run_on_each_node():
    """The JobSet controller is the chart's Deployment, of the chart's replica count (the stack sets none): not a pod on
    each node, as a DaemonSet's would be."""
    image = f"docker.io/myorg/jobset:v0.12.0@sha256:{'a' * 64}"
    run = run_stack({**OFF, "platform.jobset.image": image})
    (warning,) = [w for w in run.warnings if w.startswith("images.pullThrough:")]
    assert f"the JobSet controller: as many as its chart makes ({image})" in warning
    assert "a pod on each node" not in warning


def test_a_cluster_made_elsewhere_gets_none_and_the_preview_says_so():
    loaded = config_of(LAB, secrets=("cluster",))
    assert not loaded.config.pull_through_repositories()
    (note,) = [n for n in stack_config.image_pull_notes(loaded) if n.startswith("images: the stack makes no")]
    assert "docker.io" in note and "images.mirror" in note
    run = run_stack(LAB, secrets=("cluster",))
    assert not run.of_type(REPOSITORY) and not run.of_type(READ)


def test_an_anonymous_docker_hub_repository_is_noted_and_credentials_silence_it():
    anonymous = [n for n in stack_config.image_pull_notes(config_of({})) if "pulls anonymously" in n]
    assert len(anonymous) == 1
    assert not [n for n in stack_config.image_pull_notes(config_of(CREDENTIALS)) if "pulls anonymously" in n]


# --- Refused at preview ------------------------------------------------------------------------------------------

TOKEN = "dckr_pat_" + "Q" * 27  # test data shaped like a Docker Hub access token


@pytest.mark.parametrize(
    "override, key, fragment",
    [
        (
            {"images": {"mirror": "us-central1-docker.pkg.dev/my-org-artifacts/m", "pullThrough": {"enabled": True}}},
            "images.pullThrough.enabled",
            "the two are alternatives",
        ),
        (
            {"images.pullThrough": {"dockerHubUsername": "myorgbot"}},
            "images.pullThrough.dockerHubPasswordSecretVersion",
            "is empty while images.pullThrough.dockerHubUsername is set",
        ),
        (
            {"images.pullThrough": {"dockerHubPasswordSecretVersion": SECRET}},
            "images.pullThrough.dockerHubUsername",
            "is empty while images.pullThrough.dockerHubPasswordSecretVersion is set",
        ),
        (
            {
                "images.pullThrough": {
                    "dockerHubUsername": "myorgbot",
                    "dockerHubPasswordSecretVersion": "projects/other-project/secrets/s/versions/1",
                }
            },
            "images.pullThrough.dockerHubPasswordSecretVersion",
            "not of the stack's project",
        ),
        (
            # a YAML block scalar's final newline: no Docker ID holds one
            {"images.pullThrough": {**CREDENTIALS["images.pullThrough"], "dockerHubUsername": "myorgbot\n"}},
            "images.pullThrough.dockerHubUsername",
            "is not a Docker ID",
        ),
        (
            {**CREDENTIALS, "images.pullThrough": {**CREDENTIALS["images.pullThrough"], "enabled": False}},
            "images.pullThrough.dockerHubUsername",
            "the stack makes no pull-through repository",
        ),
        (
            {"cluster.name": "a" * 40, "checks.image": f"registry.{'b' * 20}.example/jax:1.0.0"},
            "cluster.name",
            "longer than Artifact Registry's 63 characters",
        ),
    ],
)
def test_bad_pull_through_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_existing_clusters_refuse_it_when_asked():
    with pytest.raises(ConfigError) as raised:
        config_of({**LAB, "images.pullThrough": {"enabled": True}}, secrets=("cluster",))
    assert [p.key for p in raised.value.problems] == ["images.pullThrough.enabled"]


@pytest.mark.parametrize(
    "setting, value",
    [
        ("dockerHubUsername", TOKEN),  # the token typed where the Docker ID goes
        ("dockerHubPasswordSecretVersion", TOKEN),  # the token itself instead of where it is kept
        ("dockerHubPasswordSecretVersion", "hunter2-password"),
    ],
)
def test_a_value_that_may_be_the_credential_is_refused_and_never_shown(setting, value):
    other = {"dockerHubUsername": "myorgbot", "dockerHubPasswordSecretVersion": SECRET}
    with pytest.raises(ConfigError) as raised:
        config_of({"images.pullThrough": {**other, setting: value}})
    assert [p.key for p in raised.value.problems] == [f"images.pullThrough.{setting}"]
    assert value not in str(raised.value)
    assert "not shown" in str(raised.value)


# --- The pods that pull at once, counted on the objects ---------------------------------------------------------


def template(*images: str) -> dict[str, Any]:
    return {
        "spec": {"containers": [{"image": i} for i in images[:1]], "initContainers": [{"image": i} for i in images[1:]]}
    }


@pytest.mark.parametrize(
    "obj, counts",
    [
        ({"kind": "Deployment", "spec": {"replicas": 3, "template": template("a")}}, {"a": 3}),
        ({"kind": "Deployment", "spec": {"template": template("a", "a")}}, {"a": 1}),  # one pod pulls it once
        ({"kind": "Job", "spec": {"template": template("a", "b")}}, {"a": 1, "b": 1}),
        ({"kind": "DaemonSet", "spec": {"template": template("a")}}, {"a": None}),
        (
            {
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {"replicas": 6, "template": {"spec": {"parallelism": 2, "template": template("j")}}}
                    ]
                },
            },
            {"j": 12},
        ),
        (
            {
                "kind": "LeaderWorkerSet",
                "spec": {
                    "replicas": 4,
                    "leaderWorkerTemplate": {
                        "size": 2,
                        "leaderTemplate": template("v", "s"),
                        "workerTemplate": template("v"),
                    },
                },
            },
            {"v": 8, "s": 4},
        ),
        (
            {
                "kind": "LeaderWorkerSet",
                "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template("v")}},
            },
            {"v": 6},
        ),
        ({"kind": "ConfigMap", "data": {}}, {}),
    ],
)
def test_the_pods_a_workload_starts_are_counted_by_image(obj, counts):
    from components.manifests import pods_by_image

    assert pods_by_image(obj) == counts


def test_the_model_answers_a_service_agent_it_knows_and_refuses_to_guess_another():
    from harness.gcp_model import UnmodeledCall, service_identity

    agent = service_identity("artifactregistry.googleapis.com", "123")
    assert agent["member"] == "serviceAccount:service-123@gcp-sa-artifactregistry.iam.gserviceaccount.com"
    with pytest.raises(UnmodeledCall):
        service_identity("example.googleapis.com", "123")
