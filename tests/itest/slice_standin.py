"""The slice controller's stand-in: the twin's one stand-in (issue 34 item 4).

GKE's slice controller is Google's; its source is public (AI-Hypercomputer/xpk at
250d4b3cebf44fc6109a155862af5662d5686eee, directory ``slice/``, the commit manifests/charts/slice-controller names)
but it is neither built nor copied here. This module does, in Python and on the twin's control plane, only the part
of it that admission and placement depend on, each step read at that commit (paths below are under ``slice/``):

What it does
- **The AdmissionCheck** (internal/controller/admissioncheck_controller.go:48-74): every AdmissionCheck whose
  ``spec.controllerName`` is ``accelerator.gke.io/slice`` (SliceControllerName, workload_controller.go:63) gets the
  condition Active=True (reason Active, observedGeneration the check's generation), written by server-side apply as
  field manager ``accelerator.gke.io/slice`` when it is not True already.
- **The answer for each workload** (internal/controller/workload_controller.go Reconcile, :113-253). A Workload is
  answered when it is not to be finalized (internal/util/workload/workload.go:28-48: not deleted, finished, evicted or
  inactive, and owned by a JobSet, a Job or a LeaderWorkerSet) and is relevant (validateRelevantWorkload, :442-462):
  a pod set whose template asks for a TPU7x slice (internal/core/core.go:49-122: the
  ``cloud.google.com/gke-tpu-slice-topology`` annotation, or with the default-on gate TopologyFromNodeSelectorOrAffinity
  a ``cloud.google.com/gke-tpu-partition-<shape>-id|-state`` key of its node selector or affinity, and accelerator
  ``tpu7x``), quota reserved, an admission with a topology assignment, and every assigned node carrying the partition
  label of the slice's level (internal/topology/validation.go:40-80). Its check's state (the entry of
  ``status.admissionChecks`` of the check whose controller is the slice controller, :474-489) is then answered:
  - the Slices it would make (syncSlices, :493-656): for each pod-set assignment but a LeaderWorkerSet's leader
    (:546-557), ``topologyRequest.subGroupCount`` Slices (1 when unset), named ``<namespace>-<workload>-<podset>-<i>``
    (internal/core/slice.go:57-64, hashed past 49 characters), each with its share, in order, of the distinct partition
    ids of the assigned nodes (internal/topology/topology.go:46-62; the partition label is the ``-id`` label of the
    sub-slice shape, or of the 4x4x4 cube for a super-slice, :116-161);
  - **Retry** (requeueAfterSeconds 10, the default ``--retry-delay-on-slice-failure``, cmd/main.go:88, which the
    program's chart does not set; condition TPUSliceFailure reason ConfigurationFailure) when a Slice's partition count
    is not its topology's (validatePartitionCount, :695-721: 1 for a sub-slice, chips/64 for a super-slice);
  - **Ready** once every Slice is ACTIVE (prepareAdmissionCheckStatus, :823-862), with ``podSetUpdates`` that add the
    node selector ``cloud.google.com/gke-tpu-topology: <topology>`` to every pod set that asks for a slice
    (buildPodSetUpdates, :864-877), written by server-side apply as field manager ``accelerator.gke.io/slice``,
    forced (updateWorkloadStatus, :730-760). A state already Retry or Rejected is left alone (:502-504, :826-828).
- **The webhook** (internal/webhooks, registered for CREATE with failurePolicy Fail, config/webhook/manifests.yaml;
  the program's chart adds an objectSelector on the Kueue queue label, manifests/charts/slice-controller), for the
  JobSets and LeaderWorkerSets the stack creates, only what placement depends on:
  - a JobSet with the queue label (jobset_webhook.go:50-79), each replicated job whose pod template asks for a slice:
    the slice's health affinity (defaults.go:41-64: a required node-affinity term ``<health label> In [HEALTHY,
    DEGRADED]``, the ``--default-slice-health-node-affinity=HEALTHY_AND_DEGRADED`` the chart passes, unless the
    template names that label already) and Kueue's topology request (defaults.go:66-86):
    ``kueue.x-k8s.io/podset-required-topology`` the block label, ``kueue.x-k8s.io/podset-slice-required-topology``
    the slice's partition label, ``kueue.x-k8s.io/podset-slice-size`` the pods of one slice (the job's parallelism,
    or its share of the cubes for a super-slice). A JobSet whose pods do not use every chip of the slice is refused,
    as there (``tpus per pod * slice size != the slice's chips``), as is one without parallelism.
  - a LeaderWorkerSet with the queue label whose worker (and leader, if any) template asks for a slice
    (leaderworkerset_webhook.go:54-104): the health affinity on both templates, ``podset-required-topology`` the
    slice's partition label on both, and with a leader ``kueue.x-k8s.io/podset-group-name: lws-super-slice-group`` on
    both (so Kueue places leader and workers as one group, in one partition).

What it does not do
- It makes no Slice object (the twin has no Slice CRD) and has no GKE behind it that would form one: each Slice is
  taken as ACTIVE at once, so the check goes Ready in the same pass that would create the Slices. Never Pending for a
  Slice being formed, never Retry for a Slice that FAILED, went stale past ``--activation-timeout`` or was deleted
  (:191-197, :843-856), never the TPUSliceFailure condition of those.
- In GKE's place it does what a Slice's activation does to its nodes, so that what the answer and the stack ask of
  a pod can be met: before answering Ready it labels the nodes of each Slice's partitions
  ``cloud.google.com/gke-tpu-slice: <Slice name>`` and ``cloud.google.com/gke-tpu-topology: <topology>``, the two
  labels GKE's documentation names as the slice controller's on a formed slice's nodes
  (https://docs.cloud.google.com/kubernetes-engine/docs/how-to/create-dynamic-slices, read 2026-12-04: its first
  example selects a formed Slice's nodes by both, its "Disable the Slice Controller" steps list both as labels
  the slice controller adds). The
  upstream's own end-to-end tests model the second the same way (test/utils/e2e.go:153-179, SetSliceReady; that
  helper matches a Slice's partition ids against the nodes' 4x4x4 label only, which labels no node of a sub-slice;
  the stand-in matches them against the slice's own partition label). The first is the topology the stack's
  LeaderWorkerSets ask LeaderWorkerSet to keep each group exclusive in
  (``leaderworkerset.sigs.k8s.io/exclusive-topology``): without it no leader can be scheduled. The labels stay when
  the workload goes (each new Slice overwrites its own nodes'); GKE's Slice deletion is not modelled.
- No finalizer on the Workload and no wait for its pods to end before its Slices go (:125-143, :255-287): there are no
  Slices to clean up. No partition-conflict check (validatePartitionConflicts, :658-693: off with the
  UseRetryMechanismForSliceCreation gate the program's chart turns on). No events, no metrics.
- Webhook: not the Job webhook (job_webhook.go; the stack makes no queued bare Job: a JobSet's Jobs carry the
  JobSet's pod templates, annotated already) nor the StatefulSet webhook (statefulset_webhook.go: the
  ``gke-tpu-topology`` node selector it adds to a LeaderWorkerSet's StatefulSets is the one the Ready answer's
  podSetUpdates give every pod of the group anyway); not the ``cloud.google.com/skip-tpu-webhook-check`` annotation
  (for GKE's TPU webhook, which the twin does not run). FailOnUntoleratedDegradedSlice (off by default and in the
  chart) is not modelled.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import ssl
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from components.tpu.topology import (
    ACCELERATOR_NODE_LABEL,
    BLOCK_LABEL,
    CUBE,
    HOSTNAME_LABEL,
    SLICE_TOPOLOGY_ANNOTATION,
    SUB_SLICE_SHAPES,
    TOPOLOGY_NODE_LABEL,
    TPU_RESOURCE,
    Shape,
    partition_label,
    partition_state_label,
)
from tests.itest.lab import ControlPlane, free_port
from tests.itest.twin import issue_serving_certificate
from tests.slice_controller import WEBHOOKS as WEBHOOK_RULES

SLICE_CONTROLLER_NAME = "accelerator.gke.io/slice"
SLICE_NODE_LABEL = "cloud.google.com/gke-tpu-slice"  # a formed Slice's name on its nodes (module doc)
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TPU7X = "tpu7x"
# cmd/main.go:104-123 with the chart's --default-slice-health-node-affinity=HEALTHY_AND_DEGRADED
SLICE_HEALTH_VALUES = ["HEALTHY", "DEGRADED"]
RETRY_DELAY_SECONDS = 10  # cmd/main.go:88, --retry-delay-on-slice-failure's default
SLICE_FAILURE_CONDITION = "TPUSliceFailure"  # internal/core/constants.go:79
LWS_LEADER_POD_SET = "leader"  # internal/core/constants.go:77
LWS_GROUP_NAME = "lws-super-slice-group"  # leaderworkerset_webhook.go:33-36
TRANSIENT_HTTP = frozenset({429, 500, 502, 503, 504})
MAX_SLICE_NAME = 49  # internal/core/slice.go:34-37
# Kueue's topology annotations (sigs.k8s.io/kueue apis/kueue/v1beta2/topology_types.go)
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
POD_SET_GROUP = "kueue.x-k8s.io/podset-group-name"
# The program's chart's name, prefixed as the twin prefixes Kueue's (so the API server calls Kueue's first, as in a
# cluster where the two are "kueue-" and "slice-controller-" prefixed)
WEBHOOK_CONFIGURATION = "twin-slice-controller-mutating-webhook-configuration"
# The slice controller's webhooks for the objects the stack queues (its Job and StatefulSet webhooks are not served:
# see "What it does not do")
WEBHOOKS = {name: WEBHOOK_RULES[name] for name in ("mjobset.kb.io", "mleaderworkerset.kb.io")}
_PARTITION_KEY = re.compile(r"^cloud\.google\.com/gke-tpu-partition-(?P<shape>.+)-(?:state|id)$")
_TOPOLOGY = re.compile(r"[0-9]+x[0-9]+x[0-9]+")  # core.go:40-43, unanchored as there


# --- The slice's topology, as the controller reads it (internal/topology/topology.go) ------------------------------


@dataclass(frozen=True)
class SliceTopology:
    """A TPU7x slice topology: a sub-slice of one cube (2x2x1 ... 2x4x4) or a super-slice of whole cubes."""

    shape: Shape

    @classmethod
    def parse(cls, text: str) -> SliceTopology:
        """ParseTopologyV7 (topology.go:83-114): three axes; a supported sub-slice shape, or axes non-zero, multiples
        of 4 and non-decreasing."""
        parts = text.split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"{text!r} is no TPU7x slice topology: three axes, AxBxC")
        shape = Shape(tuple(int(p) for p in parts))
        if shape in SUB_SLICE_SHAPES:
            return cls(shape)
        dims = shape.dims
        if 0 in dims or any(d % 4 for d in dims) or list(dims) != sorted(dims):
            raise ValueError(
                f"{text!r} is no TPU7x slice topology: not a sub-slice, nor whole cubes in ascending order"
            )
        return cls(shape)

    @property
    def sub_slice(self) -> bool:
        return self.shape in SUB_SLICE_SHAPES

    @property
    def partition_label(self) -> str:
        """The node label of the partition one Slice takes (RequiredSliceLevel)."""
        return partition_label(self.shape if self.sub_slice else CUBE)

    @property
    def health_label(self) -> str:
        return partition_state_label(self.shape if self.sub_slice else CUBE)

    @property
    def chips_per_partition(self) -> int:
        return self.shape.chips if self.sub_slice else CUBE.chips

    @property
    def partitions(self) -> int:
        """Partitions of one Slice: the sub-slice's own, or one per cube."""
        return 1 if self.sub_slice else self.shape.chips // CUBE.chips

    def pods_per_partition(self, parallelism: int) -> int:
        """The slice size Kueue is given (SliceSize): the job's pods, or their share of each cube."""
        return parallelism if self.sub_slice else parallelism // self.partitions


