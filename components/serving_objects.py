"""P/D-disaggregated vLLM serving on TPU7x: model-server LeaderWorkerSets, Gateway, router values.

Pure Python (no Pulumi imports). The YAML bases under ``manifests/serving/`` are real manifests
(and the router chart's values file); this module loads them and overlays, on fresh copies, what
varies per stack: namespace, Kueue queue and priority labels, llm-d labels, images, the weights
URI, the vLLM sizes, probe budget, optional node-health settings, and everything that follows
from the slice shape and the machine type (group size, TPU requests, partition labels).

Two LeaderWorkerSets, one per role. Each group (a leader pod plus workers) takes one dynamic
slice: the leader starts a Ray head and ``vllm serve`` with tensor parallelism across every
TensorCore of the slice; the workers join the Ray cluster. Prefill serves on 8000, decode vLLM
on 8200 behind the llm-d routing sidecar on 8000 (the InferencePool target port); KV caches move
from prefill to decode over TPUConnectorHMA (TPU_KV_TRANSFER_PORT 9100, TPU_SIDE_CHANNEL_PORT
9600).

vLLM arguments are container ``args`` items, not a shell string. The leader's command is a fixed
``sh -c`` script that forms the Ray cluster and then runs ``exec vllm serve "$@"``, so each
argument reaches vLLM as one argv element and JSON values need no quoting. ``$(POD_IP)`` inside
``--kv-transfer-config`` is a Kubernetes dependent environment variable: the kubelet replaces it
with the ``POD_IP`` env var (downward API ``status.podIP``) before the process starts, the same
mechanism llm-d's TPU recipes use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from components import manifests
from components.topology import MACHINE_CATALOG, MachineType, Shape


PREFILL = "prefill"
DECODE = "decode"
ROLES = (PREFILL, DECODE)
BASE_FILES = {PREFILL: "prefill-leaderworkerset.yaml", DECODE: "decode-leaderworkerset.yaml"}
GATEWAY_FILE = "gateway.yaml"
ROUTER_VALUES_FILE = "router-values.yaml"
SERVICE_ACCOUNT_FILE = "service-account.yaml"

# Shorter than the reference's kueue-vllm-{prefill,decode}-model-streamer, which with the namespace
# llm-d-pd-disaggregation overrun the 49-character slice-name budget (README, "Slice checks").
LWS_NAMES = {PREFILL: "vllm-prefill", DECODE: "vllm-decode"}
LEADER_CONTAINER = "vllm-leader"
WORKER_CONTAINER = "vllm-worker"
SIDECAR_CONTAINER = "routing-proxy"

# vLLM for TPU: the image the reference deployment ran (a dated nightly: 2026-04-30, vLLM commit
# 18ed615, tpu-inference commit 5b39b26), not the floating `nightly`/`latest`. Pin its digest once
# pulled. llm-d's TPU7x recipes pin vllm/vllm-tpu:v0.26.0 instead (v0.27.0-v0.29.0 break
# TPUConnectorHMA at startup).
VLLM_IMAGE = "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"
ROUTING_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"

MODEL_ID = "Qwen/Qwen3.5-397B-A17B-FP8"
MODEL_REVISION = "ea5b4f81096f3901c91dea97f81324302495781d"
MODEL_PARAMETERS = 397e9  # "397B" total parameters (17B active per token), per the model id
MODEL_WEIGHTS_DTYPE = "fp8"  # "-FP8" checkpoint; ~406 GB on disk (a few tensors stay bf16)

GUIDE = "pd-disaggregation"
DEFAULT_MACHINE_TYPE = "tpu7x-standard-4t"
DEFAULT_SLICE_SHAPE = "2x2x2"

# Ports.
PREFILL_PORT = 8000
DECODE_VLLM_PORT = 8200
SIDECAR_PORT = 8000  # = InferencePool target port
KV_TRANSFER_PORT = 9100
SIDE_CHANNEL_PORT = 9600
VLLM_PORTS = {PREFILL: PREFILL_PORT, DECODE: DECODE_VLLM_PORT}

# Startup: the leader waits up to RAY_INIT_TIMEOUT_SECONDS for the workers to join the Ray
# cluster (--ray_init_timeout in the command), then the API server waits up to
# ENGINE_STARTUP_TIMEOUT_SECONDS (VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT) for the engine: streaming
# ~400 GB of weights and initialising the model on 16 devices. /v1/models answers only after
# both. The startup probe must outlast their sum, or the kubelet kills a leader that would have
# come up (and RecreateGroupOnPodRestart restarts the whole group). Default budget:
# 30 s x 240 = 7200 s = 2 x (1800 s + 1800 s). XLA compilation is deferred to the first requests
# (SKIP_JAX_PRECOMPILE=1), so it is not in the startup path.
RAY_INIT_TIMEOUT_SECONDS = 1800
ENGINE_STARTUP_TIMEOUT_SECONDS = 1800
STARTUP_SECONDS_NEEDED = RAY_INIT_TIMEOUT_SECONDS + ENGINE_STARTUP_TIMEOUT_SECONDS
STARTUP_PERIOD_SECONDS = 30
STARTUP_FAILURE_THRESHOLD = 240

# KV transfer (tpu-inference).
KV_CONNECTOR = "TPUConnectorHMA"
KV_CONNECTOR_MODULE = "tpu_inference.distributed.tpu_connector_hma"
KV_ROLES = {PREFILL: "kv_producer", DECODE: "kv_consumer"}
POD_IP_ENV = "POD_IP"

# Labels and annotations.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
GUIDE_LABEL = "llm-d.ai/guide"
MODEL_LABEL = "llm-d.ai/model"
ROLE_LABEL = "llm-d.ai/role"
ENGINE_LABEL = "inference.networking.k8s.io/engine-type"
EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"
SKIP_TPU_WEBHOOK_ANNOTATION = "cloud.google.com/skip-tpu-webhook-check"
ACCELERATOR_NODE_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_RESOURCE = "google.com/tpu"

# Secrets and accounts.
HF_TOKEN_SECRET_NAME = "llm-d-hf-token"
HF_TOKEN_SECRET_KEY = "HF_TOKEN"
SERVICE_ACCOUNT_NAME = "model-server"

# Gateway and router.
GATEWAY_NAME = "llm-d-inference-gateway"
GATEWAY_CLASS = "gke-l7-rilb"
GATEWAY_PORT = 80
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
WAIT_FOR_PROGRAMMED = "condition=Programmed"
ROUTER_CHART = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
ROUTER_CHART_VERSION = "v0.10.0"
ROUTER_RELEASE_NAME = GUIDE  # names the InferencePool (and <release>-epp)


def hf_token_secret_name() -> str:
    """Name of the Secret holding the Hugging Face token (key ``HF_TOKEN``); Pulumi creates it."""
    return HF_TOKEN_SECRET_NAME


def partition_state_label(shape: Shape | str) -> str:
    """Node label GKE sets to ``HEALTHY`` on nodes whose ``shape`` partition is usable."""
    return f"cloud.google.com/gke-tpu-partition-{shape}-state"


def hf_cache_weights_uri(bucket: str, model_id: str = MODEL_ID, revision: str = MODEL_REVISION) -> str:
    """``gs://`` URI of a model snapshot stored in the Hugging Face cache layout in ``bucket``."""
    return f"gs://{bucket}/models--{model_id.replace('/', '--')}/snapshots/{revision}"


