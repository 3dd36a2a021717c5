"""Shared config rules: pinned images."""

import pytest

from components.config_base import image_pin_problem


@pytest.mark.parametrize(
    "image, fragment",
    [
        ("docker.io/vllm/vllm-tpu:latest", "floating tag 'latest'"),
        ("docker.io/vllm/vllm-tpu:nightly", "floating tag 'nightly'"),
        ("docker.io/vllm/vllm-tpu", "has no tag"),
        ("localhost:5000/vllm-tpu", "has no tag"),
        ("", "is empty"),
    ],
)
def test_images_must_be_pinned(image, fragment):
    problem = image_pin_problem(image)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize(
    "image",
    ["docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26", "vllm/vllm-tpu:v0.26.0",
     "localhost:5000/vllm-tpu:2026-05-01", "vllm/vllm-tpu@sha256:" + "ab" * 32],
)
def test_pinned_images(image):
    assert image_pin_problem(image) is None
