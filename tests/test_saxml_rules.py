"""Saxml's sizing rule: the model's weights against the HBM of one slice of the pools."""

from __future__ import annotations

import pytest

from components.tpu.topology import MACHINE_CATALOG, Shape
from components.workloads.saxml.rules import model_fit_problem

V5E = MACHINE_CATALOG["ct5lp-hightpu-4t"]
TPU7X = MACHINE_CATALOG["tpu7x-standard-4t"]


@pytest.mark.parametrize(
    "parameters, dtype, topology, machine",
    [
        (175, "bf16", "4x8", V5E),  # the tutorial: 350 GB in 512 GB
        (256, "bf16", "4x8", V5E),  # 512 GB: exactly the HBM of 4x8
        (175, "int8", "4x4", V5E),  # 175 GB in 256 GB
        (7, "bf16", "2x2", V5E),  # 14 GB on one host
        (175, "bf16", "2x2x1", TPU7X),  # 350 GB in 4 x 192 GiB
        (700, "bf16", "2x2x2", TPU7X),
    ],
)
def test_models_that_fit(parameters, dtype, topology, machine):
    assert model_fit_problem(parameters, dtype, Shape.parse(topology), machine) is None


@pytest.mark.parametrize(
    "parameters, dtype, topology, machine, fragments",
    [
        (
            175,
            "bf16",
            "4x4",
            V5E,
            [
                "175B-parameter model at bf16 (2 bytes per parameter) needs 350 GB",
                "at least 22 chips of ct5lp-hightpu-4t (16 GB each)",
                "4x4 has 16 chips, 256 GB",
                "smallest ct5lp-hightpu-4t topology that fits is 4x8 (32 chips, 512 GB)",
            ],
        ),
        (
            175,
            "fp32",
            "4x8",
            V5E,
            [
                "needs 700 GB",
                "at least 44 chips",
                "4x8 has 32 chips, 512 GB",
                "fits is 8x8 (64 chips, 1,024 GB)",
            ],
        ),
        (257, "bf16", "4x8", V5E, ["needs 514 GB", "at least 33 chips", "fits is 8x8"]),
        (
            150,
            "int4",
            "2x2",
            V5E,
            [
                "150B-parameter model at int4 (0.5 bytes per parameter) needs 75 GB",
                "2x2 has 4 chips, 64 GB",
                "fits is 2x4 (8 chips, 128 GB)",
            ],
        ),
        (
            2000,
            "fp32",
            "16x16",
            V5E,
            [
                "needs 8,000 GB",
                "at least 500 chips",
                "No ct5lp-hightpu-4t topology holds it",
                "the largest, 16x16, has 256 chips, 4,096 GB",
            ],
        ),
        (
            1000,
            "bf16",
            "2x2x1",
            TPU7X,
            [
                "needs 2,000 GB",
                "at least 10 chips of tpu7x-standard-4t (206.2 GB each)",
                "2x2x1 has 4 chips, 824.6 GB",
                "fits is 2x2x4 (16 chips, 3,298.5 GB)",
            ],
        ),
    ],
)
def test_models_too_large(parameters, dtype, topology, machine, fragments):
    problem = model_fit_problem(parameters, dtype, Shape.parse(topology), machine)
    assert problem is not None
    for fragment in fragments:
        assert fragment in problem, problem


@pytest.mark.parametrize(
    "parameters, dtype, fragment",
    [
        (0, "bf16", "must be a positive number of billions"),
        (float("nan"), "bf16", "must be a positive number of billions"),
        (175, "bf17", "'bf17' is not a known dtype"),
        (175, "bfloat16", "'bfloat16' is not a known dtype"),
    ],
)
def test_bad_inputs_are_problems_not_exceptions(parameters, dtype, fragment):
    problem = model_fit_problem(parameters, dtype, Shape.parse("4x8"), V5E)
    assert problem is not None and fragment in problem, problem