def gcs_bucket(uri: str) -> str:
    """Bucket of a ``gs://bucket/...`` URI; ValueError otherwise."""
    match = re.match(r"^gs://([^/]+)(/.*)?$", uri or "")
    if not match:
        raise ValueError(f"{uri!r} is not a gs://bucket/path URI")
    return match.group(1)


def workload_identity_principal(project_id: str, project_number: str, namespace: str, service_account: str) -> str:
    """IAM principal of a Kubernetes service account (Workload Identity Federation for GKE)."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project_id}.svc.id.goog/subject/ns/{namespace}/sa/{service_account}"
    )


@dataclass(frozen=True)
class ServingParams:
    """What varies per stack. Defaults are the reference deployment's, fixed where it was fragile.

    ``weights_uri`` is the ``gs://`` directory of the model snapshot (see :func:`hf_cache_weights_uri`);
    ``xla_cache_uri`` defaults to ``gs://<weights bucket>/xla_cache``. ``cpu``/``memory`` are each
    TPU pod's requests (= limits). ``skip_tpu_webhook_check`` and ``healthy_nodes_only`` are
    llm-d's later additions (the annotation ``cloud.google.com/skip-tpu-webhook-check`` and the
    ``...-partition-<shape>-state: HEALTHY`` node selector); the reference uses neither.
    ``model_parameters``, ``weights_dtype`` and ``hbm_headroom_fraction`` feed the HBM preview
    rule only.
    """

    weights_uri: str
    namespace: str = "llm-d-pd-disaggregation"
    queue_name: str = "lq"
    priority_class: str = "high-priority-3000"
    guide: str = GUIDE
    model_id: str = MODEL_ID
    served_model_name: str = MODEL_ID
    xla_cache_uri: str = ""
    image: str = VLLM_IMAGE
    routing_sidecar_image: str = ROUTING_SIDECAR_IMAGE
    machine_type: str = DEFAULT_MACHINE_TYPE
    slice_shape: str = DEFAULT_SLICE_SHAPE
    prefill_name: str = LWS_NAMES[PREFILL]
    decode_name: str = LWS_NAMES[DECODE]
    prefill_replicas: int = 4
    decode_replicas: int = 4
    tensor_parallel_size: int = 16
    max_model_len: int = 9216
    max_num_seqs: int = 512
    max_num_batched_tokens: int = 8192
    kv_cache_dtype: str = "fp8"
    cpu: str = "220"
    memory: str = "850Gi"
    startup_period_seconds: int = STARTUP_PERIOD_SECONDS
    startup_failure_threshold: int = STARTUP_FAILURE_THRESHOLD
    skip_tpu_webhook_check: bool = False
    healthy_nodes_only: bool = False
    service_account_name: str = SERVICE_ACCOUNT_NAME
    hf_token_secret_name: str = HF_TOKEN_SECRET_NAME
    model_parameters: float = MODEL_PARAMETERS
    weights_dtype: str = MODEL_WEIGHTS_DTYPE
    hbm_headroom_fraction: float = 0.25

    @property
    def model_label(self) -> str:
        """Value of ``llm-d.ai/model``: the model id without its organisation."""
        return self.model_id.rsplit("/", 1)[-1]

    @property
    def machine(self) -> MachineType:
        if self.machine_type not in MACHINE_CATALOG:
            raise ValueError(f"unknown machine type {self.machine_type!r}; known: {', '.join(sorted(MACHINE_CATALOG))}")
        return MACHINE_CATALOG[self.machine_type]

    @property
    def shape(self) -> Shape:
        return Shape.parse(self.slice_shape)

    @property
    def hosts(self) -> int:
        """Pods per group = LWS size (raises when the shape splits a host)."""
        return self.machine.hosts(self.shape)

    @property
    def effective_xla_cache_uri(self) -> str:
        return self.xla_cache_uri or f"gs://{gcs_bucket(self.weights_uri)}/xla_cache"

    def name(self, role: str) -> str:
        return {PREFILL: self.prefill_name, DECODE: self.decode_name}[_role(role)]

    def replicas(self, role: str) -> int:
        return {PREFILL: self.prefill_replicas, DECODE: self.decode_replicas}[_role(role)]


# --- Loading the bases ---------------------------------------------------------------------


def _load_one(file_name: str) -> dict[str, Any]:
    return manifests.load_document(f"serving/{file_name}")


def load_base(role: str) -> dict[str, Any]:
    """A fresh copy of the LeaderWorkerSet base of ``role`` (``prefill`` or ``decode``)."""
    return _load_one(BASE_FILES[_role(role)])


def _role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; use {PREFILL!r} or {DECODE!r}")
    return role


# --- KV transfer and vLLM arguments --------------------------------------------------------


def kv_transfer_config(role: str) -> dict[str, str]:
    """vLLM ``--kv-transfer-config`` of ``role`` as data.

    ``kv_ip`` is ``$(POD_IP)``, expanded by the kubelet from the POD_IP env var (downward API
    ``status.podIP``). tpu-inference's connector finds its transfer addresses itself (the Ray
    nodes' IPs on multi-host slices), so the field documents the pod address rather than steers it.
    """
    return {
        "kv_connector": KV_CONNECTOR,
        "kv_connector_module_path": KV_CONNECTOR_MODULE,
        "kv_role": KV_ROLES[_role(role)],
        "kv_ip": f"$({POD_IP_ENV})",
    }


def flag_values(args: list[str]) -> dict[str, str | None]:
    """``--flag=value`` items of an argument list as ``{flag: value}`` (``None`` for bare flags)."""
    values: dict[str, str | None] = {}
    for arg in args:
        if not arg.startswith("--"):
            raise ValueError(f"argument {arg!r} is not a --flag or --flag=value item")
        flag, sep, value = arg.partition("=")
        values[flag] = value if sep else None
    return values


def vllm_args(params: ServingParams, role: str, base_args: list[str]) -> list[str]:
    """The leader's ``vllm serve`` arguments for ``role``: the base's, with this stack's values."""
    args = list(base_args)
    manifests.set_flag(args, "--model", params.weights_uri)
    manifests.set_flag(args, "--served-model-name", params.served_model_name)
    manifests.set_flag(args, "--max-model-len", params.max_model_len)
    manifests.set_flag(args, "--max-num-batched-tokens", params.max_num_batched_tokens)
    manifests.set_flag(args, "--max-num-seqs", params.max_num_seqs)
    manifests.set_flag(args, "--tensor-parallel-size", params.tensor_parallel_size)
    manifests.set_flag(args, "--kv-cache-dtype", params.kv_cache_dtype)
    manifests.set_flag(args, "--limit-mm-per-prompt", {"image": 0, "video": 0})
    manifests.set_flag(args, "--kv-transfer-config", kv_transfer_config(role))
    manifests.set_flag(args, "--port", VLLM_PORTS[_role(role)])
    return args


