"""The serving block: every bad value refused under its key before any resource, and what it accepts."""

import pytest

from components.config_base import ConfigError, ImageReference
from components.workloads.serving import config as serving_config
from harness.mock_engine import run_program
from tests.conftest import (
    as_pulumi_values,
    assert_bad_input,
    cubes,
    run_stack,
    stack_config,
    stack_values,
    with_overrides,
)

SIDECAR_MIRROR = "us-docker.pkg.dev/my-project/mirror/llm-d-router-disagg-sidecar"
PROJECT = stack_values("dev")["project"]  # the tests' dev stack's
TOKEN_SECRET = f"projects/{PROJECT}/secrets/hf-token"  # a secret of the dev stack's project
WITH_ADD_ON = {"cluster.secretManager": True}

SERVING_BAD_INPUTS = [
    pytest.param(
        {"serving.benchmarkImage": "vllm/vllm-openai:latest"},
        "serving.benchmarkImage",
        "uses the floating tag 'latest'",
        id="benchmark-image-floating",
    ),
    pytest.param(
        {"serving.benchmarkImage": "vllm/vllm-openai:v0.11.0\n"},  # a YAML block scalar's final newline
        "serving.benchmarkImage",
        "is not a tag",
        id="benchmark-image-tag-with-a-newline",
    ),
    pytest.param(
        {"serving.decode.tensorParallelSize": 8},
        "serving.decode.tensorParallelSize",
        "prefill uses tensor-parallel size 16 but decode uses 8",
        id="tp-mismatch",
    ),
    pytest.param(
        {"serving.prefill.tensorParallelSize": 32, "serving.decode.tensorParallelSize": 32},
        "serving.prefill.tensorParallelSize",
        "exceeds the 16 TensorCores",
        id="tp-beyond-slice",
    ),
    pytest.param(
        {"tpu.sliceShapes": ["2x2x1", "4x4x8"], "serving.sliceShape": "2x2x1", "checks.subslicing.shape": "2x2x1"},
        "serving.prefill.tensorParallelSize",
        "exceeds the 8 TensorCores of one 2x2x1 slice",
        id="tp-beyond-smaller-slice",
    ),
    pytest.param(
        {"serving.sliceShape": "2x2x4"}, "serving.sliceShape", "not one of tpu.sliceShapes", id="shape-not-admitted"
    ),
    pytest.param(
        {"serving.model.parametersBillions": 1300},
        "serving.model.parametersBillions",
        "more than the",
        id="weights-beyond-hbm",
    ),
    pytest.param(
        {"serving.hbmHeadroom": 0.9, "serving.model.parametersBillions": 397},  # the reference's model on a 2x2x2
        "serving.hbmHeadroom",
        "90% kept free",
        id="too-much-headroom",
    ),
    pytest.param(
        {"serving.model.parametersBillions": 1300, "serving.hbmHeadroom": 0.5},
        "serving.model.parametersBillions",
        "50% kept free",
        id="weights-beyond-hbm-even-at-the-default-headroom",
    ),
    pytest.param(
        {"serving.hbmHeadroom": 1.0}, "serving.hbmHeadroom", "1.0 is not 0 or more and below 1", id="headroom-all"
    ),
    pytest.param(
        {"serving.hbmHeadroom": -0.1},
        "serving.hbmHeadroom",
        "-0.1 is not 0 or more and below 1",
        id="headroom-negative",
    ),
    pytest.param(
        # the default revision, which is the default model's snapshot, with another model
        {"serving.model.id": "Qwen/Qwen3-235B-A22B-FP8", "serving.model.revision": serving_config.MODEL_REVISION},
        "serving.model.revision",
        f"is the snapshot of {serving_config.MODEL_ID}, not of Qwen/Qwen3-235B-A22B-FP8",
        id="other-model-default-revision",
    ),
    pytest.param(
        {"serving.prefill.tensorParallelSize": 6, "serving.decode.tensorParallelSize": 6},
        "serving.prefill.tensorParallelSize",
        "does not divide the 16 TensorCores of one 2x2x2 slice",
        id="tp-not-a-divisor",
    ),
    pytest.param(
        {"serving.decode.tensorParallelSize": 0},
        "serving.decode.tensorParallelSize",
        "0 is not 1 or more",
        id="tp-zero",
    ),
    pytest.param(
        {"serving.model.weightsDtype": "fp4x"},
        "serving.model.weightsDtype",
        "not a known dtype (use one of fp32, bf16, fp16, fp8, int8, int4)",
        id="unknown-dtype",
    ),
    pytest.param(
        {"serving.model.weightsDtype": "float16"},
        "serving.model.weightsDtype",
        "'float16' is not a known dtype",
        id="long-dtype-name",
    ),
    pytest.param(
        cubes(2) | {"serving.prefill.replicas": 9, "serving.decode.replicas": 9},
        "serving.decode.replicas",
        "need 3 cube(s)",
        id="serving-beyond-capacity",
    ),
    pytest.param({"serving.prefill.replicas": 0}, "serving.prefill.replicas", "0 is not 1 or more", id="no-prefill"),
    pytest.param(
        {"serving.prefill.name": "kueue-vllm-prefill-model-streamer"},
        "serving.prefill.name",
        "the budget is 49",
        id="lws-name-over-slice-budget",
    ),
    pytest.param(
        {"serving.decode.name": "vLLM_decode"}, "serving.decode.name", "is not a Kubernetes name", id="lws-name-bad"
    ),
    pytest.param(
        {"serving.decode.name": "2-decode"},
        "serving.decode.name",
        "the JobSet and LeaderWorkerSet webhooks take only names that start with a letter",
        id="lws-name-starting-with-a-digit",
    ),
    pytest.param(
        {"serving.decode.name": "vllm-prefill"}, "serving.decode.name", "also the prefill name", id="same-lws-names"
    ),
    pytest.param(
        {"serving.namespace": "serving"}, "serving.namespace", "has no LocalQueue", id="namespace-without-queue"
    ),
    pytest.param(
        {"serving.image": "docker.io/vllm/vllm-tpu:nightly"}, "serving.image", "floating tag", id="floating-image"
    ),
    # Docker's grammar: a repository name is lowercase (the kubelet refuses the pod: InvalidImageName)
    pytest.param(
        {"serving.image": "docker.io/vLLM/vllm-tpu:nightly-20260430-18ed615-5b39b26"},
        "serving.image",
        "is not an image name",
        id="image-name-uppercase",
    ),
    pytest.param(
        {"serving.routingSidecarImage": "ghcr.io/llm-d/llm-d-router-disagg-sidecar"},
        "serving.routingSidecarImage",
        "has no tag",
        id="untagged-sidecar",
    ),
    pytest.param(
        {"serving.routingSidecarImage": "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"},
        "serving.routingSidecarImage",
        "is release v0.9.0, but serving.router.version is v0.10.0",
        id="sidecar-of-another-release",
    ),
    pytest.param(
        {"serving.router.version": "v0.11.0", "serving.routingSidecarImage": SIDECAR_MIRROR + ":v0.10.0"},
        "serving.routingSidecarImage",
        "is release v0.10.0, but serving.router.version is v0.11.0",
        id="router-moved-without-its-sidecar",
    ),
    pytest.param(
        {"serving.routingSidecarImage": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"},
        "serving.routingSidecarImage",
        "is not llm-d-router's llm-d-router-disagg-sidecar",
        id="the-old-routing-sidecar",
    ),
    pytest.param(
        {"serving.routingSidecarImage": f"{SIDECAR_MIRROR}@sha256:{'a' * 64}"},
        "serving.routingSidecarImage",
        "pins a digest without a tag",
        id="sidecar-digest-without-release",
    ),
    pytest.param(
        {"serving.router.version": "v0.9.0"},
        "serving.router.version",
        "older than v0.10.0, the first release whose P/D sidecar takes --model-server-port",
        id="router-before-the-sidecar-flags",
    ),
    pytest.param({"serving.resources": {"cpu": "300"}}, "serving.resources.cpu", "exceeds", id="cpu-beyond-host"),
    pytest.param(
        {"serving.resources": {"memory": "lots"}},
        "serving.resources.memory",
        "not a Kubernetes quantity",
        id="bad-memory",
    ),
    pytest.param(
        {"serving.startupFailureThreshold": 60},
        "serving.startupFailureThreshold",
        "at least 120",
        id="startup-too-short",
    ),
    pytest.param(
        {"serving.router.version": "v0"}, "serving.router.version", "not an exact version", id="floating-router"
    ),
    pytest.param(
        {"serving.router.chart": "ghcr.io/llm-d/charts/x"},
        "serving.router.chart",
        "not an oci://",
        id="router-chart-without-scheme",
    ),
    pytest.param({"serving.gateway.port": 0}, "serving.gateway.port", "0 is outside 1-65535", id="bad-gateway-port"),
    # A class no GKE controller claims is never Programmed; a global one's proxies are not in the proxy-only subnet the
    # NetworkPolicies admit; a multi-cluster one does not route to the router's InferencePool (config.py GatewayClass).
    pytest.param(
        {"serving.gateway.className": "gke-l7-ilb"},
        "serving.gateway.className",
        "'gke-l7-ilb' is not a GatewayClass of GKE's regional Application Load Balancers",
        id="gateway-class-gke-does-not-have",
    ),
    pytest.param(
        {"serving.gateway.className": "gke-l7-global-external-managed"},
        "serving.gateway.className",
        "is not a GatewayClass of GKE's regional Application Load Balancers",
        id="gateway-class-global",
    ),
    pytest.param(
        {"serving.gateway.className": "gke-l7-rilb-mc"},
        "serving.gateway.className",
        "use one of gke-l7-rilb, gke-l7-regional-external-managed",
        id="gateway-class-multi-cluster",
    ),
    pytest.param(
        {"serving.weightsBucket.name": "Bad_Bucket!"},
        "serving.weightsBucket.name",
        "not a Cloud Storage bucket name",
        id="bad-bucket",
    ),
    pytest.param(
        {"serving.weightsBucket.name": "my-weights\n"},  # a YAML block scalar's final newline
        "serving.weightsBucket.name",
        "not a Cloud Storage bucket name",
        id="bucket-with-a-newline",
    ),
    pytest.param(
        {"serving.model.revision": "main"},
        "serving.model.revision",
        "'main' is not a commit: a branch or tag moves",
        id="staged-branch-revision",
    ),
    pytest.param(
        {"serving.weightsStaging.image": "python"},
        "serving.weightsStaging.image",
        "has no tag",
        id="staging-image-untagged",
    ),
    pytest.param(
        {"serving.weightsStaging.timeoutMinutes": 5},
        "serving.weightsStaging.timeoutMinutes",
        "5 is outside 10-1440",
        id="staging-timeout-too-short",
    ),
    pytest.param({"serving.priority": "top"}, "serving.priority", "not a priority level", id="bad-priority"),
    pytest.param({"serving.prefil": {}}, "serving.prefil", "did you mean 'prefill'", id="misspelled-key"),
    # a model of no parameters is not a model too large: the setting's own bound says so, with its own fix
    pytest.param(
        {"serving.model.parametersBillions": 0},
        "serving.model.parametersBillions",
        "set a number above 0",
        id="model-of-no-parameters",
    ),
    pytest.param(
        {"serving.weightsStaging.serviceAccountName": "model-server"},
        "serving.weightsStaging.serviceAccountName",
        "every model server could then overwrite or delete the weights",
        id="staging-shares-the-model-servers-account",
    ),
    pytest.param(
        {"serving.weightsStaging.serviceAccountName": "Weights_Staging"},
        "serving.weightsStaging.serviceAccountName",
        "not a Kubernetes name",
        id="bad-staging-account",
    ),
    # Kubernetes makes `default` in every namespace: the stack's own ServiceAccount of that name is refused at create
    pytest.param(
        {"serving.serviceAccountName": "default"},
        "serving.serviceAccountName",
        "refused as already existing",
        id="model-servers-as-the-namespace-default-account",
    ),
    pytest.param(
        {"serving.weightsStaging.serviceAccountName": "default"},
        "serving.weightsStaging.serviceAccountName",
        "Kubernetes makes in every namespace",
        id="staging-as-the-namespace-default-account",
    ),
    pytest.param(
        {"serving.model.weightsPath": "xla_cache/qwen"},
        "serving.model.weightsPath",
        "overlap",
        id="weights-inside-the-xla-cache",
    ),
    pytest.param(
        {"serving.model.weightsPath": "qwen\n"},  # a YAML block scalar's final newline
        "serving.model.weightsPath",
        "is not gs://<bucket>/<path>",
        id="weights-path-with-a-newline",
    ),
    pytest.param(
        {
            "serving.model.id": "Qwen/Qwen3-8B\n",
            "serving.model.revision": "a" * 40,
            "serving.model.weightsPath": "qwen",
        },
        "serving.model.id",
        "is not a valid label value",
        id="model-id-with-a-newline",
    ),
    pytest.param({"serving.router.replicas": 0}, "serving.router.replicas", "0 is not 1 or more", id="no-epp"),
    pytest.param(
        {"serving.router.eppImage": f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0@sha256:{'a' * 64}"},
        "serving.router.eppImage",
        "is tagged v0.9.0, but llm-d router v0.10.0 runs v0.10.0",
        id="epp-of-another-release",
    ),
    pytest.param(
        {"serving.router.eppImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"},
        "serving.router.eppImage",
        "has no digest",
        id="epp-override-without-digest",
    ),
    pytest.param(
        {"serving.router.eppImage": f"ghcr.io/llm-d/llm-d-inference-scheduler:v0.10.0@sha256:{'a' * 64}"},
        "serving.router.eppImage",
        "is not llm-d-router-endpoint-picker",
        id="epp-of-another-name",
    ),
]


# The Hugging Face token in Secret Manager (serving.hfTokenSecretVersion): one route for the token, a version of a
# secret of the stack's project, and the add-on that mounts it.
SERVING_BAD_INPUTS += [
    pytest.param(
        {**WITH_ADD_ON, "serving.hfToken": "hf_abcdef", "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/1"},
        "serving.hfToken",
        "and so is serving.hfTokenSecretVersion: the pods would get the token twice",
        id="token-by-both-routes",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": TOKEN_SECRET},
        "serving.hfTokenSecretVersion",
        f"'{TOKEN_SECRET}' is not a Secret Manager secret version",
        id="secret-without-version",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/0"},
        "serving.hfTokenSecretVersion",
        "is not a Secret Manager secret version",
        id="version-zero",
    ),
    pytest.param(
        # no alias starts with a hyphen, nor is longer than 63 characters (Secret.version_aliases)
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/-current"},
        "serving.hfTokenSecretVersion",
        "is not a Secret Manager secret version",
        id="alias-with-a-leading-hyphen",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/a{'b' * 63}"},
        "serving.hfTokenSecretVersion",
        "is not a Secret Manager secret version",
        id="alias-of-64-characters",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": "hf-token/versions/latest"},
        "serving.hfTokenSecretVersion",
        f"write projects/{PROJECT}/secrets/<secret>/versions/<number>",
        id="secret-without-project",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": f"projects/{PROJECT}/secrets/hf token/versions/1"},
        "serving.hfTokenSecretVersion",
        "is not a Secret Manager secret version",
        id="secret-id-with-a-space",
    ),
    pytest.param(
        # a secret version the add-on mounts, but of a regional secret, which the stack's grant cannot name
        {
            **WITH_ADD_ON,
            "serving.hfTokenSecretVersion": f"projects/{PROJECT}/locations/us-central1/secrets/hf-token/versions/1",
        },
        "serving.hfTokenSecretVersion",
        "names a version of a regional secret (in us-central1)",
        id="regional-secret",
    ),
    pytest.param(
        {**WITH_ADD_ON, "serving.hfTokenSecretVersion": "projects/secrets-team/secrets/hf-token/versions/2"},
        "serving.hfTokenSecretVersion",
        f"names a secret of project 'secrets-team', not of the stack's project '{PROJECT}'",
        id="secret-of-another-project",
    ),
    pytest.param(
        {"serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/latest"},
        "serving.hfTokenSecretVersion",
        "needs GKE's Secret Manager add-on, which mounts the secret into the pods, and cluster.secretManager is false",
        id="token-file-without-the-add-on",
    ),
    # A setting's own range is declared on its field, so it holds wherever the setting is written, as its type always
    # did: in a block that is off too.
    pytest.param(
        {"serving.enabled": False, "serving.router.replicas": 0},
        "serving.router.replicas",
        "0 is not 1 or more",
        id="range-where-serving-is-off",
    ),
]


# The llm-d router's and the Inference Extension's releases are tagged vX.Y.Z: the chart, images and CRDs by that tag.
SERVING_BAD_INPUTS += [
    pytest.param(
        {"serving.router.version": "0.10.0"},
        "serving.router.version",
        "0.10.0 has no leading v, but the release is tagged v0.10.0",
        id="router-version-without-v",
    ),
    pytest.param(
        {"serving.inferencePoolCrds": {"install": True, "version": "1.5.0"}},
        "serving.inferencePoolCrds.version",
        "write v1.5.0",
        id="inference-pool-crds-version-without-v",
    ),
]


# What vLLM's scheduler refuses at start (vllm-project/vllm vllm/config/scheduler.py): each field 1 or more, and a
# step's token budget no smaller than the sequences in it.
SERVING_BAD_INPUTS += [
    pytest.param({"serving.maxNumSeqs": 0}, "serving.maxNumSeqs", "0 is not 1 or more", id="max-num-seqs-zero"),
    pytest.param(
        {"serving.maxNumBatchedTokens": -1},
        "serving.maxNumBatchedTokens",
        "-1 is not 1 or more",
        id="max-num-batched-tokens-negative",
    ),
    pytest.param(
        {"serving.maxNumBatchedTokens": 256},  # below the default maxNumSeqs, 512
        "serving.maxNumBatchedTokens",
        "256 is below serving.maxNumSeqs (512): vLLM refuses",
        id="batched-tokens-below-max-num-seqs",
    ),
    # A context of no token takes no prompt, vLLM's -1 (fit to memory) no number `make bench` could size within.
    pytest.param({"serving.maxModelLen": 0}, "serving.maxModelLen", "0 is not 1 or more", id="max-model-len-zero"),
    pytest.param({"serving.maxModelLen": -1}, "serving.maxModelLen", "-1 is not 1 or more", id="max-model-len-auto"),
    # vLLM offers fp8_inc (Intel Gaudi's), which the TPU backend cannot make a dtype of; int4 vLLM does not offer.
    pytest.param(
        {"serving.kvCacheDtype": "fp8_inc"},
        "serving.kvCacheDtype",
        "'fp8_inc' is not a KV cache dtype vLLM's TPU backend stores",
        id="kv-cache-dtype-not-on-tpu",
    ),
    pytest.param(
        {"serving.kvCacheDtype": "int4"},
        "serving.kvCacheDtype",
        "use one of auto, bfloat16",
        id="kv-cache-dtype-unknown",
    ),
]


# What the tests below accept, each under its own keys, in one run of the program (each config is also checked alone):
# one of the KV cache dtypes, a token budget of maxNumSeqs, the releases written with their v, a weights path beside
# the cache, the external regional Gateway class (the internal one, the default, is the dev stack's own), a token file
# by an alias of its secret, and distinct names of the serving accounts.
ACCEPTED = {
    "serving.kvCacheDtype": "auto",
    "serving.maxModelLen": 1,
    "serving.maxNumBatchedTokens": 256,
    "serving.maxNumSeqs": 256,
    "serving.router.version": "v0.10.0",
    "serving.inferencePoolCrds": {"install": True, "version": "v1.5.0"},
    "serving.model.weightsPath": "xla_cache_weights/qwen",
    "serving.gateway.className": "gke-l7-regional-external-managed",
    **WITH_ADD_ON,
    "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/current",
    "serving.serviceAccountName": "servers",
    "serving.weightsStaging.serviceAccountName": "stager",
}


# With staging off the weights are put in the bucket elsewhere: a branch revision is accepted, and the staging
# account's name names nothing (even the benchmark's). One run for both tests below.
FILLED_ELSEWHERE = {
    "serving.weightsStaging.enabled": False,
    "serving.model.revision": "main",
    "serving.weightsStaging.serviceAccountName": serving_config.BENCHMARK_SERVICE_ACCOUNT,
}


def accepted(override, accepting=ACCEPTED):
    """The program's run that holds ``override``: the config takes it alone, and the run of ``accepting``, which holds
    it as written (run_stack keeps it: one run for the tests that read it)."""
    stack_config("dev", override)
    assert {key: accepting[key] for key in override} == override
    return run_stack(accepting)


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "bfloat16", "fp8_e5m2"])
def test_a_kv_cache_dtype_the_tpu_backend_stores_is_accepted(kv_cache_dtype):
    override = {"serving.kvCacheDtype": kv_cache_dtype, "serving.maxModelLen": 1}
    stack_config("dev", override)  # the config takes each: KvCacheDtype is the one check of the value
    # and the program runs with one of them, ACCEPTED's (objects.py hands vLLM the value as it is)
    assert accepted(override | {"serving.kvCacheDtype": ACCEPTED["serving.kvCacheDtype"]}).registrations