def template_topology(template: dict[str, Any]) -> str:
    """GetTPUTopology (core.go:54-99): the slice-topology annotation, else a partition label's shape named by the node
    selector or the required node affinity."""
    annotated = (template.get("metadata") or {}).get("annotations", {}).get(SLICE_TOPOLOGY_ANNOTATION, "")
    if annotated:
        return str(annotated)
    spec = template.get("spec") or {}
    keys = list(spec.get("nodeSelector") or {})
    keys += [expr["key"] for term in _required_terms(spec) for expr in term.get("matchExpressions") or []]
    for key in keys:
        if match := _PARTITION_KEY.match(key):
            return match["shape"]
    return ""


def template_accelerator(template: dict[str, Any]) -> str:
    """GetTPUAccelerator (core.go:101-122): the node selector's accelerator, else a required In of one value."""
    spec = template.get("spec") or {}
    if ACCELERATOR_NODE_LABEL in (spec.get("nodeSelector") or {}):
        return str(spec["nodeSelector"][ACCELERATOR_NODE_LABEL])
    for term in _required_terms(spec):
        for expr in term.get("matchExpressions") or []:
            if expr["key"] == ACCELERATOR_NODE_LABEL and expr["operator"] == "In" and len(expr["values"]) == 1:
                return str(expr["values"][0])
    return ""


