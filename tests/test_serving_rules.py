"""Preview rules of the P/D model servers: table-driven bad inputs, each named in its problem."""

from __future__ import annotations

import pytest

from components.config_base import parse_quantity
from components.tpu.topology import MACHINE_CATALOG, Shape
from components.workloads.serving import rules
from components.workloads.serving.rules import STARTUP_SECONDS_NEEDED

TPU7X = MACHINE_CATALOG["tpu7x-standard-4t"]
V5E = MACHINE_CATALOG["ct5lp-hightpu-4t"]


# --- Tensor parallelism ----------------------------------------------------------------------


@pytest.mark.parametrize("prefill, decode", [(16, 8), (8, 16), (1, 2)])
def test_prefill_and_decode_tensor_parallel_sizes_must_match(prefill, decode):
    (problem,) = rules.tensor_parallel_match_problems(prefill, decode)
    assert f"prefill uses tensor-parallel size {prefill} but decode uses {decode}" in problem
    assert "same size" in problem


@pytest.mark.parametrize(
    "tp, shape, machine, fragment",
    [
        (17, "2x2x2", TPU7X, "exceeds the 16 TensorCores of one 2x2x2 slice"),
        (16, "2x2x1", TPU7X, "exceeds the 8 TensorCores of one 2x2x1 slice"),
        (128, "2x4x4", TPU7X, "exceeds the 64 TensorCores"),
        (16, "2x4", V5E, "exceeds the 8 TensorCores of one 2x4 slice (8 chips x 1"),
    ],
)
def test_tensor_parallel_size_must_fit_the_slice(tp, shape, machine, fragment):
    problems = rules.tensor_parallel_fit_problems(tp, Shape.parse(shape), machine)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("tp, shape", [(16, "2x2x2"), (8, "2x2x2"), (8, "2x2x1"), (64, "2x4x4"), (256, "4x4x8")])
def test_tensor_parallel_size_within_the_slice_is_fine(tp, shape):
    assert rules.tensor_parallel_fit_problems(tp, Shape.parse(shape), TPU7X) == []


# --- Weights in HBM --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters, dtype, shape, machine, headroom, fragment",
    [
        # 397e9 x 2 B = 794 GB > 4 chips x 206 GB x 0.75 = 618 GB
        (397, "bf16", "2x2x1", TPU7X, 0.25, "take 794 GB, more than the 618 GB a 2x2x1 slice leaves"),
        # 397e9 x 4 B = 1,588 GB > 8 x 206 GB x 0.75 = 1,237 GB
        (397, "fp32", "2x2x2", TPU7X, 0.25, "take 1,588 GB"),
        (397, "fp8", "2x2x1", TPU7X, 0.6, "60% kept free"),
        (70, "bf16", "2x4", V5E, 0.1, "a 2x4 slice leaves"),  # 140 GB > 8 x 16 GB x 0.9
        (397, "fp4", "2x2x2", TPU7X, 0.25, "'fp4' is not a known dtype; use one of fp32"),
        (0, "fp8", "2x2x2", TPU7X, 0.25, "must be a positive number"),
    ],
)
def test_weights_must_fit_the_slice_hbm(parameters, dtype, shape, machine, headroom, fragment):
    problems = rules.weights_fit_problems(parameters, dtype, Shape.parse(shape), machine, headroom)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize(
    "parameters, dtype, shape, headroom",
    [
        (397, "fp8", "2x2x2", 0.25),
        (397, "fp8", "2x2x1", 0.25),
        (397, "bf16", "2x2x2", 0.25),
        (480, "fp8", "2x2x1", 0.2),
    ],
)
def test_weights_that_fit(parameters, dtype, shape, headroom):
    assert rules.weights_fit_problems(parameters, dtype, Shape.parse(shape), TPU7X, headroom) == []


# --- Pod resources ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cpu, memory, resource, fragment",
    [
        ("225", "850Gi", "cpu", "cpu request 225 exceeds the 224 vCPUs"),
        ("220", "1Ti", "memory", "memory request 1Ti exceeds"),
        ("lots", "850Gi", "cpu", "'lots' is not a Kubernetes quantity"),
        ("220", "850GB", "memory", "'850GB' is not a Kubernetes quantity"),
        ("0", "850Gi", "cpu", "must be positive"),
    ],
)
def test_pod_resources_must_fit_a_host(cpu, memory, resource, fragment):
    problems = rules.pod_resources_problems(cpu, memory, TPU7X)
    assert any(key == resource and fragment in p for key, p in problems), problems


