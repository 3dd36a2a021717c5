"""P/D-disaggregated vLLM serving on TPU7x: model-server LeaderWorkerSets, Gateway, router values.

Pure Python (no Pulumi imports). The YAML bases under ``manifests/serving/`` are real manifests (and the router chart's
values file); the builders overlay, on fresh copies, what varies per stack, from the validated blocks (serving, tpu,
queues, network) and the few values that are no setting: the project (the bucket's default name), the pull path of the
images and whether Pulumi awaits anything.

Two LeaderWorkerSets, one per role. Each group (a leader pod plus workers) takes one dynamic slice: the leader starts a
Ray head and ``vllm serve`` with tensor parallelism across every TensorCore of the slice; the workers join the Ray
cluster. Prefill serves on 8000, decode vLLM on 8200 behind the llm-d routing sidecar on 8000 (the InferencePool target
port); KV caches move from prefill to decode over TPUConnectorHMA. vLLM arguments are container ``args`` items: the
leader's fixed ``sh -c`` script forms the Ray cluster, then runs ``exec vllm serve "$@"``, so each argument reaches vLLM
as one argv element and JSON values need no quoting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from components import manifests
from components.config_base import ImageReference, PullPath
from components.gcp.config import NetworkConfig, TpuConfig
from components.platform.config import QueuesConfig
from components.platform.kueue_objects import queue_labels
from components.tpu.topology import SLICE_TOPOLOGY_ANNOTATION, slice_health_label, take_tpu_host
from components.workloads.serving import rules
from components.workloads.serving.config import (
    BENCHMARK_SERVICE_ACCOUNT,
    DECODE,
    PREFILL,
    ROLES,
    GatewayConfig,
    ServingConfig,
    ServingRoleConfig,
    endpoint_picker_image,
    routing_sidecar_image,
    served_model_name,
    weights_uri,
    xla_cache_uri,
)

BASE_FILES = {PREFILL: "prefill-leaderworkerset.yaml", DECODE: "decode-leaderworkerset.yaml"}
ROUTER_VALUES_FILE = "router-values.yaml"
STAGING_JOB_FILE = "weights-staging-job.yaml"
NETWORK_POLICIES_FILE = "network-policies.yaml"
# The NetworkPolicies of network-policies.yaml, by name: each holds every sender of one group of pods.
MODEL_SERVERS_POLICY = "model-servers"
ENDPOINT_PICKER_POLICY = "endpoint-picker"
STAGING_SCRIPT_FILE = "stage_weights.py"
# Its libraries, every version with the sha256 of each wheel: the init container pip-installs them with --require-hashes.
STAGING_REQUIREMENTS_FILE = "stage-weights-requirements.txt"
STAGING_FILES = (STAGING_SCRIPT_FILE, STAGING_REQUIREMENTS_FILE)  # the ConfigMap's keys, mounted at /staging
STAGING_CONTAINER = "stage-weights"
STAGING_INSTALL_CONTAINER = "install-libraries"
LEADER_CONTAINER = "vllm-leader"
WORKER_CONTAINER = "vllm-worker"

GUIDE = "pd-disaggregation"  # the llm-d guide: its label selects the serving leaders

GUIDE_LABEL = "llm-d.ai/guide"
MODEL_LABEL = "llm-d.ai/model"
ROLE_LABEL = "llm-d.ai/role"
SKIP_TPU_WEBHOOK_ANNOTATION = "cloud.google.com/skip-tpu-webhook-check"
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"

# What Kueue's LeaderWorkerSet webhook refuses to change on a queue-managed LWS (kubernetes-sigs/kueue v0.17.8,
# pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go ValidateUpdate): the queue-name label, the
# priority-class label once a group is ready, the pod "shape" of both templates (pkg/util/pod/pod.go SpecShape, below;
# the pod-level `resources` since v0.17.7, when set) and the group size: Kueue 0.17 accepts a new size in place without
# reserving quota for it (kubernetes-sigs/kueue#13809; 0.19.1 refuses it). A change to any of these must replace the
# LWS, reloading the model; any other edit (an image, flags, the routing sidecar's image) rolls the groups in place.
_POD_SHAPE = (
    *(f"{key}[*].{field}" for key in ("containers", "initContainers") for field in ("resources", "ports")),
    *("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority", "topologySpreadConstraints"),
    *("overhead", "resourceClaims", "resources"),
)
# The slice shape too, which none of those carries for a super-slice (serving.healthyNodesOnly selects the cube's state
# whatever its shape): two shapes of as many hosts (4x4x16 and 4x8x8, 64 each) differ only in the templates'
# slice-topology annotation. Kueue's webhook accepts that in place (SpecShape reads no annotation), its LWS integration
# only updates an existing group's Workload's priority and admission gate, so each group's Workload keeps the old shape
# in its pod sets (kueue v0.17.8 pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go updateWorkload), and
# the slice controller's LeaderWorkerSet webhook, which derives the pods' Kueue topology and health affinity from the
# annotation, acts on CREATE only (AI-Hypercomputer/xpk 250d4b3c slice/internal/webhooks/leaderworkerset_webhook.go). A
# key with dots is quoted in a property path (pulumi/pulumi sdk/go/common/resource/properties_path.go), as the
# Kubernetes provider names it in its diff (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/provider.go
# addPatchValueToDiff).
_SHAPE_ANNOTATION = f'metadata.annotations["{SLICE_TOPOLOGY_ANNOTATION}"]'
REPLACED_ON = [
    "metadata.labels",
    "spec.leaderWorkerTemplate.size",
    *(f"spec.leaderWorkerTemplate.{kind}Template.spec.{path}" for kind in ("leader", "worker") for path in _POD_SHAPE),
    *(f"spec.leaderWorkerTemplate.{kind}Template.{_SHAPE_ANNOTATION}" for kind in ("leader", "worker")),
]

# The Hugging Face token reaches the model servers and the staging Job by one of two routes. serving.hfToken: the
# Secret llm-d-hf-token (made only when the setting is set), read by an optional reference into the variable HF_TOKEN.
HF_TOKEN_SECRET_NAME = "llm-d-hf-token"
HF_TOKEN_SECRET_KEY = "HF_TOKEN"
HF_TOKEN_ENV = "HF_TOKEN"
# serving.hfTokenSecretVersion: no Secret and no variable holding the token. GKE's Secret Manager add-on (the
# open-source Secrets Store CSI driver and Google's provider) mounts the secret version as a file: a CSI volume of its
# driver that names a SecretProviderClass of its provider, gke (hf-token-secret-provider-class.yaml), read as the pod's
# own Kubernetes service account through Workload Identity (GoogleCloudPlatform/accelerated-platforms 9320f3b2,
# platforms/gke/base/core/huggingface/initialize: DEVELOPER.md and templates/secretproviderclass-huggingface-tokens).
# HF_TOKEN_PATH names the file: huggingface_hub takes the token from HF_TOKEN, else from the file at HF_TOKEN_PATH
# (huggingface_hub 2.4.0, the staging Job's pin: constants.py HF_TOKEN_PATH, utils/_auth.py get_token; the variable
# exists since v0.23.0, huggingface/huggingface_hub#2185), and vLLM passes no token of its own unless --hf-token is
# given, so huggingface_hub's lookup decides there too (vllm-tpu 0.20.0 and 0.21.0, either side of the image's vLLM:
# vllm/config/model.py hf_token, vllm/transformers_utils/config.py). The staging program reads the same two variables.
HF_TOKEN_PATH_ENV = "HF_TOKEN_PATH"
SECRET_MANAGER_CSI_DRIVER = "secrets-store-gke.csi.k8s.io"
HF_TOKEN_PROVIDER_CLASS = "hf-token"
HF_TOKEN_VOLUME = "hf-token"
HF_TOKEN_DIR = "/var/run/secrets/huggingface.co"
HF_TOKEN_FILE = "token"
# The checkov check of secrets in environment variables (CIS GKE 4.4.1): its skip on the YAML bases holds only for
# the Secret's HF_TOKEN, and goes with it.
SECRET_ENV_CHECK = "CKV_K8S_35"
CHECKOV_SKIP_PREFIX = "checkov.io/skip"

ROUTER_RELEASE_NAME = GUIDE  # names the InferencePool (and <release>-epp)
# The label the chart selects its endpoint picker pods by, `llm-d-router-gateway: <release>-epp` (llm-d-router
# v0.10.0 config/charts/routerlib/templates/_helpers.tpl: llm-d-router.selectorLabels, with the pool created;
# llm-d-router.name is the release name cut at 40 characters, then -epp): the Deployment's selector, and ours.
ENDPOINT_PICKER_SELECTOR_LABEL = "llm-d-router-gateway"
ENDPOINT_PICKER_NAME = f"{ROUTER_RELEASE_NAME[:40]}-epp"


@dataclass(frozen=True)
class ServingObjects:
    """Every manifest of the serving workload, built once per run from the serving block and the stack's."""

    service_account: dict[str, Any]  # the model servers': reads the bucket by Workload Identity
    gateway: dict[str, Any]
    router_values: dict[str, Any]
    leaderworkersets: list[dict[str, Any]]  # prefill, then decode
    staging_script: dict[str, Any] | None  # the weights-staging ConfigMap, account and Job (None: staging is off)
    staging_service_account: dict[str, Any] | None  # the one identity that writes the weights
    staging_job: dict[str, Any] | None
    benchmark_service_account: dict[str, Any]  # `make bench`'s Job runs as it: reads the tokenizer, writes results/
    network_policies: list[dict[str, Any]]  # who may connect to the model servers and to the endpoint picker
    # What mounts the Secret Manager token into the pods (None: the token, if any, is the Secret's HF_TOKEN)
    hf_token_provider_class: dict[str, Any] | None