# --- The LeaderWorkerSets ------------------------------------------------------------------


def _set_probe_port(container: dict[str, Any], port: int) -> None:
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container[probe]["httpGet"]["port"] = port


def leaderworkerset(params: ServingParams, role: str) -> dict[str, Any]:
    """The ``role`` LeaderWorkerSet with ``params`` overlaid on its YAML base.

    Raises ValueError for what cannot be built (unknown role or machine type, a shape that is no
    topology or splits a host, an empty required value); everything else is for the preview
    rules (components/serving_rules.py).
    """
    required = {
        "namespace": params.namespace, "queue_name": params.queue_name, "priority_class": params.priority_class,
        "guide": params.guide, "model_id": params.model_id, "served_model_name": params.served_model_name,
        "image": params.image, "service_account_name": params.service_account_name,
        "hf_token_secret_name": params.hf_token_secret_name,
    }
    for key, value in required.items():
        if not value:
            raise ValueError(f"{key} must not be empty")
    gcs_bucket(params.weights_uri)
    machine, shape = params.machine, params.shape
    hosts = machine.hosts(shape)

    lws = load_base(role)
    metadata = lws["metadata"]
    metadata["name"] = params.name(role)
    metadata["namespace"] = params.namespace
    metadata["labels"].update({
        GUIDE_LABEL: params.guide, MODEL_LABEL: params.model_label, ROLE_LABEL: role,
        QUEUE_LABEL: params.queue_name, PRIORITY_LABEL: params.priority_class,
    })

    spec = lws["spec"]
    spec["replicas"] = params.replicas(role)
    template = spec["leaderWorkerTemplate"]
    template["size"] = hosts

    tpus = str(machine.chips_per_host)
    for kind in ("leaderTemplate", "workerTemplate"):
        pod = template[kind]
        labels = pod["metadata"]["labels"]
        labels.update({MODEL_LABEL: params.model_label, ROLE_LABEL: role})
        if kind == "leaderTemplate":
            labels[GUIDE_LABEL] = params.guide  # the router's InferencePool selects serving leaders
        else:
            labels.pop(GUIDE_LABEL, None)  # workers run Ray only; no HTTP server to route to
        annotations = pod["metadata"]["annotations"]
        annotations[SLICE_TOPOLOGY_ANNOTATION] = str(shape)
        if params.skip_tpu_webhook_check:
            annotations[SKIP_TPU_WEBHOOK_ANNOTATION] = "true"

        pod_spec = pod["spec"]
        pod_spec["serviceAccountName"] = params.service_account_name
        node_selector = pod_spec.setdefault("nodeSelector", {})
        node_selector[ACCELERATOR_NODE_LABEL] = machine.accelerator_label
        if params.healthy_nodes_only:
            node_selector[partition_state_label(shape)] = "HEALTHY"

        container = manifests.container(pod_spec, LEADER_CONTAINER if kind == "leaderTemplate" else WORKER_CONTAINER)
        container["image"] = params.image
        resources = {TPU_RESOURCE: tpus, "cpu": params.cpu, "memory": params.memory}
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
        # Optional: weights and tokenizer come from gs://, so the token only matters for gated
        # downloads from the Hub; the stack creates the Secret only when a token is configured.
        manifests.set_env(container, "HF_TOKEN", {"valueFrom": {"secretKeyRef": {
            "name": params.hf_token_secret_name, "key": HF_TOKEN_SECRET_KEY, "optional": True}}})
        manifests.set_env(container, "VLLM_XLA_CACHE_PATH", {"value": params.effective_xla_cache_uri})

        if kind == "leaderTemplate":
            container["args"] = vllm_args(params, role, container["args"])
            _set_probe_port(container, VLLM_PORTS[role])
            container["startupProbe"]["periodSeconds"] = params.startup_period_seconds
            container["startupProbe"]["failureThreshold"] = params.startup_failure_threshold
            if role == DECODE:
                manifests.container(pod_spec, SIDECAR_CONTAINER, "initContainers")["image"] = params.routing_sidecar_image
    return lws


