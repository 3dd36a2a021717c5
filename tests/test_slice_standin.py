"""The slice controller's stand-in (tests/itest/slice_standin.py), its pure parts, offline: what its webhook does to
the dev stack's JobSets and LeaderWorkerSets, and which Slices it would answer for a workload Kueue placed on the
twin's nodes. The twin's tests (tests/itest/test_twin_kueue.py) run it against the real Kueue."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from components import stack as stack_config
from components.tpu.topology import CUBE, SLICE_TOPOLOGY_ANNOTATION, TOPOLOGY_NODE_LABEL, Shape, is_sub_slice
from harness.twin_nodes import twin_nodes
from tests.conftest import stack_values
from tests.itest import slice_standin as standin


@pytest.fixture(scope="module")
def dev() -> stack_config.Stack:
    return stack_config.load(stack_values("dev"))


def topology_levels(dev: stack_config.Stack) -> list[str]:
    assert dev.kueue is not None
    (topology,) = [o for o in dev.kueue if o["kind"] == "Topology"]
    return [level["nodeLabel"] for level in topology["spec"]["levels"]]


def review(obj: dict[str, Any]) -> dict[str, Any]:
    request = {"uid": "u", "kind": {"kind": obj["kind"]}, "object": obj}
    response: dict[str, Any] = standin.admission_response({"request": request})["response"]
    return response


def patched(obj: dict[str, Any]) -> dict[str, Any]:
    response = review(obj)
    assert response["allowed"], response
    ((operation,),) = [json.loads(base64.b64decode(response["patch"]))]
    assert operation["op"] == "replace" and operation["path"] == "/spec"
    return {**obj, "spec": operation["value"]}


def test_the_jobset_webhook_gives_each_check_a_topology_request_on_the_stacks_own_levels(dev: stack_config.Stack):
    assert dev.checks is not None
    levels = topology_levels(dev)
    for jobset in dev.checks.jobsets:
        ((replicated,),) = [jobset["spec"]["replicatedJobs"]]
        shape = Shape.parse(
            replicated["template"]["spec"]["template"]["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION]
        )
        template = patched(jobset)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        # Kueue places each slice at a level of the stack's own Topology, within one level above it
        required, per_slice = annotations[standin.REQUIRED_TOPOLOGY], annotations[standin.SLICE_REQUIRED_TOPOLOGY]
        assert required in levels and per_slice in levels
        assert levels.index(required) < levels.index(per_slice)
        # one slice's pods fill one partition: the shape's own for a sub-slice, a cube for a super-slice
        partition = shape if is_sub_slice(shape) else CUBE
        chips = sum(int(c["resources"]["limits"]["google.com/tpu"]) for c in template["spec"]["containers"])
        assert int(annotations[standin.SLICE_SIZE]) * chips == partition.chips
        assert per_slice.endswith(f"-{partition}-id")
        # only partitions in a usable state
        (term,) = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert {"key": f"cloud.google.com/gke-tpu-partition-{partition}-state", "operator": "In",
                "values": ["HEALTHY", "DEGRADED"]} in term["matchExpressions"]  # fmt: skip


def test_the_jobset_webhook_refuses_a_check_whose_pods_do_not_fill_the_slice_and_ignores_one_outside_kueue(
    dev: stack_config.Stack,
):
    assert dev.checks is not None
    for jobset in dev.checks.jobsets:
        short = copy.deepcopy(jobset)
        short["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] -= 1
        refused = review(short)
        assert not refused["allowed"] and "full utilization" in refused["status"]["message"]
        unqueued = copy.deepcopy(jobset)
        del unqueued["metadata"]["labels"][standin.QUEUE_LABEL]
        assert review(unqueued) == {"uid": "u", "allowed": True}


def test_the_lws_webhook_makes_leader_and_worker_one_group_in_one_partition(dev: stack_config.Stack):
    assert dev.serving is not None
    levels = topology_levels(dev)
    for lws in dev.serving.leaderworkersets:
        templates = patched(lws)["spec"]["leaderWorkerTemplate"]
        leader, worker = templates["leaderTemplate"]["metadata"], templates["workerTemplate"]["metadata"]
        shape = Shape.parse(worker["annotations"][SLICE_TOPOLOGY_ANNOTATION])
        for metadata in (leader, worker):
            assert (
                metadata["annotations"][standin.REQUIRED_TOPOLOGY] == f"cloud.google.com/gke-tpu-partition-{shape}-id"
            )
            assert metadata["annotations"][standin.REQUIRED_TOPOLOGY] in levels
        assert leader["annotations"][standin.POD_SET_GROUP] == worker["annotations"][standin.POD_SET_GROUP]


@pytest.mark.parametrize(
    ("text", "sub"), [("2x2x1", True), ("2x4x4", True), ("4x4x4", False), ("4x4x8", False), ("8x8x16", False)]
)
def test_slice_topologies_the_controller_accepts(text: str, sub: bool):
    assert standin.SliceTopology.parse(text).sub_slice is sub


@pytest.mark.parametrize("text", ["2x2", "4x4x6", "8x4x4", "0x4x4", "2x2x3", "", "4x4x4x4"])
def test_slice_topologies_the_controller_refuses(text: str):
    with pytest.raises(ValueError, match="is no TPU7x slice topology"):
        standin.SliceTopology.parse(text)


def assignment(hosts: list[str]) -> dict[str, Any]:
    """A Kueue topology assignment of one pod a host (the compact form: a prefix and the roots)."""
    return {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": len(hosts),
                "valuesPerLevel": [
                    {"individual": {"prefix": "gke-", "roots": [h.removeprefix("gke-") for h in hosts]}}
                ],
                "podCounts": {"universal": 1},
            }
        ],
    }


def workload(template: dict[str, Any], groups: dict[str, list[str]], owner_kind: str = "JobSet") -> dict[str, Any]:
    versions = {"JobSet": "jobset.x-k8s.io/v1alpha2", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1"}
    return {
        "metadata": {
            "name": "wl",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": versions[owner_kind], "kind": owner_kind, "name": "o", "controller": True}
            ],
        },
        "spec": {
            "podSets": [
                {"name": name, "count": len(hosts), "template": template, "topologyRequest": {"subGroupCount": 1}}
                for name, hosts in groups.items()
            ]
        },
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "podSetAssignments": [{"name": name, "topologyAssignment": assignment(h)} for name, h in groups.items()]
            },
        },
    }


def test_the_answer_for_a_sub_slice_placed_in_one_partition_or_across_two(dev: stack_config.Stack):
    assert dev.checks is not None
    nodes = {n["metadata"]["name"]: n for n in twin_nodes(dev.config)}
    (jobset,) = [j for j in dev.checks.jobsets if j["metadata"]["name"] == "subslice-check"]
    template = patched(jobset)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    label = template["metadata"]["annotations"][standin.SLICE_REQUIRED_TOPOLOGY]
    by_partition: dict[str, list[str]] = {}
    for name, node in sorted(nodes.items()):
        if label in node["metadata"]["labels"]:
            by_partition.setdefault(node["metadata"]["labels"][label], []).append(name)
    first, second = list(by_partition.values())[:2]

    planned = standin.plan_slices(workload(template, {"main": first}), nodes)
    assert planned is not None and [s.partition_ids for s in planned] == [
        (nodes[first[0]]["metadata"]["labels"][label],)
    ]
    assert standin.partition_count_problem(planned) is None
    # the answer's podSetUpdates ask for nodes of the slice's topology, which the stand-in labels on its nodes
    topology = template["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION]
    assert standin.pod_set_updates(workload(template, {"main": first})) == [
        {"name": "main", "nodeSelector": {TOPOLOGY_NODE_LABEL: topology}}
    ]

    across = standin.plan_slices(workload(template, {"main": [first[0], second[0]]}), nodes)
    assert across is not None and standin.partition_count_problem(across) is not None  # the controller's Retry

    unreserved = workload(template, {"main": first})
    unreserved["status"]["conditions"] = []
    assert standin.plan_slices(unreserved, nodes) is None


def test_a_leaderworkersets_leader_gets_no_slice_of_its_own(dev: stack_config.Stack):
    assert dev.serving is not None
    nodes = {n["metadata"]["name"]: n for n in twin_nodes(dev.config)}
    lws = patched(dev.serving.leaderworkersets[0])
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    label = template["metadata"]["annotations"][standin.REQUIRED_TOPOLOGY]
    first = sorted(
        n for n in nodes if nodes[n]["metadata"]["labels"].get(label) == f"{dev.config.tpu.pools[0].name}-2x2x2-0"
    )
    planned = standin.plan_slices(
        workload(template, {"leader": first[:1], "worker": first[1:]}, owner_kind="LeaderWorkerSet"), nodes
    )
    assert planned is not None and [s.pod_set for s in planned] == ["worker"]
