"""Saxml's preview rule: does the model fit the HBM of one slice of the pools' topology.

Pure Python (no Pulumi). The fit counts the weights only: parameters x bytes per parameter
(components/tpu/sizing.py) against chips x HBM per chip (TPU v5e: 16 GB per chip). It is a floor,
not a capacity plan: the KV cache, activations and the runtime need HBM on top of the weights.
"""

from __future__ import annotations

import math
from fractions import Fraction

from components.tpu.sizing import BYTES_PER_PARAMETER, slice_topologies, smallest_fitting_topology, weight_bytes
from components.tpu.topology import GB, MachineType, Shape


def _gb(size: float | Fraction) -> str:
    return f"{float(size) / GB:,.1f}".removesuffix(".0") + " GB"


def model_fit_problem(parameters_billions: float, dtype: str, shape: Shape, machine: MachineType) -> str | None:
    """Whether the weights fit the HBM of one ``shape`` slice of ``machine``; a reason or None.

    175B at bf16 is 350 GB, at least 22 v5e chips of 16 GB: it fits 4x8 (32 chips, 512 GB), not
    4x4 (16 chips, 256 GB). When it does not fit, the reason names both sizes and the smallest
    topology of the machine type that would fit (or says that none does).
    """
    try:
        needed = weight_bytes(parameters_billions, dtype)
    except ValueError as error:
        return str(error)
    available = machine.hbm_bytes(shape)
    if needed <= available:
        return None
    chips = math.ceil(needed / machine.hbm_bytes_per_chip)
    text = (
        f"a {parameters_billions:g}B-parameter model at {dtype} ({float(BYTES_PER_PARAMETER[dtype]):g} bytes per "
        f"parameter) needs {_gb(needed)} of HBM for its weights alone, at least {chips} chips of {machine.name} "
        f"({_gb(machine.hbm_bytes_per_chip)} each); {shape} has {shape.chips} chips, {_gb(available)}"
    )
    fitting = smallest_fitting_topology(needed, machine)
    if fitting is None:
        largest = slice_topologies(machine)[-1]
        return (
            f"{text}. No {machine.name} topology holds it (the largest, {largest}, has "
            f"{largest.chips} chips, {_gb(machine.hbm_bytes(largest))}): quantize the model or "
            "serve it across slices"
        )
    return (
        f"{text}. The smallest {machine.name} topology that fits is {fitting} "
        f"({fitting.chips} chips, {_gb(machine.hbm_bytes(fitting))})"
    )
