"""Model sizing: one dtype table for every workload, exact weight bytes, slice topologies."""

from __future__ import annotations

from fractions import Fraction

import pytest

from components.tpu.sizing import (
    BYTES_PER_PARAMETER,
    DTYPES_TEXT,
    dtype_problem,
    slice_topologies,
    smallest_fitting_topology,
    weight_bytes,
)
from components.tpu.topology import (
    GB,
    MACHINE_CATALOG,
    Shape,
    dynamic_slice_problem,
    is_sub_slice,
    is_super_slice,
    static_slice_problem,
)

V5E = MACHINE_CATALOG["ct5lp-hightpu-4t"]
TPU7X = MACHINE_CATALOG["tpu7x-standard-4t"]
DOCUMENTED = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")  # what both config docs promise


def test_the_table_holds_exactly_the_documented_dtypes():
    assert tuple(BYTES_PER_PARAMETER) == DOCUMENTED
    assert f"{', '.join(DOCUMENTED[:-1])} or {DOCUMENTED[-1]}" == DTYPES_TEXT


@pytest.mark.parametrize("dtype, size", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)])
def test_bytes_per_parameter(dtype, size):
    assert dtype_problem(dtype) is None
    assert weight_bytes(1, dtype) == Fraction(size) * 10**9


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "BF16", "fp4", ""])
def test_any_other_name_is_refused(dtype):
    assert dtype_problem(dtype) == f"{dtype!r} is not a known dtype"
    with pytest.raises(ValueError, match="use one of fp32, bf16, fp16, fp8, int8, int4"):
        weight_bytes(1, dtype)


def test_175b_bf16_is_exactly_350_gb_and_fits_a_4x8_v5e_slice():
    assert weight_bytes(175, "bf16") == 350 * GB
    assert weight_bytes(0.1, "int4") == Fraction(5, 100) * 10**9  # exact: no float rounding
    assert smallest_fitting_topology(350 * GB, V5E) == Shape.parse("4x8")


@pytest.mark.parametrize("parameters", [0, -7, float("nan"), float("inf")])
def test_a_parameter_count_that_is_not_positive_is_refused(parameters):
    with pytest.raises(ValueError, match="positive number of billions"):
        weight_bytes(parameters, "bf16")


def test_v5e_hbm_comes_from_the_machine_catalog():
    assert V5E.hbm_bytes_per_chip == 16 * GB
    assert V5E.hbm_bytes(Shape.parse("4x8")) == 512 * GB


def test_v5e_topologies_fewest_chips_first():
    topologies = slice_topologies(V5E)
    assert set(topologies) == set(V5E.static_topologies)
    assert [s.chips for s in topologies] == sorted(s.chips for s in topologies)
    assert all(static_slice_problem(s, V5E) is None for s in slice_topologies(V5E))


def test_tpu7x_topologies_are_sub_and_super_slices():
    shapes = slice_topologies(TPU7X)
    subs = tuple(s for s in shapes if is_sub_slice(s))
    assert subs and shapes[: len(subs)] == subs  # the partitions of a cube first, then whole cubes
    assert all(is_super_slice(s) for s in shapes[len(subs) :])
    assert all(dynamic_slice_problem(s) is None for s in shapes)
    assert [s.chips for s in shapes] == sorted(s.chips for s in shapes)


def test_no_topology_holds_too_much():
    assert smallest_fitting_topology(10**16, V5E) is None