def serving_objects(
    serving: ServingConfig,
    tpu: TpuConfig,
    queues: QueuesConfig,
    network: NetworkConfig,
    project: str,
    pull_path: PullPath,
    skip_await: bool,
) -> ServingObjects:
    """Every serving object of the stack. ``pull_path``: where the nodes pull the images from (images.mirror or the
    pull-through repositories); ``skip_await``: a control plane without workloads, Pulumi waits for no Gateway or Job.
    """
    namespace, staging = serving.namespace, serving.weights_staging
    inference_gateway = gateway(namespace, serving.gateway)
    if skip_await:
        await_nothing(inference_gateway)
    # Weights staging: the ConfigMap its Job mounts at /staging (the program and its requirements), its account, the Job
    script: dict[str, Any] | None = None
    stager: dict[str, Any] | None = None
    job: dict[str, Any] | None = None
    if staging.enabled:
        script = manifests.config_map("weights-staging-script", namespace, staging_files())
        stager = load_base(
            "weights-staging-service-account.yaml", name=staging.service_account_name, namespace=namespace
        )
        job = weights_staging_job(serving, project, pull_path, skip_await)
    benchmark = load_base("benchmark-service-account.yaml", name=BENCHMARK_SERVICE_ACCOUNT, namespace=namespace)
    token_version = serving.hf_token_secret_version
    return ServingObjects(
        service_account=load_base("service-account.yaml", name=serving.service_account_name, namespace=namespace),
        gateway=inference_gateway,
        router_values=router_values(serving, pull_path),
        leaderworkersets=[leaderworkerset(serving, tpu, queues, project, pull_path, role) for role in ROLES],
        staging_script=script,
        staging_service_account=stager,
        staging_job=job,
        benchmark_service_account=benchmark,
        network_policies=network_policies(serving, network),
        hf_token_provider_class=hf_token_provider_class(namespace, token_version) if token_version else None,
    )


