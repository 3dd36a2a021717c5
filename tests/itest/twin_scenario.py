"""What the twin's scenarios watch (issue 34, items 5 and 6): Kueue's Workloads as they are admitted, preempted and
requeued, where each group's pods are bound, how that compares with the preview's admission plan, and the report a
person reads (build/itest/twin-report.md and .json, beside the lab's report.json).

What is read from Kueue, at the version of lab/versions.lock (sigs.k8s.io/kueue v0.17.1):
- a Workload's conditions (apis/kueue/v1beta2/workload_types.go): QuotaReserved, Admitted, Evicted (reason Preempted
  when preempted), Preempted (reason InClusterQueue), Requeued, PodsReady, Finished;
- who preempted it: the Preempted condition's message names the preemptor Workload's UID
  (pkg/scheduler/preemption/preemption.go preemptionMessage, "Preempted to accommodate a workload (UID: <uid>, ...");
- whose Workload it is: its owner reference, the JobSet or LeaderWorkerSet (one Workload a JobSet, one a
  LeaderWorkerSet group: pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go).
Each pod's group: the Job a JobSet made it for (the Job controller's ``batch.kubernetes.io/job-name`` label, one Job a
slice) or its LeaderWorkerSet group (``leaderworkerset.sigs.k8s.io/group-index``, lws v0.9.0 api/.../types.go).
"""

from __future__ import annotations

import datetime
import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.tpu import topology
from components.tpu.admission import Expectation
from components.tpu.topology import CUBE, SUB_SLICE_SHAPES, Shape

if TYPE_CHECKING:
    from components.stack import StackConfig
    from tests.itest.lab import KubeApi

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOADS_PATH = f"{KUEUE_API}/workloads"
PREEMPTOR_UID = re.compile(r"\(UID: ([0-9a-f-]+)")
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
SLICE_2X2X2 = Shape.parse("2x2x2")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def workload_owners(config: StackConfig) -> dict[tuple[str, str], str]:
    """(kind, name) of each slice workload's object -> the config key the admission plan names it by."""
    owners = {}
    for workload in config.admission_plan().workloads:
        block, item = workload.key.split(".", 1)
        if block == "checks":
            owners[("JobSet", config.checks.by_kind()[item].name)] = workload.key
        else:
            owners[("LeaderWorkerSet", config.serving.role(item).name)] = workload.key
    return owners