def relevant(template: dict[str, Any]) -> bool:
    """IsRelevantPodTemplateSpec (core.go:49-52): the template asks for a TPU7x slice."""
    return bool(_TOPOLOGY.search(template_topology(template))) and template_accelerator(template) == TPU7X


def _required_terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms: list[dict[str, Any]] = required.get("nodeSelectorTerms") or []
    return terms


# --- The webhook's mutations (internal/webhooks) ---------------------------------------------------------------------


class Refused(Exception):
    """The webhook refuses the object (the Defaulter returned an error)."""


def add_health_affinity(template: dict[str, Any], topology: SliceTopology) -> None:
    """annotatePodTemplateSpecWithSliceHealth (defaults.go:41-64) and AddNodeAffinity (internal/core/jobset.go:58-83)."""
    spec = template.setdefault("spec", {})
    label = topology.health_label
    if label in (spec.get("nodeSelector") or {}):
        return
    if any(expr["key"] == label for term in _required_terms(spec) for expr in term.get("matchExpressions") or []):
        return
    requirement = {"key": label, "operator": "In", "values": list(SLICE_HEALTH_VALUES)}
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": [requirement]})
    for term in terms:
        if requirement not in term.get("matchExpressions", []):
            term.setdefault("matchExpressions", []).append(copy.deepcopy(requirement))


