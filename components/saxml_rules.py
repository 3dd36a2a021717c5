"""Sizing rules for serving on TPU slices (Saxml): does a model fit the HBM of a slice topology.

Pure Python (no Pulumi imports), so stack-config validation, the Saxml overlays and the tests
share them. Every ``*_problem`` function returns a readable reason or None and never raises on
bad input, so callers can collect all problems of a config at once.

The fit check counts the weights only: parameters x bytes per parameter against chips x HBM per
chip (``MachineType.hbm_bytes_per_chip``; TPU v5e: 16 GB per chip). It is a floor, not a
capacity plan: the KV cache, activations and the runtime need HBM on top of the weights.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real

from components.topology import (
    CUBE,
    GB,
    MACHINE_CATALOG,
    SUB_SLICE_SHAPES,
    MachineType,
    Shape,
    dynamic_slice_problem,
    is_super_slice,
    static_slice_problem,
)

DEFAULT_MACHINE_TYPE = "ct5lp-hightpu-4t"
DEFAULT_TOPOLOGY = "4x8"

BYTES_PER_PARAMETER: dict[str, float] = {
    "fp32": 4,
    "float32": 4,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}

_SUPER_SLICE_MAX_AXIS = 256  # each axis of a TPU7x super-slice: a multiple of 4 up to 256


def _super_slice_shapes() -> tuple[Shape, ...]:
    axes = range(CUBE.dims[0], _SUPER_SLICE_MAX_AXIS + 1, 4)
    shapes = (Shape((a, b, c)) for a in axes for b in axes if b >= a for c in axes if c >= b)
    return tuple(s for s in shapes if is_super_slice(s))


def slice_topologies(machine: MachineType) -> tuple[Shape, ...]:
    """Every slice topology ``machine`` comes in, fewest chips first (ties: most compact first)."""
    shapes = (*SUB_SLICE_SHAPES, *_super_slice_shapes()) if machine.dynamic_slicing else machine.static_topologies
    return tuple(sorted(shapes, key=lambda s: (s.chips, max(s.dims), s.dims)))


# --- Inputs -------------------------------------------------------------------------------------


def _machine(machine_type: str) -> MachineType | str:
    if machine_type not in MACHINE_CATALOG:
        return f"unknown machine type {machine_type!r}; known: {', '.join(sorted(MACHINE_CATALOG))}"
    return MACHINE_CATALOG[machine_type]


def _known_machine(machine_type: str) -> MachineType:
    if machine_type not in MACHINE_CATALOG:
        raise ValueError(_machine(machine_type))
    return MACHINE_CATALOG[machine_type]


def _shape_on(topology: str, machine_type: str) -> tuple[Shape, MachineType] | str:
    """The parsed topology and machine, or why ``topology`` is no slice of ``machine_type``."""
    machine = _machine(machine_type)
    if isinstance(machine, str):
        return machine
    try:
        shape = Shape.parse(topology)
    except ValueError as error:
        return str(error)
    if machine.dynamic_slicing:
        problem = dynamic_slice_problem(shape)
        if problem:
            return f"{problem}; not a {machine.name} slice topology"
        return shape, machine
    problem = static_slice_problem(shape, machine)
    return problem if problem else (shape, machine)


def topology_problem(topology: str, machine_type: str = DEFAULT_MACHINE_TYPE) -> str | None:
    """Why ``topology`` is not a slice topology of ``machine_type``, or None."""
    found = _shape_on(topology, machine_type)
    return found if isinstance(found, str) else None


def bytes_per_parameter(precision: str | float) -> float:
    """Bytes one parameter takes: a dtype name (``bf16``, ``int8``, ...) or a positive number."""
    if isinstance(precision, str):
        key = precision.strip().lower()
        if key not in BYTES_PER_PARAMETER:
            raise ValueError(
                f"unknown dtype {precision!r}; use one of {', '.join(BYTES_PER_PARAMETER)} or bytes per parameter"
            )
        return BYTES_PER_PARAMETER[key]
    if isinstance(precision, bool) or not isinstance(precision, Real) or not math.isfinite(precision) or precision <= 0:
        raise ValueError(f"bytes per parameter must be a positive number, not {precision!r}")
    return float(precision)


def _precision_text(precision: str | float, size: float) -> str:
    if isinstance(precision, str):
        return f"{precision.strip().lower()} ({size:g} bytes per parameter)"
    return f"{size:g} bytes per parameter"


def _gb(size: float | Fraction) -> str:
    return f"{float(size) / GB:,.1f}".removesuffix(".0") + " GB"


def _parameters_problem(parameters_billions: float) -> str | None:
    if (
        isinstance(parameters_billions, bool)
        or not isinstance(parameters_billions, Real)
        or not math.isfinite(parameters_billions)
        or parameters_billions <= 0
    ):
        return f"parameters_billions must be a positive number, not {parameters_billions!r}"
    return None


# --- Model size against HBM ---------------------------------------------------------------------


def weight_bytes(parameters_billions: float, precision: str | float = "bf16") -> Fraction:
    """Bytes of the weights: parameters x bytes per parameter (exact, so 175B bf16 is 350 GB)."""
    problem = _parameters_problem(parameters_billions)
    if problem:
        raise ValueError(problem)
    return Fraction(str(parameters_billions)) * 10**9 * Fraction(str(bytes_per_parameter(precision)))


def chips_needed(parameters_billions: float, precision: str | float = "bf16",
                 machine_type: str = DEFAULT_MACHINE_TYPE) -> int:
    """Fewest chips of ``machine_type`` whose HBM holds the weights (175B bf16 on v5e: 22)."""
    machine = _known_machine(machine_type)
    return math.ceil(weight_bytes(parameters_billions, precision) / machine.hbm_bytes_per_chip)


def smallest_fitting_topology(size: float | Fraction, machine_type: str = DEFAULT_MACHINE_TYPE) -> Shape | None:
    """The slice topology of ``machine_type`` with the fewest chips whose HBM holds ``size`` bytes."""
    machine = _known_machine(machine_type)
    return next((s for s in slice_topologies(machine) if machine.hbm_bytes(s) >= size), None)


def model_fit_problem(
    parameters_billions: float,
    precision: str | float = "bf16",
    topology: str = DEFAULT_TOPOLOGY,
    machine_type: str = DEFAULT_MACHINE_TYPE,
) -> str | None:
    """Whether the weights of the model fit the HBM of one ``topology`` slice; a reason or None.

    ``precision`` is a dtype name (``bf16``, ``fp32``, ``int8``, ...) or bytes per parameter.
    175B at bf16 is 350 GB, at least 22 v5e chips of 16 GB: it fits 4x8 (32 chips, 512 GB),
    not 4x4 (16 chips, 256 GB). When it does not fit, the reason names both sizes and the
    smallest topology of the machine type that would fit (or says that none does).
    """
    problem = _parameters_problem(parameters_billions)
    if problem:
        return problem
    try:
        size = bytes_per_parameter(precision)
    except ValueError as error:
        return str(error)
    found = _shape_on(topology, machine_type)
    if isinstance(found, str):
        return found
    shape, machine = found

    needed = weight_bytes(parameters_billions, precision)
    available = machine.hbm_bytes(shape)
    if needed <= available:
        return None
    chips = math.ceil(needed / machine.hbm_bytes_per_chip)
    text = (
        f"a {parameters_billions:g}B-parameter model at {_precision_text(precision, size)} needs "
        f"{_gb(needed)} of HBM for its weights alone, at least {chips} chips of {machine.name} "
        f"({_gb(machine.hbm_bytes_per_chip)} each); {shape} has {shape.chips} chips, {_gb(available)}"
    )
    fitting = smallest_fitting_topology(needed, machine.name)
    if fitting is None:
        largest = slice_topologies(machine)[-1]
        return (
            f"{text}. No {machine.name} topology holds it (the largest, {largest}, has "
            f"{largest.chips} chips, {_gb(machine.hbm_bytes(largest))}): quantize the model or "
            f"serve it across slices"
        )
    return (
        f"{text}. The smallest {machine.name} topology that fits is {fitting} "
        f"({fitting.chips} chips, {_gb(machine.hbm_bytes(fitting))})"
    )
