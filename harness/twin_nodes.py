"""The Node objects a GKE cluster made from a stack's config would have: the twin's simulated cluster (issue 34).

Pure: a stack's config in, Node dicts out (kwok keeps them Ready in the lab; nothing here talks to a cluster). Built
from the stack's own blocks (tpu.pools, tpu.machineType, tpu.reservation, cluster.systemPool, region), so a change of
the stack's TPU capacity changes the twin's nodes the way GKE would change the cluster's.

What GKE sets that the twin copies, each with its source:

- Well-known labels (k8s.io/api v0.36.5 core/v1/well_known_labels.go, the constants the kubelet and the cloud
  node controller write): ``kubernetes.io/hostname`` (the node name), ``kubernetes.io/os``,
  ``node.kubernetes.io/instance-type`` (the machine type), ``topology.kubernetes.io/zone`` and ``/region``.
  ``kubernetes.io/arch`` is set on the system pool's nodes only (N2, E2, N2D and C3 are x86-64 machines,
  https://cloud.google.com/compute/docs/general-purpose-machines, read 2026-12-04): no source read here names the
  CPU architecture of a tpu7x-standard-4t host.
- ``cloud.google.com/gke-nodepool``: the node pool's name. GoogleCloudPlatform/cluster-toolkit@1047080375afbb44 (2026-06-25)
  modules/compute/gke-job-template/templates/gke-job-base.yaml.tftpl places pods on pools by it.
- TPU nodes, GoogleCloudPlatform/cluster-toolkit@1047080375afbb44 modules/internal/tpu-definition: main.tf
  ``tpu_taint`` (``google.com/tpu=present:NoSchedule`` on every TPU machine type, tpu7x included) and
  outputs.tf ``kubernetes_label`` (``cloud.google.com/gke-tpu-accelerator``: ``tpu7x`` for the tpu7x family;
  ``cloud.google.com/gke-tpu-topology``: the pool's placement topology, 4x4x4 for a TPU7x cube).
- TPU7x dynamic slicing (the labels Kueue's Topology levels and the slice controller read),
  AI-Hypercomputer/xpk@250d4b3cebf44fc6 (2026-05-11, the last commit of slice/, the slice controller's source):
  slice/internal/core/constants.go (``cloud.google.com/gce-topology-block`` the block, the sub-block as
  ``cloud.google.com/gke-tpu-partition-4x4x4-id``, ``...-4x4x4-state`` ``HEALTHY``, resource ``google.com/tpu``,
  64 chips a cube), slice/internal/topology/topology.go (``cloud.google.com/gke-tpu-partition-<shape>-id`` and
  ``-state`` for each sub-slice shape) and slice/hack/kind-cluster-subslice.yaml (its test cluster's nodes: every
  partition label on each node, partitions nested 4x4x4 > 2x4x4 > 2x2x4 > 2x2x2 > 2x2x1, one 2x2x1 a host).
  GKE's docs say the same of the sub-block: "a node pool maps directly to a sub-block", 16 nodes in 4x4x4
  (https://docs.cloud.google.com/kubernetes-engine/docs/concepts/dynamic-slicing, read 2026-12-04).
- Allocatable CPU and memory: capacity less GKE's reservations for Standard nodes, and 100 MiB of memory for the
  kubelet's eviction threshold (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes,
  "Memory and CPU reservations", read 2026-12-04). No source read here gives a real tpu7x node's allocatable
  (a TPU host may reserve more); the pods the stack makes request less than what this leaves.
- ``pods``: 110, GKE Standard's default maximum Pods per node
  (https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr, read 2026-12-04).

What the twin makes up, because GKE's values are opaque: node names (``gke-<cluster>-<pool>-<hash>-<n>`` in
GKE's shape, trimmed so the hostname label holds), the block's value (the reservation block's name, GKE writes an
organisation-specific id) and the partition ids (``<sub-block>-<shape>-<n>``), which host sits where in its cube,
and the system pool's zones (GKE spreads a regional pool over three zones of the region, its own pick).
Not set: GKE's other labels (``cloud.google.com/gke-os-distribution``, ``gke-boot-disk``, ...), which nothing the
stack makes selects on.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from components import naming
from components.tpu import topology
from components.tpu.topology import CUBE, SUB_SLICE_SHAPES, MachineType, Shape

if TYPE_CHECKING:
    from components.stack import StackConfig

GIB = 1024**3
MIB = 1024**2

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_TAINT = {"key": topology.TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
HEALTHY = "HEALTHY"
MAX_PODS = 110
EVICTION_THRESHOLD_BYTES = 100 * MIB
HOSTNAME_MAX = 63  # a label value

# Memory GB per vCPU of the general-purpose machine types a system pool is made of
# (https://cloud.google.com/compute/docs/general-purpose-machines, read 2026-12-04: standard 4, highmem 8, highcpu 1
# for N2, N2D, C3 and E2).
_MEMORY_GB_PER_VCPU = {"standard": 4, "highmem": 8, "highcpu": 1}
_GENERAL_PURPOSE = re.compile(r"^(?P<family>n2|n2d|c3|e2)-(?P<kind>standard|highmem|highcpu)-(?P<vcpus>[0-9]+)$")
# The system pool's zones: GKE's pick of three in the region; the twin names them <region>-a, -b, -c.
_SYSTEM_ZONES = ("a", "b", "c")


def reserved_cpu_millis(vcpus: int) -> int:
    """GKE's CPU reservation: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% of every core above 4."""
    tiers = ((1, 60), (1, 10), (2, 5))
    millis, left = 0, vcpus
    for cores, per_core in tiers:
        used = min(left, cores)
        millis += used * per_core
        left -= used
    return millis + left * 25 // 10