def tpus_per_pod(template: dict[str, Any]) -> int:
    """getTPUsRequestedPerPod (defaults.go:31-39): the containers' google.com/tpu limits."""
    containers = (template.get("spec") or {}).get("containers") or []
    return sum(int(c.get("resources", {}).get("limits", {}).get(TPU_RESOURCE, 0)) for c in containers)


def mutate_jobset(jobset: dict[str, Any]) -> dict[str, Any]:
    """JobSetWebhook.Default (jobset_webhook.go:50-79), the parts placement depends on (module doc)."""
    mutated = copy.deepcopy(jobset)
    if not (mutated["metadata"].get("labels") or {}).get(QUEUE_LABEL):
        return mutated
    for replicated in mutated["spec"].get("replicatedJobs", []):
        job_spec = replicated["template"]["spec"]
        template = job_spec["template"]
        if not relevant(template):
            continue
        try:
            topology = SliceTopology.parse(
                template.get("metadata", {}).get("annotations", {}).get(SLICE_TOPOLOGY_ANNOTATION, "")
            )
        except ValueError as error:
            raise Refused(str(error)) from error
        add_health_affinity(template, topology)
        parallelism = job_spec.get("parallelism")
        if parallelism is None:
            raise Refused(f'invalid jobset "{jobset["metadata"]["name"]}": parallelism must be set')
        size = topology.pods_per_partition(int(parallelism))
        if tpus_per_pod(template) * size != topology.chips_per_partition:
            raise Refused(
                f'invalid jobset "{jobset["metadata"]["name"]}": {tpus_per_pod(template) * size} TPUs requested per '
                f"slice partition, {topology.chips_per_partition} needed (full utilization)"
            )
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[REQUIRED_TOPOLOGY] = BLOCK_LABEL
        annotations[SLICE_REQUIRED_TOPOLOGY] = topology.partition_label
        annotations[SLICE_SIZE] = str(size)
    return mutated