def await_nothing(manifest: dict[str, Any]) -> None:
    """Tell Pulumi not to wait for ``manifest`` to become ready (a cluster that runs nothing)."""
    manifest["metadata"].setdefault("annotations", {})[SKIP_AWAIT_ANNOTATION] = "true"


def load_base(file_name: str, **metadata: str) -> dict[str, Any]:
    """A fresh copy of the one document of ``manifests/serving/<file_name>``, with ``metadata`` (its name, namespace)
    set, if any (the router's values file has none)."""
    document = manifests.load_document(f"serving/{file_name}")
    if metadata:
        document["metadata"].update(metadata)
    return document


def hf_token_provider_class(namespace: str, secret_version: str) -> dict[str, Any]:
    """The SecretProviderClass that makes ``secret_version`` the file ``token`` of the pods' token volume."""
    provider_class = load_base("hf-token-secret-provider-class.yaml", name=HF_TOKEN_PROVIDER_CLASS, namespace=namespace)
    # The provider reads `secrets` as a YAML list in a string (config/config.go: Parse): written as data, not text.
    objects = [{"resourceName": secret_version, "path": HF_TOKEN_FILE}]
    provider_class["spec"]["parameters"]["secrets"] = yaml.safe_dump(objects, sort_keys=False)
    return provider_class


