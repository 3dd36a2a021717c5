"""Preview rules for the P/D model servers: pure functions (no Pulumi imports), each returning a list of sentences,
empty when all is well, each saying what is wrong and how to fix it; the caller (config validation) names the key."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.config_base import ImageReference, Problem, image_pin_problem, parse_quantity
from components.naming import bucket_name_problem
from components.tpu.sizing import weight_bytes
from components.tpu.topology import GB, MachineType, Shape

# Startup: the leader waits up to 1800 s for the workers to join the Ray cluster (--ray_init_timeout of vLLM's
# examples/online_serving/multi-node-serving.sh, in the command of the LWS bases; on timeout the script exits 1 and
# `vllm serve` never starts). Then the engine core streams ~400 GB of weights and initialises the model on 16 devices,
# and /v1/models answers only after that. Nothing in vLLM bounds that load here: with one API server (no
# --api-server-count, data-parallel size 1: vllm/entrypoints/cli/serve.py), the API server waits for the engine's READY
# in wait_for_engine_startup (vllm/v1/engine/utils.py), which polls every 10 s with no deadline until READY or until an
# engine process exits. VLLM_ENGINE_READY_TIMEOUT_S (default 600, vllm/envs.py) bounds only MPClient's wait for the
# input-socket ready message (vllm/v1/engine/core_client.py), which with one API server comes after the handshake, load
# included; it bounds the load only where engines start apart from the API server (several API servers, Ray data
# parallelism) or scale up (elastic EP). Read in vllm v0.20.0 and v0.21.0, the releases either side of the image's vLLM
# 5b39b268 (2026-04-30, tpu-inference 18ed615 .buildkite/vllm_lkg.version), identical in these paths; tpu-inference
# 18ed615 reads no startup timeout of its own, and its placement-group wait (vLLM's _wait_until_pg_ready, 1800 s,
# vllm/v1/executor/ray_utils.py) ends as soon as the formed Ray cluster has the TPUs. So the startup probe is the only
# bound on the load: it must outlast the Ray wait plus an allowance for the load, or the kubelet kills a leader that
# would have come up (and RecreateGroupOnPodRestart restarts the whole group). The 1800 s allowance is this program's
# figure, not an upstream one and not a measurement. Default budget: 30 s x 240 = 7200 s = 2 x (1800 s + 1800 s). XLA
# compilation is deferred to the first requests (SKIP_JAX_PRECOMPILE=1), so it is not in the startup path.
RAY_INIT_TIMEOUT_SECONDS = 1800
ENGINE_LOAD_ALLOWANCE_SECONDS = 1800
STARTUP_SECONDS_NEEDED = RAY_INIT_TIMEOUT_SECONDS + ENGINE_LOAD_ALLOWANCE_SECONDS
STARTUP_PERIOD_SECONDS = 30
STARTUP_FAILURE_THRESHOLD = 240

# A label value as the API server checks it: kubernetes/apimachinery pkg/util/validation/validation.go
# IsValidLabelValue, Go's "^(...)?$", whose `$` is the end of the text. Matched whole (fullmatch): Python's `$` also
# matches before a final newline, so "Qwen3\n" (a YAML `|` scalar) passed and was refused in the `up`.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")

# The decode pods' P/D sidecar is llm-d-router's pd-sidecar binary, of the router's release (config.py ROUTER_VERSION).
# The flags the decode base passes are those of v0.10.0 (pkg/sidecar/proxy/options.go): --model-server-port first
# appears there (llm-d-router#2142, which deprecates --vllm-port), and v0.10.0 removed --connector (llm-d-router#2054),
# so an older sidecar refuses the arguments and a newer one is the router's own business.
ROUTING_SIDECAR_NAME = "llm-d-router-disagg-sidecar"
SIDECAR_FLAGS_SINCE = "v0.10.0"
_RELEASE = re.compile(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)")


def tensor_parallel_match_problems(prefill_tp: int, decode_tp: int) -> list[str]:
    """Prefill and decode must shard the model alike: TPUConnectorHMA copies KV shard by shard."""
    if prefill_tp == decode_tp:
        return []
    return [
        f"prefill uses tensor-parallel size {prefill_tp} but decode uses {decode_tp}; TPUConnectorHMA "
        "moves KV caches between identically sharded servers only, so give both roles the same size"
    ]


def tensor_parallel_fit_problems(tensor_parallel_size: int, shape: Shape, machine: MachineType) -> list[str]:
    """Tensor parallelism spans the JAX devices of one slice: chips x TensorCores per chip (JAX shows each TensorCore
    as a device: a 2x2x2 TPU7x slice is 8 chips, 16 devices). The size is 1 or more: its field declares it."""
    devices = shape.chips * machine.tensorcores_per_chip
    if tensor_parallel_size > devices:
        return [
            f"tensor-parallel size {tensor_parallel_size} exceeds the {devices} TensorCores of one {shape} slice "
            f"({shape.chips} chips x {machine.tensorcores_per_chip} on {machine.name}); use at most {devices} "
            "or a larger slice shape"
        ]
    if devices % tensor_parallel_size:
        divisors = ", ".join(str(d) for d in range(1, devices + 1) if devices % d == 0)
        return [
            f"tensor-parallel size {tensor_parallel_size} does not divide the {devices} TensorCores of one {shape} "
            f"slice, so vLLM cannot shard the model evenly over them; use one of {divisors}"
        ]
    return []


def weights_fit_problems(
    parameters_billions: float, dtype: str, shape: Shape, machine: MachineType, headroom_fraction: float
) -> list[str]:
    """The weights must fit the slice's HBM with ``headroom_fraction`` of it left for the KV
    cache, activations and compiled programs: ``parameters x bytes <= chips x HBM x (1 - headroom)``, the headroom a
    fraction at least 0 and below 1 (serving.hbmHeadroom declares it)."""
    try:
        needed = weight_bytes(parameters_billions, dtype)
    except ValueError as error:
        return [str(error)]
    usable = machine.hbm_bytes(shape) * (1 - headroom_fraction)
    if needed <= usable:
        return []
    return [
        f"{parameters_billions:g}B parameters in {dtype} take {float(needed) / GB:,.0f} GB, more than the {usable / GB:,.0f} GB "
        f"a {shape} slice leaves for weights ({shape.chips} chips x {machine.hbm_bytes_per_chip / GB:,.0f} GB HBM, "
        f"{headroom_fraction:.0%} kept free); use a larger slice shape, a smaller dtype or less headroom"
    ]


def pod_resources_problems(cpu: str, memory: str, machine: MachineType) -> list[tuple[str, str]]:
    """A TPU pod takes a whole host: its CPU and memory requests must fit that host's VM; each problem as (``cpu`` or
    ``memory``, sentence)."""
    problems = []
    for name, text, capacity, unit in (
        ("cpu", cpu, machine.vcpus_per_host, "vCPUs"),
        ("memory", memory, machine.memory_bytes_per_host, "bytes"),
    ):
        try:
            value = parse_quantity(text)
        except ValueError as error:
            problems.append((name, f"{name}: {error}"))
            continue
        if value <= 0:
            problems.append((name, f"{name} request {text} must be positive"))
        elif value > capacity:
            exceeds = f"exceeds the {capacity:,} {unit} of one {machine.name} host"
            problems.append(
                (name, f"{name} request {text} {exceeds}; request less (the node's allocatable is lower still)")
            )
    return problems


def startup_budget_problems(period_seconds: int, failure_threshold: int) -> list[str]:
    """The startup probe must outlast the Ray cluster wait plus the allowance for loading the model."""
    if period_seconds < 1 or failure_threshold < 1:
        return [f"startup probe period {period_seconds} s and failure threshold {failure_threshold} must be at least 1"]
    budget = period_seconds * failure_threshold
    if budget >= STARTUP_SECONDS_NEEDED:
        return []
    threshold = -(-STARTUP_SECONDS_NEEDED // period_seconds)
    return [
        f"startup probe allows {period_seconds} s x {failure_threshold} = {budget} s, less than the "
        f"{STARTUP_SECONDS_NEEDED} s allowed for forming the Ray cluster and loading the model (vLLM sets no limit on "
        "the load, so the probe is the only one); the kubelet would restart a group still loading; raise the failure "
        f"threshold to at least {threshold}"
    ]


def weights_uri_problems(uri: str) -> list[str]:
    """The Run:ai streamer reads the weights from ``gs://<bucket>/<snapshot directory>``."""
    # Whole (fullmatch), and no carriage return or line feed in the path: Cloud Storage's object names hold neither
    # (cloud.google.com/storage/docs/objects#naming), and `$` let a final newline through ("gs://b/qwen\n").
    if not (match := re.fullmatch(r"gs://([^/]+)(/[^\r\n]*)?", uri or "")):
        return [f"weights URI {uri!r} is not gs://<bucket>/<path>; point it at the model snapshot in Cloud Storage"]
    bucket, problems = match.group(1), []
    if problem := bucket_name_problem(bucket):
        problems.append(f"{bucket!r} in the weights URI is not a Cloud Storage bucket name ({problem})")
    if uri.rstrip("/") == f"gs://{bucket}":
        problems.append(f"weights URI {uri!r} names the bucket only; point it at the snapshot directory inside it")
    return problems