def mutate_leaderworkerset(lws: dict[str, Any]) -> dict[str, Any]:
    """LeaderWorkerSetWebhook.Default (leaderworkerset_webhook.go:54-104), the parts placement depends on."""
    mutated = copy.deepcopy(lws)
    if not (mutated["metadata"].get("labels") or {}).get(QUEUE_LABEL):
        return mutated
    templates = mutated["spec"]["leaderWorkerTemplate"]
    worker, leader = templates["workerTemplate"], templates.get("leaderTemplate")
    if not relevant(worker) or (leader is not None and not relevant(leader)):
        return mutated
    try:
        topology = SliceTopology.parse(
            worker.get("metadata", {}).get("annotations", {}).get(SLICE_TOPOLOGY_ANNOTATION, "")
        )
    except ValueError as error:
        raise Refused(str(error)) from error
    for template in (worker, leader):
        if template is None:
            continue
        add_health_affinity(template, topology)
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[REQUIRED_TOPOLOGY] = topology.partition_label
        if leader is not None:
            annotations[POD_SET_GROUP] = LWS_GROUP_NAME
    return mutated


MUTATORS = {"JobSet": mutate_jobset, "LeaderWorkerSet": mutate_leaderworkerset}


def admission_response(review: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview answer: the mutation as one JSON patch of spec (and metadata), or a refusal."""
    request = review["request"]
    answer: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    obj = request["object"]
    mutator = MUTATORS.get(request["kind"]["kind"])
    if mutator is not None:
        try:
            mutated = mutator(obj)
        except Refused as refusal:
            answer = {"uid": request["uid"], "allowed": False, "status": {"code": 403, "message": str(refusal)}}
        else:
            if mutated != obj:
                patch = [{"op": "replace", "path": "/spec", "value": mutated["spec"]}]
                answer["patchType"] = "JSONPatch"
                answer["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


# --- The workload reconciler's answer (internal/controller/workload_controller.go) -----------------------------------


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def owner(workload: dict[str, Any]) -> dict[str, Any] | None:
    """GetOwner (internal/util/workload/workload.go:75-86): the controller, else a JobSet, Job or LWS owner."""
    refs = workload["metadata"].get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller"):
            return dict(ref)
    return next((dict(r) for r in refs if r["kind"] in ("JobSet", "Job", "LeaderWorkerSet")), None)


def supported_owner(workload: dict[str, Any]) -> str | None:
    """The owner's kind when it is one the controller handles (workload.go:50-73), else None."""
    ref = owner(workload)
    if ref is None:
        return None
    kinds = {
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    }
    if (ref["apiVersion"], ref["kind"]) not in kinds:
        return None
    if ref["kind"] != "LeaderWorkerSet" and not ref.get("controller"):
        return None
    return str(ref["kind"])


def should_finalize(workload: dict[str, Any]) -> bool:
    """ShouldFinalize (workload.go:28-48): the controller lets such a workload go."""
    return bool(
        workload["metadata"].get("deletionTimestamp")
        or condition_true(workload, "Finished")
        or condition_true(workload, "Evicted")
        or workload["spec"].get("active") is False
        or supported_owner(workload) is None
    )


def assigned_nodes(assignment: dict[str, Any]) -> Iterator[str]:
    """The hostname of each domain of a topology assignment, in order (Kueue's pkg/util/tas InternalSeqFrom)."""
    levels = assignment.get("levels") or []
    if HOSTNAME_LABEL not in levels:
        return
    index = levels.index(HOSTNAME_LABEL)
    for part in assignment.get("slices") or []:
        values = part["valuesPerLevel"][index]
        for i in range(int(part["domainCount"])):
            if "universal" in values:
                yield str(values["universal"])
            else:
                individual = values["individual"]
                yield f"{individual.get('prefix', '')}{individual['roots'][i]}{individual.get('suffix', '')}"


def slice_name(namespace: str, workload: str, pod_set: str, index: int) -> str:
    """SliceName (internal/core/slice.go:57-64)."""
    name = f"{namespace}-{workload}-{pod_set}-{index}"
    if len(name) <= MAX_SLICE_NAME:
        return name
    return f"{name[: MAX_SLICE_NAME - 6]}-{hashlib.sha256(name.encode()).hexdigest()[:5]}"


@dataclass(frozen=True)
class PlannedSlice:
    """A Slice the real controller would create for a workload (it is never created here)."""

    name: str
    pod_set: str
    topology: str
    partition_ids: tuple[str, ...]
    partition_label: str


def plan_slices(workload: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> list[PlannedSlice] | None:
    """The Slices the real controller would make for a workload (syncSlicesForAssignment), or None when it would not
    answer the workload at all (validateRelevantWorkload)."""
    pod_sets = {p["name"]: p for p in workload["spec"].get("podSets", [])}
    admission = workload.get("status", {}).get("admission")
    is_lws = supported_owner(workload) == "LeaderWorkerSet"
    if not any(relevant(p["template"]) for p in pod_sets.values()):
        return None
    if not condition_true(workload, "QuotaReserved") or not admission:
        return None
    assignments = admission.get("podSetAssignments") or []
    if not any(a.get("topologyAssignment") for a in assignments):
        return None

    def label_of(pod_set: dict[str, Any]) -> str:
        try:
            return SliceTopology.parse(template_topology(pod_set["template"])).partition_label
        except ValueError:
            return ""

    def valid(assignment: dict[str, Any], label: str) -> bool:  # IsAssignmentValid (validation.go:63-80)
        topology_assignment = assignment.get("topologyAssignment")
        if not topology_assignment or HOSTNAME_LABEL not in (topology_assignment.get("levels") or []):
            return False
        return all(
            nodes.get(n, {}).get("metadata", {}).get("labels", {}).get(label)
            for n in assigned_nodes(topology_assignment)
        )

    planned: list[PlannedSlice] = []
    for assignment in assignments:
        pod_set = pod_sets.get(assignment["name"])
        if pod_set is None or (is_lws and assignment["name"] == LWS_LEADER_POD_SET):
            continue
        if not relevant(pod_set["template"]) or not assignment.get("topologyAssignment"):
            continue
        label = label_of(pod_set)
        if not valid(assignment, label):
            return None  # AllAssignmentsValid fails: the controller skips the workload
        if pod_set.get("topologyRequest") is None:
            continue
        count = int(pod_set["topologyRequest"].get("subGroupCount") or 1)
        ids: list[str] = []
        for node in assigned_nodes(assignment["topologyAssignment"]):
            value = nodes[node]["metadata"]["labels"][label]
            if value not in ids:
                ids.append(value)
        chunk = len(ids) // count
        topology = template_topology(pod_set["template"])
        for i in range(count):
            planned.append(
                PlannedSlice(
                    slice_name(workload["metadata"]["namespace"], workload["metadata"]["name"], pod_set["name"], i),
                    pod_set["name"],
                    topology,
                    tuple(ids[i * chunk : (i + 1) * chunk]),
                    label,
                )
            )
    return planned


def pod_set_updates(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """buildPodSetUpdates (workload_controller.go:864-877)."""
    updates = []
    for pod_set in workload["spec"].get("podSets", []):
        if topology := template_topology(pod_set["template"]):
            updates.append({"name": pod_set["name"], "nodeSelector": {TOPOLOGY_NODE_LABEL: topology}})
    return updates


def partition_count_problem(planned: list[PlannedSlice]) -> str | None:
    """validatePartitionCount (workload_controller.go:695-721)."""
    wrong = []
    for planned_slice in planned:
        try:
            topology = SliceTopology.parse(planned_slice.topology)
        except ValueError as error:
            return str(error)
        if len(planned_slice.partition_ids) != topology.partitions:
            wrong.append(planned_slice.name)
    return f"incorrect number of partitions for slices: {wrong}" if wrong else None


# --- The stand-in, running ---------------------------------------------------------------------------------------------


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SliceStandIn:
    """The slice controller's stand-in on a twin's control plane (module doc): ``start()`` serves and registers its
    webhook and runs its loop in a thread; ``stop()`` ends both and removes the registration. ``pause()`` holds the
    answers to workloads (the AdmissionCheck stays Active) until ``resume()``. ``answers`` is the timeline of its
    answers, ``failures`` what went wrong inside its thread."""

    def __init__(self, plane: ControlPlane, run_dir: Path, interval: float = 0.5):
        self.plane = plane
        self.run_dir = run_dir
        self.interval = interval
        self.answers: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.log = run_dir / "slice-standin.log"
        self._stop = threading.Event()
        self._answering = threading.Event()
        self._answering.set()
        self._thread: threading.Thread | None = None
        self._server: ThreadingHTTPServer | None = None
        self._server_thread: threading.Thread | None = None
        pki = plane.run_dir / "pki"
        self._context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self._context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    # -- lifecycle

    def start(self) -> None:
        self.serve_webhook()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="slice-standin", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        # failurePolicy Fail: a registration left behind would refuse every queued JobSet and LWS
        self.plane.kubectl(
            "delete", "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--ignore-not-found", check=False
        )
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def pause(self) -> None:
        self._answering.clear()

    def resume(self) -> None:
        self._answering.set()

    def answer_for(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The stand-in's latest answer for a workload."""
        mine = [a for a in self.answers if a["workload"] == f"{namespace}/{name}"]
        return mine[-1] if mine else None

    # -- the webhook

    def serve_webhook(self) -> None:
        certs = self.run_dir / "slice-standin-certs"
        issue_serving_certificate(self.plane.run_dir / "pki", certs, "slice-standin-webhook")
        port = free_port()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    answer = json.dumps(admission_response(json.loads(body))).encode()
                except Exception:
                    standin.failed(f"webhook {self.path}")
                    self.send_response(500)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                standin.note("webhook " + format % args)

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(certs / "tls.crt"), str(certs / "tls.key"))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._server_thread = threading.Thread(target=server.serve_forever, name="slice-standin-webhook", daemon=True)
        self._server_thread.start()
        bundle = base64.b64encode((self.plane.run_dir / "pki" / "ca.crt").read_bytes()).decode()
        configuration = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION},
            "webhooks": [
                {
                    "name": name,
                    "admissionReviewVersions": ["v1"],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
                    "objectSelector": {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]},
                    "rules": [
                        {
                            "apiGroups": [group],
                            "apiVersions": [version],
                            "operations": ["CREATE"],
                            "resources": [resource],
                        }
                    ],
                }
                for name, (group, version, resource, path) in WEBHOOKS.items()
            ],
        }
        self.plane.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))

    # -- the loop

    def _run(self) -> None:
        busy = 0  # passes in a row the API server turned away
        while not self._stop.is_set():
            try:
                self.reconcile()
                busy = 0
            except (urllib.error.HTTPError, urllib.error.URLError, TimeoutError) as error:
                # the lab's API server answers 429 while it is busy (as it does any controller, which retries):
                # the next pass reads everything again; only a server that stays away is a failure
                busy += 1
                if (isinstance(error, urllib.error.HTTPError) and error.code not in TRANSIENT_HTTP) or busy > 40:
                    self.failed("reconcile")
                else:
                    self.note(f"reconcile: {error} (pass skipped)")
            except Exception:
                self.failed("reconcile")
            self._stop.wait(self.interval)

    def reconcile(self) -> None:
        checks = self.get(f"{KUEUE_API}/admissionchecks")["items"]
        mine = {c["metadata"]["name"] for c in checks if c["spec"].get("controllerName") == SLICE_CONTROLLER_NAME}
        for check in checks:
            if check["metadata"]["name"] in mine and not condition_true(check, "Active"):
                self.activate(check)
        if not mine or not self._answering.is_set():
            return
        workloads = self.get(f"{KUEUE_API}/workloads")["items"]
        nodes: dict[str, dict[str, Any]] | None = None
        for workload in workloads:
            state = next((s for s in workload.get("status", {}).get("admissionChecks", []) if s["name"] in mine), None)
            if state is None or state["state"] in ("Ready", "Retry", "Rejected") or should_finalize(workload):
                continue
            if nodes is None:
                nodes = {n["metadata"]["name"]: n for n in self.get("/api/v1/nodes")["items"]}
            planned = plan_slices(workload, nodes)
            if planned is None:
                continue
            self.answer(workload, state["name"], planned, nodes)

    def activate(self, check: dict[str, Any]) -> None:
        """admissioncheck_controller.go:57-71."""
        condition = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "The admission check is active",
            "observedGeneration": check["metadata"]["generation"],
            "lastTransitionTime": now(),
        }
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": check["metadata"]["name"], "uid": check["metadata"]["uid"]},
            "status": {"conditions": [condition]},
        }
        self.apply(f"{KUEUE_API}/admissionchecks/{check['metadata']['name']}/status", body)
        self.note(f"AdmissionCheck {check['metadata']['name']} Active")

    def answer(
        self, workload: dict[str, Any], check: str, planned: list[PlannedSlice], nodes: dict[str, dict[str, Any]]
    ) -> None:
        metadata = workload["metadata"]
        entry: dict[str, Any] = {"name": check, "lastTransitionTime": now()}
        conditions = []
        if problem := partition_count_problem(planned):
            entry |= {"state": "Retry", "requeueAfterSeconds": RETRY_DELAY_SECONDS, "message": problem}
            conditions.append(
                {
                    "type": SLICE_FAILURE_CONDITION,
                    "status": "True",
                    "reason": "ConfigurationFailure",
                    "message": problem,
                    "lastTransitionTime": entry["lastTransitionTime"],
                }
            )
        else:
            for planned_slice in planned:  # the Slice's activation, in GKE's place (module doc)
                self.label_nodes(planned_slice, nodes)
            updates = pod_set_updates(workload)
            entry |= {
                "state": "Ready",
                "message": f"stand-in: {len(planned)} Slice(s) taken as ACTIVE at once (none is made or formed)",
                **({"podSetUpdates": updates} if updates else {}),
            }
        status: dict[str, Any] = {"admissionChecks": [entry]}
        if conditions:
            status["conditions"] = conditions
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
                "resourceVersion": metadata["resourceVersion"],
            },
            "status": status,
        }
        path = f"{KUEUE_API}/namespaces/{metadata['namespace']}/workloads/{metadata['name']}/status"
        try:
            self.apply(path, body)
        except urllib.error.HTTPError as error:
            if error.code in (404, 409):  # gone, or changed since it was read: the next pass reads it again
                return
            raise
        record = {
            "at": entry["lastTransitionTime"],
            "workload": f"{metadata['namespace']}/{metadata['name']}",
            "check": check,
            "state": entry["state"],
            "slices": [
                {
                    "name": s.name,
                    "podSet": s.pod_set,
                    "topology": s.topology,
                    "partitionLabel": s.partition_label,
                    "partitionIds": list(s.partition_ids),
                }
                for s in planned
            ],
            "podSetUpdates": entry.get("podSetUpdates", []),
        }
        self.answers.append(record)
        self.note(json.dumps(record))

    def label_nodes(self, planned_slice: PlannedSlice, nodes: dict[str, dict[str, Any]]) -> None:
        """The labels GKE gives the nodes of a formed Slice (module doc): its name and its topology."""
        wanted = {SLICE_NODE_LABEL: planned_slice.name, TOPOLOGY_NODE_LABEL: planned_slice.topology}
        for name, node in nodes.items():
            labels = node["metadata"].get("labels", {})
            if labels.get(planned_slice.partition_label) not in planned_slice.partition_ids:
                continue
            if wanted.items() <= labels.items():
                continue
            self.request(
                "PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": wanted}}, "application/merge-patch+json"
            )
            labels.update(wanted)

    # -- the API server

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = urllib.request.Request(self.plane.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30, context=self._context) as response:
            return json.loads(response.read())

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def apply(self, path: str, body: dict[str, Any]) -> Any:
        """Server-side apply as the slice controller's field manager, forced (as it writes: client.Apply,
        FieldOwner SliceControllerName, ForceOwnership)."""
        query = f"?fieldManager={urllib.parse.quote(SLICE_CONTROLLER_NAME, safe='')}&force=true"
        return self.request("PATCH", path + query, body, "application/apply-patch+yaml")

    # -- what happened

    def note(self, line: str) -> None:
        with self.log.open("a") as log:
            log.write(f"{now()} {line}\n")

    def failed(self, where: str) -> None:
        text = f"{where}: {traceback.format_exc()}"
        self.failures.append(text)
        self.note(text)