def reserved_memory_bytes(capacity: int) -> int:
    """GKE's memory reservation: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
    2% of the rest (machines of 1 GiB and more)."""
    tiers = ((4 * GIB, 25), (4 * GIB, 20), (8 * GIB, 10), (112 * GIB, 6))
    reserved, left = 0, capacity
    for size, percent in tiers:
        used = min(left, size)
        reserved += used * percent // 100
        left -= used
    return reserved + left * 2 // 100


def resources(vcpus: int, memory_bytes: int, chips: int = 0) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a node with ``vcpus``, ``memory_bytes`` and ``chips`` TPU chips."""
    capacity = {"cpu": str(vcpus), "memory": str(memory_bytes), "pods": str(MAX_PODS)}
    allocatable = {
        "cpu": f"{vcpus * 1000 - reserved_cpu_millis(vcpus)}m",
        "memory": str(memory_bytes - reserved_memory_bytes(memory_bytes) - EVICTION_THRESHOLD_BYTES),
        "pods": str(MAX_PODS),
    }
    if chips:
        capacity[topology.TPU_RESOURCE] = allocatable[topology.TPU_RESOURCE] = str(chips)
    return capacity, allocatable


def node_name(cluster: str, pool: str, index: int) -> str:
    """A node name in GKE's shape, gke-<cluster>-<pool>-<hash>-<n>, at most 63 characters (it is the hostname)."""
    digest = hashlib.sha256(f"{cluster}/{pool}".encode()).hexdigest()[:8]
    suffix = f"-{digest}-{index:04d}"
    stem = f"gke-{cluster}-{pool}"[: HOSTNAME_MAX - len(suffix)].rstrip("-")
    return stem + suffix


def _node(name: str, labels: dict[str, str], resources_: tuple[dict[str, str], dict[str, str]]) -> dict[str, Any]:
    capacity, allocatable = resources_
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": allocatable},
    }