def prefill_decode_leaderworkersets(params: ServingParams) -> list[dict[str, Any]]:
    """The prefill and the decode LeaderWorkerSet, in that order."""
    return [leaderworkerset(params, role) for role in ROLES]


# --- Service account, Gateway, router values -----------------------------------------------


def model_server_service_account(namespace: str, name: str = SERVICE_ACCOUNT_NAME) -> dict[str, Any]:
    """The ServiceAccount the model-server pods run as (bucket access via Workload Identity)."""
    if not namespace or not name:
        raise ValueError("namespace and name must not be empty")
    account = _load_one(SERVICE_ACCOUNT_FILE)
    account["metadata"].update(name=name, namespace=namespace)
    return account


def gateway(
    namespace: str,
    *,
    name: str = GATEWAY_NAME,
    gateway_class: str = GATEWAY_CLASS,
    port: int = GATEWAY_PORT,
) -> dict[str, Any]:
    """The inference Gateway (HTTP on ``port``), annotated for Pulumi to await ``Programmed``."""
    if not namespace or not name or not gateway_class:
        raise ValueError("namespace, name and gateway_class must not be empty")
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be 1-65535, not {port}")
    gw = _load_one(GATEWAY_FILE)
    gw["metadata"].update(name=name, namespace=namespace)
    gw["spec"]["gatewayClassName"] = gateway_class
    (listener,) = gw["spec"]["listeners"]
    listener["port"] = port
    return gw


