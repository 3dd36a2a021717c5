"""The twin's nodes (harness/twin_nodes.py): what GKE would make from a stack's TPU and system-pool config.

Fixture stacks, not a user's stack file: every expectation is derived from the fixture's own config (its pools,
machine type, reservation) or from the stack's own objects (the Kueue Topology and ResourceFlavor, the pods'
node selectors and tolerations), so a change of either that the nodes do not follow fails here.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from components import stack as stack_config
from components.tpu import topology
from components.tpu.topology import CUBE, SUB_SLICE_SHAPES, Shape
from harness import twin_nodes as twin
from tests.crd_schemas import core_errors
from tests.itest import slice_standin as standin

# Three cubes, one pinned to a sub-block, the system pool two nodes a zone on another machine type.
THREE_CUBES = {
    "project": "fixture-project",
    "region": "us-east5",
    "cluster": {
        "name": "fixture-cluster",
        "systemPool": {"machineType": "n2-highmem-8", "nodesPerZone": 2},
        "maintenanceWindow": {
            "start": "2026-12-05T02:00:00Z",
            "end": "2026-12-05T08:00:00Z",
            "recurrence": "FREQ=DAILY",
        },
    },
    "tpu": {
        "zone": "us-east5-ai1b",
        "reservation": {"name": "fixture-res", "block": "block-3"},
        "pools": [
            {"name": "cube-a", "nodeCount": 16, "subBlock": "sub-block-9"},
            {"name": "cube-b", "nodeCount": 16},
            {"name": "cube-c", "nodeCount": 16},
        ],
        "sliceShapes": ["2x2x1", "2x2x2", "2x4x4", "4x4x8"],
    },
    "serving": {"enabled": True, "weightsBucket": {"name": "fixture-weights"}},
}
ONE_CUBE = {
    "project": "fixture-project",
    "tpu": {
        "reservation": {"name": "one-res", "block": "blk-1"},
        "pools": [{"name": "only-cube", "nodeCount": 16}],
        "sliceShapes": ["2x2x2"],
    },
    "checks": {"superslicing": {"enabled": False}},
}
FIXTURES = {"three-cubes": THREE_CUBES, "one-cube": ONE_CUBE}


@pytest.fixture(params=sorted(FIXTURES), scope="module")
def stack(request: pytest.FixtureRequest) -> stack_config.Stack:
    return stack_config.load(FIXTURES[request.param])


def tpu_nodes(stack: stack_config.Stack) -> list[dict[str, Any]]:
    return twin.tpu_nodes(stack.config)


def labels(node: dict[str, Any]) -> dict[str, str]:
    return node["metadata"]["labels"]


def test_one_node_per_host_of_each_pool_with_its_chips(stack):
    tpu = stack.config.tpu
    nodes = tpu_nodes(stack)
    by_pool = defaultdict(list)
    for node in nodes:
        by_pool[labels(node)[twin.NODEPOOL_LABEL]].append(node)
    assert {name: len(pool_nodes) for name, pool_nodes in by_pool.items()} == {p.name: p.node_count for p in tpu.pools}
    assert sum(int(n["status"]["allocatable"][topology.TPU_RESOURCE]) for n in nodes) == tpu.total_chips
    for node in nodes:
        assert node["spec"]["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]
        assert labels(node)[topology.ACCELERATOR_NODE_LABEL] == tpu.machine.accelerator_label
        assert labels(node)["node.kubernetes.io/instance-type"] == tpu.machine_type
        assert labels(node)["topology.kubernetes.io/zone"] == tpu.zone
        assert labels(node)["topology.kubernetes.io/region"] == stack.config.region
        capacity = node["status"]["capacity"]
        assert (int(capacity["cpu"]), int(capacity["memory"])) == (
            tpu.machine.vcpus_per_host,
            tpu.machine.memory_bytes_per_host,
        )


def test_every_level_of_the_stacks_kueue_topology_is_on_every_tpu_node(stack):
    assert stack.kueue is not None
    (kueue_topology,) = [o for o in stack.kueue if o["kind"] == "Topology"]
    (flavor,) = [o for o in stack.kueue if o["kind"] == "ResourceFlavor"]
    levels = [level["nodeLabel"] for level in kueue_topology["spec"]["levels"]]
    for node in tpu_nodes(stack):
        assert set(levels) <= set(labels(node)), sorted(set(levels) - set(labels(node)))
        assert flavor["spec"]["nodeLabels"].items() <= labels(node).items()
    for node in twin.system_nodes(stack.config):
        assert not flavor["spec"]["nodeLabels"].items() <= labels(node).items()


def test_partitions_nest_and_hold_the_hosts_of_their_shape(stack):
    machine = stack.config.tpu.machine
    nodes = tpu_nodes(stack)
    shapes = sorted((CUBE, *SUB_SLICE_SHAPES), key=lambda s: s.chips)
    for smaller, larger in itertools.pairwise(shapes):
        members: dict[str, set[str]] = defaultdict(set)
        for node in nodes:
            members[labels(node)[topology.partition_label(smaller)]].add(labels(node)[topology.partition_label(larger)])
        # each partition of a shape lies inside one partition of the next larger shape
        assert all(len(parents) == 1 for parents in members.values()), smaller
    for shape in shapes:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for node in nodes:
            assert labels(node)[topology.partition_state_label(shape)] == "HEALTHY"
            groups[labels(node)[topology.partition_label(shape)]].append(node)
        # the hosts of a partition hold exactly its chips, and no partition spans two pools
        assert {len(g) for g in groups.values()} == {shape.chips // machine.chips_per_host}
        assert all(len({labels(n)[twin.NODEPOOL_LABEL] for n in g}) == 1 for g in groups.values())
        assert len(groups) == len(stack.config.tpu.pools) * (CUBE.chips // shape.chips)


def test_a_partitions_hosts_form_a_box_of_its_shape():
    machine = topology.MACHINE_CATALOG[topology.TPU7X]
    origins = twin.host_origins(machine, CUBE)
    host = twin.host_shape(machine)
    assert len(set(origins)) == len(origins) == CUBE.chips // machine.chips_per_host
    for shape in SUB_SLICE_SHAPES:
        boxes = defaultdict(list)
        for origin in origins:
            boxes[twin.partition_index(origin, shape)].append(origin)
        for box in boxes.values():
            # the chips its hosts cover along each axis are the shape's extent
            extent = tuple(max(o[axis] for o in box) + host.dims[axis] - min(o[axis] for o in box) for axis in range(3))
            assert Shape(extent) == shape


def test_the_sub_block_and_block_come_from_the_reservation():
    config = stack_config.load(THREE_CUBES).config
    for node in twin.tpu_nodes(config):
        pool = next(p for p in config.tpu.pools if p.name == labels(node)[twin.NODEPOOL_LABEL])
        assert labels(node)[topology.BLOCK_LABEL] == config.tpu.reservation.block
        assert labels(node)[topology.partition_label(CUBE)] == (pool.sub_block or pool.name)


def pod_specs(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside an object (a JobSet's, a LeaderWorkerSet's leader and worker templates)."""
    if isinstance(obj, dict):
        if "containers" in obj:
            yield obj
        for value in obj.values():
            yield from pod_specs(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from pod_specs(item)


def tpu_pod_specs(stack: stack_config.Stack) -> list[dict[str, Any]]:
    objects = [
        *(stack.checks.jobsets if stack.checks else []),
        *(stack.serving.leaderworkersets if stack.serving else []),
    ]
    return [
        spec
        for spec in pod_specs(objects)
        if any(topology.TPU_RESOURCE in c.get("resources", {}).get("limits", {}) for c in spec["containers"])
    ]


def tolerates(spec: dict[str, Any], taint: dict[str, str]) -> bool:
    return any(
        t.get("key") == taint["key"]
        and t.get("effect", taint["effect"]) == taint["effect"]
        and (t.get("operator") == "Exists" or t.get("value") == taint["value"])
        for t in spec.get("tolerations", [])
    )


def test_the_stacks_tpu_pods_select_and_tolerate_the_tpu_nodes_only(stack):
    specs = tpu_pod_specs(stack)
    assert specs, "the fixture makes TPU pods"
    nodes, system = tpu_nodes(stack), twin.system_nodes(stack.config)
    for spec in specs:
        selector = spec.get("nodeSelector", {})
        chips = max(int(c["resources"]["limits"][topology.TPU_RESOURCE]) for c in spec["containers"])
        fits = [n for n in nodes if selector.items() <= labels(n).items()]
        assert fits and all(int(n["status"]["allocatable"][topology.TPU_RESOURCE]) >= chips for n in fits)
        assert all(tolerates(spec, taint) for n in fits for taint in n["spec"]["taints"])
        assert not [n for n in system if selector.items() <= labels(n).items()]


# Every kind of shape serving may run on, with a tensor-parallel size that fits it: each sub-slice, the cube, and a
# super-slice of two cubes (4x4x8), for which GKE writes no partition label of its own.
HEALTHY_SERVING_SHAPES = [("2x2x1", 8), ("2x2x2", 16), ("2x2x4", 16), ("2x4x4", 16), ("4x4x4", 16), ("4x4x8", 16)]


@pytest.mark.parametrize(
    ("shape", "tensor_parallel_size"), HEALTHY_SERVING_SHAPES, ids=[s for s, _ in HEALTHY_SERVING_SHAPES]
)
def test_healthy_nodes_only_selects_a_health_label_the_nodes_carry_and_the_slice_controller_reads(
    shape: str, tensor_parallel_size: int
):
    """serving.healthyNodesOnly on a four-cube stack serving ``shape``: every node selector of the serving pods is one
    the twin's TPU7x nodes carry (all HEALTHY, every partition label GKE writes), on as many hosts as one slice needs,
    and the health label in it is the one the slice controller reads for that shape, so its webhook leaves the pods'
    health to the selector and adds no HEALTHY-or-DEGRADED affinity of its own (tests/itest/slice_standin.py)."""
    values = copy.deepcopy(THREE_CUBES)
    values["tpu"]["pools"].append({"name": "cube-d", "nodeCount": 16})
    values["tpu"]["sliceShapes"] = [text for text, _ in HEALTHY_SERVING_SHAPES]
    one_group = {"replicas": 1, "tensorParallelSize": tensor_parallel_size}
    values["serving"] |= {"sliceShape": shape, "healthyNodesOnly": True, "prefill": one_group, "decode": one_group}
    stack = stack_config.load(values)
    assert stack.serving is not None
    nodes, hosts = tpu_nodes(stack), stack.config.tpu.machine.hosts(Shape.parse(shape))
    for lws in stack.serving.leaderworkersets:
        mutated = standin.mutate_leaderworkerset(lws)
        for kind in ("leader", "worker"):
            spec = lws["spec"]["leaderWorkerTemplate"][f"{kind}Template"]["spec"]
            selector = spec["nodeSelector"]
            assert [key for key in selector if key.endswith("-state")], "healthyNodesOnly selects a partition state"
            fits = [n for n in nodes if selector.items() <= labels(n).items()]
            assert len(fits) >= hosts, sorted(set(selector) - set().union(*(labels(n) for n in nodes)))
            mutated_spec = mutated["spec"]["leaderWorkerTemplate"][f"{kind}Template"]["spec"]
            assert "affinity" not in mutated_spec, mutated_spec.get("affinity")


def test_system_pool_nodes_follow_the_system_pool_config():
    config = stack_config.load(THREE_CUBES).config
    pool = config.cluster.system_pool
    nodes = twin.system_nodes(config)
    assert len(nodes) == 3 * pool.nodes_per_zone
    assert len({labels(n)["topology.kubernetes.io/zone"] for n in nodes}) == 3
    vcpus = int(pool.machine_type.rsplit("-", 1)[1])
    for node in nodes:
        assert labels(node)["node.kubernetes.io/instance-type"] == pool.machine_type
        assert labels(node)["topology.kubernetes.io/zone"].startswith(config.region + "-")
        assert "taints" not in node["spec"] and topology.TPU_RESOURCE not in node["status"]["capacity"]
        assert int(node["status"]["capacity"]["cpu"]) == vcpus


@pytest.mark.parametrize("machine_type", ["n1-standard-8", "a3-highgpu-8g", "n2-custom-8-32768"])
def test_a_system_machine_type_the_twin_does_not_know_is_refused_by_name(machine_type):
    config = stack_config.load({**ONE_CUBE, "cluster": {"systemPool": {"machineType": machine_type}}}).config
    with pytest.raises(ValueError, match=re.escape(machine_type)):
        twin.system_nodes(config)


def test_node_names_are_unique_hostnames_and_the_objects_are_valid_nodes(stack):
    nodes = twin.twin_nodes(stack.config)
    names = [n["metadata"]["name"] for n in nodes]
    assert len(set(names)) == len(names)
    for node in nodes:
        name = node["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name), name
        assert labels(node)["kubernetes.io/hostname"] == name
        assert core_errors(node) == []


def test_long_cluster_and_pool_names_still_make_distinct_hostnames():
    names = {twin.node_name("c" * 40, f"{'p' * 38}-{i}", 3) for i in range(2)}
    assert len(names) == 2 and all(len(n) <= 63 and not n.startswith("-") for n in names)


# GKE's reservations against examples worked by hand from the rule of
# https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes (and, for 150 GiB, the worked example of
# hatemosphere/gke-node-allocatable-memory-calculator's README: 9.8577 GiB with the 100 MiB eviction threshold).
@pytest.mark.parametrize("vcpus, millis", [(1, 60), (2, 70), (3, 75), (4, 80), (8, 90), (224, 630)])
def test_cpu_reservation(vcpus, millis):
    assert twin.reserved_cpu_millis(vcpus) == millis


@pytest.mark.parametrize(
    "gib, reserved_gib",
    [(4, 1.0), (8, 1.8), (16, 2.6), (128, 9.32), (150, 9.76)],
)
def test_memory_reservation(gib, reserved_gib):
    reserved = twin.reserved_memory_bytes(gib * twin.GIB)
    assert reserved == pytest.approx(reserved_gib * twin.GIB, abs=8)  # whole bytes per tier
    if gib == 150:
        assert (reserved + twin.EVICTION_THRESHOLD_BYTES) / twin.GIB == pytest.approx(9.8577, abs=1e-4)


def test_a_static_slice_pool_has_its_topology_and_no_partitions():
    config = stack_config.load(
        {
            "project": "fixture-project",
            "region": "us-west4",
            "tpu": {
                "zone": "us-west4-a",
                "machineType": "ct5lp-hightpu-4t",
                "pools": [{"name": "v5e", "nodeCount": 8, "topology": "4x8"}],
                "sliceShapes": [],
            },
            "checks": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
        }
    ).config
    nodes = twin.tpu_nodes(config)
    assert len(nodes) == config.tpu.total_nodes
    for node in nodes:
        assert labels(node)[topology.TOPOLOGY_NODE_LABEL] == "4x8"
        assert not [k for k in labels(node) if "partition" in k or k == topology.BLOCK_LABEL]