def hand_over_token(
    metadata: dict[str, Any], pod_spec: dict[str, Any], container: dict[str, Any], secret_version: str
) -> None:
    """Give ``container`` the Hugging Face token by one of the two routes above (``metadata``: where the bases skip
    checkov's check of secrets in variables, dropped with the variable)."""
    if not secret_version:
        # Optional: weights and tokenizer come from gs://, so the token only matters for gated downloads from the
        # Hub; the stack creates the Secret only when a token is configured.
        token = {"secretKeyRef": {"name": HF_TOKEN_SECRET_NAME, "key": HF_TOKEN_SECRET_KEY, "optional": True}}
        manifests.set_env(container, HF_TOKEN_ENV, {"valueFrom": token})
        return
    manifests.remove_env(container, HF_TOKEN_ENV)
    manifests.set_env(container, HF_TOKEN_PATH_ENV, f"{HF_TOKEN_DIR}/{HF_TOKEN_FILE}")
    attributes = {"secretProviderClass": HF_TOKEN_PROVIDER_CLASS}
    csi = {"driver": SECRET_MANAGER_CSI_DRIVER, "readOnly": True, "volumeAttributes": attributes}
    pod_spec.setdefault("volumes", []).append({"name": HF_TOKEN_VOLUME, "csi": csi})
    mount = {"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True}
    container.setdefault("volumeMounts", []).append(mount)
    annotations = metadata.get("annotations") or {}
    for key, value in list(annotations.items()):
        if key.startswith(CHECKOV_SKIP_PREFIX) and value.startswith(f"{SECRET_ENV_CHECK}="):
            del annotations[key]


def staging_files() -> dict[str, str]:
    """The staging program and its pinned requirements, exactly as the ConfigMap carries them."""
    return {name: (manifests.MANIFESTS / "serving" / name).read_text(encoding="utf-8") for name in STAGING_FILES}


def weights_staging_job(serving: ServingConfig, project: str, pull_path: PullPath, skip_await: bool) -> dict[str, Any]:
    """The Job that copies the pinned revision into the directory the servers read (``weights_uri``), as its own
    account."""
    staging = serving.weights_staging
    job = load_base(STAGING_JOB_FILE, namespace=serving.namespace)
    timeout_seconds = staging.timeout_minutes * 60
    job["metadata"]["annotations"][TIMEOUT_ANNOTATION] = str(timeout_seconds)
    job["spec"]["activeDeadlineSeconds"] = timeout_seconds
    template = job["spec"]["template"]
    # a change to the program or its pins changes the Job, which then runs again
    manifests.mark_mounted_files(template, staging_files())
    pod = template["spec"]
    pod["serviceAccountName"] = staging.service_account_name
    installer = manifests.container(pod, STAGING_INSTALL_CONTAINER, key="initContainers")
    stager = manifests.container(pod, STAGING_CONTAINER)
    # the Python the wheels were installed for
    installer["image"] = stager["image"] = pull_path.image(staging.image)
    manifests.set_env(stager, "MODEL_ID", serving.model.id)
    manifests.set_env(stager, "MODEL_REVISION", serving.model.revision)
    manifests.set_env(stager, "DESTINATION", weights_uri(serving, project))
    hand_over_token(job["metadata"], pod, stager, serving.hf_token_secret_version)
    if skip_await:
        await_nothing(job)
    return job


# The vLLM server flags the stack's settings give, by the field that holds each: a field of the serving block, or of
# the role's block (serving.prefill, serving.decode) for a setting each role has. The YAML bases hold each flag at its
# default; a field whose default is None (vLLM's own default) has no flag in the bases, and its flag appears only when
# set. So a vLLM setting is its field in config.py and one row here.
VLLM_SETTING_FLAGS = {
    "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "tensor_parallel_size": "--tensor-parallel-size",
    "kv_cache_dtype": "--kv-cache-dtype",
}


def vllm_args(serving: ServingConfig, project: str, role: str, base_args: list[str]) -> list[str]:
    """The leader's ``vllm serve`` arguments for ``role``: the base's, with this stack's values."""
    args = list(base_args)
    manifests.set_flag(args, "--model", weights_uri(serving, project))
    manifests.set_flag(args, "--served-model-name", served_model_name(serving))
    for field, flag in VLLM_SETTING_FLAGS.items():
        block = serving.role(role) if field in ServingRoleConfig.model_fields else serving
        unset_by_default = type(block).model_fields[field].default is None
        manifests.set_flag(args, flag, getattr(block, field), optional=unset_by_default)
    return args


def leaderworkerset(
    serving: ServingConfig, tpu: TpuConfig, queues: QueuesConfig, project: str, pull_path: PullPath, role: str
) -> dict[str, Any]:
    """The ``role`` LeaderWorkerSet with the stack's blocks overlaid on its YAML base (ValueError on a shape that
    splits a host)."""
    machine, shape, model_label = tpu.machine, serving.shape, serving.model.label
    lws = load_base(BASE_FILES[role], name=serving.role(role).name, namespace=serving.namespace)
    metadata = lws["metadata"]
    # The guide and role labels are the base's own (only its leaders carry the guide label, which the router's
    # InferencePool selects: workers run Ray only, with no HTTP server to route to).
    metadata["labels"].update({MODEL_LABEL: model_label, **queue_labels(queues, serving.priority)})
    lws["spec"]["replicas"] = serving.role(role).replicas
    template = lws["spec"]["leaderWorkerTemplate"]
    template["size"] = machine.hosts(shape)
    for leader, pod in ((True, template["leaderTemplate"]), (False, template["workerTemplate"])):
        pod["metadata"]["labels"][MODEL_LABEL] = model_label
        annotations = pod["metadata"]["annotations"]
        annotations[SLICE_TOPOLOGY_ANNOTATION] = str(shape)
        if serving.skip_tpu_webhook_check:
            annotations[SKIP_TPU_WEBHOOK_ANNOTATION] = "true"

        pod_spec = pod["spec"]
        pod_spec["serviceAccountName"] = serving.service_account_name
        container = manifests.container(pod_spec, LEADER_CONTAINER if leader else WORKER_CONTAINER)
        take_tpu_host(pod_spec, container, machine, cpu=serving.resources.cpu, memory=serving.resources.memory)
        if serving.healthy_nodes_only:  # the cube's state for a super-slice: topology.slice_health_label says why
            pod_spec["nodeSelector"][slice_health_label(shape)] = "HEALTHY"

        container["image"] = pull_path.image(serving.image)
        hand_over_token(metadata, pod_spec, container, serving.hf_token_secret_version)
        manifests.set_env(container, "VLLM_XLA_CACHE_PATH", {"value": xla_cache_uri(serving, project)})

        if leader:
            container["args"] = vllm_args(serving, project, role, container["args"])
            container["startupProbe"]["periodSeconds"] = rules.STARTUP_PERIOD_SECONDS
            container["startupProbe"]["failureThreshold"] = serving.startup_failure_threshold
            if role == DECODE:
                sidecar = manifests.container(pod_spec, "routing-proxy", "initContainers")
                sidecar["image"] = pull_path.image(routing_sidecar_image(serving))
    return lws


def gateway(namespace: str, config: GatewayConfig) -> dict[str, Any]:
    """The inference Gateway (HTTP on serving.gateway.port), annotated for Pulumi to await ``Programmed``."""
    gw = load_base("gateway.yaml", name=config.name, namespace=namespace)
    gw["spec"]["gatewayClassName"] = config.class_name
    (listener,) = gw["spec"]["listeners"]
    listener["port"] = config.port
    return gw


def router_values(serving: ServingConfig, pull_path: PullPath) -> dict[str, Any]:
    """Values of the llm-d router chart (the guide label its pool selects is the base's): the Gateway and the
    endpoint picker of the router release (``serving.router.version``: the release's own image, or its digest-pinned
    override) as the nodes pull it (``pull_path``), which the chart would otherwise run at its own floating default
    tag; the chart reads `<registry>/<repository>:<tag>`, so a digest rides in the tag. The served model name is in
    no v0.10.0 value this setup uses: ``httpRoute.baseModel`` would require an ``X-Gateway-Base-Model-Name`` header on
    every request, and ``router.tokenizer.modelName`` only matters with the tokenizer enabled."""
    values = load_base(ROUTER_VALUES_FILE)
    epp = values["router"]["epp"]
    reference = ImageReference.parse(pull_path.image(endpoint_picker_image(serving)))
    registry, _, repository = reference.name.rpartition("/")
    epp["image"].update(registry=registry, repository=repository, tag=reference.tag_and_digest.removeprefix(":"))
    epp["replicas"] = serving.router.replicas
    values["httpRoute"]["inferenceGatewayName"] = serving.gateway.name
    return values


def endpoint_picker_labels() -> dict[str, str]:
    """The chart's selector labels of the endpoint picker pods of our release."""
    return {ENDPOINT_PICKER_SELECTOR_LABEL: ENDPOINT_PICKER_NAME}


def network_policies(serving: ServingConfig, network: NetworkConfig) -> list[dict[str, Any]]:
    """Who may connect to the model servers and to the endpoint picker (manifests/serving/network-policies.yaml
    says who sends what, and why), for this stack: its namespace, model label and proxy-only subnet. The ports and the
    endpoint picker's labels never vary: they are the base's own (the tests hold them to router-values.yaml's
    InferencePool target port, the LeaderWorkerSets' vLLM ports and the chart's selector labels). The weights-staging
    and benchmark Jobs accept nothing."""
    policies = manifests.load_list(f"serving/{NETWORK_POLICIES_FILE}", serving.namespace)
    servers = manifests.by_name(policies, MODEL_SERVERS_POLICY)
    picker = manifests.by_name(policies, ENDPOINT_PICKER_POLICY)
    model = {MODEL_LABEL: serving.model.label}
    peers, _, from_load_balancer, _ = servers["spec"]["ingress"]
    servers["spec"]["podSelector"]["matchLabels"] = dict(model)
    (peer,) = peers["from"]
    peer["podSelector"]["matchLabels"] = dict(model)
    proxies, *_ = from_load_balancer["from"]
    proxies["ipBlock"]["cidr"] = network.proxy_only_cidr
    from_proxies, _, _ = picker["spec"]["ingress"]
    (proxies,) = from_proxies["from"]
    proxies["ipBlock"]["cidr"] = network.proxy_only_cidr
    return policies
