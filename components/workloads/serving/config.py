"""The `serving` block of the stack config: P/D-disaggregated vLLM behind the llm-d router, its
preview rules (each reported under the config key that fixes it) and the values derived from it."""

from __future__ import annotations

import re
from functools import partial
from typing import Literal

from pydantic import Field

from components.config_base import (
    SECRET_SETTING,
    SECRET_VERSION,
    Block,
    ExactVersion,
    ImageReference,
    K8sName,
    Problems,
    ServiceAccountName,
    kind,
    written_release_image,
)
from components.gcp.config import ClusterConfig, TpuConfig
from components.platform.config import (
    WORKLOAD_NAMESPACE,
    PriorityLevel,
    QueuesConfig,
    validate_chart_reference,
    validate_release_image,
)
from components.tpu import admission, sizing, topology
from components.workloads import rules as workload_rules
from components.workloads.serving import rules

PREFILL = "prefill"
DECODE = "decode"
ROLES = (PREFILL, DECODE)

MODEL_ID = "Qwen/Qwen3.5-397B-A17B-FP8"
MODEL_REVISION = "ea5b4f81096f3901c91dea97f81324302495781d"
MODEL_PARAMETERS_BILLIONS = 397.0  # "397B" total parameters (17B active per token), per the model id
MODEL_WEIGHTS_DTYPE = "fp8"  # "-FP8" checkpoint; ~406 GB on disk (a few tensors stay bf16)

# vLLM for TPU: the image the reference deployment ran, a dated nightly (2026-04-30, tpu-inference 18ed615 on vLLM
# 5b39b26: tpu-inference's .buildkite/scripts/publish_nightly_image.sh tags nightly-<date>-<tpu-inference sha>-<vLLM
# sha>), not the floating `nightly`/`latest`; pin its digest once pulled. llm-d's TPU7x recipes pin
# vllm/vllm-tpu:v0.26.0 instead (v0.27.0-v0.29.0 break TPUConnectorHMA at startup; llm-d
# guides/pd-disaggregation/README.md, tpu-inference#3566). Not the 0.32.0 release (2026-10-22, on PyPI) because
# nothing names a docker.io/vllm/vllm-tpu image of it: tpu-inference's tag workflow publishes to PyPI only
# (.github/workflows/release.yml), its one image pipeline pushes only `nightly` and `nightly-<date>-<sha>-<sha>`
# (.buildkite/nightly_releases.yml), no doc or recipe seen names a v0.32.0 tag, and Docker Hub cannot be asked from
# here. The P/D settings hold at 0.32.0 (read in the PyPI wheels): TPUConnectorHMA in
# tpu_inference.distributed.tpu_connector_hma (accepted by platforms/tpu_platform.py; its __init__ now runs vLLM's base
# init, which sets the _kv_transfer_config that v0.27.0's lacked), kv_producer/kv_consumer, TPU_KV_TRANSFER_PORT and
# TPU_SIDE_CHANNEL_PORT (distributed/utils.py), TPU_MULTIHOST_BACKEND=ray (envs.py); its vLLM refuses a kv_ip, which
# the kv-transfer-config no longer sets. Moving is this one line once an image tag of the release is confirmed.
VLLM_IMAGE = "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"
# The llm-d router: one release, one version. Its chart (serving.router), its endpoint picker image and the decode
# pods' P/D sidecar all come from llm-d/llm-d-router at that tag: the release workflow pushes the sidecar as
# ghcr.io/llm-d/<repo>-disagg-sidecar:<tag> (llm-d-router v0.10.0 .github/workflows/ci-release.yaml,
# ci-build-images.yaml; Makefile SIDECAR_IMAGE_NAME llm-d-router-disagg-sidecar, IMAGE_REGISTRY ghcr.io/llm-d), so
# the sidecar's tag is the router's version, never a second setting.
ROUTER_VERSION = "v0.10.0"
# The release's two images, written in full so that Renovate pins each by digest and moves it with the router
# (renovate.json: the pin rule of components/**.py, the llm-d router group); a stack at that release runs them as
# written here, by their digest once they have one. The endpoint picker the chart runs: router.epp.image {registry,
# repository, tag} (llm-d-router v0.10.0 config/charts/routerlib/values.yaml: ghcr.io/llm-d,
# llm-d-router-endpoint-picker, and the floating tag main, which router-values.yaml replaces by the release), read as
# `<registry>/<repository>:<tag>` (templates/_deployment.yaml). Then the P/D sidecar.
ROUTER_RELEASE_IMAGES = (
    "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
    "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
)
ENDPOINT_PICKER_REPOSITORY, ROUTING_SIDECAR_REPOSITORY = (ImageReference.parse(i).name for i in ROUTER_RELEASE_IMAGES)
# The weights-staging Job pip-installs its hash-pinned libraries (wheels only) into the official python
# image at a patch release, then runs the program on them. By digest: the multi-platform index Docker Hub served
# for this tag, as docker-library/repo-info records it (commit bc9bbb47fc709dc4b29d3b128d66823b953b97a7,
# repos/python/remote/3.12.14-slim-bookworm.md; built 2026-08-25 on Debian bookworm of 2026-08-24).
STAGING_IMAGE = "docker.io/library/python:3.12.14-slim-bookworm@sha256:b64e9d3a71eddaa1b3f80c04abf292b3139e3b7c4dd272d19c31dc1f91194d1b"
# The benchmark `make bench` runs: the image inference-perf's release workflow publishes for each tag
# (kubernetes-sigs/inference-perf .github/workflows/publish-on-release.yml: quay.io/inference-perf/inference-perf:<tag>).
# Its copy in manifests/operations/benchmark/job.yaml is the base the overlay replaces.
BENCHMARK_IMAGE = "quay.io/inference-perf/inference-perf:v0.7.0"
STAGING_TIMEOUT_MINUTES = 360  # ~400 GB at a few hundred MB/s, with room for retries
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
# Where in the weights bucket vLLM keeps its XLA compilation cache (VLLM_XLA_CACHE_PATH, the codelab's
# gs://<bucket>/xla_cache): tpu-inference hands it to JAX as jax_compilation_cache_dir (vllm-project/tpu-inference
# v0.27.0 tpu_inference/runner/compilation_manager.py), and JAX writes compiled programs there. The model servers' one
# write grant: JAX treats the cache as trusted code ("a directory to which others may write" lets them run code;
# docs.jax.dev persistent_compilation_cache), so nothing else may write it, and they may write nothing else.
XLA_CACHE_DIR = "xla_cache"
# Where `make bench` (components/operations/benchmark.py) writes its reports in the weights bucket, as its own
# Kubernetes service account: the benchmark reads the snapshot's tokenizer and writes under this prefix only,
# so neither the model servers nor the staging Job are widened for it.
RESULTS_DIR = "results"
BENCHMARK_SERVICE_ACCOUNT = "serving-benchmark"


