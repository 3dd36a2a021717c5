"""P/D serving as part of the dev stack: GCP identity, Secret, Gateway, router, LeaderWorkerSets,
order of creation, outputs, and every preview rule as a bad input naming its key."""

import copy
import dataclasses
import functools
import json
import re

import pulumi
import pytest

from components.config_base import ConfigError
from harness.gcp_model import GET_BUCKET, Bucket, CloudProject
from harness.mock_engine import PROJECT_NUMBER_PLACEHOLDER, run_program, stack_holdings
from tests.conftest import (
    FIXTURE_STACKS,
    as_pulumi_values,
    cubes,
    pulled,
    run_stack,
    stack_config,
    stack_values,
    with_overrides,
)
from tools.render import kubernetes_objects, render
from tools.stack_file import SECRET_PLACEHOLDER

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
READY_GATE = "pulumi-python:dynamic/tpu-gke:ReadyGate"
NAMESPACE = "llm-d-pd-disaggregation"
PRINCIPAL = (
    f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER_PLACEHOLDER}/locations/global/workloadIdentityPools/"
    f"{stack_values('dev')['project']}.svc.id.goog/subject/ns/{NAMESPACE}/sa/model-server"
)


def objects(run, kind):
    return {o["metadata"]["name"]: o for o in kubernetes_objects(run.registrations) if o["kind"] == kind}


def test_weights_bucket_is_private_and_kept_on_destroy(dev_run):
    bucket = dev_run.one("gcp:storage/bucket:Bucket", "weights")
    assert bucket.parent == "serving"
    dev = stack_values("dev")
    assert (bucket.input("name"), bucket.input("location")) == (
        dev["serving"]["weightsBucket"]["name"],
        dev["region"].upper(),
    )
    assert bucket.input("uniformBucketLevelAccess") is True and bucket.input("publicAccessPrevention") == "enforced"
    assert bucket.input("forceDestroy") is False
    assert bucket.options == {"retainOnDelete": True}  # destroy and serving.enabled false forget it


def test_the_weights_bucket_is_deleted_with_the_weights_only_when_asked():
    bucket = run_stack({"serving.weightsBucket.keepOnDestroy": False}).one("gcp:storage/bucket:Bucket", "weights")
    assert bucket.input("forceDestroy") is True
    assert "retainOnDelete" not in bucket.options