def test_a_token_budget_of_at_least_max_num_seqs_is_accepted():
    assert accepted({"serving.maxNumBatchedTokens": 256, "serving.maxNumSeqs": 256}).registrations


@pytest.mark.parametrize("gateway_class", ["gke-l7-rilb", "gke-l7-regional-external-managed"])
def test_each_regional_gateway_class_passes_the_preview(gateway_class, dev_run):
    """Whether the external one may face the internet is the policy pack's question (allowPublicEndpoints)."""
    override = {"serving.gateway.className": gateway_class}
    # the dev stack's own class (the default) is the dev run (run_stack caches a run by the config as written)
    run = dev_run if stack_config("dev", override) == stack_config("dev") else accepted(override)
    (gateway,) = [r for r in run.registrations if r.type.endswith(":Gateway")]
    assert gateway.inputs["spec"]["gatewayClassName"] == gateway_class


def test_the_releases_written_with_their_v_are_accepted():
    run = accepted(
        {"serving.router.version": "v0.10.0", "serving.inferencePoolCrds": {"install": True, "version": "v1.5.0"}}
    )
    assert run.registrations


@pytest.mark.parametrize("override, key, fragment", SERVING_BAD_INPUTS)
def test_bad_serving_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_serving_on_v5e_is_refused():
    with pytest.raises(ConfigError) as raised:
        run_stack({"serving.enabled": True}, stack="saxml")
    assert any(p.key == "serving.enabled" for p in raised.value.problems)