class ServingModelConfig(Block):
    id: str = Field(
        MODEL_ID, description="Hugging Face model id (also the served model name unless servedName is set)."
    )
    served_name: str = Field("", description="Model name clients send; empty means the model id.")
    revision: str = Field(
        MODEL_REVISION, description="Snapshot (commit) of the model in the bucket's Hugging Face cache layout."
    )
    weights_path: str = Field(
        "",
        description="Object path of the snapshot in the bucket; empty means models--<org>--<name>/snapshots/<revision>.",
    )
    parameters_billions: float = Field(
        MODEL_PARAMETERS_BILLIONS, description="Total parameters in billions (the HBM rule).", gt=0
    )
    weights_dtype: str = Field(MODEL_WEIGHTS_DTYPE, description=f"Storage type of the weights: {sizing.DTYPES_TEXT}.")

    @property
    def label(self) -> str:
        """Value of ``llm-d.ai/model``: the model id without its organisation."""
        return self.id.rsplit("/", 1)[-1]


class WeightsBucketConfig(Block):
    name: str = Field("", description="Bucket of the weights and the XLA cache; empty means `<project>-llm-weights`.")
    create: bool = Field(
        True,
        description="Create the bucket (false: use an existing one, which must hold the weights, be in `region` (or a dual-region "
        "that lists it) and, with grantAccess, have uniform bucket-level access, which the grants' IAM conditions "
        "need: the preview reads the bucket and refuses it otherwise).",
    )
    keep_on_destroy: bool = Field(
        True,
        description="`pulumi destroy` (or serving.enabled false) leaves a created bucket and the weights in the project; "
        "false deletes the bucket with everything in it.",
    )
    grant_access: bool = Field(
        True,
        description="Grant, by Workload Identity, the model servers' Kubernetes service account read on the bucket and write "
        f"on its {XLA_CACHE_DIR}/ prefix only, and the staging Job's read on the bucket and write on the "
        "snapshot's directory only; false when the grants are made elsewhere or the cluster has no Workload Identity.",
    )


class WeightsStagingConfig(Block):
    enabled: bool = Field(
        True,
        description="Before the model servers start, a Job copies serving.model.revision of the model from Hugging Face into "
        "the bucket (skipping files already complete); false when the bucket is filled elsewhere.",
    )
    image: str = Field(
        STAGING_IMAGE,
        description="Python image (CPython 3.11 or later, glibc) that installs the hash-pinned libraries and runs the staging program "
        "(dated tag or digest).",
    )
    timeout_minutes: int = Field(
        STAGING_TIMEOUT_MINUTES,
        description="How long the Job may run and `pulumi up` waits for it before failing.",
        ge=10,
        le=1440,
    )
    service_account_name: ServiceAccountName = Field(
        "weights-staging",
        description="Kubernetes service account of the Job: the one identity that writes the weights (the snapshot's directory "
        "only); not serving.serviceAccountName.",
    )


