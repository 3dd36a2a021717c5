"""The twin (issue 34): the real webhooks of Kueue, JobSet and LeaderWorkerSet on the dev stack's objects, the stack's
nodes kept Ready by kwok, and the dev stack's slice check and serving groups admitted by Kueue through the slice
controller's stand-in (tests/itest/slice_standin.py) and bound by kube-scheduler, on a control plane of the twin's own.
Skipped, saying how to build them, when the twin's tools are not built."""

from __future__ import annotations

import functools
import json
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from components import stack as stack_config
from components.tpu.topology import (
    BLOCK_LABEL,
    SLICE_TOPOLOGY_ANNOTATION,
    TOPOLOGY_NODE_LABEL,
    Shape,
    is_sub_slice,
    partition_label,
)
from harness.twin_nodes import twin_nodes
from tests.conftest import stack_values
from tests.itest.conftest import Report, install_pinned_crds
from tests.itest.lab import REPORT_DIR, ControlPlane, Tools
from tests.itest.slice_standin import SLICE_CONTROLLER_NAME, SliceStandIn
from tests.itest.twin import KWOK_ANNOTATION, Twin, TwinTools

T = TypeVar("T")


@pytest.fixture(scope="module")
def twin(
    tools: Tools, report: Report, dev: stack_config.Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Twin]:
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
    running = Twin(plane, twin_tools, run_dir, dev.config)
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
    return [create(twin.plane, obj) for obj in dev.kueue]


def test_the_stacks_kueue_objects_pass_kueues_webhooks(
    twin: Twin, dev: stack_config.Stack, stack_kueue: list[dict[str, Any]]
):
    plane = twin.plane
    assert dev.kueue is not None
    assert [(o["kind"], o["metadata"]["name"]) for o in stack_kueue] == [
        (o["kind"], o["metadata"]["name"]) for o in dev.kueue
    ]
    assert all(o["metadata"]["uid"] for o in stack_kueue)
    # the webhooks were asked: a ClusterQueue that names a resource its group does not cover passes the CRD schema
    # and is refused by Kueue's validating webhook (pkg/webhooks/clusterqueue_webhook.go, "must match the name in
    # coveredResources")
    (queue,) = [o for o in dev.kueue if o["kind"] == "ClusterQueue"]
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


@pytest.fixture(scope="module")
def standin(twin: Twin, stack_kueue: list[dict[str, Any]]) -> Iterator[SliceStandIn]:
    """The slice controller's stand-in, started once the stack's Kueue objects exist (the test of the ClusterQueue
    asks for it only after it has seen the queue wait for it)."""
    running = SliceStandIn(twin.plane, twin.run_dir)
    running.start()
    try:
        yield running
    finally:
        running.stop()
        if running.log.exists():
            (REPORT_DIR / "logs").mkdir(parents=True, exist_ok=True)
            shutil.copy(running.log, REPORT_DIR / "logs" / "twin-slice-standin.log")
        assert not running.failures, "\n".join(running.failures)


def test_the_cluster_queue_waits_for_the_slice_check_and_opens_once_it_is_active(
    twin: Twin, dev: stack_config.Stack, stack_kueue: list[dict[str, Any]], request: pytest.FixtureRequest
):
    """Kueue keeps the stack's ClusterQueue inactive until the slice controller marks its AdmissionCheck Active; the
    stand-in does, and the queue opens."""
    assert dev.kueue is not None
    (queue,) = [o for o in dev.kueue if o["kind"] == "ClusterQueue"]
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
    request.getfixturevalue("standin")
    after = settled("True")
    assert after.get("status") == "True", after
    checks = [o for o in dev.kueue if o["kind"] == "AdmissionCheck"]
    assert checks and all(c["spec"]["controllerName"] == SLICE_CONTROLLER_NAME for c in checks)
    for check in checks:
        served = get(twin.plane, "admissionchecks.kueue.x-k8s.io", check["metadata"]["name"])
        (active,) = [c for c in served["status"]["conditions"] if c["type"] == "Active"]
        assert active["status"] == "True" and active["observedGeneration"] == served["metadata"]["generation"]


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