def test_a_bad_token_is_never_echoed():
    raw = with_overrides(stack_values(), {"serving.hfToken": {"not": "a string hf_SECRETVALUE"}})
    with pytest.raises(ConfigError) as raised:
        run_program(as_pulumi_values(raw))
    assert "hf_SECRETVALUE" not in str(raised.value)
    assert any(p.key == "serving.hfToken" for p in raised.value.problems)


def test_a_branch_revision_is_accepted_when_the_bucket_is_filled_elsewhere():
    run = accepted({"serving.model.revision": "main", "serving.weightsStaging.enabled": False}, FILLED_ELSEWHERE)
    assert not [r for r in run.registrations if r.name in ("stage-model-weights", "weights-staging-script")]


def test_a_weights_path_beside_the_cache_is_accepted():
    assert accepted({"serving.model.weightsPath": "xla_cache_weights/qwen"}).registrations


# An alias of the secret's (Secret.version_aliases) is a version AccessSecretVersion, the add-on's read, takes.
@pytest.mark.parametrize("version", ["1", "42", "latest", "current", "Prod_token-2"])
def test_a_secret_version_by_number_latest_or_alias_is_accepted(version):
    named = {**WITH_ADD_ON, "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/{version}"}
    stack_config("dev", named)  # the config takes it
    if version == "current":  # and the add-on is handed it as written (one run of the stack: the suite's minute)
        (provider_class,) = [r for r in accepted(named).registrations if r.type.endswith(":SecretProviderClass")]
        assert f"{TOKEN_SECRET}/versions/{version}" in provider_class.input("spec.parameters.secrets")


