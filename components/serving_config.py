"""The `serving` block of the stack config: P/D-disaggregated vLLM behind the llm-d router, and
its preview rules, each reported under the config key that fixes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from components import admission, serving_objects, serving_rules, topology, workload_rules
from components.config_base import EXACT_VERSION, Problems, image_pin_problem, is_k8s_name, setting

if TYPE_CHECKING:
    from components.stack_config import StackConfig

@dataclass(frozen=True)
class ServingModelConfig:
    id: str = setting(serving_objects.MODEL_ID, "Hugging Face model id (also the served model name unless servedName is set).")
    served_name: str = setting("", "Model name clients send; empty means the model id.")
    revision: str = setting(serving_objects.MODEL_REVISION, "Snapshot (commit) of the model in the bucket's Hugging Face cache layout.")
    weights_path: str = setting("", "Object path of the snapshot in the bucket; empty means models--<org>--<name>/snapshots/<revision>.")
    parameters_billions: float = setting(serving_objects.MODEL_PARAMETERS / 1e9, "Total parameters in billions (the HBM rule).")
    weights_dtype: str = setting(serving_objects.MODEL_WEIGHTS_DTYPE, "Storage type of the weights: fp32, bf16, fp16, fp8, int8 or int4.")


@dataclass(frozen=True)
class WeightsBucketConfig:
    name: str = setting("", "Bucket of the weights and the XLA cache; empty means `<project>-llm-weights`.")
    create: bool = setting(True, "Create the bucket (false: use an existing one, which must hold the weights).")
    protect: bool = setting(True, "Mark a created bucket `protect`, so `pulumi destroy` cannot delete the weights.")


@dataclass(frozen=True)
class ServingRoleConfig:
    name: str = setting(doc="LeaderWorkerSet name (counts against the 49-character slice-name budget).")
    replicas: int = setting(4, "Model-server groups of this role, one slice each.")
    tensor_parallel_size: int = setting(16, "vLLM --tensor-parallel-size; prefill and decode must match.")


@dataclass(frozen=True)
class ServingResourcesConfig:
    cpu: str = setting("220", "CPU request (= limit) of each TPU pod.")
    memory: str = setting("850Gi", "Memory request (= limit) of each TPU pod.")


@dataclass(frozen=True)
class GatewayConfig:
    name: str = setting(serving_objects.GATEWAY_NAME, "Gateway name.")
    class_name: str = setting(serving_objects.GATEWAY_CLASS, "GatewayClass; gke-l7-rilb is GKE's regional internal Application Load Balancer.")
    port: int = setting(serving_objects.GATEWAY_PORT, "HTTP listener port.")


@dataclass(frozen=True)
class RouterConfig:
    chart: str = setting(serving_objects.ROUTER_CHART, "llm-d router chart.")
    version: str = setting(serving_objects.ROUTER_CHART_VERSION, "Exact chart version (never the floating v0).")


@dataclass(frozen=True)
class InferencePoolCrdsConfig:
    install: bool = setting(False, "Install the InferencePool CRDs (GKE manages them on recent versions; set true where it does not).")
    version: str = setting("v1.5.0", "Gateway API Inference Extension release whose CRDs to install.")


@dataclass(frozen=True)
class ServingConfig:
    enabled: bool = setting(False, "Deploy P/D-disaggregated vLLM behind the llm-d router and an internal Gateway (TPU7x).")
    namespace: str = setting("llm-d-pd-disaggregation", "Serving namespace; must be one of queues.namespaces (its LocalQueue).")
    hf_token: str = setting("", "Hugging Face token (set with --secret); empty means no token Secret is created.", secret=True)
    model: ServingModelConfig = setting(ServingModelConfig(), "The model.")
    weights_bucket: WeightsBucketConfig = setting(WeightsBucketConfig(), "Cloud Storage bucket of the weights.")
    image: str = setting(serving_objects.VLLM_IMAGE, "vLLM TPU image (dated tag or digest).")
    routing_sidecar_image: str = setting(serving_objects.ROUTING_SIDECAR_IMAGE, "llm-d routing sidecar image of the decode pods.")
    slice_shape: str = setting("2x2x2", "Slice of each model-server group; one of tpu.sliceShapes.")
    priority: str = setting("high", "Priority level (queues.priorityClasses): serving preempts the checks.")
    prefill: ServingRoleConfig = setting(ServingRoleConfig("vllm-prefill"), "Prefill LeaderWorkerSet.")
    decode: ServingRoleConfig = setting(ServingRoleConfig("vllm-decode"), "Decode LeaderWorkerSet.")
    max_model_len: int = setting(9216, "vLLM --max-model-len.")
    max_num_seqs: int = setting(512, "vLLM --max-num-seqs.")
    max_num_batched_tokens: int = setting(8192, "vLLM --max-num-batched-tokens.")
    kv_cache_dtype: str = setting("fp8", "vLLM --kv-cache-dtype.")
    resources: ServingResourcesConfig = setting(ServingResourcesConfig(), "Requests of each TPU pod.")
    hbm_headroom: float = setting(0.25, "Share of the slice's HBM kept free of weights (KV cache, activations).")
    startup_failure_threshold: int = setting(
        serving_objects.STARTUP_FAILURE_THRESHOLD, "Startup probe failures (every 30 s) allowed while the model loads and compiles."
    )
    skip_tpu_webhook_check: bool = setting(False, "Annotate pods cloud.google.com/skip-tpu-webhook-check.")
    healthy_nodes_only: bool = setting(False, "Select only nodes whose partition state is HEALTHY.")
    service_account_name: str = setting(serving_objects.SERVICE_ACCOUNT_NAME, "Kubernetes service account of the model servers.")
    gateway: GatewayConfig = setting(GatewayConfig(), "The inference Gateway.")
    router: RouterConfig = setting(RouterConfig(), "The llm-d router Helm chart.")
    inference_pool_crds: InferencePoolCrdsConfig = setting(InferencePoolCrdsConfig(), "InferencePool CRDs.")


# --- Derived values ----------------------------------------------------------------------------


def weights_bucket_name(config: StackConfig) -> str:
    return config.serving.weights_bucket.name or f"{config.project}-llm-weights"


def weights_uri(config: StackConfig) -> str:
    model = config.serving.model
    bucket = weights_bucket_name(config)
    if model.weights_path:
        return f"gs://{bucket}/{model.weights_path.strip('/')}"
    return serving_objects.hf_cache_weights_uri(bucket, model.id, model.revision)


def serving_params(config: StackConfig) -> serving_objects.ServingParams:
    serving = config.serving
    return serving_objects.ServingParams(
        weights_uri=weights_uri(config),
        namespace=serving.namespace,
        queue_name=config.queues.local_queue_name,
        priority_class=config.priority_class(serving.priority).name,
        model_id=serving.model.id,
        served_model_name=serving.model.served_name or serving.model.id,
        image=serving.image,
        routing_sidecar_image=serving.routing_sidecar_image,
        machine_type=config.tpu.machine_type,
        slice_shape=serving.slice_shape,
        prefill_name=serving.prefill.name,
        decode_name=serving.decode.name,
        prefill_replicas=serving.prefill.replicas,
        decode_replicas=serving.decode.replicas,
        tensor_parallel_size=serving.prefill.tensor_parallel_size,
        max_model_len=serving.max_model_len,
        max_num_seqs=serving.max_num_seqs,
        max_num_batched_tokens=serving.max_num_batched_tokens,
        kv_cache_dtype=serving.kv_cache_dtype,
        cpu=serving.resources.cpu,
        memory=serving.resources.memory,
        startup_failure_threshold=serving.startup_failure_threshold,
        skip_tpu_webhook_check=serving.skip_tpu_webhook_check,
        healthy_nodes_only=serving.healthy_nodes_only,
        service_account_name=serving.service_account_name,
        model_parameters=serving.model.parameters_billions * 1e9,
        weights_dtype=serving.model.weights_dtype,
        hbm_headroom_fraction=serving.hbm_headroom,
    )


def serving_workloads(config: StackConfig) -> list[admission.SliceWorkload]:
    serving = config.serving
    priority = config.priority_class(serving.priority)
    shape = topology.Shape.parse(serving.slice_shape)
    return [
        admission.SliceWorkload(f"serving.{role}", shape, role_config.replicas, priority.name, priority.value)
        for role, role_config in (("prefill", serving.prefill), ("decode", serving.decode))
    ]


# --- Validation --------------------------------------------------------------------------------


def validate_serving(config: StackConfig, problems: Problems) -> None:
    serving = config.serving
    if not serving.enabled:
        return
    machine = topology.MACHINE_CATALOG.get(config.tpu.machine_type)
    if machine is None or not machine.dynamic_slicing:
        problems.add("serving.enabled", f"P/D serving runs on TPU7x sub-slices, not {config.tpu.machine_type}", "set tpu.machineType to tpu7x-standard-4t or serving.enabled false")
        return
    before = len(problems.items)
    _validate_names(config, problems)
    _validate_shape_and_parallelism(config, problems)
    _validate_model(config, problems)
    _validate_pods(config, problems)
    _validate_front(serving, problems)
    if len(problems.items) == before:
        _validate_capacity(config, problems)


def _validate_names(config: StackConfig, problems: Problems) -> None:
    serving = config.serving
    workload_rules.validate_queued_namespace(config, "serving.namespace", serving.namespace, problems)
    for key, value in (("serviceAccountName", serving.service_account_name), ("gateway.name", serving.gateway.name)):
        if not is_k8s_name(value):
            problems.add(f"serving.{key}", f"{value!r} is not a Kubernetes name", "use lowercase letters, digits and hyphens")
    names = {}
    for role, role_config in (("prefill", serving.prefill), ("decode", serving.decode)):
        key = f"serving.{role}.name"
        named = workload_rules.validate_workload_name(key, serving.namespace, role_config.name, "serving.namespace", problems)
        if named and role_config.name in names.values():
            problems.add(key, f"{role_config.name!r} is also the {next(iter(names))} name", "give each role its own name")
        names[role] = role_config.name
    workload_rules.validate_priority_level("serving.priority", serving.priority, problems)


def _validate_shape_and_parallelism(config: StackConfig, problems: Problems) -> None:
    serving = config.serving
    if not workload_rules.validate_admitted_shape(config, "serving.sliceShape", serving.slice_shape, problems):
        return
    for problem in serving_rules.tensor_parallel_match_problems(serving.prefill.tensor_parallel_size, serving.decode.tensor_parallel_size):
        problems.add("serving.decode.tensorParallelSize", problem, f"set {serving.prefill.tensor_parallel_size}, as serving.prefill.tensorParallelSize")
    for role, role_config in (("prefill", serving.prefill), ("decode", serving.decode)):
        for problem in serving_rules.tensor_parallel_fit_problems(role_config.tensor_parallel_size, serving.slice_shape, config.tpu.machine_type):
            problems.add(f"serving.{role}.tensorParallelSize", problem, "lower it or use a larger serving.sliceShape")
        if role_config.replicas < 1:
            problems.add(f"serving.{role}.replicas", f"{role_config.replicas} serves nothing", "use 1 or more")


def _validate_model(config: StackConfig, problems: Problems) -> None:
    serving = config.serving
    model = serving.model
    for problem in serving_rules.label_value_problems(model.id.rsplit("/", 1)[-1], "model name"):
        problems.add("serving.model.id", problem, "use a Hugging Face id such as Qwen/Qwen3.5-397B-A17B-FP8")
    for problem in serving_rules.weights_uri_problems(weights_uri(config)):
        key = "serving.model.weightsPath" if model.weights_path else "serving.weightsBucket.name"
        problems.add(key, problem, "name the bucket and the snapshot path")
    if model.weights_dtype not in serving_rules.BYTES_PER_PARAMETER:
        problems.add("serving.model.weightsDtype", f"{model.weights_dtype!r} is not a known dtype", f"use one of {', '.join(serving_rules.BYTES_PER_PARAMETER)}")
    elif serving.slice_shape in config.tpu.slice_shapes:
        fit = serving_rules.weights_fit_problems(
            model.parameters_billions * 1e9, model.weights_dtype, serving.slice_shape, config.tpu.machine_type, serving.hbm_headroom
        )
        for problem in fit:
            problems.add("serving.model.parametersBillions", problem, "use a larger serving.sliceShape, a smaller dtype or less serving.hbmHeadroom")


def _validate_pods(config: StackConfig, problems: Problems) -> None:
    serving = config.serving
    for problem in serving_rules.pod_resources_problems(serving.resources.cpu, serving.resources.memory, config.tpu.machine_type):
        resource = "cpu" if problem.startswith("cpu") else "memory"
        problems.add(f"serving.resources.{resource}", problem, "request at most what one TPU host has")
    for problem in serving_rules.startup_budget_problems(serving_objects.STARTUP_PERIOD_SECONDS, serving.startup_failure_threshold):
        problems.add("serving.startupFailureThreshold", problem, "raise it")
    for key, image in (("image", serving.image), ("routingSidecarImage", serving.routing_sidecar_image)):
        if problem := image_pin_problem(image):
            problems.add(f"serving.{key}", problem, "pin a dated tag or @sha256:<digest>")


def _validate_front(serving: ServingConfig, problems: Problems) -> None:
    if not 1 <= serving.gateway.port <= 65535:
        problems.add("serving.gateway.port", f"{serving.gateway.port} is not a port", "use 1-65535, e.g. 80")
    if not serving.router.chart.startswith(("oci://", "https://")):
        problems.add("serving.router.chart", f"{serving.router.chart!r} is not an oci:// or https:// chart reference", "use the chart's published URL")
    for key, version in (("router.version", serving.router.version), ("inferencePoolCrds.version", serving.inference_pool_crds.version)):
        if not EXACT_VERSION.match(version):
            problems.add(f"serving.{key}", f"{version!r} is not an exact version", "pin a release such as v0.10.0")


def _validate_capacity(config: StackConfig, problems: Problems) -> None:
    workloads = serving_workloads(config)
    needed = admission.cubes_needed(workloads)
    if needed > config.cubes:
        problems.add(
            "serving.decode.replicas",
            f"prefill and decode together need {needed} cube(s) of {topology.CUBE}; the stack has {config.cubes}, so serving could never run whole",
            "lower serving.prefill.replicas or serving.decode.replicas, or add TPU pools",
        )
    objects = serving_objects.prefill_decode_leaderworkersets(serving_params(config))
    for problem in serving_rules.leaderworkerset_problems(objects, config.tpu.machine_type):
        problems.add("serving", problem, "report this: the LeaderWorkerSets contradict the serving config")