def is_true(conditions: dict[str, dict[str, Any]], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


@dataclass
class WorkloadSeen:
    """One Kueue Workload as last seen, and whose it is."""

    name: str
    uid: str
    owner: tuple[str, str]
    conditions: dict[str, dict[str, Any]]
    # the admitted topology assignment's domains, as Kueue wrote them (status.admission)
    admission: dict[str, Any] | None

    @property
    def admitted(self) -> bool:
        return is_true(self.conditions, "Admitted")

    @property
    def finished(self) -> bool:
        return is_true(self.conditions, "Finished")


@dataclass
class Recorder:
    """Polls the twin's Workloads once a second on a thread of its own and keeps every condition change it sees,
    stamped with Kueue's lastTransitionTime and the time it was seen; steps mark where each scenario began."""

    api: KubeApi
    owners: dict[tuple[str, str], str] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    uids: dict[str, tuple[str, tuple[str, str]]] = field(default_factory=dict)  # uid -> (name, owner)
    current: dict[str, WorkloadSeen] = field(default_factory=dict)  # uid -> last seen
    lock: threading.Lock = field(default_factory=threading.Lock)
    _seen: set[tuple[str, str, str, str, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="twin-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def mark(self, step: str, **details: Any) -> None:
        with self.lock:
            self.timeline.append({"seen": now(), "step": step, **details})

    def key_of(self, owner: tuple[str, str]) -> str:
        return self.owners.get(owner, f"{owner[0]} {owner[1]}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as error:  # an API server that answers late must not end the recording
                self.errors.append(str(error)[:300])
            self._stop.wait(1.0)

    def poll(self) -> dict[str, WorkloadSeen]:
        listed = (self.api.get(WORKLOADS_PATH) or {}).get("items") or []
        seen_now = {}
        with self.lock:
            for item in listed:
                metadata = item["metadata"]
                owner = next(
                    ((o["kind"], o["name"]) for o in metadata.get("ownerReferences") or []), ("", metadata["name"])
                )
                conditions = {c["type"]: c for c in (item.get("status") or {}).get("conditions") or []}
                workload = WorkloadSeen(
                    metadata["name"], metadata["uid"], owner, conditions, (item.get("status") or {}).get("admission")
                )
                seen_now[workload.uid] = workload
                self.uids[workload.uid] = (workload.name, owner)
                for condition in conditions.values():
                    mark = (
                        workload.uid,
                        condition["type"],
                        condition["status"],
                        condition.get("reason", ""),
                        condition.get("lastTransitionTime", ""),
                    )
                    if mark in self._seen:
                        continue
                    self._seen.add(mark)
                    entry = {
                        "seen": now(),
                        "at": condition.get("lastTransitionTime", ""),
                        "key": self.key_of(owner),
                        "workload": workload.name,
                        "condition": condition["type"],
                        "status": condition["status"],
                        "reason": condition.get("reason", ""),
                        "message": condition.get("message", ""),
                    }
                    preemptor = PREEMPTOR_UID.search(condition.get("message", ""))
                    if condition["type"] == "Preempted" and condition["status"] == "True" and preemptor:
                        entry["preemptor_uid"] = preemptor[1]
                    self.timeline.append(entry)
            self.current = seen_now
        return seen_now

    def by_key(self) -> dict[str, list[WorkloadSeen]]:
        with self.lock:
            grouped: dict[str, list[WorkloadSeen]] = {}
            for workload in self.current.values():
                grouped.setdefault(self.key_of(workload.owner), []).append(workload)
            return grouped

    def preemptions_since(self, index: int) -> list[tuple[str, str]]:
        """(preempted key, preemptor key) of every preemption first seen after timeline entry ``index``."""
        with self.lock:
            found = []
            for entry in self.timeline[index:]:
                if "preemptor_uid" in entry:
                    preemptor = self.uids.get(entry["preemptor_uid"])
                    found.append((entry["key"], self.key_of(preemptor[1]) if preemptor else entry["preemptor_uid"]))
            return found


@dataclass(frozen=True)
class Observed:
    """What the twin did with one workload key during one step."""

    key: str
    workloads: int  # Kueue Workloads of it (one a JobSet, one an LWS group)
    admitted: int
    preempted_by: tuple[str, ...]  # keys of the preemptors Kueue named, in this step

    @property
    def runs(self) -> bool:
        return self.workloads > 0 and self.admitted == self.workloads


def observe(recorder: Recorder, since: int) -> dict[str, Observed]:
    grouped = recorder.by_key()
    preemptions = recorder.preemptions_since(since)
    keys = set(grouped) | {k for k, _ in preemptions}
    return {
        key: Observed(
            key,
            len([w for w in grouped.get(key, []) if not w.finished]),
            len([w for w in grouped.get(key, []) if w.admitted and not w.finished]),
            tuple(sorted({by for preempted, by in preemptions if preempted == key})),
        )
        for key in sorted(keys)
    }


def differences(expected: dict[str, Expectation], observed: dict[str, Observed], ran_before: set[str]) -> list[str]:
    """Every way the twin's step differs from the plan, workload by workload: who runs, who waits, and who preempted
    whom. The plan's relations are between config keys and say who *can* preempt; Kueue preempts only as much as it
    must (the first serving group that does not fit evicts the super-slice check; the next ones need not), so a
    preemptor the twin names must be one the plan names, and a workload that ran before the step and the plan now
    leaves waiting must have been preempted by one of them."""
    found = []
    for key, expectation in expected.items():
        seen = observed.get(key, Observed(key, 0, 0, ()))
        if expectation.runs != seen.runs:
            found.append(
                f"{key}: the plan says it {'runs' if expectation.runs else 'waits'}; the twin admitted "
                f"{seen.admitted} of its {seen.workloads} workload(s)"
            )
        if stray := [by for by in seen.preempted_by if by not in expectation.preempted_by]:
            found.append(
                f"{key}: preempted by {', '.join(stray)} in the twin; the plan names only "
                f"{', '.join(expectation.preempted_by) or 'no one'}"
            )
        if key in ran_before and not expectation.runs and not seen.preempted_by:
            found.append(f"{key}: the plan has {', '.join(expectation.preempted_by)} preempt it; the twin did not")
        if seen.preempted_by and (key not in ran_before or expectation.runs):
            found.append(f"{key}: preempted by {', '.join(seen.preempted_by)} in the twin; the plan keeps it running")
    found += [f"{key}: the twin has workloads of it; the plan does not know it" for key in observed
              if key not in expected and observed[key].workloads]  # fmt: skip
    return found


# --- Placement ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """One group's pods (a JobSet's Job, one slice, or an LWS group) and the nodes they are bound to."""

    key: str
    group: str
    pods: tuple[tuple[str, str], ...]  # (pod, node); node "" while unbound

    @property
    def nodes(self) -> list[str]:
        return [node for _, node in self.pods]


def groups_of(api: KubeApi, namespace: str, owners: dict[tuple[str, str], str]) -> dict[str, list[Placed]]:
    """key -> its groups, from the pods in ``namespace`` that are not being deleted."""
    pods = (api.get(f"/api/v1/namespaces/{namespace}/pods") or {}).get("items") or []
    grouped: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for pod in pods:
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            continue
        labels = metadata.get("labels") or {}
        if LWS_NAME_LABEL in labels:
            key = owners.get(("LeaderWorkerSet", labels[LWS_NAME_LABEL]))
            group = f"{labels[LWS_NAME_LABEL]} group {labels.get(LWS_GROUP_LABEL, '?')}"
        elif JOBSET_NAME_LABEL in labels:
            key = owners.get(("JobSet", labels[JOBSET_NAME_LABEL]))
            group = labels.get(JOB_NAME_LABEL, metadata["name"])
        else:
            continue
        if key is not None:
            grouped.setdefault((key, group), []).append((metadata["name"], pod["spec"].get("nodeName") or ""))
    placed: dict[str, list[Placed]] = {}
    for (key, group), members in sorted(grouped.items()):
        placed.setdefault(key, []).append(Placed(key, group, tuple(sorted(members))))
    return placed


def node_domains(nodes: Iterable[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """TPU node -> its partition of each shape ("4x4x4" its cube, "2x2x2", ...), from the labels GKE sets (and
    harness/twin_nodes.py copies)."""
    return {
        n["metadata"]["name"]: {
            str(shape): n["metadata"]["labels"][topology.partition_label(shape)] for shape in (CUBE, *SUB_SLICE_SHAPES)
        }
        for n in nodes
        if topology.partition_label(CUBE) in n["metadata"]["labels"]
    }


def placement_problems(
    placed: dict[str, list[Placed]],
    domains: dict[str, dict[str, str]],
    shapes: dict[str, Shape],
    slices: dict[str, int],
) -> list[str]:
    """Each key's groups bound as its slice shape asks: a sub-slice group inside one partition of its shape (2x2x2
    here), no two groups in one partition; a super-slice across as many whole cubes as it spans, one pod a host."""
    problems = []
    used: dict[str, str] = {}
    for key, groups in placed.items():
        shape = shapes[key]
        if len(groups) != slices[key]:
            problems.append(f"{key}: {len(groups)} group(s) of pods, the plan has {slices[key]} slice(s)")
        for group in groups:
            unbound = [pod for pod, node in group.pods if not node]
            if unbound:
                problems.append(f"{key} {group.group}: unbound {', '.join(unbound)}")
                continue
            if len(set(group.nodes)) != len(group.nodes):
                problems.append(f"{key} {group.group}: two pods on one host")
            if topology.is_sub_slice(shape):
                partitions = {domains[n][str(shape)] for n in group.nodes}
                if len(partitions) != 1:
                    problems.append(f"{key} {group.group}: across {len(partitions)} {shape} partitions")
                    continue
                (partition,) = partitions
                if partition in used:
                    problems.append(f"{key} {group.group}: shares partition {partition} with {used[partition]}")
                used[partition] = f"{key} {group.group}"
            else:
                cubes = {domains[n][str(CUBE)] for n in group.nodes}
                wanted = topology.cubes_in(shape)
                if len(cubes) != wanted:
                    problems.append(f"{key} {group.group}: on {len(cubes)} cube(s), a {shape} spans {wanted}")
    return problems


def placement_table(placed: dict[str, list[Placed]], domains: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [
        {
            "key": key,
            "group": group.group,
            "pods": [
                {
                    "pod": pod,
                    "node": node,
                    "cube": domains.get(node, {}).get(str(CUBE), ""),
                    "partition": domains.get(node, {}).get(str(SLICE_2X2X2), ""),
                }
                for pod, node in group.pods
            ],
        }
        for key, groups in placed.items()
        for group in groups
    ]


# --- The report a person reads -------------------------------------------------------------------------------------


@dataclass
class TwinReport:
    """build/itest/twin-report.json and .md: each step's plan and what the twin did, the timeline of Workload
    conditions, and each group's placement (node, 4x4x4 cube, 2x2x2 partition)."""

    directory: Path
    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)  # the slice controller stand-in's, in order

    def step(self, name: str, **details: Any) -> dict[str, Any]:
        entry = {"step": name, **details}
        self.steps.append(entry)
        return entry

    def write(self, timeline: list[dict[str, Any]], seconds: float) -> tuple[Path, Path]:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {"written": now(), "seconds": round(seconds, 1), "steps": self.steps, "timeline": timeline,
                "answers": self.answers, "notes": self.notes}  # fmt: skip
        json_path = self.directory / "twin-report.json"
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        md_path = self.directory / "twin-report.md"
        md_path.write_text(markdown(data))
        return json_path, md_path


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "# The TPU7x twin: admission, preemption and placement",
        "",
        f"Written {data['written']} by `make twin` (tests/itest/test_twin_scenarios.py), {data['seconds']} s of "
        "scenarios: the program's own `pulumi up` and `destroy` on the twin's control plane, real Kueue, JobSet, "
        "LeaderWorkerSet and kube-scheduler on kwok's simulated TPU7x nodes.",
        "",
    ]
    for step in data["steps"]:
        lines += [f"## {step['step']}", ""]
        if step.get("config"):
            lines += ["Config: " + ", ".join(f"`{k}={v}`" for k, v in step["config"].items()), ""]
        if step.get("plan"):
            lines += ["The preview's `admissionPlan`:", "", *[f"- {line}" for line in step["plan"]], ""]
        if step.get("observed"):
            lines += ["| workload | plan | twin: admitted | preempted by (twin) | preempted by (plan) |",
                      "| --- | --- | --- | --- | --- |"]  # fmt: skip
            for key, seen in step["observed"].items():
                plan = step.get("expected", {}).get(key, {})
                lines.append(
                    f"| {key} | {'runs' if plan.get('runs') else 'waits'} | {seen['admitted']} of "
                    f"{seen['workloads']} | {', '.join(seen['preempted_by']) or '-'} | "
                    f"{', '.join(plan.get('preempted_by', [])) or '-'} |"
                )
            lines.append("")
        if step.get("differences") is not None:
            lines += ["Differences from the plan: " + ("; ".join(step["differences"]) or "none"), ""]
        if step.get("placement"):
            lines += [
                "| workload | group | pod | node | cube | 2x2x2 partition |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
            for group in step["placement"]:
                for pod in group["pods"]:
                    lines.append(
                        f"| {group['key']} | {group['group']} | {pod['pod']} | {pod['node'] or '(unbound)'} | "
                        f"{pod['cube']} | {pod['partition']} |"
                    )
            lines.append("")
        if step.get("placement_problems"):
            lines += ["Placement problems: " + "; ".join(step["placement_problems"]), ""]
        if step.get("text"):
            lines += [step["text"], ""]
    lines += ["## Timeline", "", "| seen | Kueue's time | workload | condition | reason | message |",
              "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for entry in data["timeline"]:
        if "step" in entry:
            lines.append(f"| {entry['seen']} | | **{entry['step']}** | | | |")
            continue
        message = entry["message"].replace("|", "/")[:160]
        lines.append(
            f"| {entry['seen']} | {entry['at']} | {entry['key']} ({entry['workload']}) | "
            f"{entry['condition']}={entry['status']} | {entry['reason']} | {message} |"
        )
    if data.get("answers"):
        lines += ["", "## The slice controller stand-in's answers", "",
                  "| at | workload | state | slices (partitions) |", "| --- | --- | --- | --- |"]  # fmt: skip
        for answer in data["answers"]:
            slices = "; ".join(
                f"{s.get('topology', '')} {','.join(s.get('partitionIds', []))}" for s in answer.get("slices", [])
            )
            lines.append(
                f"| {answer.get('at', '')} | {answer.get('workload', '')} | {answer.get('state', '')} | {slices} |"
            )
    if data["notes"]:
        lines += ["", "## Notes", "", *[f"- {note}" for note in data["notes"]]]
    return "\n".join(lines) + "\n"


def wait_for(check: Any, timeout: float, poll: float = 1.0) -> Any:
    """``check()`` until it returns something true, or its last answer after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    answer = check()
    while not answer and time.monotonic() < deadline:
        time.sleep(poll)
        answer = check()
    return answer