def test_on_a_cluster_made_elsewhere_the_add_on_is_its_owner_s():
    """cluster.secretManager is about a cluster of this stack: on another one the add-on is not the stack's to turn
    on, so the token file is accepted without it (docs/deploying.md says what the owner must have on)."""
    existing = {"cluster.existing": {"name": "team-cluster", "location": "us-central1"}}
    run = run_stack({**existing, "serving.hfTokenSecretVersion": f"{TOKEN_SECRET}/versions/1"})
    assert [r.name for r in run.registrations if r.type.endswith(":SecretProviderClass")] == ["hf-token"]


def test_the_router_release_s_images_are_written_once_at_the_router_s_version():
    """ROUTER_RELEASE_IMAGES holds the endpoint picker and the P/D sidecar at ROUTER_VERSION, once each: a router moved
    without them would run the new tags (by design), but the default stack would lose the digests Renovate pins."""
    written = [ImageReference.parse(i) for i in serving_config.ROUTER_RELEASE_IMAGES]
    assert [w.name for w in written] == [
        serving_config.ENDPOINT_PICKER_REPOSITORY,
        serving_config.ROUTING_SIDECAR_REPOSITORY,
    ]
    assert {w.tag for w in written} == {serving_config.ROUTER_VERSION}
    defaults = serving_config.ServingConfig()
    assert serving_config.endpoint_picker_image(defaults) == serving_config.ROUTER_RELEASE_IMAGES[0]
    assert serving_config.routing_sidecar_image(defaults) == serving_config.ROUTER_RELEASE_IMAGES[1]