@pytest.mark.parametrize("text, value", [("220", 220), ("500m", 0.5), ("850Gi", 850 * 2**30), ("1.5G", 1.5e9)])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


# --- Startup, images, URIs, labels -----------------------------------------------------------


@pytest.mark.parametrize(
    "period, threshold, fragment",
    [
        (30, 60, "allows 30 s x 60 = 1800 s, less than the 3600 s"),
        (10, 100, "raise the failure threshold to at least 360"),
        (30, 119, "raise the failure threshold to at least 120"),
        (0, 240, "must be at least 1"),
        (30, 0, "must be at least 1"),
    ],
)
def test_startup_budget_must_outlast_ray_and_engine_startup(period, threshold, fragment):
    problems = rules.startup_budget_problems(period, threshold)
    assert any(fragment in p for p in problems), problems


def test_startup_budget_thresholds():
    assert STARTUP_SECONDS_NEEDED == 3600
    assert rules.startup_budget_problems(30, 120) == []
    assert rules.startup_budget_problems(30, 240) == []


@pytest.mark.parametrize(
    "uri, fragment",
    [
        ("s3://bucket/model", "is not gs://<bucket>/<path>"),
        ("/data/model", "is not gs://<bucket>/<path>"),
        ("gs://Bucket_Upper/model", "is not a Cloud Storage bucket name"),
        ("gs://qwen-weights", "names the bucket only"),
        ("gs://qwen-weights/", "names the bucket only"),
        ("gs://qwen-weights/qwen\n", "is not gs://<bucket>/<path>"),  # no object name holds a line feed
        ("gs://qwen-weights/qw\ren", "is not gs://<bucket>/<path>"),  # nor a carriage return
        ("gs://qwen-weights\n/qwen", "is not a Cloud Storage bucket name"),
    ],
)
def test_weights_uri(uri, fragment):
    problems = rules.weights_uri_problems(uri)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("value", ["-guide", "guide-", "a" * 64, "has space", "slash/ed", "guide\n"])
def test_label_values(value):
    (problem,) = rules.label_value_problems(value, "guide label")
    assert "guide label" in problem and "not a valid label value" in problem


# --- The router release and its P/D sidecar --------------------------------------------------

MIRROR = "us-docker.pkg.dev/p/mirror/llm-d-router-disagg-sidecar"
DIGEST = "sha256:" + "c" * 64


@pytest.mark.parametrize("version", ["v0.10.0", "v0.10.0-rc.1", "v0.10.1", "v0.11.0", "1.0.0"])
def test_router_releases_whose_sidecar_takes_our_flags(version):
    assert rules.router_version_problems(version) == []


@pytest.mark.parametrize("version", ["v0.9.0", "v0.8.0", "0.9.9"])
def test_router_releases_before_model_server_port_are_refused(version):
    (problem,) = rules.router_version_problems(version)
    assert f"{version} is older than v0.10.0" in problem and "--model-server-port" in problem


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
        f"{MIRROR}:v0.10.0",
        f"{MIRROR}:v0.10.0@{DIGEST}",
        "registry.local:5000/llm-d-router-disagg-sidecar:v0.10.0",  # a registry port is not a tag
    ],
)
def test_a_sidecar_of_the_routers_release_is_accepted(image):
    assert rules.routing_sidecar_image_problems(image, "v0.10.0") == []


@pytest.mark.parametrize(
    "image, fragments",
    [
        (f"{MIRROR}:v0.9.0", ["is release v0.9.0, but serving.router.version is v0.10.0"]),
        (f"{MIRROR}@{DIGEST}", ["pins a digest without a tag", "name the tag v0.10.0"]),
        (
            "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0",
            ["is not llm-d-router's llm-d-router-disagg-sidecar", "is release v0.8.0"],
        ),
        (f"{MIRROR}:latest", ["is not pinned", "floating tag 'latest'"]),
        (MIRROR, ["is not pinned", "no tag"]),
    ],
)
def test_a_sidecar_of_another_release_or_program_is_refused(image, fragments):
    problems = rules.routing_sidecar_image_problems(image, "v0.10.0")
    for fragment in fragments:
        assert any(fragment in p for p in problems), problems