class ServingRoleConfig(Block):
    name: K8sName = Field(description="LeaderWorkerSet name (counts against the 49-character slice-name budget).")
    replicas: int = Field(4, description="Model-server groups of this role, one slice each.", ge=1)
    tensor_parallel_size: int = Field(
        16, description="vLLM --tensor-parallel-size; prefill and decode must match.", ge=1
    )


class ServingResourcesConfig(Block):
    cpu: str = Field("220", description="CPU request (= limit) of each TPU pod.")
    memory: str = Field("850Gi", description="Memory request (= limit) of each TPU pod.")


# The GatewayClasses the front door can run on (any other is refused at preview): GKE's regional Application Load
# Balancers, internal (gke-l7-rilb, the default) or external (gke-l7-regional-external-managed, the Inference
# Extension's own GKE example: kubernetes-sigs/gateway-api-inference-extension v1.5.0
# config/manifests/gateway/gke/gateway.yaml; the policy pack refuses it unless allowPublicEndpoints). Both are
# Envoy-based and reach their backends, the model servers and the endpoint picker's ext_proc callout, from the region's
# proxy-only subnet (cloud.google.com/load-balancing/docs/firewall-rules;
# cloud.google.com/kubernetes-engine/docs/how-to/configure-gateway-resources: the regional GatewayClasses need one),
# which is where the serving NetworkPolicies admit them from (network.proxyOnlyCidr,
# manifests/serving/network-policies.yaml). Any other class breaks the front door:
# - a name GKE does not install (cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities lists its
#   classes) is claimed by no controller: the Gateway is never Programmed, and `pulumi up` waits out its timeout
#   (gateway.yaml) and fails;
# - the global classes (gke-l7-global-external-managed, gke-l7-gxlb) send from 35.191.0.0/16 and 130.211.0.0/22 (the
#   same firewall-rules page), which the endpoint picker's policy admits on its health port only: every ext_proc call
#   to the picker is dropped;
# - the multi-cluster -mc classes route to a fleet's ServiceImports, and to an InferencePool only through its
#   GCPInferencePoolImport (cloud.google.com/kubernetes-engine/docs/concepts/about-multi-cluster-inference-gateway),
#   never through the router's HTTPRoute to the pool.
GatewayClass = Literal["gke-l7-rilb", "gke-l7-regional-external-managed"]
# What each class's load balancer reports its requests as, which the Gateway's 5xx alert reads: the metric and its
# monitored resource (Cloud Monitoring's "Google Cloud metrics" list, loadbalancing.googleapis.com: https/internal/ on
# internal_http_lb_rule, https/external/regional/ on http_external_regional_lb_rule, each with response_code_class and
# the resource's url_map_name).
GATEWAY_REQUESTS: dict[GatewayClass, tuple[str, str]] = {
    "gke-l7-rilb": ("loadbalancing.googleapis.com/https/internal/request_count", "internal_http_lb_rule"),
    "gke-l7-regional-external-managed": (
        "loadbalancing.googleapis.com/https/external/regional/request_count",
        "http_external_regional_lb_rule",
    ),
}


class GatewayConfig(Block):
    name: K8sName = Field("llm-d-inference-gateway", description="Gateway name.")
    class_name: GatewayClass = Field(
        "gke-l7-rilb",
        json_schema_extra=kind("GatewayClass of GKE's regional Application Load Balancers"),
        description="GatewayClass: gke-l7-rilb, GKE's regional internal Application Load Balancer, or "
        "gke-l7-regional-external-managed, its external twin (which the policy pack refuses unless allowPublicEndpoints).",
    )
    port: int = Field(80, description="HTTP listener port.", ge=1, le=65535)


class RouterConfig(Block):
    install: bool = Field(
        True, description="Install the llm-d router (false: it is installed elsewhere, or not at all)."
    )
    chart: str = Field("oci://ghcr.io/llm-d/charts/llm-d-router-gateway", description="llm-d router chart.")
    version: ExactVersion = Field(
        ROUTER_VERSION,
        description="Exact llm-d router release (never the floating v0): the chart, the endpoint picker image and the decode "
        f"pods' P/D sidecar; {rules.SIDECAR_FLAGS_SINCE} or later.",
    )
    replicas: int = Field(
        2,
        description="Endpoint picker replicas: one leads (by a lease) and serves, the others stand by with their state warm and "
        "take over within seconds when it goes (no disruption budget: only the leader is ever Ready, so one would "
        "block every drain of its node); 2 or more required in production.",
        ge=1,
    )
    epp_image: str = Field(
        "",
        description=f"Endpoint picker image pinned by digest; empty means `{ENDPOINT_PICKER_REPOSITORY}:<serving.router.version>`, "
        "by digest where the program records that release's (docs/supply-chain.md). Set "
        "`<that image>@sha256:<digest>`; the tag stays the router's release.",
    )