def host_origins(machine: MachineType, pool_shape: Shape) -> list[tuple[int, ...]]:
    """The chip coordinates of each host's corner in a pool of ``pool_shape``, one host a ``host_shape`` block,
    hosts in row-major order of the host grid (the twin's pick: GKE does not say which node sits where)."""
    host = host_shape(machine)
    grid = [p // h for p, h in zip(pool_shape.dims, host.dims, strict=True)]
    origins = []
    for flat in range(machine.hosts(pool_shape)):
        coords, rest = [], flat
        for size in reversed(grid):
            coords.append(rest % size)
            rest //= size
        origins.append(tuple(c * h for c, h in zip(reversed(coords), host.dims, strict=True)))
    return origins


def host_shape(machine: MachineType) -> Shape:
    """The chips of one host as a slice shape: the smallest sub-slice, 2x2x1 for TPU7x."""
    shape = min(SUB_SLICE_SHAPES, key=lambda s: s.chips)
    if shape.chips != machine.chips_per_host:
        raise ValueError(
            f"{machine.name}: {machine.chips_per_host} chips a host, but the smallest sub-slice is {shape}"
        )
    return shape


def partition_index(origin: tuple[int, ...], shape: Shape) -> int:
    """Which ``shape`` partition of the cube holds the host at ``origin`` (row-major over the cube's partitions)."""
    counts = [c // s for c, s in zip(CUBE.dims, shape.dims, strict=True)]
    index = 0
    for coordinate, size, count in zip(origin, shape.dims, counts, strict=True):
        index = index * count + coordinate // size
    return index


def tpu_nodes(config: StackConfig) -> list[dict[str, Any]]:
    """The nodes of the stack's TPU pools, as GKE makes them (labels, taint, capacity, allocatable)."""
    tpu, machine = config.tpu, config.tpu.machine
    block = tpu.reservation.block or "block-0"
    nodes = []
    for pool in tpu.pools:
        pool_shape = Shape.parse(pool.topology)
        sub_block = pool.sub_block or pool.name
        for index in range(pool.node_count):
            labels = {
                NODEPOOL_LABEL: pool.name,
                "node.kubernetes.io/instance-type": machine.name,
                "topology.kubernetes.io/zone": tpu.zone,
                "topology.kubernetes.io/region": config.region,
                topology.ACCELERATOR_NODE_LABEL: machine.accelerator_label,
                topology.TOPOLOGY_NODE_LABEL: str(pool_shape),
            }
            if machine.dynamic_slicing:
                labels[topology.BLOCK_LABEL] = block
                origin = host_origins(machine, pool_shape)[index]
                for shape in (CUBE, *SUB_SLICE_SHAPES):
                    value = sub_block if shape == CUBE else f"{sub_block}-{shape}-{partition_index(origin, shape)}"
                    labels[topology.partition_label(shape)] = value
                    labels[topology.partition_state_label(shape)] = HEALTHY
            name = node_name(config.cluster.name, pool.name, index)
            node = _node(
                name, labels, resources(machine.vcpus_per_host, machine.memory_bytes_per_host, machine.chips_per_host)
            )
            node["spec"]["taints"] = [dict(TPU_TAINT)]
            nodes.append(node)
    return nodes


def system_nodes(config: StackConfig) -> list[dict[str, Any]]:
    """The system pool's nodes: cluster.systemPool.nodesPerZone in each of three zones of the region, untainted."""
    pool = config.cluster.system_pool
    match = _GENERAL_PURPOSE.match(pool.machine_type)
    if not match:
        raise ValueError(
            f"{pool.machine_type!r}: the twin knows the vCPUs and memory of n2, n2d, c3 and e2 standard, highmem and "
            "highcpu machine types only"
        )
    vcpus = int(match["vcpus"])
    memory = vcpus * _MEMORY_GB_PER_VCPU[match["kind"]] * topology.GB
    nodes = []
    for zone in _SYSTEM_ZONES:
        for n in range(pool.nodes_per_zone):
            labels = {
                NODEPOOL_LABEL: naming.SYSTEM_POOL_NAME,
                "node.kubernetes.io/instance-type": pool.machine_type,
                "topology.kubernetes.io/zone": f"{config.region}-{zone}",
                "topology.kubernetes.io/region": config.region,
                "kubernetes.io/arch": "amd64",
            }
            index = _SYSTEM_ZONES.index(zone) * pool.nodes_per_zone + n
            nodes.append(
                _node(node_name(config.cluster.name, naming.SYSTEM_POOL_NAME, index), labels, resources(vcpus, memory))
            )
    return nodes


def twin_nodes(config: StackConfig) -> list[dict[str, Any]]:
    """Every node of the cluster the stack's config describes: the TPU pools' and the system pool's."""
    return [*tpu_nodes(config), *system_nodes(config)]
