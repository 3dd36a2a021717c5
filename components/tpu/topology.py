"""TPU topology model: shapes, machine catalog and the TPU7x dynamic-slicing rules, pure Python so that config
validation, the capacity report, the Kueue Topology levels and the tests share them without registering anything."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_SHAPE_PATTERN = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*){1,2}$")

GIB = 1024**3
GB = 1000**3

# Names GKE gives TPU nodes and pods; every builder and the Kueue objects select on these.
TPU_RESOURCE = "google.com/tpu"  # the device plugin's extended resource: chips of one host
ACCELERATOR_NODE_LABEL = "cloud.google.com/gke-tpu-accelerator"  # MachineType.accelerator_label
TOPOLOGY_NODE_LABEL = "cloud.google.com/gke-tpu-topology"  # the slice topology of a static pool
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"  # pod: the dynamic slice it asks for
BLOCK_LABEL = "cloud.google.com/gce-topology-block"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, order=True)
class Shape:
    """A TPU slice shape in chips per axis, e.g. ``4x4x4`` or ``4x8``."""

    dims: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Shape:
        if not isinstance(text, str) or not _SHAPE_PATTERN.match(text):
            raise ValueError(
                f"{text!r} is not a TPU topology; write 2 or 3 positive integers joined by 'x', e.g. 4x4x4 or 4x8"
            )
        return cls(tuple(int(part) for part in text.split("x")))

    def __str__(self) -> str:
        return "x".join(str(d) for d in self.dims)

    @property
    def chips(self) -> int:
        return math.prod(self.dims)


@dataclass(frozen=True)
class MachineType:
    """Facts about one TPU VM type (GKE and Cloud TPU documentation)."""

    name: str
    accelerator_label: str  # value of cloud.google.com/gke-tpu-accelerator on its nodes
    chips_per_host: int
    tensorcores_per_chip: int
    hbm_bytes_per_chip: int
    vcpus_per_host: int
    memory_bytes_per_host: int
    topology_rank: int  # 3 for the 3D torus generations, 2 for v5e
    dynamic_slicing: bool
    # The fixed slice topologies GKE offers (generations without dynamic slicing), fewest chips first.
    static_topologies: tuple[Shape, ...] = ()
    # GKE makes this machine type's nodes with secure boot on (Shielded GKE Nodes, CIS GKE 5.5.7), as a source read
    # here shows: its pools get secure boot unless tpu.secureBoot says otherwise. False: no source read here says
    # either way, so its pools go without unless the stack asks.
    secure_boot_known: bool = False

    def hosts(self, shape: Shape) -> int:
        """Nodes needed for one slice of ``shape``; raises when the shape splits a host."""
        if shape.chips % self.chips_per_host:
            raise ValueError(
                f"{shape} has {shape.chips} chips, not a multiple of the {self.chips_per_host} chips "
                f"of one {self.name} host"
            )
        return shape.chips // self.chips_per_host

    def hbm_bytes(self, shape: Shape) -> int:
        return shape.chips * self.hbm_bytes_per_chip


TPU7X = "tpu7x-standard-4t"  # Ironwood: dynamic slicing of 4x4x4 cubes
V5E = "ct5lp-hightpu-4t"  # TPU v5e: fixed multi-host slices

MACHINE_CATALOG: dict[str, MachineType] = {
    machine.name: machine
    for machine in (
        MachineType(
            name=TPU7X,
            accelerator_label="tpu7x",
            chips_per_host=4,
            tensorcores_per_chip=2,
            hbm_bytes_per_chip=192 * GIB,
            vcpus_per_host=224,
            memory_bytes_per_host=960 * GB,
            topology_rank=3,
            dynamic_slicing=True,
            # GoogleCloudPlatform/cluster-toolkit@1047080375afbb44da4b596be314634e7486af4a makes tpu7x-standard-4t
            # pools (examples/gke-tpu-7x/gke-tpu-7x.yaml) with its modules/compute/gke-node-pool, which turns secure
            # boot on unless told otherwise (variables.tf enable_secure_boot, default true), and deploys that
            # blueprint every day (tools/cloud-build/daily-tests/tests/gke-tpu-7x.yml). GKE's and Cloud TPU's
            # documentation read here say nothing either way.
            secure_boot_known=True,
        ),
        MachineType(
            name=V5E,
            accelerator_label="tpu-v5-lite-podslice",
            chips_per_host=4,
            tensorcores_per_chip=1,
            hbm_bytes_per_chip=16 * GB,
            vcpus_per_host=112,
            memory_bytes_per_host=192 * GB,
            topology_rank=2,
            dynamic_slicing=False,
            # platform-facts.md, "TPU v5e slices": 2x2 is one host, the others chips / 4 hosts.
            static_topologies=tuple(Shape.parse(t) for t in ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
        ),
    )
}


def try_shape(text: str) -> Shape | None:
    """``text`` as a Shape, or None when it is none (for validation that reports it elsewhere)."""
    try:
        return Shape.parse(text)
    except ValueError:
        return None


def take_tpu_host(pod_spec: dict[str, Any], container: dict[str, Any], machine: MachineType, **resources: str) -> None:
    """Place a TPU workload's pod on ``machine``'s nodes, its ``container`` requesting, and limited to, every chip of
    the host (each host runs one such pod), and ``resources`` besides."""
    pod_spec.setdefault("nodeSelector", {})[ACCELERATOR_NODE_LABEL] = machine.accelerator_label
    requested = {TPU_RESOURCE: str(machine.chips_per_host), **resources}
    container["resources"] = {"requests": dict(requested), "limits": dict(requested)}


# --- TPU7x dynamic slicing -------------------------------------------------------------

CUBE = Shape((4, 4, 4))
"""One reservation sub-block: the unit a dynamic-slicing node pool provisions."""

SUB_SLICE_SHAPES: tuple[Shape, ...] = tuple(Shape.parse(text) for text in ("2x2x1", "2x2x2", "2x2x4", "2x4x4"))
MAX_CUBES_PER_SUPER_SLICE = 144  # one reservation block

# Floors from the GKE dynamic-slicing requirements.
SUB_SLICING_MIN_GKE_VERSION = "1.36.0-gke.3712000"
SUPER_SLICING_MIN_GKE_VERSION = "1.35.2-gke.1842000"


def partition_label(shape: Shape) -> str:
    return f"cloud.google.com/gke-tpu-partition-{shape}-id"


def partition_state_label(shape: Shape) -> str:
    """Node label GKE sets to ``HEALTHY`` on nodes whose ``shape`` partition is usable."""
    return f"cloud.google.com/gke-tpu-partition-{shape}-state"


def slice_health_label(shape: Shape) -> str:
    """The node label whose ``HEALTHY`` says a node may hold a slice of ``shape``: the shape's own partition state for
    a sub-slice, the cube's for a super-slice (4x4x4 included). GKE writes the partition state of the cube and of the
    sub-slice shapes only (the 4x4x4 one says whether a node can form a dynamic slice:
    https://docs.cloud.google.com/kubernetes-engine/docs/how-to/create-dynamic-slices), no ``...-4x4x8-state``, and the
    slice controller reads the cube's for every super-slice (AI-Hypercomputer/xpk@250d4b3cebf44fc6, the slice-controller
    chart's source: slice/internal/topology/topology.go ``HealthLabel``, slice/internal/core/constants.go
    ``TPUSliceHealthNodeSelectorKey``); its webhook adds its HEALTHY-or-DEGRADED default only to a pod that names no
    such label (slice/internal/webhooks/defaults.go ``annotatePodTemplateSpecWithSliceHealth``)."""
    return partition_state_label(shape if is_sub_slice(shape) else CUBE)


def is_sub_slice(shape: Shape) -> bool:
    return shape in SUB_SLICE_SHAPES


def is_super_slice(shape: Shape) -> bool:
    """Whole cubes stitched together: each axis a multiple of 4, ascending, at most one block."""
    dims = shape.dims
    return (
        len(dims) == 3
        and all(d % 4 == 0 for d in dims)
        and list(dims) == sorted(dims)
        and cubes_in(shape) <= MAX_CUBES_PER_SUPER_SLICE
    )


def cubes_in(shape: Shape) -> int:
    """Cubes a super-slice takes (1 for 4x4x4)."""
    return math.prod(d // 4 for d in shape.dims)


def dynamic_slice_problem(shape: Shape) -> str | None:
    """Why ``shape`` can never be a TPU7x dynamic slice, or None when it can."""
    if is_sub_slice(shape) or is_super_slice(shape):
        return None
    allowed = ", ".join(str(s) for s in SUB_SLICE_SHAPES)
    return (
        f"{shape} is neither a sub-slice ({allowed}) nor a super-slice "
        f"(AxBxC with each axis a multiple of 4, A<=B<=C, at most {MAX_CUBES_PER_SUPER_SLICE} cubes)"
    )


def slices_that_fit(shape: Shape, cubes: int) -> int:
    """How many slices of ``shape`` the given number of cubes holds at once."""
    if is_sub_slice(shape):
        return (CUBE.chips // shape.chips) * cubes
    if is_super_slice(shape):
        return cubes // cubes_in(shape)
    raise ValueError(dynamic_slice_problem(shape))


def kueue_topology_levels() -> list[str]:
    """Kueue Topology levels, coarsest first: block, every partition from the cube down to the smallest sub-slice,
    hostname (the reference's seven levels). Always all of them, whatever tpu.sliceShapes lists: Kueue places a slice
    at the level whose domain matches its shape, and a Topology's levels are immutable (CEL ``self == oldSelf``), so a
    level set that followed the shapes would refuse the next `up` that adds a smaller shape."""
    partitions = [CUBE, *reversed(SUB_SLICE_SHAPES)]
    return [BLOCK_LABEL, *(partition_label(s) for s in partitions), HOSTNAME_LABEL]


# --- Static multi-host slices (TPU v5e and older) -------------------------------------
def static_slice_problem(shape: Shape, machine: MachineType) -> str | None:
    """Why ``shape`` is not a slice topology of ``machine``'s generation, or None."""
    if len(shape.dims) != machine.topology_rank:
        reason = f"{machine.name} slices have {machine.topology_rank} axes; {shape} has {len(shape.dims)}"
    elif shape.chips % machine.chips_per_host:
        reason = (
            f"{shape} ({shape.chips} chips) does not fill whole {machine.name} hosts of {machine.chips_per_host} chips"
        )
    elif machine.static_topologies and shape not in machine.static_topologies:
        reason = "GKE offers no such slice"
    else:
        return None
    if not machine.static_topologies:
        return reason
    known = ", ".join(str(s) for s in machine.static_topologies)
    return f"{shape} is not a {machine.name} slice topology ({reason}); use one of {known}"