# The InferencePool CRDs: the Gateway API Inference Extension release llm-d-router v0.10.0 is built
# and tested against, v1.5.0 (its go.mod requires sigs.k8s.io/gateway-api-inference-extension v1.5.0;
# deploy/components/crds-gie/kustomization.yaml installs that release's v1-manifests.yaml), not
# v1.6.0: the router does not claim it, and its InferencePool v1 schema differs only in making
# endpointPickerRef optional, which the chart's pool always sets (shared/schemas v1.5.0 and v1.6.0).
class InferencePoolCrdsConfig(Block):
    install: bool = Field(
        False,
        description="Install the InferencePool CRDs (GKE manages them on recent versions; set true where it does not).",
    )
    version: ExactVersion = Field(
        "v1.5.0", description="Gateway API Inference Extension release whose CRDs to install."
    )


# What vLLM's --kv-cache-dtype offers (its CacheDType choices, vllm/config/cache.py, read in the v0.20.0 sdist: the
# release nearest the image's vLLM 5b39b26, tpu-inference 18ed615 .buildkite/vllm_lkg.version) and the TPU backend can
# store: tpu-inference makes the cache's JAX dtype of fp8, fp8_e4m3, fp8_e5m2 or a name jnp.dtype knows (18ed615
# tpu_inference/utils.py to_jax_dtype, read by runner/tpu_runner.py), and its platform reports every dtype supported,
# so fp8_inc, nvfp4 and the like fail only when the runner starts.
KvCacheDtype = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]


class ServingConfig(Block):
    enabled: bool = Field(
        False,
        description="Deploy P/D-disaggregated vLLM (TPU7x) behind the llm-d router and a Gateway, internal by default "
        "(serving.gateway.className).",
    )
    namespace: K8sName = Field(
        WORKLOAD_NAMESPACE, description="Serving namespace; must be one of queues.namespaces (its LocalQueue)."
    )
    hf_token: str = Field(
        "",
        description="Hugging Face token (set with --secret), handed to the pods as the environment variable HF_TOKEN from a "
        "Kubernetes Secret; empty means no token Secret is created. Refused on a production stack: use "
        "serving.hfTokenSecretVersion.",
        json_schema_extra=SECRET_SETTING,
    )
    hf_token_secret_version: str = Field(
        "",
        description="The Hugging Face token kept in Secret Manager instead: the secret version "
        "projects/<project>/secrets/<secret>/versions/<number, latest or an alias>, in the stack's project. GKE's Secret "
        "Manager add-on (cluster.secretManager) mounts it into the model servers and the staging Job as a file "
        "(HF_TOKEN_PATH), never an environment variable; their accounts get roles/secretmanager.secretAccessor on "
        "the secret. Not with serving.hfToken.",
    )
    model: ServingModelConfig = Field(ServingModelConfig(), description="The model.")
    weights_bucket: WeightsBucketConfig = Field(
        WeightsBucketConfig(), description="Cloud Storage bucket of the weights."
    )
    weights_staging: WeightsStagingConfig = Field(
        WeightsStagingConfig(), description="The Job that stages the weights in the bucket."
    )
    image: str = Field(VLLM_IMAGE, description="vLLM TPU image (dated tag or digest).")
    benchmark_image: str = Field(
        BENCHMARK_IMAGE,
        description="inference-perf image of `make bench`'s Job (dated tag or digest), pulled the way every image of the stack is "
        "(images.mirror or the pull-through repositories) and listed in the `images` output.",
    )
    routing_sidecar_image: str = Field(
        "",
        description=f"P/D sidecar image of the decode pods; empty means `{ROUTING_SIDECAR_REPOSITORY}:<serving.router.version>`, "
        "by digest where the program records that release's. "
        "An override is that release pinned by digest, or from elsewhere: its name ends in "
        f"`{rules.ROUTING_SIDECAR_NAME}` and its tag is serving.router.version (pulled as every image is: images.mirror or pull-through).",
    )
    slice_shape: str = Field("2x2x2", description="Slice of each model-server group; one of tpu.sliceShapes.")
    priority: PriorityLevel = Field(
        "high", description="Priority level (queues.priorityClasses): serving preempts the checks."
    )
    prefill: ServingRoleConfig = Field(ServingRoleConfig(name="vllm-prefill"), description="Prefill LeaderWorkerSet.")
    decode: ServingRoleConfig = Field(ServingRoleConfig(name="vllm-decode"), description="Decode LeaderWorkerSet.")
    # vLLM takes 1 or more tokens, or -1 (auto: fit to memory), and starts with 0, which no prompt fits (vllm-project/vllm
    # v0.20.0 vllm/config/model.py max_model_len Field(ge=-1), v1/engine/input_processor.py); below -1 it exits at start.
    # A number it is here: `make bench` sizes its prompts within it (components/operations/benchmark.py).
    max_model_len: int = Field(9216, description="vLLM --max-model-len: the context length in tokens.", ge=1)
    # vLLM's SchedulerConfig declares both 1 or more (max_num_seqs, max_num_batched_tokens: Field(ge=1); vllm-project/vllm
    # vllm/config/scheduler.py, read at 01230b40128e570a58e54e75f7e55c4d5cd9246d): the engine exits at start otherwise.
    max_num_seqs: int = Field(512, description="vLLM --max-num-seqs.", ge=1)
    max_num_batched_tokens: int = Field(
        8192, description="vLLM --max-num-batched-tokens; at least serving.maxNumSeqs.", ge=1
    )
    kv_cache_dtype: KvCacheDtype = Field(
        "fp8",
        description="vLLM --kv-cache-dtype: auto, bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2 (what its TPU backend stores).",
        json_schema_extra=kind("KV cache dtype vLLM's TPU backend stores"),
    )
    resources: ServingResourcesConfig = Field(ServingResourcesConfig(), description="Requests of each TPU pod.")
    hbm_headroom: float = Field(
        0.25, description="Share of the slice's HBM kept free of weights (KV cache, activations).", ge=0, lt=1
    )
    startup_failure_threshold: int = Field(
        rules.STARTUP_FAILURE_THRESHOLD,
        description=f"Startup probe failures (every {rules.STARTUP_PERIOD_SECONDS} s) allowed while the model loads and compiles.",
    )
    skip_tpu_webhook_check: bool = Field(False, description="Annotate pods cloud.google.com/skip-tpu-webhook-check.")
    healthy_nodes_only: bool = Field(
        False,
        description="Select only nodes whose partition state is HEALTHY: the slice shape's own, the 4x4x4 cube's for a "
        "super-slice (GKE labels no larger shape). Off, the slice controller's default also allows DEGRADED ones.",
    )
    service_account_name: ServiceAccountName = Field(
        "model-server",
        description=f"Kubernetes service account of the model servers: reads the bucket, writes only its {XLA_CACHE_DIR}/ prefix.",
    )
    gateway: GatewayConfig = Field(GatewayConfig(), description="The inference Gateway.")
    router: RouterConfig = Field(RouterConfig(), description="The llm-d router Helm chart.")
    inference_pool_crds: InferencePoolCrdsConfig = Field(InferencePoolCrdsConfig(), description="InferencePool CRDs.")

    def role(self, role: str) -> ServingRoleConfig:
        return {PREFILL: self.prefill, DECODE: self.decode}[role]

    @property
    def shape(self) -> topology.Shape:
        """The slice of each model-server group (raises on a shape the rules refuse)."""
        return topology.Shape.parse(self.slice_shape)


