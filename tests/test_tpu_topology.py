"""The pure TPU topology model: shapes, machine facts and dynamic-slicing rules."""

import dataclasses
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.config_base import Problems
from components.gcp.config import TPU7X_MIN_GKE_VERSION, ClusterConfig, GkeVersion, TpuConfig, validate_cluster
from components.tpu import topology
from components.tpu.topology import MACHINE_CATALOG, Shape

TPU7X = MACHINE_CATALOG["tpu7x-standard-4t"]
V5E = MACHINE_CATALOG["ct5lp-hightpu-4t"]


@given(st.lists(st.integers(min_value=1, max_value=64), min_size=2, max_size=3))
def test_shape_text_round_trips(dims):
    text = "x".join(map(str, dims))
    shape = Shape.parse(text)
    assert str(shape) == text
    assert shape.chips == __import__("math").prod(dims)


@pytest.mark.parametrize("text", ["", "4", "4x", "x4", "4x0x4", "4x4x4x4", "4X4", "4 x4", "-4x4", "axb", "04x4"])
def test_malformed_shapes_are_rejected(text):
    with pytest.raises(ValueError, match="not a TPU topology"):
        Shape.parse(text)


@pytest.mark.parametrize(
    "machine, shape, hosts, tensorcores",
    [
        (TPU7X, "2x2x1", 1, 8),
        (TPU7X, "2x2x2", 2, 16),
        (TPU7X, "2x2x4", 4, 32),
        (TPU7X, "2x4x4", 8, 64),
        (TPU7X, "4x4x4", 16, 128),
        (TPU7X, "4x4x8", 32, 256),
        (V5E, "4x8", 8, 32),
        (V5E, "2x4", 2, 8),
    ],
)
def test_hosts_and_tensorcores_follow_the_machine_catalog(machine, shape, hosts, tensorcores):
    assert machine.hosts(Shape.parse(shape)) == hosts
    assert Shape.parse(shape).chips * machine.tensorcores_per_chip == tensorcores


def test_machine_catalog_is_consistent():
    """The catalog's facts are each written once, with their source, in MACHINE_CATALOG (and shown in every render's
    node selectors and TPU requests); what must hold between them: a generation slices either dynamically, in 3D, or
    in its fixed 2D topologies, each of whole hosts."""
    assert len({machine.accelerator_label for machine in MACHINE_CATALOG.values()}) == len(MACHINE_CATALOG)
    for machine in MACHINE_CATALOG.values():
        assert machine.chips_per_host > 0 and machine.tensorcores_per_chip > 0
        if machine.dynamic_slicing:
            assert machine.topology_rank == 3 and not machine.static_topologies
        else:
            assert machine.static_topologies
            assert all(len(t.dims) == machine.topology_rank for t in machine.static_topologies)
            assert all(t.chips % machine.chips_per_host == 0 for t in machine.static_topologies)


def test_a_shape_that_splits_a_host_has_no_host_count():
    with pytest.raises(ValueError, match="not a multiple"):
        TPU7X.hosts(Shape.parse("1x1x1"))


@pytest.mark.parametrize(
    "shape, sub, super_, cubes",
    [
        ("2x2x1", True, False, None),
        ("2x2x2", True, False, None),
        ("2x2x4", True, False, None),
        ("2x4x4", True, False, None),
        ("4x4x4", False, True, 1),
        ("4x4x8", False, True, 2),
        ("4x8x8", False, True, 4),
        ("8x8x8", False, True, 8),
        ("8x4x4", False, False, None),  # axes must ascend
        ("2x2x3", False, False, None),
        ("4x4x6", False, False, None),
        ("4x8", False, False, None),
        ("48x48x64", False, False, None),  # 12*12*16 = 2304 cubes, past one block
    ],
)
def test_sub_and_super_slice_rules(shape, sub, super_, cubes):
    parsed = Shape.parse(shape)
    assert topology.is_sub_slice(parsed) is sub
    assert topology.is_super_slice(parsed) is super_
    assert (topology.dynamic_slice_problem(parsed) is None) is (sub or super_)
    if cubes is not None:
        assert topology.cubes_in(parsed) == cubes


@pytest.mark.parametrize(
    "shape, cubes, fit",
    [
        ("2x2x1", 2, 32),
        ("2x2x2", 2, 16),
        ("2x2x4", 1, 4),
        ("2x4x4", 2, 4),
        ("4x4x4", 2, 2),
        ("4x4x8", 2, 1),
        ("4x4x8", 1, 0),
        ("4x8x8", 3, 0),
    ],
)
def test_slices_that_fit_the_capacity(shape, cubes, fit):
    assert topology.slices_that_fit(Shape.parse(shape), cubes) == fit


@given(st.sampled_from(topology.SUB_SLICE_SHAPES), st.integers(min_value=1, max_value=144))
def test_sub_slices_exactly_tile_the_cubes(shape, cubes):
    assert topology.slices_that_fit(shape, cubes) * shape.chips == cubes * topology.CUBE.chips


PARTITION = "cloud.google.com/gke-tpu-partition-{}-id"


def test_kueue_topology_levels_run_from_block_through_every_partition_to_hostname():
    # The codelab's Topology: every partition of a cube, down to 2x2x1.
    assert topology.kueue_topology_levels() == [
        "cloud.google.com/gce-topology-block",
        *(PARTITION.format(p) for p in ["4x4x4", "2x4x4", "2x2x4", "2x2x2", "2x2x1"]),
        "kubernetes.io/hostname",
    ]


@pytest.mark.parametrize(
    "shapes, floor",
    [
        (["2x2x2"], topology.SUB_SLICING_MIN_GKE_VERSION),
        (["4x4x8"], topology.SUPER_SLICING_MIN_GKE_VERSION),
        (["4x4x8", "2x2x1"], topology.SUB_SLICING_MIN_GKE_VERSION),
        ([], TPU7X_MIN_GKE_VERSION),  # no slicing: only the machine type's floor
    ],
)
def test_gke_version_floor_follows_the_slicing_in_use(shapes, floor):
    """cluster.version is held to the floor of the slicing in use: accepted at it, refused one GKE build below it."""

    def version_problems(version: str) -> list[str]:
        problems = Problems()
        validate_cluster(ClusterConfig(version=version), TpuConfig(slice_shapes=shapes), problems, date(2026, 1, 1))
        return [p.key for p in problems.items if p.key == "cluster.version"]

    at = GkeVersion.parse(floor)
    assert version_problems(floor) == []
    assert version_problems(str(dataclasses.replace(at, gke=at.gke - 1))) == ["cluster.version"]


@pytest.mark.parametrize(
    "shape, problem",
    [
        ("4x8", None),
        ("16x16", None),
        ("4x4x4", "2 axes"),
        ("1x2", "whole"),
        ("4x6", "not a ct5lp-hightpu-4t slice topology"),
    ],
)
def test_static_v5e_slices(shape, problem):
    found = topology.static_slice_problem(Shape.parse(shape), V5E)
    assert (found is None) if problem is None else (problem in found)