def test_kueue_holds_queued_pods_in_the_workload_namespaces_only(twin: Twin, stack_kueue: list[dict[str, Any]]):
    """The Configuration the program gives Kueue names the workload namespaces (managedJobsNamespaceSelector), and
    Kueue's pod webhook reads it: a pod naming a LocalQueue is held for admission in a workload namespace, and left
    to the scheduler anywhere else (kubernetes-sigs/kueue v0.17 pkg/controller/jobs/pod/pod_webhook.go, Default). So
    a Kueue outage holds no pod of the cluster's other namespaces."""
    local_queue = next(o for o in stack_kueue if o["kind"] == "LocalQueue")
    held = {}
    for namespace in (local_queue["metadata"]["namespace"], "default"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "twin-queued-pod",
                "namespace": namespace,
                "labels": {"kueue.x-k8s.io/queue-name": local_queue["metadata"]["name"]},
            },
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
        served = create(twin.plane, pod, "--dry-run=server")
        held[namespace] = [gate["name"] for gate in served["spec"].get("schedulingGates", [])]
    assert "kueue.x-k8s.io/admission" in held[local_queue["metadata"]["namespace"]], held
    assert held["default"] == [], held


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
    # their chips back for the slices below (Kueue's topology-aware scheduling counts the pods outside it)
    twin.plane.kubectl("delete", "pod", *pods, "-n", "default", "--wait=true", "--timeout=60s")


# --- The slice controller's stand-in: admission through its answer, placement through its webhook ---------------------