def weights_bucket_name(serving: ServingConfig, project: str) -> str:
    return serving.weights_bucket.name or f"{project}-llm-weights"


def hf_cache_weights_uri(bucket: str, model_id: str, revision: str) -> str:
    """``gs://`` URI of a model snapshot stored in the Hugging Face cache layout in ``bucket``."""
    return f"gs://{bucket}/models--{model_id.replace('/', '--')}/snapshots/{revision}"


def weights_uri(serving: ServingConfig, project: str) -> str:
    model = serving.model
    bucket = weights_bucket_name(serving, project)
    if model.weights_path:
        return f"gs://{bucket}/{model.weights_path.strip('/')}"
    return hf_cache_weights_uri(bucket, model.id, model.revision)


def weights_object_prefix(serving: ServingConfig, project: str) -> str:
    """The object-name prefix of the snapshot's directory in the bucket (``models--.../snapshots/<rev>/``)."""
    path = weights_uri(serving, project).removeprefix(f"gs://{weights_bucket_name(serving, project)}/")
    return f"{path.strip('/')}/"


def xla_cache_uri(serving: ServingConfig, project: str) -> str:
    return f"gs://{weights_bucket_name(serving, project)}/{XLA_CACHE_DIR}"


def served_model_name(serving: ServingConfig) -> str:
    return serving.model.served_name or serving.model.id


def router_release_image(repository: str, version: str) -> str:
    """``repository`` at the router release ``version``: as ROUTER_RELEASE_IMAGES writes it (its digest included) when
    that is the release written there, else by the release's tag."""
    return written_release_image(ROUTER_RELEASE_IMAGES, repository, version) or f"{repository}:{version}"


def routing_sidecar_image(serving: ServingConfig) -> str:
    """The decode pods' P/D sidecar: the router release's own, or the override of the same release."""
    return serving.routing_sidecar_image or router_release_image(ROUTING_SIDECAR_REPOSITORY, serving.router.version)


def endpoint_picker_image(serving: ServingConfig) -> str:
    """The router's endpoint picker: the release's own, or the override of the same release with its digest."""
    return serving.router.epp_image or router_release_image(ENDPOINT_PICKER_REPOSITORY, serving.router.version)


