"""The twin scenarios' judgement, without the twin (tests/itest/twin_scenario.py): how a step's observations are held
against the admission plan, and how placement is judged on the dev stack's own nodes (harness/twin_nodes.py), the dev stack
given the reference's two cubes: the steady state below (which check serving preempts) is that scenario's."""

from __future__ import annotations

import pytest

from components import stack as stack_config
from harness.twin_nodes import twin_nodes
from tests.conftest import cubes, stack_values, with_overrides
from tests.itest.twin_scenario import Observed, Placed, differences, markdown, node_domains, placement_problems


@pytest.fixture(scope="module")
def dev():
    return stack_config.load(with_overrides(stack_values("dev"), cubes(2))).config


@pytest.fixture(scope="module")
def domains(dev):
    return node_domains(twin_nodes(dev))


def seen(key, workloads, admitted, preempted_by=()):
    return Observed(key, workloads, admitted, tuple(preempted_by))


def test_the_dev_plan_s_steady_state_matches_and_every_departure_is_named(dev):
    expected = dev.admission_plan().expectations()
    good = {
        "serving.prefill": seen("serving.prefill", 4, 4),
        "serving.decode": seen("serving.decode", 4, 4),
        "checks.subslicing": seen("checks.subslicing", 1, 1),
        "checks.superslicing": seen("checks.superslicing", 1, 0, ["serving.decode"]),
    }
    assert differences(expected, good, ran_before={"checks.superslicing"}) == []
    # the super-slice check left running, preempted by the wrong one, or not preempted at all
    assert differences(expected, {**good, "checks.superslicing": seen("checks.superslicing", 1, 1)}, set())
    wrong = {**good, "checks.superslicing": seen("checks.superslicing", 1, 0, ["checks.subslicing"])}
    assert any("checks.subslicing" in d for d in differences(expected, wrong, {"checks.superslicing"}))
    quiet = {**good, "checks.superslicing": seen("checks.superslicing", 1, 0)}
    assert differences(expected, quiet, {"checks.superslicing"}) == [
        "checks.superslicing: the plan has serving.prefill, serving.decode preempt it; the twin did not"
    ]
    # a serving group left waiting, and a workload the plan does not know
    assert differences(expected, {**good, "serving.decode": seen("serving.decode", 4, 3)}, set())
    assert differences(expected, {**good, "other": seen("other", 1, 1)}, set())


def tpu_nodes_by_partition(domains, shape):
    by: dict[str, list[str]] = {}
    for node, of in sorted(domains.items()):
        by.setdefault(of[shape], []).append(node)
    return by


def test_placement_inside_partitions_and_across_cubes(dev, domains):
    partitions = list(tpu_nodes_by_partition(domains, "2x2x2").values())
    assert len(partitions) == 16 and all(len(p) == 2 for p in partitions)
    plan = dev.admission_plan()
    shapes = {w.key: w.shape for w in plan.workloads}
    slices = {w.key: w.slices for w in plan.workloads}
    sub = [Placed("checks.subslicing", f"job-{i}", tuple((f"p{i}-{j}", n) for j, n in enumerate(partitions[i])))
           for i in range(6)]  # fmt: skip
    assert placement_problems({"checks.subslicing": sub}, domains, shapes, slices) == []
    # a slice across two partitions, two slices in one partition, a pod unbound
    split = [*sub[:5], Placed("checks.subslicing", "job-5", (("a", partitions[5][0]), ("b", partitions[6][0])))]
    assert placement_problems({"checks.subslicing": split}, domains, shapes, slices)
    shared = [*sub[:5], Placed("checks.subslicing", "job-5", tuple(sub[0].pods))]
    assert placement_problems({"checks.subslicing": shared}, domains, shapes, slices)
    unbound = [*sub[:5], Placed("checks.subslicing", "job-5", (("a", partitions[5][0]), ("b", "")))]
    assert placement_problems({"checks.subslicing": unbound}, domains, shapes, slices)
    # the super-slice: every host of both cubes, one pod each; one cube's worth is not enough
    hosts = sorted(domains)
    whole = [Placed("checks.superslicing", "job-0", tuple((f"p{i}", n) for i, n in enumerate(hosts)))]
    assert placement_problems({"checks.superslicing": whole}, domains, shapes, slices) == []
    cube = tpu_nodes_by_partition(domains, "4x4x4")
    one_cube = [n for nodes in cube.values() for n in nodes][:16] * 2
    half = [Placed("checks.superslicing", "job-0", tuple((f"p{i}", n) for i, n in enumerate(one_cube)))]
    assert placement_problems({"checks.superslicing": half}, domains, shapes, slices)


def test_the_report_reads_as_markdown(dev):
    expected = dev.admission_plan().expectations()
    data = {
        "written": "t",
        "seconds": 1.0,
        "notes": ["a note"],
        "steps": [
            {
                "step": "serving switched on",
                "config": {"serving.enabled": True},
                "plan": dev.admission_plan().lines(),
                "expected": {k: vars(e) for k, e in expected.items()},
                "observed": {"checks.superslicing": {**vars(seen("checks.superslicing", 1, 0, ["serving.prefill"]))}},
                "differences": [],
                "placement": [{"key": "k", "group": "g", "pods": [{"pod": "p", "node": "n", "cube": "c", "partition": "x"}]}],
            }
        ],
        "timeline": [
            {"seen": "s", "step": "serving switched on"},
            {"seen": "s", "at": "a", "key": "checks.superslicing", "workload": "w", "condition": "Preempted",
             "status": "True", "reason": "InClusterQueue", "message": "Preempted to accommodate a workload"},
        ],
    }  # fmt: skip
    text = markdown(data)
    assert "## serving switched on" in text and "| checks.superslicing | waits | 0 of 1 | serving.prefill |" in text
    assert "| k | g | p | n | c | x |" in text and "Preempted=True" in text and "- a note" in text