def get(plane: ControlPlane, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    where = ["-n", namespace] if namespace else []
    got: dict[str, Any] = json.loads(plane.kubectl("get", resource, name, *where, "-o", "json").stdout)
    return got


def listed(plane: ControlPlane, resource: str, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(plane.kubectl("get", resource, "-n", namespace, "-o", "json").stdout)[
        "items"
    ]
    return items


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 120, why: Callable[[], str] = str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := probe()) is not None:
            return found
        time.sleep(1)
    raise AssertionError(f"not within {timeout:.0f}s: {what}\n{why()}")


def pods_state(plane: ControlPlane, namespace: str, selector: str, *owners: str) -> str:
    """Each pod's node, phase, scheduling gates and the scheduler's last word, and the ``owners`` resources of the
    namespace (for a failure's message)."""
    pods = json.loads(plane.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout)["items"]
    lines = [plane.kubectl("get", owner, "-n", namespace, "-o", "wide").stdout for owner in owners]
    lines.append(f"{len(pods)} pod(s) match {selector}")
    for pod in pods:
        scheduled = condition(pod, "PodScheduled")
        gates = [g["name"] for g in pod["spec"].get("schedulingGates", [])]
        lines.append(
            f"{pod['metadata']['name']}: node={pod['spec'].get('nodeName')} phase={pod['status'].get('phase')} "
            f"gates={gates} nodeSelector={pod['spec'].get('nodeSelector')} scheduled={scheduled.get('message', '')}"
        )
    return "\n".join(lines)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def workloads_of(plane: ControlPlane, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        w
        for w in listed(plane, "workloads.kueue.x-k8s.io", namespace)
        if any(r["kind"] == kind and r["name"] == name for r in w["metadata"].get("ownerReferences", []))
    ]


def bound_pods(plane: ControlPlane, namespace: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = json.loads(plane.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout)["items"]
    bound = [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    return bound if len(bound) == count else None


def partition_of(nodes: dict[str, dict[str, Any]], pod: dict[str, Any], shape: Shape) -> str:
    return str(nodes[pod["spec"]["nodeName"]]["metadata"]["labels"][partition_label(shape)])


@pytest.fixture(scope="module")
def node_index(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in nodes}


def test_the_sub_slice_check_is_admitted_after_the_standins_ready_and_each_slice_binds_inside_one_partition(
    twin: Twin, dev: stack_config.Stack, standin: SliceStandIn, node_index: dict[str, dict[str, Any]]
):
    """The dev stack's sub-slice check, created as rendered: Kueue reserves quota and waits on the slice check while
    the stand-in holds its answer; admitted once it answers Ready; then every pod bound, each job's pods (one Slice)
    on the nodes of one partition of the check's shape, in one block, on the partitions of the stand-in's Slices."""
    assert dev.checks is not None
    plane = twin.plane
    (jobset,) = [j for j in dev.checks.jobsets if is_sub_slice(Shape.parse(slice_shape(j)))]
    name, namespace = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    shape = Shape.parse(slice_shape(jobset))
    (replicated,) = jobset["spec"]["replicatedJobs"]
    pods_per_job = replicated["template"]["spec"]["parallelism"]
    for obj in (dev.checks.service_account, dev.checks.script_configmap):
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    standin.pause()
    try:
        create(plane, jobset)

        def reserved() -> dict[str, Any] | None:
            found = workloads_of(plane, namespace, "JobSet", name)
            return found[0] if found and condition(found[0], "QuotaReserved").get("status") == "True" else None

        workload = wait_for(f"quota reserved for {name}", reserved)
        time.sleep(3)  # the stand-in holds its answer: Kueue must not admit meanwhile
        held = get(plane, "workloads.kueue.x-k8s.io", workload["metadata"]["name"], namespace)
        assert condition(held, "Admitted").get("status") != "True", held["status"]
        assert [s["state"] for s in held["status"]["admissionChecks"]] == ["Pending"], held["status"]
        assert get(plane, "jobsets.jobset.x-k8s.io", name, namespace)["spec"]["suspend"] is True
    finally:
        standin.resume()

    def admitted() -> dict[str, Any] | None:
        got = get(plane, "workloads.kueue.x-k8s.io", workload["metadata"]["name"], namespace)
        return got if condition(got, "Admitted").get("status") == "True" else None

    done = wait_for(f"{name} admitted", admitted)
    answer = standin.answer_for(namespace, workload["metadata"]["name"])
    assert answer is not None and answer["state"] == "Ready", answer
    assert condition(done, "Admitted")["lastTransitionTime"] >= answer["at"]
    # one Slice a job (Kueue's sub-group), each one partition of the check's shape
    assert len(answer["slices"]) == replicated["replicas"]
    assert all(len(s["partitionIds"]) == 1 for s in answer["slices"])

    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    pods = wait_for(
        f"the {replicated['replicas'] * pods_per_job} pods of {name} bound",
        lambda: bound_pods(plane, namespace, selector, replicated["replicas"] * pods_per_job),
        why=lambda: pods_state(plane, namespace, selector, "jobs"),
    )
    by_job: dict[str, set[str]] = {}
    for pod in pods:
        by_job.setdefault(pod["metadata"]["labels"]["job-name"], set()).add(partition_of(node_index, pod, shape))
    assert len(by_job) == replicated["replicas"]
    assert all(len(partitions) == 1 for partitions in by_job.values()), by_job
    used = [p for partitions in by_job.values() for p in partitions]
    assert len(set(used)) == len(used), f"two slices share a partition: {by_job}"
    assert set(used) == {p for s in answer["slices"] for p in s["partitionIds"]}
    assert len({node_index[p["spec"]["nodeName"]]["metadata"]["labels"][BLOCK_LABEL] for p in pods}) == 1
    # the node selector of the answer's podSetUpdates is met on every node: the stand-in labelled them
    assert all(p["spec"]["nodeSelector"][TOPOLOGY_NODE_LABEL] == str(shape) for p in pods)


def test_each_prefill_and_decode_group_lands_inside_one_partition(
    twin: Twin, dev: stack_config.Stack, standin: SliceStandIn, node_index: dict[str, dict[str, Any]]
):
    """The dev stack's LeaderWorkerSets, created as rendered: each group (leader and workers, one Kueue workload) is
    admitted through the stand-in's answer and bound on the nodes of one partition of its slice shape, no two groups
    on one partition."""
    assert dev.serving is not None
    plane = twin.plane
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(dev.serving.service_account))
    for lws in dev.serving.leaderworkersets:
        create(plane, lws)
    partitions: dict[tuple[str, str], set[str]] = {}
    for lws in dev.serving.leaderworkersets:
        name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
        template = lws["spec"]["leaderWorkerTemplate"]
        shape = Shape.parse(template["workerTemplate"]["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION])
        count = lws["spec"]["replicas"] * template["size"]
        selector = f"leaderworkerset.sigs.k8s.io/name={name}"
        pods = wait_for(
            f"the {count} pods of {name} bound",
            functools.partial(bound_pods, plane, namespace, selector, count),
            timeout=180,
            why=functools.partial(pods_state, plane, namespace, selector, "statefulsets"),
        )
        for pod in pods:
            group = (name, pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"])
            partitions.setdefault(group, set()).add(partition_of(node_index, pod, shape))
        groups = workloads_of(plane, namespace, "LeaderWorkerSet", name)
        assert len(groups) == lws["spec"]["replicas"]
        for group_workload in groups:
            answer = standin.answer_for(namespace, group_workload["metadata"]["name"])
            assert answer is not None and answer["state"] == "Ready", (group_workload["metadata"]["name"], answer)
    assert all(len(p) == 1 for p in partitions.values()), partitions
    used = [p for group in partitions.values() for p in group]
    assert len(set(used)) == len(used), f"two groups share a partition: {partitions}"


def slice_shape(jobset: dict[str, Any]) -> str:
    (replicated,) = jobset["spec"]["replicatedJobs"]
    return str(replicated["template"]["spec"]["template"]["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION])