def serving_workloads(serving: ServingConfig, queues: QueuesConfig) -> list[admission.SliceWorkload]:
    """The slice demand of prefill and decode, for the admission plan."""
    priority = queues.priority_class(serving.priority)
    return [
        admission.SliceWorkload(
            f"serving.{role}", serving.shape, serving.role(role).replicas, priority.name, priority.value
        )
        for role in ROLES
    ]


def validate_serving(
    serving: ServingConfig,
    tpu: TpuConfig,
    queues: QueuesConfig,
    cluster: ClusterConfig,
    project: str,
    problems: Problems,
) -> None:
    if not serving.enabled:
        return
    machine = topology.MACHINE_CATALOG.get(tpu.machine_type)
    if machine is None or not machine.dynamic_slicing:
        problems.add(
            "serving.enabled",
            f"P/D serving runs on TPU7x sub-slices, not {tpu.machine_type}",
            f"set tpu.machineType to {topology.TPU7X} or serving.enabled false",
        )
        return
    before = len(problems.items)
    _validate_names(serving, queues, problems)
    shape = _validate_shape_and_parallelism(serving, tpu, machine, problems)
    _validate_model(serving, project, machine, shape, problems)
    _validate_pods(serving, machine, problems)
    _validate_scheduler(serving, problems)
    _validate_staging(serving, problems)
    _validate_token(serving, cluster, project, problems)
    _validate_front(serving, problems)
    if shape is not None and len(problems.items) == before:
        _validate_capacity(serving, tpu, queues, problems)


def _validate_names(serving: ServingConfig, queues: QueuesConfig, problems: Problems) -> None:
    workload_rules.validate_queued_namespace(queues, "serving.namespace", serving.namespace, problems)
    staging = serving.weights_staging
    staging_account = staging.service_account_name
    if staging.enabled and staging_account == serving.service_account_name:
        problems.add(
            "serving.weightsStaging.serviceAccountName",
            f"{staging_account!r} is also serving.serviceAccountName: every model server could then overwrite "
            "or delete the weights",
            "give the staging Job its own account, e.g. weights-staging",
        )
    # The account the stack makes in the namespace under a fixed name (the benchmark's): named by a key too, it would be
    # one object applied by two resources (deleting either deletes it), and one principal with both sets of bucket
    # grants, a role granted by both once (one IAM binding: deleting either grant revokes it).
    accounts = [("serving.serviceAccountName", serving.service_account_name)]
    if staging.enabled:
        accounts.append(("serving.weightsStaging.serviceAccountName", staging_account))
    for key, name in accounts:
        if name == BENCHMARK_SERVICE_ACCOUNT:
            problems.add(
                key,
                f"{name!r} is the account the stack makes for `make bench`'s Job in {serving.namespace}",
                "give it another name",
            )
    first_role_named: dict[str, str] = {}
    for role in ROLES:
        key, name = f"serving.{role}.name", serving.role(role).name
        named = workload_rules.validate_workload_name(key, serving.namespace, name, "serving.namespace", problems)
        if named and (other := first_role_named.setdefault(name, role)) != role:
            problems.add(key, f"{name!r} is also the {other} name", "give each role its own name")


def _validate_shape_and_parallelism(
    serving: ServingConfig, tpu: TpuConfig, machine: topology.MachineType, problems: Problems
) -> topology.Shape | None:
    """The serving shape, when it is an admitted one that parses (None otherwise)."""
    if not workload_rules.validate_admitted_shape(tpu, "serving.sliceShape", serving.slice_shape, problems):
        return None
    shape = topology.try_shape(serving.slice_shape)  # one that does not parse is reported under tpu.sliceShapes
    prefill_tp = serving.prefill.tensor_parallel_size
    for problem in rules.tensor_parallel_match_problems(prefill_tp, serving.decode.tensor_parallel_size):
        problems.add(
            "serving.decode.tensorParallelSize", problem, f"set {prefill_tp}, as serving.prefill.tensorParallelSize"
        )
    if shape is not None:
        for role in ROLES:
            for problem in rules.tensor_parallel_fit_problems(serving.role(role).tensor_parallel_size, shape, machine):
                problems.add(
                    f"serving.{role}.tensorParallelSize", problem, "lower it or use a larger serving.sliceShape"
                )
    return shape


