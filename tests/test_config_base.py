"""Shared config rules: pinned images, bucket names, Kubernetes quantities."""

import pytest

from components import naming
from components.config_base import image_pin_problem, image_unpinned_reason, parse_quantity


@pytest.mark.parametrize(
    "image, fragment",
    [
        ("docker.io/vllm/vllm-tpu:latest", "floating tag 'latest'"),
        ("docker.io/vllm/vllm-tpu:nightly", "floating tag 'nightly'"),
        ("docker.io/vllm/vllm-tpu", "has no tag"),
        ("localhost:5000/vllm-tpu", "has no tag"),
        ("", "is empty"),
        ("vllm/vllm-tpu:v2", "names no release version (x.y.z) or build date"),  # refused since the pack's rule
        ("vllm/vllm-tpu@sha256:abc", "is not sha256:<64 hex>"),
    ],
)
def test_images_must_be_pinned(image, fragment):
    problem = image_pin_problem(image)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26",
        "vllm/vllm-tpu:v0.26.0",
        "localhost:5000/vllm-tpu:2026-05-01",
        "vllm/vllm-tpu@sha256:" + "ab" * 32,
    ],
)
def test_pinned_images(image):
    assert image_pin_problem(image) is None


@pytest.mark.parametrize(
    "image, pinned",
    [
        ("docker.io/library/python:3.12.8-slim-bookworm", True),
        ("us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9.0-rev1", True),
        ("docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26", True),  # a dated build
        ("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0", True),
        ("tpuongke/kueue-slice-controller:v0.8.0-200", True),
        ("registry.example:5000/team/app:2026-04-30", True),
        ("nginx@sha256:" + "a" * 64, True),
        ("nginx:latest@sha256:" + "b" * 64, True),
        ("nginx", False),
        ("registry.example:5000/team/app", False),  # the port is not a tag
        ("nginx:latest", False),
        ("vllm/vllm-tpu:nightly", False),
        ("python:3.12", False),  # a minor alias moves with each patch release
        ("app:main", False),
        ("app:v2", False),
        ("nginx@sha256:abc", False),
        ("", False),
    ],
)
def test_which_images_are_pinned(image: str, pinned: bool) -> None:
    """The one rule of the config blocks and the policy pack."""
    assert (image_unpinned_reason(image) is None) is pinned, image_unpinned_reason(image)


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("ab", "3 to 63"),
        ("Sax_Bucket", "3 to 63"),
        ("-bucket", "3 to 63"),
        ("b" * 64, "3 to 63"),
        ("goog-models", "'goog'"),
        ("my-google-weights", "'google'"),
    ],
)
def test_bucket_names(name, fragment):
    problem = naming.bucket_name_problem(name)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize("name", ["abc", "my-tpu-project-sax-admin", "weights_v2", "models.example.com"])
def test_valid_bucket_names(name):
    assert naming.bucket_name_problem(name) is None


@pytest.mark.parametrize("text, value", [("2", 2), ("500m", 0.5), ("4Gi", 4 * 2**30), ("1.5k", 1500)])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["two", "4GB", "", "-1"])
def test_not_quantities(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)
