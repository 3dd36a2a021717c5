"""The twin's scenarios (issue 34, item 5): the project's own program, run through the real Pulumi engine as the lab
runs it (tests/itest/engine.py: the dev fixture stack onto an existing cluster given by a kubeconfig), against the
twin's control plane, where real Kueue, JobSet, LeaderWorkerSet and kube-scheduler admit, preempt and place what it
creates on kwok's simulated TPU7x nodes. The tests run in file order and share one stack:

1. the sub-slice check alone (serving and the super-slice check switched off): admitted, each 2x2x2 slice's pods
   inside one 2x2x2 partition;
2. the super-slice check switched on: it preempts the sub-slice check and is bound across both cubes;
3. serving switched on: its prefill and decode groups preempt the super-slice check, the sub-slice check comes
   back beside them, each group inside one 2x2x2 partition;
4. each step's `admissionPlan` output against what the twin did, workload by workload;
5. changes Kueue would refuse, refused by the program's own preview (under the key the user set) before `up` changes
   anything, then the corrected change going through;
6. `destroy` draining through the program's gates and leaving no Workload, pod, JobSet or LeaderWorkerSet.

Every step writes to build/itest/twin-report.md and .json (tests/itest/twin_scenario.py): the plan, what the twin
did, the timeline of the Workloads' conditions, the slice controller stand-in's answers (tests/itest/slice_standin.py,
whose webhook gives the stack's JobSets and LeaderWorkerSets the topology request placement depends on) and each
group's placement.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pulumi import automation as auto

from components import stack as stack_config
from components.stack import StackConfig
from harness.twin_nodes import twin_nodes
from tests.conftest import stack_values, with_overrides
from tests.itest.conftest import Report, install_pinned_crds
from tests.itest.engine import WORKLOAD_NAMESPACE, Lab, close_lab, lab_overrides, open_lab
from tests.itest.engine import stack_config as lab_config
from tests.itest.lab import PROJECT_NAME, REPORT_DIR, ControlPlane, KubeApi, PulumiHome, Tools, config_text
from tests.itest.slice_standin import SliceStandIn
from tests.itest.twin import KWOK_ANNOTATION, Twin, TwinTools
from tests.itest.twin_scenario import (
    KUEUE_API,
    WORKLOADS_PATH,
    Observed,
    Placed,
    Recorder,
    TwinReport,
    differences,
    groups_of,
    node_domains,
    observe,
    placement_problems,
    placement_table,
    wait_for,
    workload_owners,
)

STACK = "twin"
SETTLE_SECONDS = 240  # Kueue's scheduling cycles, the JobSet, LWS and Job controllers and kwok, on two shared cores


@dataclass
class Scenario:
    """The twin with the stack on it, the Workloads' recorder and the report, shared by the module's tests."""

    twin: Twin
    lab: Lab
    api: KubeApi
    recorder: Recorder
    report: TwinReport
    nodes: list[dict[str, Any]]
    overrides: dict[str, Any]
    standin: SliceStandIn
    ran_before: set[str] = field(default_factory=set)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    def config(self) -> StackConfig:
        return stack_config.load(with_overrides(stack_values("dev"), self.overrides)).config

    def set(self, changes: dict[str, Any]) -> None:
        for key, value in changes.items():
            self.lab.stack.set_config(f"{PROJECT_NAME}:{key}", auto.ConfigValue(config_text(value)), path=True)
        self.overrides.update(changes)


def start_twin(twin: Twin, report: Report, jobs_complete: bool) -> None:
    plane = twin.plane
    report.operation("twin: control plane start", plane.start(), "ok", ports=plane.ports)
    began = time.monotonic()
    install_pinned_crds(plane)
    twin.start_kueue()
    twin.start_lws()
    twin.start_jobset()
    twin.start_scheduler()
    twin.start_kwok(jobs_complete=jobs_complete)
    report.operation("twin: Kueue, LWS, JobSet, kube-scheduler and kwok up", time.monotonic() - began, "ok")


def create_nodes(plane: ControlPlane, config: StackConfig) -> list[dict[str, Any]]:
    """The stack's nodes as GKE makes them (harness/twin_nodes.py), for kwok to keep Ready; waits until they are."""
    built = twin_nodes(config)
    for node in built:
        node["metadata"]["annotations"] = dict(KWOK_ANNOTATION)
        plane.kubectl("create", "-f", "-", stdin=json.dumps(node))
    wanted = {n["metadata"]["name"] for n in built}

    def ready() -> bool:
        listed = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        settled = {
            n["metadata"]["name"]
            for n in listed
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
            and not [t for t in n["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
        }
        return settled >= wanted

    assert wait_for(ready, 120, poll=2), "kwok did not bring the stack's nodes Ready"
    return built


@pytest.fixture(scope="module")
def scenario(tools: Tools, report: Report, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    twin_tools = TwinTools(tools)
    if missing := twin_tools.missing():
        pytest.skip(
            "the twin's tools are not built (" + ", ".join(missing) + "): run lab/build.sh twin "
            "(cold about 7 minutes on 2 cores, docs/lab.md)"
        )
    began = time.monotonic()
    run_dir = tmp_path_factory.mktemp("twin-scenarios")
    plane = ControlPlane(run_dir / "controlplane", tools)
    twin = Twin(plane, twin_tools, run_dir, stack_config.load(stack_values("dev")).config)
    home = PulumiHome(run_dir / "pulumi", tools)
    lab: Lab | None = None
    recorder: Recorder | None = None
    standin: SliceStandIn | None = None
    twin_report = TwinReport(REPORT_DIR)
    try:
        # the checks' pods hold their slices (the real ones for holdSeconds, 1800 and 600 s), so kwok must not end them
        start_twin(twin, report, jobs_complete=False)
        standin = SliceStandIn(plane, run_dir)
        standin.start()
        api = plane.api()
        overrides = {**lab_overrides(plane.inline_kubeconfig)}
        nodes = create_nodes(plane, stack_config.load(with_overrides(stack_values("dev"), overrides)).config)
        home.install_provider()
        lab = open_lab(STACK, plane, api, home, report)
        lab.stack.set_all_config(lab_config(lab), path=True)  # the dev stack and the lab's overrides, secrets marked
        recorder = Recorder(api)
        recorder.start()
        yield Scenario(twin, lab, api, recorder, twin_report, nodes, overrides, standin)
    finally:
        if standin is not None:
            twin_report.answers = list(standin.answers)
            twin_report.notes += [f"the stand-in failed: {f}" for f in standin.failures]
        if recorder is not None:
            recorder.stop()
            paths = twin_report.write(recorder.timeline, time.monotonic() - began)
            report.data["twin"] = {"report": [str(p) for p in paths], "recorder_errors": recorder.errors[:20]}
        if lab is not None:
            close_lab(lab)
        twin.keep_logs(REPORT_DIR / "logs" / "twin-scenarios")
        if standin is not None:
            standin.stop()
        twin.stop()
        plane.stop()
        home.remove()


# --- One step: the config changed, `pulumi up`, Kueue left to settle -----------------------------------------------


def expected_groups(config: StackConfig) -> dict[str, tuple[int, int]]:
    """key -> (Kueue Workloads, pods) it makes: a JobSet is one Workload; an LWS group is one (its ``slices``)."""
    machine = config.tpu.machine
    counts = {}
    for workload in config.admission_plan().workloads:
        pods = workload.slices * machine.hosts(workload.shape)
        counts[workload.key] = (workload.slices if workload.key.startswith("serving.") else 1, pods)
    return counts


def step(s: Scenario, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Set ``changes``, run `pulumi up`, wait for Kueue to settle where the plan says, and record the step: the plan
    the program exported, what the twin did, the differences and where each group's pods were bound."""
    s.set(changes)
    config = s.config()
    plan = config.admission_plan()
    expected = plan.expectations()
    owners = workload_owners(config)
    s.recorder.owners.update(owners)
    since = len(s.recorder.timeline)
    s.recorder.mark(name, config=changes)
    operation, result = s.lab.run(
        f"up: {name}",
        lambda op: s.lab.stack.up(on_output=op.on_output, on_event=op.on_event, color="never"),
    )
    s.lab.state["up"] = True
    exported = result.outputs["admissionPlan"].value
    counts = expected_groups(config)
    began = time.monotonic()

    def settled() -> dict[str, Observed] | None:
        observed = observe(s.recorder, since)
        for key, expectation in expected.items():
            seen = observed.get(key)
            made = seen.workloads if seen else 0
            admitted = seen.admitted if seen else 0
            if made != counts[key][0] or admitted != (made if expectation.runs else 0):
                return None
        return observed

    observed = wait_for(settled, SETTLE_SECONDS) or observe(s.recorder, since)
    settle_seconds = time.monotonic() - began
    found = differences(expected, observed, s.ran_before)
    running = {k for k, e in expected.items() if e.runs}

    def bound() -> dict[str, list[Placed]] | None:
        placed = {k: v for k, v in groups_of(s.api, WORKLOAD_NAMESPACE, owners).items() if k in running}
        complete = all(sum(len(g.pods) for g in placed.get(k, [])) == counts[k][1] for k in running)
        return placed if complete and all(n for groups in placed.values() for g in groups for n in g.nodes) else None

    placed = wait_for(bound, 90) or groups_of(s.api, WORKLOAD_NAMESPACE, owners)
    domains = node_domains(s.nodes)
    shapes = {w.key: w.shape for w in plan.workloads}
    slices = {w.key: w.slices for w in plan.workloads}
    problems = placement_problems({k: v for k, v in placed.items() if k in running}, domains, shapes, slices)
    unbound = sorted({pod for groups in placed.values() for g in groups for pod, node in g.pods if not node})
    entry = s.report.step(
        name,
        unbound_reasons={pod: why_unbound(s.api, pod) for pod in unbound[:8]},
        config=changes,
        plan=exported,
        expected={k: vars(e) for k, e in expected.items()},
        observed={k: {**vars(o), "runs": o.runs} for k, o in observed.items()},
        differences=found,
        changed=operation.changed_by_the_program(),
        settle_seconds=round(settle_seconds, 1),
        placement=placement_table(placed, domains),
        placement_problems=problems,
    )
    s.steps[name] = {"entry": entry, "exported": exported, "lines": plan.lines(), "placed": placed,
                     "domains": domains, "observed": observed, "expected": expected}  # fmt: skip
    s.ran_before = {k for k, o in observed.items() if o.runs}
    return s.steps[name]


def why_unbound(api: KubeApi, pod: str) -> dict[str, Any]:
    """What holds a pod: its scheduling gates and the scheduler's word (its PodScheduled condition)."""
    served = api.get(f"/api/v1/namespaces/{WORKLOAD_NAMESPACE}/pods/{pod}") or {}
    conditions = {c["type"]: c for c in (served.get("status") or {}).get("conditions") or []}
    return {
        "gates": [g["name"] for g in (served.get("spec") or {}).get("schedulingGates") or []],
        "scheduled": conditions.get("PodScheduled", {}).get("message", ""),
    }


def untouched(done: dict[str, Any], *names: str) -> None:
    """The workloads the step's change does not touch were left alone by `up`: not updated, not replaced (a
    replacement is a new run, its slices given up), though the controllers' webhooks wrote to them at create."""
    changed = done["entry"]["changed"]
    assert not {n: changed[n] for n in names if n in changed}, f"up changed what the step did not: {changed}"


def require(s: Scenario, name: str) -> dict[str, Any]:
    if name not in s.steps:
        pytest.skip(f"needs the step {name!r}, which did not run")
    return s.steps[name]


def placement_of(s: Scenario, name: str) -> tuple[dict[str, list[Placed]], dict[str, dict[str, str]], list[str]]:
    done = require(s, name)
    return done["placed"], done["domains"], done["entry"]["placement_problems"]


SUB_ALONE = "the sub-slice check alone"
SUPER_ARRIVES = "the super-slice check switched on"
SERVING_ARRIVES = "serving switched on"


# --- 1. the sub-slice check alone ---------------------------------------------------------------------------------


def test_the_sub_slice_check_alone_is_admitted(scenario: Scenario):
    done = step(scenario, SUB_ALONE, {"serving.enabled": False, "checks.superslicing.enabled": False})
    seen = done["observed"]["checks.subslicing"]
    assert seen.runs, f"Kueue did not admit the sub-slice check: {seen}"
    assert done["exported"] == done["lines"], "the preview's admissionPlan is not the plan the test compares with"


def test_the_sub_slice_check_s_slices_are_each_inside_one_2x2x2_partition(scenario: Scenario):
    placed, domains, problems = placement_of(scenario, SUB_ALONE)
    assert not problems, problems
    partitions = {domains[n]["2x2x2"] for g in placed["checks.subslicing"] for n in g.nodes}
    assert len(partitions) == len(placed["checks.subslicing"]), "two slices share a partition"


# --- 2. the super-slice check arrives -----------------------------------------------------------------------------


def test_the_super_slice_check_preempts_the_sub_slice_check(scenario: Scenario):
    require(scenario, SUB_ALONE)
    done = step(scenario, SUPER_ARRIVES, {"checks.superslicing.enabled": True})
    observed = done["observed"]
    assert observed["checks.superslicing"].runs, f"the super-slice check is not admitted: {observed}"
    assert not observed["checks.subslicing"].runs, "the sub-slice check still runs beside the super-slice check"
    assert observed["checks.subslicing"].preempted_by == ("checks.superslicing",), observed["checks.subslicing"]
    untouched(done, "subslice-check")


def test_the_super_slice_check_is_bound_across_both_cubes(scenario: Scenario):
    placed, domains, problems = placement_of(scenario, SUPER_ARRIVES)
    assert not problems, problems
    (group,) = placed["checks.superslicing"]
    assert len(set(group.nodes)) == 32, "a 4x4x8 slice is 32 hosts"
    assert len({domains[n]["4x4x4"] for n in group.nodes}) == 2, "the 4x4x8 slice is not across both cubes"


# --- 3. serving arrives -------------------------------------------------------------------------------------------


def test_serving_preempts_the_super_slice_check_and_the_sub_slice_check_comes_back_beside_it(scenario: Scenario):
    require(scenario, SUPER_ARRIVES)
    done = step(scenario, SERVING_ARRIVES, {"serving.enabled": True})
    observed = done["observed"]
    for key in ("serving.prefill", "serving.decode"):
        assert observed[key].runs, f"{key} is not admitted: {observed[key]}"
    assert not observed["checks.superslicing"].runs, "the super-slice check still runs beside serving"
    assert set(observed["checks.superslicing"].preempted_by) <= {"serving.prefill", "serving.decode"}
    assert observed["checks.superslicing"].preempted_by, "no serving group preempted the super-slice check"
    assert observed["checks.subslicing"].runs, "the sub-slice check did not come back beside serving"
    untouched(done, "subslice-check", "superslice-check")


EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def slice_label_missing(s: Scenario, reasons: dict[str, dict[str, Any]]) -> str | None:
    """Why the serving groups cannot be placed in this twin, when it is the node label their exclusive placement needs
    that no node carries; None otherwise (then the placement is asserted)."""
    keys = {lws["metadata"].get("annotations", {}).get(EXCLUSIVE_TOPOLOGY) for lws in s.lab.expected
            if lws["kind"] == "LeaderWorkerSet"} - {None}  # fmt: skip
    nodes = (s.api.get("/api/v1/nodes") or {}).get("items") or []
    labelled = {key for key in keys for n in nodes if key in n["metadata"].get("labels", {})}
    if not reasons or labelled or not keys or not all("pod affinity" in r["scheduled"] for r in reasons.values()):
        return None
    return (
        f"the serving groups' leaders cannot be scheduled: the program's LeaderWorkerSets ask for exclusive placement "
        f"on {', '.join(sorted(keys))} ({EXCLUSIVE_TOPOLOGY}), whose required pod affinity (lws v0.9.0 "
        "pkg/webhooks/pod_webhook.go SetExclusiveAffinities) needs that node label, and no node of the twin carries "
        "it: GKE labels the nodes of a formed slice with it, as the slice controller's stand-in "
        "(tests/itest/slice_standin.py) should have; LWS makes a group's workers only once its leader is scheduled "
        "(pkg/controllers/pod_controller.go:161)."
    )


def test_each_prefill_and_decode_group_lands_inside_one_partition(scenario: Scenario):
    placed, domains, problems = placement_of(scenario, SERVING_ARRIVES)
    if problems and (why := slice_label_missing(scenario, scenario.steps[SERVING_ARRIVES]["entry"]["unbound_reasons"])):
        scenario.report.notes.append(why)
        pytest.skip(why)
    assert not problems, problems
    for key in ("serving.prefill", "serving.decode"):
        for group in placed[key]:
            assert len(group.pods) == 2, f"{group.group}: a 2x2x2 group is a leader and a worker"
            assert len({domains[n]["2x2x2"] for n in group.nodes}) == 1, group
    # and the sub-slice check's slices are beside them: no partition shared
    owners = [(domains[g.nodes[0]]["2x2x2"], g.group) for groups in placed.values() for g in groups]
    assert len({p for p, _ in owners}) == len(owners), owners


# --- 4. the preview's plan against the twin -----------------------------------------------------------------------


def test_the_preview_admission_plan_is_what_the_twin_did_workload_by_workload(scenario: Scenario):
    """Each step's `admissionPlan` output (the structured form of the same plan, components/tpu/admission.py
    expectations, which the test first ties to the exported lines) against the Workloads Kueue admitted, preempted
    and left waiting."""
    names = [SUB_ALONE, SUPER_ARRIVES, SERVING_ARRIVES]
    done = [require(scenario, name) for name in names]
    mismatched = {
        name: d["entry"]["differences"] for name, d in zip(names, done, strict=True) if d["entry"]["differences"]
    }
    assert all(d["exported"] == d["lines"] for d in done), "an exported plan is not its structured form's lines"
    assert not mismatched, "the twin differs from the preview's plan:\n" + json.dumps(mismatched, indent=2)


# --- 5. a change Kueue refuses ------------------------------------------------------------------------------------

# Changes a user makes to a running stack, each of one setting, that reach what Kueue's webhooks check on an object
# the program updates: the model servers' image (LWS pod templates, in place), their CPU request (the pod shape Kueue
# holds immutable on a queued LWS, kueue v0.17.1 pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go
# ValidateUpdate), the ClusterQueue the LocalQueue points to (Kueue's CRD holds a LocalQueue's spec.clusterQueue
# immutable), a priority above what Kueue's API holds (int32). The twin found the last two passing the program and
# refused by Kueue; the program's own rules now refuse both first (queues.priorityClasses.*.value's range, the
# lifecycle review of queues.clusterQueueName). Each is previewed against the twin.
CANDIDATES: list[dict[str, Any]] = [
    {"serving.image": "docker.io/vllm/vllm-tpu:nightly-20260501-18ed615-5b39b26"},
    {"serving.resources.memory": "800Gi"},
    {"queues.clusterQueueName": "cq-twin"},
    {"queues.priorityClasses.high.value": 3_000_000_000},
]


def previewed(s: Scenario, change: dict[str, Any]) -> tuple[bool, str, dict[str, str]]:
    """(refused, what the engine said, what the preview would change) of ``change``, the stack's config put back."""
    before = {key: s.overrides.get(key) for key in change}
    s.set(change)
    try:
        operation, _ = s.lab.run(
            f"preview {change}",
            lambda op: s.lab.stack.preview(on_output=op.on_output, on_event=op.on_event, color="never", diff=True),
        )
        return False, "", operation.changed_by_the_program()
    except auto.CommandError as error:
        return True, str(error)[-2500:], {}
    finally:
        for key, value in before.items():
            if value is None:
                s.lab.stack.remove_config(f"{PROJECT_NAME}:{key}", path=True)
                s.overrides.pop(key, None)
            else:
                s.set({key: value})


def served_versions(s: Scenario) -> dict[str, str]:
    """What the program wrote of every Kubernetes object the state holds, by kind, namespace and name: its uid and
    generation (a change to its spec moves it), or its resourceVersion where it has no generation; the controllers'
    status writes move neither."""
    versions = {}
    for resource in state_resources(s):
        outputs = resource.get("outputs") or {}
        if not resource["type"].startswith("kubernetes:") or "kind" not in outputs or "metadata" not in outputs:
            continue
        served = s.api.object(outputs)
        metadata = outputs["metadata"]
        key = f"{outputs['kind']} {metadata.get('namespace', '')}/{metadata['name']}"
        if served is None:
            versions[key] = "(absent)"
            continue
        meta = served["metadata"]
        versions[key] = f"{meta['uid']} {meta.get('generation', meta['resourceVersion'])}"
    return versions


def state_resources(s: Scenario) -> list[dict[str, Any]]:
    exported = json.loads(s.lab.home.cli("stack", "export", "--stack", STACK).stdout)
    resources: list[dict[str, Any]] = exported["deployment"].get("resources") or []
    return resources


def program_state(s: Scenario) -> dict[str, Any]:
    """The state's resources by URN, inputs and outputs, but the dynamic providers' default provider, which the engine
    configures with the whole stack config (tests/itest/engine.py Operation.changed_by_the_program says why)."""
    return {
        r["urn"]: {"inputs": r.get("inputs"), "outputs": r.get("outputs")}
        for r in state_resources(s)
        if not r["type"].startswith("pulumi:providers:pulumi-python")
    }


def refused_by_the_program(text: str, change: dict[str, Any]) -> bool:
    """The program's own preview refused ``change`` (its config rules or its lifecycle review), under each key the
    change sets (components/config_base.py ConfigError)."""
    return "Stack config has" in text and all(f"{key}:" in text for key in change)


def test_a_change_kueue_would_refuse_is_refused_by_the_program_before_up_changes_anything(scenario: Scenario):
    """`pulumi up` previews first and stops on a failed preview: a change Kueue would refuse is refused there by the
    program, under the key that made it, and the stack's state and every object it serves are as they were. A
    candidate refused by Kueue alone is a rule the program is missing (the twin found two)."""
    require(scenario, SERVING_ARRIVES)
    before_state, before_served = program_state(scenario), served_versions(scenario)
    probes = {json.dumps(change): previewed(scenario, change) for change in CANDIDATES}
    scenario.report.step(
        "changes previewed against the twin",
        text="\n".join(f"- `{c}`: {'refused: ' + t[-600:] if r else f'goes through, changing {ch}'}"
                       for c, (r, t, ch) in probes.items()),
    )  # fmt: skip
    refused = {c: t for c, (r, t, _) in probes.items() if r}
    assert refused, "no candidate change is refused: " + json.dumps({c: p[2] for c, p in probes.items()})
    not_by_the_program = {c: t[-600:] for c, t in refused.items() if not refused_by_the_program(t, json.loads(c))}
    assert not not_by_the_program, "refused, but not by the program's own rules: " + json.dumps(not_by_the_program)
    assert program_state(scenario) == before_state, "a refused preview changed the state"
    after = served_versions(scenario)
    moved = {k: (v, after.get(k)) for k, v in before_served.items() if after.get(k) != v}
    assert not moved, f"a refused preview changed served objects: {moved}"
    scenario.steps["refused"] = {"refused": refused}


def test_the_corrected_change_then_goes_through(scenario: Scenario):
    """The refused change taken back (the config as it was), `up` converges: nothing to change, and Kueue keeps
    what it admitted."""
    require(scenario, "refused")
    done = step(scenario, "the refused change taken back", {})
    assert done["entry"]["changed"] == {}, done["entry"]["changed"]
    assert not done["entry"]["differences"], done["entry"]["differences"]


def test_the_queues_renamed_together_are_new_queues_that_kueue_admits_the_workloads_into(scenario: Scenario):
    """A LocalQueue cannot follow a renamed ClusterQueue (the refusal above), but renamed with it the LocalQueues are
    new objects pointing at the new ClusterQueue: `up` goes through, Kueue admits every workload again as the plan
    says, and the old queues are gone (Kueue held the old ClusterQueue until no workload was admitted in it)."""
    require(scenario, "refused")
    renamed = {"queues.clusterQueueName": "cq-twin", "queues.localQueueName": "lq-twin"}
    done = step(scenario, "the queues renamed together", renamed)
    assert not done["entry"]["differences"], done["entry"]["differences"]
    local_queue = scenario.api.get(f"{KUEUE_API}/namespaces/{WORKLOAD_NAMESPACE}/localqueues/lq-twin") or {}
    assert local_queue.get("spec", {}).get("clusterQueue") == "cq-twin", local_queue
    assert wait_for(lambda: scenario.api.get(f"{KUEUE_API}/clusterqueues/cq") is None, 60), (
        "the old ClusterQueue is left"
    )
    assert scenario.api.get(f"{KUEUE_API}/namespaces/{WORKLOAD_NAMESPACE}/localqueues/lq") is None


# --- 6. destroy ---------------------------------------------------------------------------------------------------

KINDS_LEFT = {
    "Kueue Workload": WORKLOADS_PATH,
    "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
    "LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets",
}


def left_behind(s: Scenario) -> dict[str, list[str]]:
    found = {
        kind: [f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in listed.get("items") or []]
        for kind, path in KINDS_LEFT.items()
        if (listed := s.api.get(path)) is not None
    }
    tpu_nodes = {n["metadata"]["name"] for n in s.nodes if n["spec"].get("taints")}
    pods = (s.api.get("/api/v1/pods") or {}).get("items") or []
    found["pod on a TPU node"] = [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods if p["spec"].get("nodeName") in tpu_nodes
    ]
    found["pod in the workload namespace"] = [
        p["metadata"]["name"] for p in pods if p["metadata"]["namespace"] == WORKLOAD_NAMESPACE
    ]
    return {kind: names for kind, names in found.items() if names}


def test_destroy_drains_through_the_gates_and_leaves_no_workload_behind(scenario: Scenario):
    lab = scenario.lab
    lab.require("up")
    scenario.recorder.mark("destroy")
    operation, _ = lab.run(
        "destroy", lambda op: lab.stack.destroy(on_output=op.on_output, on_event=op.on_event, color="never")
    )
    lab.state["destroyed"] = True
    text = operation.text()
    gate_lines = [line.strip() for line in text.splitlines() if "tpu-drain-gate:" in line]
    wait_for(lambda: not left_behind(scenario), 90)
    left = left_behind(scenario)
    scenario.report.step("destroy", text="The drain gate said:\n\n" + "\n".join(f"    {line}" for line in gate_lines)
                         + f"\n\nLeft behind: {left or 'nothing'}")  # fmt: skip
    assert "tpu-drain-gate: nothing holds on any more" in text, "destroy did not pass through the TPU drain gate"
    deletes = [urn.split("::")[-1] for _, op, urn in operation.order if op == "delete"]
    names = {name for _, name in workload_owners(scenario.config())}
    workloads = [name for name in deletes if name in names]
    assert sorted(workloads) == sorted(names), deletes
    assert deletes.index("tpu-drain-gate") > max(deletes.index(name) for name in workloads), (
        "the drain gate went before the workloads it waits for"
    )
    assert not left, f"left behind after destroy: {left}"