def _validate_model(
    serving: ServingConfig,
    project: str,
    machine: topology.MachineType,
    shape: topology.Shape | None,
    problems: Problems,
) -> None:
    model = serving.model
    for problem in rules.label_value_problems(model.label, "model name"):
        problems.add("serving.model.id", problem, "use a Hugging Face id such as Qwen/Qwen3.5-397B-A17B-FP8")
    for problem in rules.weights_uri_problems(weights_uri(serving, project)):
        key = "serving.model.weightsPath" if model.weights_path else "serving.weightsBucket.name"
        problems.add(key, problem, "name the bucket and the snapshot path")
    if model.weights_path:
        for other in (XLA_CACHE_DIR, RESULTS_DIR):
            for problem in rules.prefix_overlap_problems(weights_object_prefix(serving, project), f"{other}/"):
                problems.add("serving.model.weightsPath", problem, f"keep the snapshot out of {other}/")
    if model.id != MODEL_ID and model.revision == MODEL_REVISION and not model.weights_path:
        problems.add(
            "serving.model.revision",
            f"is the snapshot of {MODEL_ID}, not of {model.id}: the servers would look for a directory no one fills",
            f"set the commit of {model.id} to serve (its Hugging Face revision), or serving.model.weightsPath",
        )
    if dtype_problem := sizing.dtype_problem(model.weights_dtype):
        problems.add("serving.model.weightsDtype", dtype_problem, f"use one of {', '.join(sizing.DTYPES)}")
    elif shape is not None:
        fit = partial(rules.weights_fit_problems, model.parameters_billions, model.weights_dtype, shape, machine)
        default_headroom = ServingConfig().hbm_headroom
        if serving.hbm_headroom > default_headroom and not fit(default_headroom):
            # the headroom raised above its default is what leaves too little HBM
            key, fix = "serving.hbmHeadroom", f"keep free at most the default {default_headroom}"
        else:
            key = "serving.model.parametersBillions"
            fix = "use a larger serving.sliceShape, a smaller dtype or less serving.hbmHeadroom"
        for fit_problem in fit(serving.hbm_headroom):
            problems.add(key, fit_problem, fix)


def _validate_pods(serving: ServingConfig, machine: topology.MachineType, problems: Problems) -> None:
    for resource, problem in rules.pod_resources_problems(serving.resources.cpu, serving.resources.memory, machine):
        problems.add(f"serving.resources.{resource}", problem, "request at most what one TPU host has")
    for problem in rules.startup_budget_problems(rules.STARTUP_PERIOD_SECONDS, serving.startup_failure_threshold):
        problems.add("serving.startupFailureThreshold", problem, "raise it")
    problems.require_pinned("serving.image", serving.image, "pin a dated tag or @sha256:<digest>")
    problems.require_pinned("serving.benchmarkImage", serving.benchmark_image, "pin a release tag or @sha256:<digest>")


def _validate_scheduler(serving: ServingConfig, problems: Problems) -> None:
    # vLLM's SchedulerConfig.verify_max_model_len raises when max_num_batched_tokens < max_num_seqs (vllm-project/vllm
    # vllm/config/scheduler.py, read at 01230b40128e570a58e54e75f7e55c4d5cd9246d), so both roles' servers would exit at
    # start and crash-loop until the up gives up. A budget below maxModelLen is fine: chunked prefill is on (the
    # reference's own 8192 < 9216).
    if serving.max_num_batched_tokens < serving.max_num_seqs:
        problems.add(
            "serving.maxNumBatchedTokens",
            f"{serving.max_num_batched_tokens} is below serving.maxNumSeqs ({serving.max_num_seqs}): vLLM refuses a "
            "step's token budget smaller than the sequences it may schedule in that step and exits at start",
            f"set it to at least {serving.max_num_seqs}, or lower serving.maxNumSeqs",
        )


def _validate_staging(serving: ServingConfig, problems: Problems) -> None:
    staging = serving.weights_staging
    if not staging.enabled:
        return
    if not COMMIT_SHA.fullmatch(serving.model.revision):
        problems.add(
            "serving.model.revision",
            f"{serving.model.revision!r} is not a commit: a branch or tag moves, and the staged snapshot and the "
            "servers would stop agreeing",
            "set the 40-hex commit sha of the revision to serve (or serving.weightsStaging.enabled false)",
        )
    problems.require_pinned("serving.weightsStaging.image", staging.image, "pin a dated tag or @sha256:<digest>")


# A regional secret's version, projects/<p>/locations/<l>/secrets/<s>/versions/<v> (googleapis/googleapis f8291d2b
# google/cloud/secretmanager/v1/resources.proto, SecretVersion's patterns): the add-on mounts it
# (GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp v1.15.0 util/constants.go regionalSecretRegex), but the
# stack grants its readers with secretmanager.SecretIamMember, which names a global secret; a regional one is
# RegionalSecretIamMember's (pulumi-gcp v9.35.0 sdk/python/pulumi_gcp/secretmanager/regional_secret_iam_member.py).
REGIONAL_SECRET_VERSION = re.compile(r"projects/[^/]+/locations/(?P<location>[^/]+)/secrets/[^/]+/versions/[^/]+")
# A version named by one of its secret's aliases (a letter, then up to 62 letters, digits, hyphens and underscores),
# which AccessSecretVersion, the add-on's read, takes in place of the number (googleapis/googleapis 02838cf
# google/cloud/secretmanager/v1/resources.proto, Secret.version_aliases; the add-on passes the version on as written:
# secrets-store-csi-driver-provider-gcp@0077988 util/constants.go globalSecretRegex, versions/([^/]+)).
SECRET_VERSION_BY_ALIAS = re.compile(SECRET_VERSION.pattern.replace("latest", "[A-Za-z][A-Za-z0-9_-]{0,62}"))


