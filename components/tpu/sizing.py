"""How big a model's weights are, and which TPU slices hold them: serving (vLLM on TPU7x) and Saxml (TPU v5e) size
their models with the same dtype names and arithmetic, parameters x bytes per parameter, exact (175B in bf16 is 350
GB, not 349.99...). The fit rules built on this live with each workload."""

from __future__ import annotations

import math
from fractions import Fraction

from components.tpu.topology import CUBE, SUB_SLICE_SHAPES, MachineType, Shape, is_super_slice

# Storage bytes of one parameter, by the dtype names the config documents.
BYTES_PER_PARAMETER: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
}
DTYPES = tuple(BYTES_PER_PARAMETER)
DTYPES_TEXT = ", ".join(DTYPES[:-1]) + f" or {DTYPES[-1]}"  # "fp32, bf16, fp16, fp8, int8 or int4"

_SUPER_SLICE_MAX_AXIS = 256  # each axis of a TPU7x super-slice: a multiple of 4 up to 256


def dtype_problem(dtype: str) -> str | None:
    """Why ``dtype`` is no dtype of the table, or None."""
    if dtype in BYTES_PER_PARAMETER:
        return None
    return f"{dtype!r} is not a known dtype"


def weight_bytes(parameters_billions: float, dtype: str) -> Fraction:
    """Bytes of the weights: parameters x bytes per parameter, exact (ValueError for a bad input)."""
    if problem := dtype_problem(dtype):
        raise ValueError(f"{problem}; use one of {', '.join(DTYPES)}")
    if not math.isfinite(parameters_billions) or parameters_billions <= 0:
        raise ValueError(f"the parameter count must be a positive number of billions, not {parameters_billions!r}")
    return Fraction(str(parameters_billions)) * 10**9 * BYTES_PER_PARAMETER[dtype]


def _super_slice_shapes() -> tuple[Shape, ...]:
    axes = range(CUBE.dims[0], _SUPER_SLICE_MAX_AXIS + 1, 4)
    shapes = (Shape((a, b, c)) for a in axes for b in axes if b >= a for c in axes if c >= b)
    return tuple(s for s in shapes if is_super_slice(s))


def slice_topologies(machine: MachineType) -> tuple[Shape, ...]:
    """Every slice topology ``machine`` comes in, fewest chips first (ties: most compact first)."""
    shapes = (*SUB_SLICE_SHAPES, *_super_slice_shapes()) if machine.dynamic_slicing else machine.static_topologies
    return tuple(sorted(shapes, key=lambda s: (s.chips, max(s.dims), s.dims)))


def smallest_fitting_topology(size: float | Fraction, machine: MachineType) -> Shape | None:
    """The slice topology of ``machine`` with the fewest chips whose HBM holds ``size`` bytes."""
    return next((s for s in slice_topologies(machine) if machine.hbm_bytes(s) >= size), None)