def test_a_router_of_another_release_runs_that_release_s_tags():
    assert serving_config.router_release_image(serving_config.ENDPOINT_PICKER_REPOSITORY, "v0.11.0") == (
        "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.11.0"
    )


BENCHMARK = serving_config.BENCHMARK_SERVICE_ACCOUNT
SERVERS_KEY, STAGING_KEY = "serving.serviceAccountName", "serving.weightsStaging.serviceAccountName"
IS_THE_BENCHMARK_S = "is the account the stack makes for `make bench`'s Job"


@pytest.mark.parametrize(
    "override, key, fragment",
    [
        pytest.param({SERVERS_KEY: BENCHMARK}, SERVERS_KEY, IS_THE_BENCHMARK_S, id="servers-as-the-benchmark"),
        pytest.param({STAGING_KEY: BENCHMARK}, STAGING_KEY, IS_THE_BENCHMARK_S, id="staging-as-the-benchmark"),
        pytest.param(
            {SERVERS_KEY: "servers", STAGING_KEY: "servers"}, STAGING_KEY, "is also " + SERVERS_KEY, id="one-name"
        ),
        # with staging off the stack makes no staging account: its name names nothing
        pytest.param({STAGING_KEY: BENCHMARK, "serving.weightsStaging.enabled": False}, None, "", id="staging-off"),
        pytest.param({SERVERS_KEY: "servers", STAGING_KEY: "stager"}, None, "", id="distinct-names"),
    ],
)
def test_each_serving_account_name_is_refused_where_another_account_of_the_namespace_has_it(override, key, fragment):
    """The benchmark's account has a fixed name in the namespace (BENCHMARK_SERVICE_ACCOUNT): a serving account named
    so would be one ServiceAccount applied by two resources (deleting either deletes it), and one principal holding
    the benchmark's grants and its own, a role both grant being one IAM binding that either's deletion revokes. A
    name the keys give that is another account's is refused under its key; distinct names pass, each one object."""
    if key is not None:
        assert_bad_input(override, key, fragment)
        return
    # distinct names are ACCEPTED's, staging off FILLED_ELSEWHERE's (the runs of the accepted settings of this file)
    holding = [accepting for accepting in (ACCEPTED, FILLED_ELSEWHERE) if accepting.items() >= override.items()]
    run = accepted(override, holding[0]) if holding else run_stack(override)
    namespace = stack_values()["serving"].get("namespace", serving_config.ServingConfig().namespace)
    accounts = [
        r.input("metadata.name")
        for r in run.of_type("kubernetes:core/v1:ServiceAccount")
        if r.input("metadata.namespace") == namespace
    ]
    assert BENCHMARK in accounts and len(accounts) == len(set(accounts)), accounts