def prefix_overlap_problems(weights_prefix: str, cache_prefix: str) -> list[str]:
    """The snapshot's directory and another writer's prefix (the model servers' XLA cache, the benchmark's
    results) are apart: each has its own writer, granted by object-name prefix, so neither may hold the other."""
    if weights_prefix.startswith(cache_prefix) or cache_prefix.startswith(weights_prefix):
        return [
            f"the snapshot directory {weights_prefix!r} and {cache_prefix!r} overlap: the account that writes "
            f"{cache_prefix!r} could then overwrite the weights (or the staging Job its objects)"
        ]
    return []


def label_value_problems(value: str, what: str) -> list[str]:
    """A Kubernetes label value: at most 63 characters, alphanumeric at both ends."""
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return [
            f"{what} {value!r} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        ]
    return []


def router_version_problems(version: str) -> list[str]:
    """The router release must be one whose sidecar takes the flags the decode pods pass."""
    release, floor = (_RELEASE.match(v) for v in (version, SIDECAR_FLAGS_SINCE))
    if release is None or floor is None or tuple(map(int, release.groups())) >= tuple(map(int, floor.groups())):
        return []
    return [
        f"llm-d router {version} is older than {SIDECAR_FLAGS_SINCE}, the first release whose P/D sidecar takes "
        "--model-server-port (the decode pods pass it; older sidecars refuse unknown flags and exit)"
    ]


def routing_sidecar_image_problems(image: str, router_version: str) -> list[str]:
    """An override of the P/D sidecar image: pinned, llm-d-router's disagg sidecar, and the router's release, which
    the tag carries, so a digest alone is refused: ``<registry>/<path>/<name>:<tag>[@sha256:<digest>]``."""
    if unpinned := image_pin_problem(image):
        return [unpinned]
    reference = ImageReference.parse(image)
    name, tag = reference.name.rsplit("/", 1)[-1], reference.tag
    problems = []
    if name != ROUTING_SIDECAR_NAME:
        problems.append(
            f"{image!r} is not llm-d-router's {ROUTING_SIDECAR_NAME}, whose flags the decode pods pass "
            f"(the image named {name!r} may take others)"
        )
    if not tag:
        problems.append(
            f"{image!r} pins a digest without a tag, so nothing shows which router release it is; "
            f"name the tag {router_version} with the digest"
        )
    elif tag != router_version:
        problems.append(
            f"{image!r} is release {tag}, but serving.router.version is {router_version}: the sidecar speaks "
            "to the router's endpoint picker and takes that release's flags, so both must be one release"
        )
    return problems


@dataclass(frozen=True)
class BucketRead:
    """What the preview read of an existing weights bucket (serving.weightsBucket.create false): ``error`` is the
    read's failure in the provider's words (a missing bucket's is Cloud Storage's 404, "The specified bucket does
    not exist."), else the bucket's ``location`` as the API reports it, its uniform bucket-level access, and the
    regions of a configurable dual-region (customPlacementConfig.dataLocations)."""

    name: str
    error: str = ""
    location: str = ""
    uniform_access: bool = False
    data_locations: tuple[str, ...] = ()


# A bucket's location is a region (`US-CENTRAL1`), a dual-region (`NAM4`, or a configurable one whose regions the
# bucket lists) or a multi-region (`US`, `EU`, `ASIA`); region names alone hold a hyphen (Cloud Storage "Bucket
# locations", docs.cloud.google.com/storage/docs/locations, read 2026-12).
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")


def weights_bucket_review(
    read: BucketRead, region: str, grant_access: bool
) -> tuple[list[str], list[str], list[Problem]]:
    """(what to report, what to warn of, what to refuse) of the weights bucket the stack uses but did not make.

    - Uniform bucket-level access, with serving.weightsBucket.grantAccess: the stack's grants carry IAM conditions
      (object-name prefixes, components/resources.py object_prefix_condition), and Cloud Storage takes conditional
      role bindings only on a bucket with uniform bucket-level access (IAM "Resource types that accept conditional
      role bindings", cloud.google.com/iam/help/conditions/resource-policies, Cloud Storage buckets, read 2026-12;
      hashicorp/terraform-provider-google v7.45.0 google/services/storage/iam_storage_bucket_test.go makes every
      bucket of its conditional-binding tests with it): the grant fails at `up` otherwise.
    - Location: the TPU hosts in ``region`` stream the weights (~400 GB) at every model server start and write the
      XLA cache there. Cloud Storage's advice is to "colocate your data and compute in the same region(s)", regions
      and dual-regions both suiting that ("Bucket locations", location recommendations, read 2026-12). A bucket in
      another single region (or a configurable dual-region without ``region``) puts every read across regions: it
      is refused. A multi-region or a predefined dual-region, whose regions the bucket does not list, is warned of.
    """
    key = "serving.weightsBucket.name"
    own = "or let the stack make one (serving.weightsBucket.create true)"
    if read.error:
        if "Error 404" in read.error:
            what, fix = "does not exist", f"create it and stage the weights there, name an existing one, {own}"
        else:
            what = f"could not be read ({read.error})"
            fix = f"grant the deployer storage.buckets.get on it (roles/storage.bucketViewer), {own}"
        return [], [], [Problem(key, f"bucket {read.name!r} {what}", fix)]
    location = read.location.lower()
    access = "uniform bucket-level access" if read.uniform_access else "fine-grained access (ACLs)"
    report = [f"weights bucket {read.name}: {read.location}, {access}"]
    warnings: list[str] = []
    problems: list[Problem] = []
    if grant_access and not read.uniform_access:
        problems.append(
            Problem(
                key,
                f"bucket {read.name!r} has fine-grained access (ACLs), and the stack's grants on it carry IAM "
                "conditions, which Cloud Storage takes only on a bucket with uniform bucket-level access",
                f"turn it on (`gcloud storage buckets update gs://{read.name} --uniform-bucket-level-access`, after "
                "checking that nothing reads it through object ACLs), or set serving.weightsBucket.grantAccess false "
                "and make the grants elsewhere",
            )
        )
    regions = [r.lower() for r in read.data_locations]
    if location == region or region in regions:
        return report, warnings, problems
    if _REGION.match(location) or regions:
        problems.append(
            Problem(
                key,
                f"bucket {read.name!r} keeps its data in {', '.join(regions) or location}, not in {region}: every "
                "model server start would stream the weights across regions",
                f"copy the weights to a bucket in {region} and name it, {own}",
            )
        )
    else:
        warnings.append(
            f"serving.weightsBucket.name: bucket {read.name!r} is in {read.location}, a multi- or dual-region whose "
            f"regions the bucket does not list: if {region} is not among them, every model server start streams the "
            f"weights across regions (Cloud Storage advises a bucket in {region})"
        )
    return report, warnings, problems