def load_router_values() -> dict[str, Any]:
    """A fresh copy of ``manifests/serving/router-values.yaml``."""
    return _load_one(ROUTER_VALUES_FILE)


def router_values(
    *,
    guide: str = GUIDE,
    gateway_name: str = GATEWAY_NAME,
    gateway_namespace: str = "",
) -> dict[str, Any]:
    """Values of the llm-d router chart with the guide label and the Gateway overlaid.

    The release namespace is Helm's (the release's ``namespace``); ``gateway_namespace`` is only
    needed when the Gateway lives elsewhere (it must then allow routes from the release's
    namespace). The served model name appears in no v0.10.0 value this setup uses:
    ``httpRoute.baseModel`` would require an ``X-Gateway-Base-Model-Name`` header on every
    request, and ``router.tokenizer.modelName`` only matters with the tokenizer enabled.
    """
    if not guide or not gateway_name:
        raise ValueError("guide and gateway_name must not be empty")
    values = load_router_values()
    values["router"]["modelServers"]["matchLabels"] = {GUIDE_LABEL: guide}
    values["httpRoute"]["inferenceGatewayName"] = gateway_name
    values["httpRoute"]["inferenceGatewayNamespace"] = gateway_namespace
    return values


def endpoint_picker_config(values: dict[str, Any]) -> dict[str, Any]:
    """The EndpointPickerConfig the values select (``pluginsConfigFile`` in ``pluginsCustomConfig``)."""
    epp = values["router"]["epp"]
    return yaml.safe_load(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]])
