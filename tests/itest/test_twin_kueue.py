"""The twin (issue 34), its first parts: the real webhooks of Kueue, JobSet and LeaderWorkerSet on the dev stack's
objects, and the stack's nodes kept Ready by kwok, on a control plane of the twin's own. Skipped, saying how to
build them, when the twin's tools are not built."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from components import stack as stack_config
from harness.twin_nodes import twin_nodes
from tests.conftest import stack_values
from tests.itest.conftest import Report, install_pinned_crds
from tests.itest.lab import REPORT_DIR, ControlPlane, Tools
from tests.itest.twin import KWOK_ANNOTATION, Twin, TwinTools, activate_slice_admission_checks


@pytest.fixture(scope="module")
def twin(tools: Tools, report: Report, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """Kueue and kwok on a control plane of the twin's own (the lab's other stacks never see its webhooks or
    nodes, and it never meets their objects), stopped at the end of the module whatever happens."""
    twin_tools = TwinTools(tools)
    if missing := twin_tools.missing():
        pytest.skip(
            "the twin's tools are not built (" + ", ".join(missing) + "): run lab/build.sh twin "
            "(cold about 7 minutes on 2 cores, docs/lab.md)"
        )
    run_dir = tmp_path_factory.mktemp("twin")
    plane = ControlPlane(run_dir / "controlplane", tools)
    running = Twin(plane, twin_tools, run_dir)
    try:
        report.operation("twin: control plane start", plane.start(), "ok", ports=plane.ports)
        began = time.monotonic()
        install_pinned_crds(plane)
        running.start_kueue()
        report.operation("twin: Kueue up, webhooks registered", time.monotonic() - began, "ok", ports=running.ports)
        began = time.monotonic()
        running.start_lws()
        running.start_jobset()
        report.operation(
            "twin: LeaderWorkerSet and JobSet managers up, webhooks registered", time.monotonic() - began, "ok"
        )
        began = time.monotonic()
        running.start_scheduler()
        running.start_kwok()
        report.operation("twin: kube-scheduler and kwok up", time.monotonic() - began, "ok")
        yield running
    finally:
        running.keep_logs(REPORT_DIR / "logs")
        running.stop()
        plane.stop()


@pytest.fixture(scope="module")
def dev() -> stack_config.Stack:
    return stack_config.load(stack_values("dev"))


def create(plane: ControlPlane, obj: dict[str, Any], *extra: str) -> dict[str, Any]:
    done = plane.kubectl("create", "-o", "json", *extra, "-f", "-", stdin=json.dumps(obj))
    created: dict[str, Any] = json.loads(done.stdout)
    return created


@pytest.fixture(scope="module")
def stack_kueue(twin: Twin, dev: stack_config.Stack) -> list[dict[str, Any]]:
    """The dev stack's namespaces and Kueue objects, created through the twin's webhooks."""
    assert dev.kueue is not None
    for namespace in dev.namespaces.values():
        twin.plane.kubectl("apply", "-f", "-", stdin=json.dumps(namespace))
    return [create(twin.plane, obj) for obj in dev.kueue.all]


def test_the_stacks_kueue_objects_pass_kueues_webhooks(
    twin: Twin, dev: stack_config.Stack, stack_kueue: list[dict[str, Any]]
):
    plane = twin.plane
    assert dev.kueue is not None
    assert [(o["kind"], o["metadata"]["name"]) for o in stack_kueue] == [
        (o["kind"], o["metadata"]["name"]) for o in dev.kueue.all
    ]
    assert all(o["metadata"]["uid"] for o in stack_kueue)
    # the webhooks were asked: a ClusterQueue that names a resource its group does not cover passes the CRD schema
    # and is refused by Kueue's validating webhook (pkg/webhooks/clusterqueue_webhook.go, "must match the name in
    # coveredResources")
    (queue,) = [o for o in dev.kueue.queue_objects if o["kind"] == "ClusterQueue"]
    bad = json.loads(json.dumps(queue))
    bad["metadata"]["name"] = "twin-bad-queue"
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "twin.example/not-covered"
    refused = plane.kubectl("create", "-f", "-", stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert "admission webhook" in refused.stderr and "coveredResources" in refused.stderr, refused.stderr


def cluster_queue_active(plane: ControlPlane, name: str) -> dict[str, Any]:
    queue = json.loads(plane.kubectl("get", "clusterqueues.kueue.x-k8s.io", name, "-o", "json").stdout)
    conditions = queue.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Active"), {})


def test_the_cluster_queue_waits_for_the_slice_check_and_opens_once_it_is_active(
    twin: Twin, dev: stack_config.Stack, stack_kueue: list[dict[str, Any]]
):
    """Kueue keeps the stack's ClusterQueue inactive until the slice controller marks its AdmissionCheck Active
    (the stand-in's one job so far); then it opens."""
    assert dev.kueue is not None
    (queue,) = [o for o in dev.kueue.queue_objects if o["kind"] == "ClusterQueue"]
    name = queue["metadata"]["name"]

    def settled(status: str) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        condition: dict[str, Any] = {}
        while time.monotonic() < deadline:
            condition = cluster_queue_active(twin.plane, name)
            if condition.get("status") == status:
                break
            time.sleep(1)
        return condition

    before = settled("False")
    assert before.get("status") == "False" and before.get("reason") == "AdmissionCheckInactive", before
    assert activate_slice_admission_checks(twin.plane) == [
        o["metadata"]["name"] for o in dev.kueue.queue_objects if o["kind"] == "AdmissionCheck"
    ]
    after = settled("True")
    assert after.get("status") == "True", after


def test_the_stacks_jobsets_pass_kueues_and_jobsets_webhooks(twin: Twin, dev: stack_config.Stack):
    assert dev.checks is not None
    for jobset in dev.checks.jobsets:
        assert not jobset["spec"].get("suspend"), "the render leaves suspend to Kueue"
        assert "startupPolicy" not in jobset["spec"] and "publishNotReadyAddresses" not in jobset["spec"]["network"]
        served = create(twin.plane, jobset, "--dry-run=server")
        # Kueue's JobSet webhook suspends a queued JobSet until its workload is admitted
        assert served["spec"].get("suspend") is True, jobset["metadata"]["name"]
        # JobSet's own defaulting of fields the render leaves unset (pkg/webhooks/jobset_webhook.go Default, v0.12.0)
        assert served["spec"].get("startupPolicy") == {"startupPolicyOrder": "AnyOrder"}
        assert served["spec"]["network"].get("publishNotReadyAddresses") is True


def test_the_stacks_leaderworkersets_pass_kueues_and_lws_webhooks(twin: Twin, dev: stack_config.Stack):
    assert dev.serving is not None
    for lws in dev.serving.leaderworkersets:
        served = create(twin.plane, lws, "--dry-run=server")
        # LeaderWorkerSet's own defaulting (what Kueue's webhook alone left empty and the schema refused)
        assert served["spec"]["rolloutStrategy"]["type"] == "RollingUpdate", lws["metadata"]["name"]
        template = served["spec"]["leaderWorkerTemplate"]
        assert template["size"] == lws["spec"]["leaderWorkerTemplate"]["size"]


@pytest.fixture(scope="module")
def nodes(twin: Twin, dev: stack_config.Stack) -> list[dict[str, Any]]:
    """The dev stack's nodes as GKE would make them (harness/twin_nodes.py), created for kwok to keep."""
    built = twin_nodes(dev.config)
    for node in built:
        node["metadata"]["annotations"] = dict(KWOK_ANNOTATION)
        twin.plane.kubectl("create", "-f", "-", stdin=json.dumps(node))
    return built


def test_kwok_keeps_the_stacks_nodes_ready(twin: Twin, nodes: list[dict[str, Any]]):
    wanted = {n["metadata"]["name"] for n in nodes}
    # Ready, and the node lifecycle controller's not-ready taint lifted once it saw so
    deadline = time.monotonic() + 90
    settled: set[str] = set()
    while time.monotonic() < deadline:
        listed = json.loads(twin.plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        settled = {
            n["metadata"]["name"]
            for n in listed
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
            and not [t for t in n["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
        }
        if settled >= wanted:
            break
        time.sleep(2)
    assert settled >= wanted, sorted(wanted - settled)[:5]
    # kwok keeps what GKE set: the allocatable TPU chips and the taint
    served = {
        n["metadata"]["name"]: n for n in json.loads(twin.plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    for node in nodes:
        got = served[node["metadata"]["name"]]
        assert got["status"]["allocatable"] == node["status"]["allocatable"]
        assert got["spec"].get("taints", []) == node["spec"].get("taints", [])
        assert node["metadata"]["labels"].items() <= got["metadata"]["labels"].items()


def test_the_scheduler_places_a_tpu_pod_on_a_tpu_node_and_a_plain_pod_on_a_system_node(
    twin: Twin, dev: stack_config.Stack, nodes: list[dict[str, Any]]
):
    """kube-scheduler on the twin's nodes: the serving leader's own selector and
    tolerations land it on a TPU node with chips to spare; a pod without them stays off the tainted TPU nodes."""
    assert dev.serving is not None
    leader = dev.serving.leaderworkersets[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    chips = {c["name"]: c["resources"]["limits"] for c in leader["containers"] if "resources" in c}
    pods = {
        "twin-tpu-pod": {
            "nodeSelector": leader.get("nodeSelector", {}),
            "tolerations": leader.get("tolerations", []),
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": limits}}
                           for limits in chips.values()],
        },
        "twin-plain-pod": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }  # fmt: skip
    for name, spec in pods.items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}
        twin.plane.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    deadline = time.monotonic() + 60
    placed: dict[str, str] = {}
    while time.monotonic() < deadline and len(placed) < len(pods):
        for name in pods:
            got = json.loads(twin.plane.kubectl("get", "pod", name, "-n", "default", "-o", "json").stdout)
            if got["spec"].get("nodeName"):
                placed[name] = got["spec"]["nodeName"]
        time.sleep(1)
    assert set(placed) == set(pods), placed
    by_name = {n["metadata"]["name"]: n for n in nodes}
    assert by_name[placed["twin-tpu-pod"]]["spec"].get("taints"), "the TPU pod is on a TPU node"
    assert not by_name[placed["twin-plain-pod"]]["spec"].get("taints"), "the plain pod is on a system node"