def test_an_existing_bucket_is_used_not_created():
    run = run_stack({"serving.weightsBucket": {"name": "team-weights", "create": False}})
    assert not [r for r in run.registrations if r.type == "gcp:storage/bucket:Bucket"]
    members = [r for r in run.registrations if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"]
    assert {m.input("bucket") for m in members} == {"team-weights"}


STAGER = PRINCIPAL.removesuffix("/sa/model-server") + "/sa/weights-staging"
SERVING = stack_config("dev").serving  # the tests' dev stack's serving block
BUCKET = SERVING.weights_bucket.name
# The snapshot's directory in the bucket: Hugging Face's cache layout, models--<organisation>--<name>/snapshots/<rev>
SNAPSHOT = f"models--{SERVING.model.id.replace('/', '--')}/snapshots/{SERVING.model.revision}"
STARTS_WITH = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/([^/]+)/objects/([^"]*)"\)')
WRITE_ROLES = {"roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.objectCreator"}


def may_write(run, member: str, obj: str) -> bool:
    """Whether ``member`` may create, overwrite or delete the object ``obj`` of the weights bucket, by the
    stack's grants. Only the one condition form the program writes is understood; any other fails."""
    for grant in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        if grant.input("member") != member or grant.input("role") not in WRITE_ROLES:
            continue
        condition = grant.inputs.get("condition")
        if condition is None:
            return True
        (bucket, prefix) = STARTS_WITH.fullmatch(condition["expression"]).groups()
        assert bucket == grant.input("bucket") == BUCKET
        if obj.startswith(prefix):
            return True
    return False


def test_only_the_staging_job_writes_the_weights_and_only_the_model_servers_the_xla_cache(dev_run):
    """R5 of the December review: the Job and the model servers were one account with objectUser on the
    bucket, so any vLLM pod could overwrite or delete the snapshot."""
    weights, cache = f"{SNAPSHOT}/model-00001-of-00094.safetensors", "xla_cache/jit_step-abc123-cache"
    assert may_write(dev_run, STAGER, weights) and may_write(dev_run, STAGER, f"{SNAPSHOT}/.staged-complete")
    assert not may_write(dev_run, PRINCIPAL, weights)
    assert not may_write(dev_run, PRINCIPAL, f"{SNAPSHOT}/.staged-complete")
    assert may_write(dev_run, PRINCIPAL, cache)
    assert not may_write(dev_run, STAGER, cache)  # JAX runs what it finds in its cache
    assert not may_write(dev_run, STAGER, f"{SNAPSHOT.rpartition('/')[0]}/other-revision/x")
    grants = dev_run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    for member in (PRINCIPAL, STAGER):  # both read the whole bucket: listing it is a bucket-level call
        assert {g.input("role") for g in grants if g.input("member") == member} >= {"roles/storage.objectViewer"}
    for grant in grants:
        assert grant.input("bucket") == BUCKET
        assert "weights" in grant.dependencies  # the bucket first
    accounts = objects(dev_run, "ServiceAccount")
    assert accounts["model-server"]["metadata"]["namespace"] == accounts["weights-staging"]["metadata"]["namespace"]
    job = objects(dev_run, "Job")["stage-model-weights"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "weights-staging"
    for lws in objects(dev_run, "LeaderWorkerSet").values():
        for kind in ("leaderTemplate", "workerTemplate"):
            assert lws["spec"]["leaderWorkerTemplate"][kind]["spec"]["serviceAccountName"] == "model-server"


def test_the_grants_follow_a_custom_weights_path_and_bucket():
    run = run_stack({"serving.weightsBucket.name": "team-weights", "serving.model.weightsPath": "/qwen/v1/"})
    (write,) = [
        g
        for g in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if g.input("member") == STAGER and g.input("role") == "roles/storage.objectUser"
    ]
    assert write.input("condition")["expression"] == (
        'resource.name.startsWith("projects/_/buckets/team-weights/objects/qwen/v1/")'
    )


def test_the_staging_account_changes_no_model_server(dev_run):
    """What `up` does with a new staging account: it replaces the Job (its pod template is immutable) and
    moves the Job's grants; the LeaderWorkerSets do not change, so no group restarts."""
    changed = run_stack({"serving.weightsStaging.serviceAccountName": "weights-copier"})
    for name in ("vllm-prefill", "vllm-decode"):
        assert changed.one(LWS, name).inputs == dev_run.one(LWS, name).inputs
    job = changed.one("kubernetes:batch/v1:Job", "stage-model-weights")
    assert job.input("spec")["template"]["spec"]["serviceAccountName"] == "weights-copier"
    assert job.options["replaceOnChanges"] == ["metadata.labels", "spec"]


def test_without_grants_no_member_is_registered_and_the_job_still_has_its_own_account():
    run = run_stack({"serving.weightsBucket.grantAccess": False})
    assert not run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert objects(run, "Job")["stage-model-weights"]["spec"]["template"]["spec"]["serviceAccountName"] == (
        "weights-staging"
    )


def test_hf_token_is_a_secret_everywhere(tmp_path):
    run = run_stack({"serving.hfToken": "hf_abcdef"}, secrets=("serving",))
    secret = objects(run, "Secret")["llm-d-hf-token"]
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert secret["stringData"] == {"HF_TOKEN": "[secret]"}
    # A stack file with the token encrypted, as `pulumi config set --secret` writes it.
    stack_file = (
        (FIXTURE_STACKS / "Pulumi.dev.yaml")
        .read_text()
        .replace(
            "    weightsBucket:",
            "    hfToken:\n      secure: v1:ciphertext-only-the-cli-can-decrypt\n    weightsBucket:",
            1,
        )
    )
    (tmp_path / "Pulumi.withtoken.yaml").write_text(stack_file)
    files, rendered = render("withtoken", tmp_path)
    assert "llm-d-hf-token" in objects(rendered, "Secret")
    assert SECRET_PLACEHOLDER not in "".join(files.values())


def test_a_token_in_plain_text_is_refused_with_the_command_that_encrypts_it():
    registrations: list = []
    raw = with_overrides(stack_values(), {"serving.hfToken": "hf_plaintextTOKEN"})
    with pytest.raises(ConfigError) as raised:
        run_program(as_pulumi_values(raw), secret_keys=[], registrations=registrations)
    (problem,) = raised.value.problems
    assert problem.key == "serving.hfToken" and "plain text" in problem.what
    assert "pulumi config set --secret --path serving.hfToken <value>" in problem.fix
    assert "hf_plaintextTOKEN" not in str(raised.value)
    assert registrations == []


def test_no_token_means_no_secret(dev_run):
    run = dev_run
    assert "hfToken" not in stack_values()["serving"], "the dev stack carries no token a CLI could not decrypt"
    assert "llm-d-hf-token" not in objects(run, "Secret")
    lws = objects(run, "LeaderWorkerSet")["vllm-prefill"]
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    token = next(e for e in leader["env"] if e["name"] == "HF_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["optional"] is True


def test_gateway_is_internal_and_awaited(dev_run):
    gateway = objects(dev_run, "Gateway")["llm-d-inference-gateway"]
    assert gateway["metadata"]["namespace"] == NAMESPACE
    assert gateway["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Programmed"
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    assert [(listener["port"], listener["protocol"]) for listener in gateway["spec"]["listeners"]] == [(80, "HTTP")]


def test_router_release_is_pinned_after_the_gateway(dev_run):
    router = dev_run.one(RELEASE, "router")
    assert router.parent == "serving"
    assert (router.input("chart"), router.input("version")) == (
        "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
        "v0.10.0",
    )
    assert (router.input("name"), router.input("namespace")) == ("pd-disaggregation", NAMESPACE)
    values = router.input("values")
    assert values["provider"]["name"] == "gke"
    assert values["router"]["modelServers"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    assert values["httpRoute"]["inferenceGatewayName"] == "llm-d-inference-gateway"
    assert "inference-gateway" in router.dependencies
    assert router.provider.split("::")[-2] == "gke"


def helm_waits(release) -> bool:
    """Whether the provider has Helm wait for the release's workloads: unless skipAwait, and always when atomic
    (components/platform/releases.py helm_release says where)."""
    return release.inputs.get("atomic") is True or not release.inputs.get("skipAwait")


def test_helm_waits_for_every_release_but_the_routers(dev_run):
    """Helm can never call the router's release ready with a standby picker (never Ready, by design): waiting, it
    would time out and roll the release back. The controllers' releases it still waits for."""
    waits = {r.name: helm_waits(r) for r in dev_run.of_type(RELEASE)}
    assert waits.pop("router") is False
    assert waits and all(waits.values()), waits


def test_the_up_waits_for_a_ready_endpoint_picker_of_the_router_release_instead():
    """What Helm cannot judge, a ReadyGate waits for: a Ready picker behind the Service the chart names after the
    release, of the release's current template, as long as Helm would have; again after each upgrade (an input from
    the release's status); nothing waits for the gate."""
    run = run_stack({}, preview=False)
    router = run.one(RELEASE, "router")
    gate = run.one(READY_GATE, "router-endpoint-picker")
    assert "router" in gate.dependencies and gate.parent == "serving"
    assert gate.input("service_namespace") == router.input("namespace")
    assert gate.input("service_name") == gate.input("deployment") == f"{router.input('name')}-epp"
    assert "webhook_configuration" not in gate.inputs
    assert gate.input("release_revision") == 1  # the mock's first install
    assert gate.input("timeout_seconds") == router.input("timeout")
    assert not [r.name for r in run.registrations if gate.name in r.dependencies]


def test_no_disruption_budget_holds_the_endpoint_pickers_leader(dev_run):
    """Only the lease holder is ever Ready (manifests/serving/router-values.yaml says where that is read), so any
    budget selecting the pickers would count one Ready pod and refuse the leader's eviction, and every drain of its
    node would wait on it. With a standby running, none selects them."""
    from components.workloads.serving.objects import endpoint_picker_labels

    assert dev_run.one(RELEASE, "router").input("values")["router"]["epp"]["replicas"] > 1
    pickers = endpoint_picker_labels().items()
    budgets = [r for r in dev_run.registrations if r.type == "kubernetes:policy/v1:PodDisruptionBudget"]
    assert not [
        b.name
        for b in budgets
        if b.input("metadata")["namespace"] == NAMESPACE
        and b.input("spec")["selector"].get("matchLabels", {}).items() <= pickers
    ]


def _decode_sidecar(run):
    leader = objects(run, "LeaderWorkerSet")["vllm-decode"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    (sidecar,) = leader["spec"]["initContainers"]
    return sidecar


@pytest.mark.parametrize("version", ["v0.10.0", "v0.11.0"])
def test_the_router_version_is_the_sidecars_and_the_endpoint_pickers(dev_run, version):
    """serving.router.version is the one version: the chart, the endpoint picker and the P/D sidecar."""
    override = {"serving.router.version": version}
    # The dev stack's own version (run_stack caches a run by the config as written, not as the program reads it)
    run = dev_run if stack_config("dev", override) == stack_config("dev") else run_stack(override)
    router = run.one(RELEASE, "router")
    assert router.input("version") == version
    assert router.input("values")["router"]["epp"]["image"]["tag"] == version
    assert _decode_sidecar(run)["image"] == pulled(f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{version}")


@pytest.mark.parametrize("suffix", [":v0.10.0", f":v0.10.0@sha256:{'b' * 64}"])
def test_a_sidecar_override_is_that_release_from_elsewhere(suffix):
    image = "us-docker.pkg.dev/my-project/mirror/llm-d-router-disagg-sidecar" + suffix
    assert _decode_sidecar(run_stack({"serving.routingSidecarImage": image}))["image"] == image


def test_inference_pool_crds_only_when_asked(dev_run):
    assert not [r for r in dev_run.registrations if r.name == "inference-pool-crds"]
    run = run_stack({"serving.inferencePoolCrds": {"install": True}})
    crds = run.one("kubernetes:yaml/v2:ConfigFile", "inference-pool-crds")
    assert crds.input("file").endswith("/releases/download/v1.5.0/manifests.yaml")
    assert "inference-pool-crds" in run.one(RELEASE, "router").dependencies


def test_leaderworkersets_wait_for_the_platform_queue_and_identity():
    run = run_stack({"serving.hfToken": "hf_abcdef"}, secrets=("serving",))
    for name in ("vllm-prefill", "vllm-decode"):
        lws = run.one(LWS, name)
        assert lws.parent == "serving"
        assert {
            "lws",
            "slice-controller",
            "kueue-objects",
            NAMESPACE,
            "model-server-account",
            "hf-token",
            "weights-bucketViewer",
            "weights-objectViewer",
            "weights-xla-cache-objectUser",
        } <= set(lws.dependencies)
        assert not {"weights-staging-account", "staging-snapshot-objectUser"} & set(lws.dependencies)


def test_leaderworkersets_carry_queue_priority_and_slice(dev_run):
    for _name, lws in objects(dev_run, "LeaderWorkerSet").items():
        labels = lws["metadata"]["labels"]
        assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/priority-class"]) == (
            "lq",
            "high-priority-3000",
        )
        assert (lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == (4, 2)
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        assert leader["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"] == "2x2x2"
        args = dict(a.split("=", 1) for a in leader["spec"]["containers"][0]["args"] if "=" in a)
        assert args["--model"] == f"gs://{BUCKET}/{SNAPSHOT}"
        assert json.loads(args["--kv-transfer-config"])["kv_connector"] == "TPUConnectorHMA"


def test_outputs_tell_clients_where_to_go():
    run = run_stack(preview=False)  # after `up`: the Gateway status exists only in a real cluster
    assert run.outputs["modelName"] == SERVING.model.id  # no servedName: the model id
    assert run.outputs["gatewayAddress"] is None  # the mocks run no Gateway controller


def test_base_url_and_curl_follow_the_gateway_address():
    import pulumi

    from components import stack as stack_config
    from components.workloads.serving.component import endpoint_outputs

    config = stack_config.load(with_overrides(stack_values(), {"serving.gateway.port": 8080})).config

    @pulumi.runtime.test
    def check():
        outputs = endpoint_outputs(config.serving, pulumi.Output.from_input("10.0.0.7"))

        def verify(values):
            base_url, curl = values
            assert base_url == "http://10.0.0.7:8080/v1"
            assert curl.startswith("curl -s http://10.0.0.7:8080/v1/completions ")
            assert f'"model": "{config.serving.model.id}"' in curl

        return pulumi.Output.all(outputs["openaiBaseUrl"], outputs["exampleCurl"]).apply(verify)

    check()


def test_serving_switched_off_removes_it():
    run = run_stack({"serving.enabled": False})
    assert not [r for r in run.registrations if r.type in (LWS, "tpu-gke:workloads:ModelServing")]
    assert not {"gatewayAddress", "openaiBaseUrl", "modelName", "exampleCurl"} & set(run.outputs)


# Edits Kueue refuses in place on a queue-managed LeaderWorkerSet (and what they touch in the LWS).
KUEUE_REFUSED_EDITS = [
    pytest.param({"serving.resources.cpu": "200"}, "containers", id="cpu-request"),
    pytest.param({"serving.resources.memory": "800Gi"}, "containers", id="memory-request"),
    pytest.param({"serving.healthyNodesOnly": True}, "nodeSelector", id="healthy-nodes-selector"),
    pytest.param({"queues.localQueueName": "serving-lq"}, "metadata", id="queue-label"),
]


@pytest.mark.parametrize("override, part", KUEUE_REFUSED_EDITS)
def test_an_edit_kueue_refuses_in_place_replaces_the_leaderworkersets(dev_run, override, part):
    """The edit changes an LWS path that carries replace-on-change, with the old LWS deleted first."""
    from components.workloads.serving.objects import REPLACED_ON

    changed = run_stack(override)
    for name in ("vllm-prefill", "vllm-decode"):
        before, after = dev_run.one(LWS, name), changed.one(LWS, name)
        assert after.options["deleteBeforeReplace"] is True
        assert after.options["replaceOnChanges"] == sorted(REPLACED_ON)
        differing = [path for path in REPLACED_ON if _at(before.inputs, path) != _at(after.inputs, path)]
        assert differing, f"{override} changes none of the replace-on-change paths"
        assert any(part in path for path in differing)


def same_size_shape_run(shape: str):
    """The dev stack serving on ``shape``, one of two super-slice shapes of 64 hosts each (4 cubes: 4x4x16 and 4x8x8),
    both admitted, one group per role, serving.healthyNodesOnly false (its default)."""
    shapes = ["2x2x2", "4x4x8", "4x4x16", "4x8x8"]
    one_group = {"serving.prefill.replicas": 1, "serving.decode.replicas": 1}
    return run_stack(cubes(8) | one_group | {"tpu.sliceShapes": shapes, "serving.sliceShape": shape})


def test_a_slice_shape_of_the_same_size_replaces_the_leaderworkersets():
    """4x4x16 and 4x8x8 make groups of the same size, the same requests and (healthyNodesOnly false) the same node
    selector: the pods' slice-topology annotation is all that differs. Kueue does not compare it, and its LWS
    integration never writes it into an existing group's Workload: only a replacement asks for the new shape."""
    from components.tpu.topology import SLICE_TOPOLOGY_ANNOTATION
    from components.workloads.serving.objects import REPLACED_ON

    before, after = same_size_shape_run("4x4x16"), same_size_shape_run("4x8x8")
    for name in ("vllm-prefill", "vllm-decode"):
        old, new = before.one(LWS, name), after.one(LWS, name)
        assert old.inputs["spec"]["leaderWorkerTemplate"]["size"] == new.inputs["spec"]["leaderWorkerTemplate"]["size"]
        assert new.options["replaceOnChanges"] == sorted(REPLACED_ON) and new.options["deleteBeforeReplace"] is True
        differing = [path for path in REPLACED_ON if _at(old.inputs, path) != _at(new.inputs, path)]
        assert differing == [
            f'spec.leaderWorkerTemplate.{kind}Template.metadata.annotations["{SLICE_TOPOLOGY_ANNOTATION}"]'
            for kind in ("leader", "worker")
        ]
        assert [_at(new.inputs, path) for path in differing] == [["4x8x8"], ["4x8x8"]]


def test_an_image_change_rolls_the_groups_in_place(dev_run):
    from components.workloads.serving.objects import REPLACED_ON

    changed = run_stack({"serving.image": "docker.io/vllm/vllm-tpu:nightly-20260601-aaaaaaa-bbbbbbb"})
    for name in ("vllm-prefill", "vllm-decode"):
        before, after = dev_run.one(LWS, name), changed.one(LWS, name)
        assert before.inputs != after.inputs
        assert all(_at(before.inputs, p) == _at(after.inputs, p) for p in REPLACED_ON), "an image change would reload"


def test_a_new_router_release_rolls_the_decode_groups_in_place(dev_run):
    """Kueue compares an init container's requests and ports only: the sidecar's image is not shape."""
    from components.workloads.serving.objects import REPLACED_ON

    changed = run_stack({"serving.router.version": "v0.11.0"})
    before, after = dev_run.one(LWS, "vllm-decode"), changed.one(LWS, "vllm-decode")
    assert before.inputs != after.inputs
    assert all(_at(before.inputs, p) == _at(after.inputs, p) for p in REPLACED_ON), "a sidecar release would reload"
    assert changed.one(LWS, "vllm-prefill").inputs == dev_run.one(LWS, "vllm-prefill").inputs


def assert_rolls_in_place(before: dict, now: dict, name: str) -> None:
    """What a stack ran before differs from what it runs now, and in no replace-on-change path: `up` updates
    the LeaderWorkerSet in place."""
    from components.workloads.serving.objects import REPLACED_ON

    assert before != now
    assert [p for p in REPLACED_ON if _at(before, p) != _at(now, p)] == [], name


def test_the_first_up_after_the_v0_8_0_sidecar_rolls_both_roles_in_place(dev_run):
    """What the stacks ran before: the llm-d-routing-sidecar v0.8.0 flags, kv_ip and POD_IP. Moving
    from it touches no replace-on-change path, so `up` updates both LeaderWorkerSets in place."""
    for name in ("vllm-prefill", "vllm-decode"):
        now = dev_run.one(LWS, name).inputs
        before = copy.deepcopy(now)
        template = before["spec"]["leaderWorkerTemplate"]
        for kind in ("leaderTemplate", "workerTemplate"):
            (container,) = template[kind]["spec"]["containers"]
            pod_ip = {"fieldRef": {"fieldPath": "status.podIP"}}
            container["env"].insert(0, {"name": "POD_IP", "valueFrom": pod_ip})
        (leader,) = template["leaderTemplate"]["spec"]["containers"]
        leader["args"] = [
            a.replace('"}', '", "kv_ip": "$(POD_IP)"}') if a.startswith("--kv-transfer-config=") else a
            for a in leader["args"]
        ]
        for sidecar in template["leaderTemplate"]["spec"].get("initContainers", []):
            sidecar["image"] = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"
            sidecar["args"] = [
                "--port=8000",
                "--vllm-port=8200",
                "--connector=nixlv2",
                "--zap-log-level=1",
                "--secure-proxy=false",
            ]
        assert_rolls_in_place(before, now, name)


def test_the_first_up_without_the_unread_startup_variable_rolls_both_roles_in_place(dev_run):
    """What the stacks ran before: VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT=1800 in every vLLM container.
    Dropping it touches no replace-on-change path, so `up` updates both LeaderWorkerSets in place."""
    for name in ("vllm-prefill", "vllm-decode"):
        now = dev_run.one(LWS, name).inputs
        before = copy.deepcopy(now)
        template = before["spec"]["leaderWorkerTemplate"]
        for kind in ("leaderTemplate", "workerTemplate"):
            (container,) = template[kind]["spec"]["containers"]
            at = next(i for i, e in enumerate(container["env"]) if e["name"] == "VLLM_HTTP_TIMEOUT_KEEP_ALIVE")
            container["env"].insert(at, {"name": "VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT", "value": "1800"})
        assert_rolls_in_place(before, now, name)


# One element of a Pulumi property path: a name, a quoted key (``["cloud.google.com/x"]``, for a key with dots) or
# ``[*]`` (pulumi/pulumi sdk/go/common/resource/properties_path.go ParsePropertyPath).
_PATH_PART = re.compile(r'\.?(?:\["((?:[^"\\]|\\.)*)"\]|\[(\*)\]|([^.\[]+))')


def _path_parts(path):
    parts, at = [], 0
    while at < len(path):
        match = _PATH_PART.match(path, at)
        assert match, f"not a property path the program writes: {path!r} at {at}"
        quoted, star, name = match.groups()
        parts.append(quoted.replace('\\"', '"') if quoted is not None else star or name)
        at = match.end()
    return parts


def _at(inputs, path):
    """The values at a Pulumi property path (``a.b[*].c``, ``a["k.with.dots"]``) of a resource's inputs."""
    from harness.mock_engine import unwrap_secrets

    values = [unwrap_secrets(inputs)]
    for part in _path_parts(path):
        nxt = []
        for value in values:
            if part == "*":
                nxt.extend(value if isinstance(value, list) else [])
            elif isinstance(value, dict) and part in value:
                nxt.append(value[part])
        values = nxt
    return values


def test_a_new_model_server_account_rolls_the_groups_in_place_and_moves_their_grants(dev_run):
    """Kueue does not hold a pod's service account: the LeaderWorkerSets update in place, after the grants
    to the new principal exist."""
    from components.workloads.serving.objects import REPLACED_ON

    changed = run_stack({"serving.serviceAccountName": "vllm"})
    for name in ("vllm-prefill", "vllm-decode"):
        before, after = dev_run.one(LWS, name), changed.one(LWS, name)
        assert before.inputs != after.inputs
        assert all(_at(before.inputs, p) == _at(after.inputs, p) for p in REPLACED_ON), "a new account would reload"
    vllm = PRINCIPAL.removesuffix("/sa/model-server") + "/sa/vllm"
    moved = [g for g in changed.of_type("gcp:storage/bucketIAMMember:BucketIAMMember") if g.input("member") == vllm]
    assert sorted(g.name for g in moved) == [
        "weights-bucketViewer",
        "weights-objectViewer",
        "weights-xla-cache-objectUser",
    ]
    assert (
        changed.one("kubernetes:batch/v1:Job", "stage-model-weights").inputs
        == dev_run.one("kubernetes:batch/v1:Job", "stage-model-weights").inputs
    )


# --- The Hugging Face token in Secret Manager (the prod stack) -------------------------------------------------

SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
PROVIDER_CLASS = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"
JOB = "kubernetes:batch/v1:Job"
TOKEN_SECRET = "projects/my-tpu-prod-project/secrets/hf-token"


def prod_principal(account: str) -> str:
    dev, prod = (stack_values(stack)["project"] for stack in ("dev", "prod"))
    return PRINCIPAL.replace(dev, prod).replace("/sa/model-server", f"/sa/{account}")


@pytest.fixture(scope="module")
def prod_run():
    return run_stack(stack="prod")


def test_the_prod_token_is_read_from_secret_manager_by_the_two_accounts_that_use_it(prod_run):
    grants = {r.name: r for r in prod_run.of_type(SECRET_IAM)}
    assert sorted(grants) == ["hf-token-model-server-secretAccessor", "hf-token-staging-secretAccessor"]
    for name, account in (("model-server", "model-server"), ("staging", "weights-staging")):
        grant = grants[f"hf-token-{name}-secretAccessor"]
        assert (grant.input("secretId"), grant.input("project")) == (TOKEN_SECRET, "my-tpu-prod-project")
        assert grant.input("role") == "roles/secretmanager.secretAccessor"
        assert grant.input("member") == prod_principal(account)
        assert "condition" not in grant.inputs  # the whole secret: its versions are the token's rotations
    assert "llm-d-hf-token" not in objects(prod_run, "Secret"), "no Kubernetes Secret holds the token"


def test_every_pod_with_the_token_file_waits_for_its_class_and_its_own_grant(prod_run):
    (provider_class,) = prod_run.of_type(PROVIDER_CLASS)
    assert provider_class.name == "hf-token" and NAMESPACE in provider_class.dependencies
    for name in ("vllm-prefill", "vllm-decode"):
        needs = set(prod_run.one(LWS, name).dependencies)
        assert {"hf-token", "hf-token-model-server-secretAccessor"} <= needs
    job = set(prod_run.one(JOB, "stage-model-weights").dependencies)
    assert {"hf-token", "hf-token-staging-secretAccessor"} <= job


def test_without_staging_only_the_model_servers_read_the_secret():
    run = run_stack({"serving.weightsStaging.enabled": False}, stack="prod")
    assert [r.input("member") for r in run.of_type(SECRET_IAM)] == [prod_principal("model-server")]


def test_the_secret_is_granted_even_when_the_bucket_grants_are_made_elsewhere():
    """weightsBucket.grantAccess is about the bucket: the token's readers are granted whatever it says."""
    run = run_stack({"serving.weightsBucket.grantAccess": False}, stack="prod")
    assert not run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert len(run.of_type(SECRET_IAM)) == 2
    # the principals' project number, after its API (the key grants read it too, as their own lookup)
    lookups = [i for i in run.invocations if i.token == "gcp:organizations/getProject:getProject"]
    assert lookups and all(lookup.waited_for == ["cloudresourcemanager"] for lookup in lookups)


# --- An existing weights bucket, read by the preview (R3-4) ------------------------------------------------

EXISTING = {"serving.weightsBucket.create": False}
BUCKET = stack_values()["serving"]["weightsBucket"]["name"]
REGION = stack_values()["region"]
GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"


def run_on(bucket, overrides=None, registrations=None, **engine):
    """The dev stack on an existing bucket, in a project holding ``bucket`` (None: no bucket at all)."""
    overrides = {**EXISTING, **(overrides or {})}
    prepared = stack_holdings(as_pulumi_values(with_overrides(stack_values(), overrides)), {})  # its reservation
    held = dataclasses.replace(prepared, buckets=(bucket,) if bucket else ())
    cloud = engine.pop("cloud", CloudProject()).holding(held)
    if registrations is not None:  # a run that collects what it registers is never cached (tests/conftest.py)
        engine["registrations"] = registrations
    return run_stack(overrides, cloud=cloud, **engine)


# (case, the bucket there, the refusal's fragment, a fragment of its fix, the recovery: overrides and bucket)
BUCKET_CASES = [
    (
        "fine-grained access under conditional grants",
        Bucket(BUCKET, REGION.upper(), uniform_access=False),
        "which Cloud Storage takes only on a bucket with uniform bucket-level access",
        f"gcloud storage buckets update gs://{BUCKET} --uniform-bucket-level-access",
        ({}, Bucket(BUCKET, REGION.upper())),
    ),
    (
        "fine-grained access, the grants made elsewhere",
        Bucket(BUCKET, REGION.upper(), uniform_access=False),
        "uniform bucket-level access",
        "or set serving.weightsBucket.grantAccess false",
        ({"serving.weightsBucket.grantAccess": False}, Bucket(BUCKET, REGION.upper(), uniform_access=False)),
    ),
    (
        "no such bucket",
        None,
        f"bucket {BUCKET!r} does not exist",
        "or let the stack make one (serving.weightsBucket.create true)",
        ({"serving.weightsBucket.create": True}, None),
    ),
    (
        "a bucket the deployer may not read",
        Bucket(BUCKET, REGION.upper(), readable=False),
        f"bucket {BUCKET!r} could not be read (",
        "grant the deployer storage.buckets.get on it (roles/storage.bucketViewer)",
        ({}, Bucket(BUCKET, REGION.upper())),
    ),
    (
        "another region",
        Bucket(BUCKET, "EUROPE-WEST4"),
        f"keeps its data in europe-west4, not in {REGION}",
        f"copy the weights to a bucket in {REGION}",
        ({}, Bucket(BUCKET, REGION.upper())),
    ),
    (
        "a configurable dual-region without the region",
        Bucket(BUCKET, "EU", data_locations=("EUROPE-WEST1", "EUROPE-WEST4")),
        f"not in {REGION}",
        f"copy the weights to a bucket in {REGION}",
        ({}, Bucket(BUCKET, "US", data_locations=(REGION.upper(), "US-EAST1"))),
    ),
]


@functools.cache  # the two fine-grained cases are refused on the same bucket: one run of the program for both
def refusal_on(bucket):
    """The preview's refusal of the dev stack on the existing ``bucket``: its message, and the types registered."""
    registrations = []
    with pytest.raises(pulumi.RunError) as raised:
        run_on(bucket, registrations=registrations)
    return str(raised.value), [r.type for r in registrations]


@pytest.mark.parametrize("case, bucket, what, fix, recovery", BUCKET_CASES, ids=[c[0] for c in BUCKET_CASES])
def test_an_existing_bucket_the_stack_cannot_use_is_refused_with_the_fix(case, bucket, what, fix, recovery):
    message, registered = refusal_on(bucket)
    assert "  - serving.weightsBucket.name: " in message and what in message and fix in message, message
    assert GRANT not in registered, "no grant is made on a bucket the preview refused"
    overrides, fixed = recovery
    recovered = run_on(fixed, overrides)
    assert bool(recovered.of_type(GRANT)) == recovered_grants(overrides)


def recovered_grants(overrides):
    return overrides.get("serving.weightsBucket.grantAccess", True)


def test_a_multi_region_bucket_is_warned_of_not_refused():
    run = run_on(Bucket(BUCKET, "US"))
    assert any(w.startswith("serving.weightsBucket.name: ") and "multi- or dual-region" in w for w in run.warnings)
    assert any(line.startswith(f"weights bucket {BUCKET}: US, uniform") for line in run.infos)


def test_the_bucket_read_waits_for_the_storage_api_and_the_grants_for_the_read():
    run = run_on(Bucket(BUCKET, REGION.upper()))
    (read,) = [i for i in run.invocations if i.token == GET_BUCKET]
    storage = next(
        r.name for r in run.of_type("gcp:projects/service:Service") if r.input("service") == "storage.googleapis.com"
    )
    assert read.waited_for == [storage]
    assert all(storage in grant.dependencies for grant in run.of_type(GRANT))
    preview = run_on(Bucket(BUCKET, REGION.upper()), cloud=CloudProject.empty())
    assert [i.answer for i in preview.invocations if i.token == GET_BUCKET] == ["unknown"]
    assert any("not read yet" in line and "Cloud Storage API" in line for line in preview.infos)
    with pytest.raises(pulumi.RunError, match="uniform bucket-level access"):
        run_on(Bucket(BUCKET, REGION.upper(), uniform_access=False), cloud=CloudProject.empty(), preview=False)


@pytest.mark.parametrize(
    "holder, refusal",
    [("someone-elses-project", "The requested bucket name is not available"), ("", "you already own it")],
    ids=["another-project", "the-stack-project"],
)
def test_a_bucket_name_held_already_is_refused_by_the_up_as_cloud_storage_refuses_it(holder, refusal):
    """Bucket names are global: the stack's create of one held already, in any project, fails in the `up` (Cloud
    Storage's 409), not in the preview, which reads no bucket the stack makes; another name is made."""
    from harness.gcp_model import AlreadyExists

    held = dataclasses.replace(
        stack_holdings(as_pulumi_values(stack_values()), {}), buckets=(Bucket(BUCKET, "US", project=holder),)
    )
    cloud = CloudProject().holding(held)
    with pytest.raises(AlreadyExists, match=f"Error 409: .*{refusal}"):
        run_stack(cloud=cloud, preview=False)
    if holder:  # once: the preview passes, and another name is made
        assert run_stack(cloud=cloud).of_type("gcp:storage/bucket:Bucket")
        assert run_stack({"serving.weightsBucket.name": f"{BUCKET}-2"}, cloud=cloud, preview=False).registrations


def test_a_bucket_the_stack_makes_is_not_read(dev_run):
    assert [i for i in dev_run.invocations if i.token == GET_BUCKET] == []


def test_a_stack_that_makes_nothing_in_google_cloud_reads_nothing():
    """The integration lab's stack (an existing cluster, an existing bucket it neither makes nor grants on) has no
    Google Cloud to read from: its preview must make no Google Cloud call, the bucket's read included."""
    from tests.test_gcp_existing_cluster import LAB

    lab = run_stack(LAB, secrets=("cluster",))
    assert [i.token for i in lab.invocations if i.token.startswith("gcp:")] == []
