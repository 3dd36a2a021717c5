"""Sizing rules: model weights against the HBM of a slice, and whole slice node pools."""

from __future__ import annotations

import pytest

from components import saxml_rules
from components.saxml_rules import (
    bytes_per_parameter,
    chips_needed,
    model_fit_problem,
    slice_topologies,
    smallest_fitting_topology,
    topology_problem,
    weight_bytes,
)
from components.topology import GB, MACHINE_CATALOG, Shape

V5E = "ct5lp-hightpu-4t"
TPU7X = "tpu7x-standard-4t"


# --- The tutorial's arithmetic --------------------------------------------------------------------


def test_175b_bf16_is_350_gb_and_needs_22_v5e_chips():
    assert weight_bytes(175, "bf16") == 350 * GB
    assert chips_needed(175, "bf16", V5E) == 22  # 350 / 16 = 21.875, rounded up
    assert smallest_fitting_topology(350 * GB, V5E) == Shape.parse("4x8")
    assert model_fit_problem(175, "bf16", "4x8", V5E) is None


def test_v5e_hbm_comes_from_the_machine_catalog():
    assert MACHINE_CATALOG[V5E].hbm_bytes_per_chip == 16 * GB
    assert MACHINE_CATALOG[V5E].hbm_bytes(Shape.parse("4x8")) == 512 * GB


@pytest.mark.parametrize(
    "precision, size",
    [("bf16", 2), ("BFloat16", 2), ("fp16", 2), ("fp32", 4), ("float32", 4), ("int8", 1), ("fp8", 1),
     ("int4", 0.5), (2, 2.0), (1.5, 1.5)],
)
def test_bytes_per_parameter(precision, size):
    assert bytes_per_parameter(precision) == size


# --- Fits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters, precision, topology, machine",
    [
        (175, "bf16", "4x8", V5E),
        (256, "bf16", "4x8", V5E),  # 512 GB: exactly the HBM of 4x8
        (175, "int8", "4x4", V5E),  # 175 GB in 256 GB
        (7, "bf16", "2x2", V5E),  # 14 GB on one host
        (8, 2, "2x2", V5E),  # 16 GB on 64 GB
        (175, "bf16", "2x2x1", TPU7X),  # 350 GB in 4 x 192 GiB
        (700, "bf16", "2x2x2", TPU7X),
    ],
)
def test_models_that_fit(parameters, precision, topology, machine):
    assert model_fit_problem(parameters, precision, topology, machine) is None


# --- Does not fit: a clear error with sizes and the smallest topology that would ------------------


@pytest.mark.parametrize(
    "parameters, precision, topology, machine, fragments",
    [
        (175, "bf16", "4x4", V5E, [
            "175B-parameter model at bf16 (2 bytes per parameter) needs 350 GB",
            "at least 22 chips of ct5lp-hightpu-4t (16 GB each)",
            "4x4 has 16 chips, 256 GB",
            "smallest ct5lp-hightpu-4t topology that fits is 4x8 (32 chips, 512 GB)",
        ]),
        (175, "fp32", "4x8", V5E, [
            "needs 700 GB", "at least 44 chips", "4x8 has 32 chips, 512 GB", "fits is 8x8 (64 chips, 1,024 GB)",
        ]),
        (257, "bf16", "4x8", V5E, ["needs 514 GB", "at least 33 chips", "fits is 8x8"]),
        (70, 2.5, "2x4", V5E, [
            "70B-parameter model at 2.5 bytes per parameter needs 175 GB", "2x4 has 8 chips, 128 GB",
            "fits is 4x4 (16 chips, 256 GB)",
        ]),
        (2000, "fp32", "16x16", V5E, [
            "needs 8,000 GB", "at least 500 chips", "No ct5lp-hightpu-4t topology holds it",
            "the largest, 16x16, has 256 chips, 4,096 GB",
        ]),
        (1000, "bf16", "2x2x1", TPU7X, [
            "needs 2,000 GB", "at least 10 chips of tpu7x-standard-4t (206.2 GB each)",
            "2x2x1 has 4 chips, 824.6 GB", "fits is 2x2x4 (16 chips, 3,298.5 GB)",
        ]),
    ],
)
def test_models_too_large(parameters, precision, topology, machine, fragments):
    problem = model_fit_problem(parameters, precision, topology, machine)
    assert problem is not None
    for fragment in fragments:
        assert fragment in problem, problem


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((0, "bf16", "4x8", V5E), "parameters_billions must be a positive number"),
        ((-7, "bf16", "4x8", V5E), "parameters_billions must be a positive number"),
        ((float("nan"), "bf16", "4x8", V5E), "parameters_billions must be a positive number"),
        (("175", "bf16", "4x8", V5E), "parameters_billions must be a positive number"),
        ((True, "bf16", "4x8", V5E), "parameters_billions must be a positive number"),
        ((175, "bf17", "4x8", V5E), "unknown dtype 'bf17'"),
        ((175, 0, "4x8", V5E), "bytes per parameter must be a positive number"),
        ((175, -2, "4x8", V5E), "bytes per parameter must be a positive number"),
        ((175, "bf16", "4x6", V5E), "4x6 is not a ct5lp-hightpu-4t slice topology"),
        ((175, "bf16", "4x4x4", V5E), "4x4x4 is not a ct5lp-hightpu-4t slice topology"),
        ((175, "bf16", "4-8", V5E), "is not a TPU topology"),
        ((175, "bf16", "4x8", TPU7X), "not a tpu7x-standard-4t slice topology"),
        ((175, "bf16", "4x8", "ct9-imaginary"), "unknown machine type 'ct9-imaginary'"),
    ],
)
def test_bad_fit_inputs_are_problems_not_exceptions(args, fragment):
    problem = model_fit_problem(*args)
    assert problem is not None and fragment in problem, problem


def test_helpers_raise_on_bad_inputs():
    with pytest.raises(ValueError, match="unknown dtype"):
        bytes_per_parameter("float8x")
    with pytest.raises(ValueError, match="positive number"):
        weight_bytes(0)
    with pytest.raises(ValueError, match="unknown machine type"):
        chips_needed(1, "bf16", "nope")


# --- Topologies -----------------------------------------------------------------------------------


def test_v5e_topologies_fewest_chips_first():
    shapes = [str(s) for s in slice_topologies(MACHINE_CATALOG[V5E])]
    assert shapes == ["2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"]


def test_tpu7x_topologies_are_sub_and_super_slices():
    shapes = slice_topologies(MACHINE_CATALOG[TPU7X])
    assert [str(s) for s in shapes[:7]] == ["2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12"]
    assert all(topology_problem(str(s), TPU7X) is None for s in shapes)
    assert [s.chips for s in shapes] == sorted(s.chips for s in shapes)


@pytest.mark.parametrize("topology", ["2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"])
def test_every_v5e_topology_is_known(topology):
    assert topology_problem(topology, V5E) is None
    assert topology_problem(topology) is None  # v5e is the default


def test_defaults_are_the_tutorial_setup():
    assert saxml_rules.DEFAULT_MACHINE_TYPE == V5E and saxml_rules.DEFAULT_TOPOLOGY == "4x8"
    assert model_fit_problem(175) is None