def _validate_token(serving: ServingConfig, cluster: ClusterConfig, project: str, problems: Problems) -> None:
    """The Hugging Face token comes by one route: a Kubernetes Secret (serving.hfToken) or a Secret Manager file."""
    version = serving.hf_token_secret_version
    if not version:
        return
    key = "serving.hfTokenSecretVersion"
    if serving.hf_token:
        problems.add(
            "serving.hfToken",
            "is set, and so is serving.hfTokenSecretVersion: the pods would get the token twice, from a Kubernetes "
            "Secret and from Secret Manager",
            "keep the Secret Manager version and remove this one: `pulumi config rm --path serving.hfToken`",
        )
    named = SECRET_VERSION_BY_ALIAS.fullmatch(version)
    if named is None and (regional := REGIONAL_SECRET_VERSION.fullmatch(version)):
        problems.add(
            key,
            f"names a version of a regional secret (in {regional['location']}): the stack grants the pods' accounts "
            "read on a global secret only",
            f"keep the token in a global secret, `gcloud secrets create <secret> --project {project}`, and write "
            f"projects/{project}/secrets/<secret>/versions/<number> (or latest, or an alias)",
        )
    elif named is None:
        problems.add(
            key,
            f"{version!r} is not a Secret Manager secret version",
            f"write projects/{project}/secrets/<secret>/versions/<number> (or latest, or an alias)",
        )
    elif named["project"] != project:
        problems.add(
            key,
            f"names a secret of project {named['project']!r}, not of the stack's project {project!r}: the stack "
            "enables Secret Manager and grants the pods' accounts on the secret in its own project only",
            f"name a secret of {project} by that id, projects/{project}/secrets/<secret>/versions/<number> (not by "
            f"the project's number), made with `gcloud secrets create <secret> --project {project}`",
        )
    if not cluster.existing.enabled and not cluster.secret_manager:
        problems.add(
            key,
            "needs GKE's Secret Manager add-on, which mounts the secret into the pods, and cluster.secretManager is "
            "false",
            "set cluster.secretManager true",
        )


def _validate_front(serving: ServingConfig, problems: Problems) -> None:
    validate_chart_reference("serving.router.chart", serving.router.chart, problems)
    # Both releases are tagged vX.Y.Z, and the tag is the name of what is fetched: llm-d-router packages its chart at
    # the tag as its version and tags its images with it (llm-d/llm-d-router hack/push-chart.sh, chart_version=
    # EXTRA_TAG, pushed only when it matches ^v...; .github/workflows/ci-build-images.yaml), and Helm pulls a version
    # that parses as semver as that exact OCI tag (helm/helm v3.20.2 pkg/registry/client.go ValidateReference); the
    # Inference Extension's CRDs are the asset of the release vX.Y.Z (kubernetes-sigs/gateway-api-inference-extension
    # tags; INFERENCE_POOL_CRDS_URL). Without the v there is no such chart, image or asset.
    without_v = [("serving.router.version", serving.router.version)]
    if serving.inference_pool_crds.install:
        without_v.append(("serving.inferencePoolCrds.version", serving.inference_pool_crds.version))
    for key, version in without_v:
        if not version.startswith("v"):
            problems.add(
                key,
                f"{version} has no leading v, but the release is tagged v{version}, and the chart, images or CRDs "
                "are fetched by that tag",
                f"write v{version}",
            )
    for problem in rules.router_version_problems(serving.router.version):
        problems.add("serving.router.version", problem, f"use {ROUTER_VERSION} or a later release")
    if serving.router.epp_image:
        key, version = "serving.router.eppImage", serving.router.version
        release = f"llm-d router {version}"
        validate_release_image(key, serving.router.epp_image, ENDPOINT_PICKER_REPOSITORY, version, release, problems)
    if serving.routing_sidecar_image:
        for problem in rules.routing_sidecar_image_problems(serving.routing_sidecar_image, serving.router.version):
            problems.add(
                "serving.routingSidecarImage",
                problem,
                f"leave it empty for {ROUTING_SIDECAR_REPOSITORY}:{serving.router.version}, or name that release "
                f"elsewhere (<registry>/{rules.ROUTING_SIDECAR_NAME}:{serving.router.version}[@sha256:<digest>])",
            )


def _validate_capacity(serving: ServingConfig, tpu: TpuConfig, queues: QueuesConfig, problems: Problems) -> None:
    needed = admission.cubes_needed(serving_workloads(serving, queues))
    if needed > tpu.cubes:
        problems.add(
            "serving.decode.replicas",
            f"prefill and decode together need {needed} cube(s) of {topology.CUBE}; the stack has {tpu.cubes}, "
            "so serving could never run whole",
            "lower serving.prefill.replicas or serving.decode.replicas, or add TPU pools",
        )
