"""Security scan of what the stacks apply: checkov's kubernetes framework over every stack's render.

Each of the tests' own stacks (tests/data/stacks; a user's Pulumi.<stack>.yaml is theirs to change) is rendered
afresh with tools/render.py (so the scan follows the code, not the committed goldens); its ``kubernetes.yaml`` holds
the program's objects and the slice-controller chart as Helm renders it. checkov checks only built-in kinds, so the pods of our
custom workloads are added beside it in ``workload-pods.yaml``, as their controllers create them:
a Job per JobSet replicated job, a Pod per LeaderWorkerSet leader and worker template, each with
its template's and its owner's ``checkov.io/skip*`` annotations.

A check that is wrong for an object is skipped on that object, never here: an annotation
``checkov.io/skip<N>: <check id>=<why>`` in the metadata checkov reads (the object's own, or for
the pods of a JobSet or LeaderWorkerSet one template's), in the YAML base under manifests/ or the
chart template. Each stack is scanned as rendered (no failed check allowed) and with every skip
annotation stripped (exactly the skipped checks must fail there), so a skip that suppresses
nothing, or names a check that never ran on its object, fails the suite too.

One checkov process runs its kubernetes runner (what ``checkov --framework kubernetes`` runs)
once per stack: the graph checks join objects by labels and names only, so stacks scanned as one
would lend each other their NetworkPolicies and RBAC. It is offline by construction: the runner
alone never reaches the CLI's platform integration or its PyPI version check, its environment
holds no API key and CKV_SKIP_PACKAGE_UPDATE_CHECK=true, and in its interpreter every name lookup
and IP connection is refused and recorded, which fails the test. (By hand, the CLI needs
``--skip-download`` and CKV_SKIP_PACKAGE_UPDATE_CHECK=true to stay offline.) checkov lives in its
own venv (.venv-checkov, requirements-checkov.txt); `make check-tools` builds it, runs this module (marked
``external``: `make test` does not) and sets TPU_GKE_CHECKOV, which makes a missing scanner an error instead of a skip.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy import cis
from tests import cis_benchmark, external, terraform_plan
from tests.conftest import FIXTURE_STACK_NAMES, FIXTURE_STACKS, PROJECT_ROOT, stack_values
from tools import render

pytestmark = pytest.mark.external  # checkov runs from .venv-checkov: make check-tools

# The tests' own stacks (tests/conftest.py): the broken copies below name their resources, which a user's stack file
# may name otherwise.
STACKS = FIXTURE_STACK_NAMES
CHECKOV_ENV = "TPU_GKE_CHECKOV"
DEFAULT_CHECKOV = PROJECT_ROOT / ".venv-checkov" / "bin" / "checkov"
SKIP_PREFIX = "checkov.io/skip"
AS_RENDERED, SKIPS_REMOVED = "as-rendered", "skips-removed"
RENDER_FILE, PODS_FILE, RESOURCES_FILE = "kubernetes.yaml", "workload-pods.yaml", "resources.json"

# Kinds checkov's graph checks join to pods and service accounts (NetworkPolicy, RBAC).
GRAPH_KINDS = {"NetworkPolicy", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
# Kinds whose pods checkov reads itself (spec.template, or the Pod itself).
BUILT_IN_WORKLOADS = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}

# Run in checkov's interpreter: refuse and record every name lookup and IP connection (an audit hook
# would too, at five times the run time), then scan each folder with checkov's kubernetes runner (what
# `checkov --framework kubernetes` runs, without the CLI's platform and update plumbing) into one JSON map.
_GUARDED_SCAN = textwrap.dedent(
    """
    import json, os, socket, sys
    log = open(os.environ["NETWORK_LOG"], "a", buffering=1)
    def refuse(name, original):
        def refused(*args, **kwargs):
            if name.endswith("connect") and args and getattr(args[0], "family", None) == socket.AF_UNIX:
                return original(*args, **kwargs)
            log.write(f"{name} {args[1:] if name.endswith('connect') else args!r}\\n")
            raise OSError(f"no network in the checkov scan: {name}")
        return refused
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "create_connection"):
        setattr(socket, name, refuse(name, getattr(socket, name)))
    for name in ("connect", "connect_ex"):
        setattr(socket.socket, name, refuse(f"socket.{name}", getattr(socket.socket, name)))
    from checkov.kubernetes.runner import Runner as KubernetesRunner
    from checkov.terraform.plan_runner import Runner as PlanRunner
    from checkov.runner_filter import RunnerFilter
    RUNNERS = {"kubernetes": KubernetesRunner, "terraform_plan": PlanRunner}
    FIELDS = ("check_id", "check_name", "resource", "file_path", "check_result")
    reports = {}
    for job in sys.argv[1:]:
        framework, folder = job.split("=", 1)
        only = RunnerFilter(framework=[framework], include_all_checkov_policies=True)
        report = RUNNERS[framework]().run(root_folder=folder, runner_filter=only)
        (report,) = report if isinstance(report, list) else [report]
        report = report.get_dict()
        for kind in ("passed_checks", "failed_checks", "skipped_checks"):
            report["results"][kind] = [{f: r[f] for f in FIELDS} for r in report["results"][kind]]
        reports[job] = {"summary": report["summary"], "results": report["results"]}
    sys.stdout.write(json.dumps(reports))  # one write: json.dump's many small ones take seconds
    """
)


def _checkov() -> Path:
    external.require("checkov (.venv-checkov)")
    configured = os.environ.get(CHECKOV_ENV)
    if configured:
        path = Path(configured)
        assert path.is_file(), f"{CHECKOV_ENV}={configured} is not a file: run `make check-tools`, which installs it"
        return path
    if not DEFAULT_CHECKOV.is_file():
        pytest.skip(f"checkov is not installed in .venv-checkov: `make check-tools` installs it (or set {CHECKOV_ENV})")
    return DEFAULT_CHECKOV


# --- What checkov reads ------------------------------------------------------------------------


def _skips(obj: dict[str, Any]) -> dict[str, str]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return {key: value for key, value in annotations.items() if key.startswith(SKIP_PREFIX)}


def _all_skips(value: Any, path: str = "") -> list[tuple[str, str, str]]:
    """Every skip annotation in an object, its own and its templates': (where, key, value)."""
    found = []
    if isinstance(value, dict):
        if path.endswith("metadata") and isinstance(value.get("annotations"), dict):
            found += [(path, k, v) for k, v in value["annotations"].items() if k.startswith(SKIP_PREFIX)]
        for key, child in value.items():
            found += _all_skips(child, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _all_skips(child, f"{path}[{index}]")
    return found


def _without_skips(value: Any) -> Any:
    """A copy with every skip annotation removed, the templates' included."""
    if isinstance(value, dict):
        return {k: _without_skips(v) for k, v in value.items() if not k.startswith(SKIP_PREFIX)}
    if isinstance(value, list):
        return [_without_skips(v) for v in value]
    return value


def _owned(owner: dict[str, Any], kind: str, api_version: str, name: str, template: dict[str, Any]) -> dict[str, Any]:
    """The object a controller creates from ``template``: its own skips and the owner's."""
    metadata = copy.deepcopy(template.get("metadata") or {})
    metadata.update(name=name, namespace=owner["metadata"]["namespace"])
    own = metadata.get("annotations") or {}
    clash = sorted(set(own) & set(_skips(owner)))
    assert not clash, f"{_describe(owner)}: a template reuses the owner's skip annotation keys {clash}"
    annotations = {**own, **_skips(owner)}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": copy.deepcopy(template["spec"])}


def workload_pods(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """What the JobSet and LeaderWorkerSet controllers create: (object, owner, where its template is)."""
    created = []
    for obj in objects:
        name, kind = obj["metadata"]["name"], obj["kind"]
        if kind == "JobSet":
            for replicated in obj["spec"]["replicatedJobs"]:
                job = _owned(obj, "Job", "batch/v1", f"{name}-{replicated['name']}", replicated["template"])
                # The JobSet controller labels every pod with its JobSet and replicated job.
                pod_metadata = job["spec"]["template"].setdefault("metadata", {})
                pod_metadata.setdefault("labels", {}).update(
                    {
                        "jobset.sigs.k8s.io/jobset-name": name,
                        "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                    }
                )
                created.append((job, obj, f"spec.replicatedJobs[{replicated['name']}].template"))
        elif kind == "LeaderWorkerSet":
            group = obj["spec"]["leaderWorkerTemplate"]
            for role in ("leaderTemplate", "workerTemplate"):
                if role in group:
                    pod = _owned(obj, "Pod", "v1", f"{name}-{role.removesuffix('Template')}", group[role])
                    created.append((pod, obj, f"spec.leaderWorkerTemplate.{role}"))
    return created


def _has_containers(value: Any) -> bool:
    if isinstance(value, dict):
        return "containers" in value or any(_has_containers(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_containers(v) for v in value)
    return False


def _resource_id(obj: dict[str, Any]) -> str:
    """checkov's name for an object: kind.namespace.name (namespace ``default`` when cluster-scoped)."""
    metadata = obj["metadata"]
    return f"{obj['kind']}.{metadata.get('namespace', 'default')}.{metadata['name']}"


def _describe(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{metadata['name']}"


# --- One checkov run over every stack ---------------------------------------------------------


@dataclass(frozen=True)
class Result:
    variant: str  # AS_RENDERED or SKIPS_REMOVED
    stack: str
    file: str
    resource: str  # checkov's id: Kind.namespace.name (a pod of a Deployment or Job: Pod.ns.<owner>.<labels>)
    check_id: str
    check_name: str
    owner: str  # the object of our render the result is about
    comment: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.stack, self.file, self.resource, self.check_id)

    def __str__(self) -> str:
        kind, namespace, name = self.resource.split(".", 2)
        return (
            f"{self.check_id} {kind} {namespace}/{name} ({self.owner}) in {self.stack}/{self.file}: {self.check_name}"
        )


@dataclass(frozen=True)
class Scan:
    summary: dict[str, Any]
    failed: list[Result]
    skipped: list[Result]
    passed: list[Result]
    network: list[str]
    skip_annotations: list[tuple[str, str, str, str]]  # (stack, owner, where: annotation, value)
    objects: dict[str, list[dict[str, Any]]]  # stack -> rendered objects
    owners: dict[tuple[str, str], str]  # (stack, checkov resource id) -> owner description


def _owner(owners: dict[tuple[str, str], str], stack: str, resource: str) -> str:
    if (stack, resource) in owners:
        return owners[stack, resource]
    kind, namespace, rest = resource.split(".", 2)
    # A pod checkov derives from a Deployment's or a Job's template: Pod.<ns>.<owner name>.<labels>
    for (owner_stack, owner_id), description in owners.items():
        _, owner_namespace, owner_name = owner_id.split(".", 2)
        if (
            owner_stack == stack
            and kind == "Pod"
            and owner_namespace == namespace
            and rest.startswith(owner_name + ".")
        ):
            return description
    return "not in the render"


def _skip_variant(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects that carry skips, without them, and what checkov's graph checks join them to."""
    return [_without_skips(o) for o in objects if _all_skips(o) or o["kind"] in GRAPH_KINDS]


def _write_stack(target: Path, text: str, objects: list[dict[str, Any]]) -> None:
    target.mkdir(parents=True)
    (target / RENDER_FILE).write_text(text)
    (target / PODS_FILE).write_text(yaml.safe_dump_all([pod for pod, _, _ in workload_pods(objects)]))


def run_checkov(checkov: Path, root: Path, jobs: list[str]) -> tuple[dict[str, Any], list[str]]:
    """One checkov process over ``jobs`` (``<framework>=<folder>``): each job's report, and every network
    access it tried (refused)."""
    home = root / "home"  # nothing of the user's: no cached credentials, no config files
    home.mkdir()
    network_log = root / "network.log"
    network_log.touch()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "NETWORK_LOG": str(network_log),
        "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true",  # the CLI's PyPI version check, should anything import it
        "LOG_LEVEL": "WARNING",
        "PYTHONWARNINGS": "ignore",
    }
    command = [str(checkov.parent / "python"), "-c", _GUARDED_SCAN, *jobs]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"checkov exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout), network_log.read_text().splitlines()


@functools.cache
def rendered(stack: str) -> tuple[str, str]:
    """The render of ``stack``, once per test process: (kubernetes.yaml, resources.json)."""
    files, _ = render.render(stack, FIXTURE_STACKS)
    return files[RENDER_FILE], files[RESOURCES_FILE]


@dataclass(frozen=True)
class CheckovRun:
    """The one checkov process of the module: every job's report, what it tried of the network, and the folders."""

    by_job: dict[str, Any]
    network: list[str]
    stacks: Path  # <stack>/<variant>/: each stack's scan
    cis: Path  # gcp/, gcp-broken/, k8s-broken/, k8s-stack-broken/: the CIS scan's


@pytest.fixture(scope="session")
def checkov_run(tmp_path_factory: pytest.TempPathFactory) -> CheckovRun:
    """checkov runs once, over the folders of the stacks' scan and of the CIS scan (below): one kubernetes runner per
    stack, since the graph checks join objects by labels and names alone, so stacks scanned as one would lend each
    other NetworkPolicies and RBAC."""
    checkov = _checkov()
    root = tmp_path_factory.mktemp("checkov")
    stacks, cis = root / "stacks", root / "cis"
    jobs = [f"kubernetes={stacks / stack}" for stack in STACKS] + _write_cis_folders(cis)
    _write_stack_folders(stacks)
    by_job, network = run_checkov(checkov, root, jobs)
    return CheckovRun(by_job, network, stacks, cis)


def _write_stack_folders(root: Path) -> None:
    """Each stack as rendered and with its skips removed, its workloads' pods beside it."""
    for stack in STACKS:
        text, _ = rendered(stack)
        stack_objects = [doc for doc in yaml.safe_load_all(text) if doc]
        _write_stack(root / stack / AS_RENDERED, text, stack_objects)
        stripped = _skip_variant(stack_objects)
        _write_stack(root / stack / SKIPS_REMOVED, yaml.safe_dump_all(stripped), stripped)


@pytest.fixture(scope="session")
def scan(checkov_run: CheckovRun) -> Scan:
    """The stacks' scan, read out of the one checkov run."""
    root = checkov_run.stacks
    objects: dict[str, list[dict[str, Any]]] = {}
    owners: dict[tuple[str, str], str] = {}
    skip_annotations = []
    for stack in STACKS:
        text, _ = rendered(stack)
        stack_objects = [doc for doc in yaml.safe_load_all(text) if doc]
        objects[stack] = stack_objects
        for obj in stack_objects:
            owners[stack, _resource_id(obj)] = _describe(obj)
            skip_annotations += [
                (stack, _describe(obj), f"{where}: {key}", value) for where, key, value in _all_skips(obj)
            ]
        for pod, owner, where in workload_pods(stack_objects):
            owners[stack, _resource_id(pod)] = f"{_describe(owner)} {where}"

    by_job, network = checkov_run.by_job, checkov_run.network
    reports = {stack: by_job[f"kubernetes={root / stack}"] for stack in STACKS}
    summary = {"parsing_errors": sum(r["summary"]["parsing_errors"] for r in reports.values())}

    def results(kind: str) -> list[Result]:
        found = []
        for stack, report in reports.items():
            for entry in report["results"][kind]:
                variant, file = Path(entry["file_path"]).parts[-2:]
                resource = entry["resource"]
                found.append(
                    Result(
                        variant,
                        stack,
                        file,
                        resource,
                        entry["check_id"],
                        entry["check_name"],
                        _owner(owners, stack, resource),
                        (entry.get("check_result") or {}).get("suppress_comment") or "",
                    )
                )
        return found

    return Scan(
        summary=summary,
        failed=results("failed_checks"),
        skipped=results("skipped_checks"),
        passed=results("passed_checks"),
        network=network,
        skip_annotations=skip_annotations,
        objects=objects,
        owners=owners,
    )


# --- The assertions -----------------------------------------------------------------------------


def test_checkov_stays_offline(scan):
    assert scan.network == [], "checkov reached for the network:\n" + "\n".join(scan.network)
    assert scan.summary["parsing_errors"] == 0, scan.summary


def test_no_check_fails_on_any_stack(scan):
    failed = sorted(str(r) for r in scan.failed if r.variant == AS_RENDERED)
    assert not failed, (
        f"{len(failed)} failed checkov check(s); fix the manifest, or skip the check on the object with "
        "`checkov.io/skip<N>: <id>=<why>` where it is wrong for it:\n" + "\n".join(failed)
    )


def test_every_inline_skip_is_needed(scan):
    """Without its skip annotations, exactly the skipped checks fail: none suppresses a passing check."""
    skipped = {r.key: r for r in scan.skipped if r.variant == AS_RENDERED}
    failing = {r.key: r for r in scan.failed if r.variant == SKIPS_REMOVED}
    needless = sorted(str(skipped[k]) for k in skipped.keys() - failing.keys())
    assert not needless, "skipped checks that pass without the skip (drop the annotation):\n" + "\n".join(needless)
    assert failing.keys() == skipped.keys(), sorted(str(failing[k]) for k in failing.keys() - skipped.keys())


def test_every_skip_names_a_check_and_says_why(scan):
    used = {(r.stack, r.owner.split(" spec.")[0], r.check_id) for r in scan.skipped if r.variant == AS_RENDERED}
    problems = []
    for stack, owner, key, value in scan.skip_annotations:
        check_id, sep, why = value.partition("=")
        if not sep or len(why.strip()) < 20 or "=" in why:
            problems.append(f"{stack}: {owner} {key}: {value!r} needs `<check id>=<why>` (no '=' in the why)")
        elif (stack, owner, check_id) not in used:
            problems.append(f"{stack}: {owner} {key}: checkov ran no check {check_id} on it")
    assert not problems, "\n".join(problems)


def test_every_workload_is_scanned(scan):
    """Each object with pods reaches checkov: a built-in kind, or one whose pods are added above."""
    scanned = {(r.stack, r.owner.split(" spec.")[0]) for r in scan.passed + scan.failed + scan.skipped}
    missing = []
    for stack, objects in scan.objects.items():
        for obj in objects:
            has_pods = obj["kind"] in BUILT_IN_WORKLOADS or _has_containers(obj.get("spec"))
            if has_pods and (stack, _describe(obj)) not in scanned:
                missing.append(f"{stack}: {_describe(obj)}")
    assert not missing, "objects with containers checkov never saw (teach workload_pods their kind):\n" + "\n".join(
        missing
    )


def test_the_slice_controller_chart_is_scanned(scan):
    """The local chart's render is part of kubernetes.yaml wherever the slice controller is installed."""
    for stack, objects in scan.objects.items():
        if any(o["kind"] == "Namespace" and o["metadata"]["name"] == "slice-controller-system" for o in objects):
            owners = {r.owner for r in scan.passed if r.stack == stack and r.variant == AS_RENDERED}
            assert "Deployment slice-controller-system/slice-controller-controller-manager" in owners, stack
            assert "ClusterRole slice-controller-manager-role" in owners, stack


def test_the_pods_of_custom_workloads_keep_their_owner_skips():
    owner = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "w", "namespace": "n", "annotations": {f"{SKIP_PREFIX}1": "CKV_K8S_8=why", "other": "x"}},
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}},
                "workerTemplate": {"spec": {"containers": []}},
            }
        },
    }
    (leader, _, _), (worker, _, where) = workload_pods([owner])
    assert leader["metadata"] == {"name": "w-leader", "namespace": "n", "annotations": {"a": "b", **_skips(owner)}}
    assert worker["metadata"]["annotations"] == {f"{SKIP_PREFIX}1": "CKV_K8S_8=why"}
    assert where == "spec.leaderWorkerTemplate.workerTemplate"
    owner["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {"annotations": {f"{SKIP_PREFIX}2": "x"}}
    assert [key for _, key, _ in _all_skips(owner)] == [f"{SKIP_PREFIX}1", f"{SKIP_PREFIX}2"]
    assert _all_skips(_without_skips(owner)) == []
    assert _without_skips(owner)["metadata"]["annotations"] == {"other": "x"}


# --- The CIS GKE Benchmark table: checkov's checks on the Google Cloud resources and the manifests --
#
# The CIS registry (policy/cis.yaml) names the checkov checks that hold each control.
# Google Cloud checks run on each stack's render as a Terraform plan (tests/terraform_plan.py); each held
# check must pass there, and fail on a copy of the render broken in the one argument it reads. Kubernetes
# checks run in the scan above; each held one must have run there, and fail on a broken copy of the slice
# controller chart's objects (the checks whose skips the scan above removes fail there already).

PLAN_FILE = "tfplan.json"


# Google Cloud checks that fail on some resources of the render on purpose: check -> (which, why). The
# failures must be exactly there, so an exception that is no longer needed fails the suite. (None today: the
# saxml stack's v5e pools go without secure boot, and CKV_GCP_68's row is held in production.)
GCP_EXCEPTIONS: dict[str, tuple[Callable[[str, dict[str, Any]], bool], str]] = {}

Breakage = Callable[[list[dict[str, Any]]], None]


def _one(resources: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [r for r in resources if r["name"] == name and r["type"] in terraform_plan.TERRAFORM_TYPES]
    return found


def _setting(name: str, path: str, value: Any) -> Breakage:
    def change(resources: list[dict[str, Any]]) -> None:
        *parents, leaf = path.split(".")
        target = _one(resources, name)["inputs"]
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value

    return change


def _dropping(name: str, path: str) -> Breakage:
    def drop(resources: list[dict[str, Any]]) -> None:
        *parents, leaf = path.split(".")
        target = _one(resources, name)["inputs"]
        for part in parents:
            target = target[part]
        del target[leaf]

    return drop


def _pool(stack: str, index: int) -> str:
    """The name of a TPU pool of one of the tests' stacks."""
    name: str = stack_values(stack)["tpu"]["pools"][index]["name"]
    return name


PROD_POOL_1, PROD_POOL_2, DEV_POOL_2 = _pool("prod", 0), _pool("prod", 1), _pool("dev", 1)
# (check, stack, breakage, the Terraform resource that must then fail it)
GCP_BROKEN: list[tuple[str, str, Breakage, str]] = [
    ("CKV_GCP_1", "dev", _setting("gke-cluster", "loggingService", "none"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_7", "prod", _setting("gke-cluster", "enableLegacyAbac", True), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_8", "saxml", _setting("gke-cluster", "monitoringService", "none"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_9", "dev", _setting("system-pool", "management.autoRepair", False), "google_container_node_pool.system-pool"),
    ("CKV_GCP_10", "prod", _setting(PROD_POOL_1, "management.autoUpgrade", False), f"google_container_node_pool.{PROD_POOL_1}"),
    ("CKV_GCP_13", "prod", _setting("gke-cluster", "masterAuth.clientCertificateConfig.issueClientCertificate", True), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_23", "dev", _dropping("gke-cluster", "ipAllocationPolicy"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_26", "prod", _dropping("node-subnet", "logConfig"), "google_compute_subnetwork.node-subnet"),
    ("CKV_GCP_64", "prod", _dropping("gke-cluster", "privateClusterConfig"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_61", "prod", _setting("gke-cluster", "enableIntranodeVisibility", False), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_65", "prod", _dropping("gke-cluster", "authenticatorGroupsConfig"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_66", "prod", _setting("gke-cluster", "binaryAuthorization.evaluationMode", "DISABLED"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_66", "prod", _dropping("gke-cluster", "binaryAuthorization"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_68", "dev", _setting("system-pool", "nodeConfig.shieldedInstanceConfig.enableSecureBoot", False), "google_container_node_pool.system-pool"),
    ("CKV_GCP_68", "prod", _dropping("gke-cluster", "nodeConfig.shieldedInstanceConfig"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_68", "prod", _setting(PROD_POOL_1, "nodeConfig.shieldedInstanceConfig.enableSecureBoot", False), f"google_container_node_pool.{PROD_POOL_1}"),
    ("CKV_GCP_68", "dev", _dropping(DEV_POOL_2, "nodeConfig.shieldedInstanceConfig"), f"google_container_node_pool.{DEV_POOL_2}"),
    ("CKV_GCP_69", "saxml", _setting("tpu1", "nodeConfig.workloadMetadataConfig.mode", "GCE_METADATA"), "google_container_node_pool.tpu1"),
    ("CKV_GCP_69", "dev", _dropping("gke-cluster", "nodeConfig.workloadMetadataConfig"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_70", "dev", _dropping("gke-cluster", "releaseChannel"), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_71", "prod", _setting("gke-cluster", "enableShieldedNodes", False), "google_container_cluster.gke-cluster"),
    ("CKV_GCP_72", "dev", _setting("system-pool", "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", False), "google_container_node_pool.system-pool"),
    ("CKV_GCP_72", "prod", _setting(PROD_POOL_2, "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", False), f"google_container_node_pool.{PROD_POOL_2}"),
    ("CKV_GCP_72", "saxml", _setting("tpu2", "nodeConfig.shieldedInstanceConfig", {"enableIntegrityMonitoring": False}), "google_container_node_pool.tpu2"),
    ("CKV2_GCP_12", "dev", _setting("allow-internal", "sourceRanges", ["0.0.0.0/0"]), "google_compute_firewall.allow-internal"),
    ("CKV2_GCP_19", "saxml", _setting("gke-cluster", "enableKubernetesAlpha", True), "google_container_cluster.gke-cluster"),
]  # fmt: skip

SLICE_CONTROLLER = "slice-controller"
MANAGER_ROLE = "ClusterRole slice-controller-manager-role"
MANAGER = "Deployment slice-controller-system/slice-controller-controller-manager"
K8sBreakage = Callable[[list[dict[str, Any]]], None]


def _object(objects: list[dict[str, Any]], described: str) -> dict[str, Any]:
    (found,) = [o for o in objects if _describe(o) == described]
    return found


def _rule(verbs: list[str], resources: list[str], group: str = "rbac.authorization.k8s.io") -> K8sBreakage:
    """A rule put first in the manager's role: checkov's CKV_K8S_49 reads a role's first rule only."""
    return lambda objects: _object(objects, MANAGER_ROLE)["rules"].insert(
        0, {"apiGroups": [group], "resources": resources, "verbs": verbs}
    )


def _pod(change: Callable[[dict[str, Any]], None]) -> K8sBreakage:
    return lambda objects: change(_object(objects, MANAGER)["spec"]["template"]["spec"])


def _container(change: Callable[[dict[str, Any]], None]) -> K8sBreakage:
    return _pod(lambda spec: [change(c) for c in spec["containers"]])


def _default_namespace(objects: list[dict[str, Any]]) -> None:
    del _object(objects, MANAGER)["metadata"]["namespace"]


def _bind_default_account(objects: list[dict[str, Any]]) -> None:
    binding = _object(objects, "ClusterRoleBinding slice-controller-manager-rolebinding")
    binding["subjects"].append({"kind": "ServiceAccount", "name": "default", "namespace": "slice-controller-system"})


# (check, breakage of the dev stack's slice controller objects, the checkov resource that must then fail it)
K8S_BROKEN: list[tuple[str, K8sBreakage, str]] = [
    ("CKV_K8S_16", _container(lambda c: c["securityContext"].update(privileged=True)), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_17", _pod(lambda spec: spec.update(hostPID=True)), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_18", _pod(lambda spec: spec.update(hostIPC=True)), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_19", _pod(lambda spec: spec.update(hostNetwork=True)), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_21", _default_namespace, "Deployment.default.slice-controller-controller-manager"),
    ("CKV_K8S_29", _pod(lambda spec: spec.pop("securityContext")), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_30", _container(lambda c: c.pop("securityContext")), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_31", _pod(lambda spec: spec["securityContext"].pop("seccompProfile")), "Deployment.slice-controller-system.slice-controller-controller-manager"),
    ("CKV_K8S_42", _bind_default_account, "ClusterRoleBinding.default.slice-controller-manager-rolebinding"),
    ("CKV_K8S_49", _rule(["*"], ["pods"], group=""), "ClusterRole.default.slice-controller-manager-role"),
    ("CKV_K8S_157", _rule(["bind"], ["clusterrolebindings"]), "ClusterRole.default.slice-controller-manager-role"),
    ("CKV_K8S_158", _rule(["escalate"], ["clusterroles"]), "ClusterRole.default.slice-controller-manager-role"),
]  # fmt: skip


def _without_network_policies(namespace: str) -> K8sBreakage:
    """Every NetworkPolicy of ``namespace`` gone. checkov's CKV2_K8S_6 joins a policy to pods by labels alone, in
    any namespace (a podSelector {} anywhere covers every pod of the scan), so the broken copy takes away the one
    namespace's policies and must fail there; policy:pods-isolated-by-network-policy holds each namespace apart."""

    def drop(objects: list[dict[str, Any]]) -> None:
        gone = [o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"].get("namespace") == namespace]
        assert gone, f"no NetworkPolicy in {namespace} to take away"
        for obj in gone:
            objects.remove(obj)

    return drop


# (check, stack, breakage of the stack's whole render, the checkov resource that must then fail it): checks that
# join objects (graph checks) need the workloads' pods beside the objects they join them to.
K8S_STACK_BROKEN: list[tuple[str, str, K8sBreakage, str]] = [
    ("CKV2_K8S_6", "dev", _without_network_policies("llm-d-pd-disaggregation"), "Pod.llm-d-pd-disaggregation.vllm-prefill-leader"),
    ("CKV2_K8S_6", "saxml", _without_network_policies("sax"), "Pod.sax.sax-admin-server.app-sax-admin-server.app.kubernetes.io/component-admin-server.app.kubernetes.io/part-of-saxml"),
]  # fmt: skip


@dataclass(frozen=True)
class CisScan:
    # (stack, check) -> {"passed": [resource addresses], "failed": [...]} on the render as a Terraform plan
    gcp: dict[tuple[str, str], dict[str, list[str]]]
    plans: dict[str, dict[str, Any]]  # stack -> the plan scanned
    # ("gcp", "k8s" or "k8s-stack", case) -> failed (check, resource)
    broken: dict[tuple[str, int], list[tuple[str, str]]]
    network: list[str]
    parsing_errors: int


def _chart_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"].startswith(SLICE_CONTROLLER)]


def _write_cis_folders(root: Path) -> list[str]:
    """The CIS scan's folders: each stack's render as a Terraform plan, and the copies broken on purpose; its jobs."""
    jobs = []
    for stack in STACKS:
        _, resources = rendered(stack)
        folder = root / "gcp" / stack
        folder.mkdir(parents=True)
        (folder / PLAN_FILE).write_text(json.dumps(terraform_plan.plan(json.loads(resources))))
        jobs.append(f"terraform_plan={folder}")
    for index, (_, stack, breakage, _) in enumerate(GCP_BROKEN):
        resources = json.loads(rendered(stack)[1])
        breakage(resources)
        folder = root / "gcp-broken" / str(index)
        folder.mkdir(parents=True)
        (folder / PLAN_FILE).write_text(json.dumps(terraform_plan.plan(resources)))
        jobs.append(f"terraform_plan={folder}")
    for index, (_, breakage, _) in enumerate(K8S_BROKEN):
        objects = _chart_objects([o for o in yaml.safe_load_all(rendered("dev")[0]) if o])
        breakage(objects)
        folder = root / "k8s-broken" / str(index)
        folder.mkdir(parents=True)
        (folder / RENDER_FILE).write_text(yaml.safe_dump_all(objects))
        jobs.append(f"kubernetes={folder}")
    for index, (_, stack, breakage, _) in enumerate(K8S_STACK_BROKEN):
        objects = [o for o in yaml.safe_load_all(rendered(stack)[0]) if o]
        breakage(objects)
        _write_stack(root / "k8s-stack-broken" / str(index), yaml.safe_dump_all(objects), objects)
        jobs.append(f"kubernetes={root / 'k8s-stack-broken' / str(index)}")
    return jobs


@pytest.fixture(scope="session")
def cis_scan(checkov_run: CheckovRun) -> CisScan:
    """The CIS scan, read out of the one checkov run."""
    root, by_job, network = checkov_run.cis, checkov_run.by_job, checkov_run.network
    plans = {stack: json.loads((root / "gcp" / stack / PLAN_FILE).read_text()) for stack in STACKS}

    def by_check(report: dict[str, Any], kind: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for entry in report["results"][kind]:
            found.setdefault(entry["check_id"], []).append(entry["resource"])
        return found

    gcp = {}
    for stack in STACKS:
        report = by_job[f"terraform_plan={root / 'gcp' / stack}"]
        passed, failed = by_check(report, "passed_checks"), by_check(report, "failed_checks")
        for check in passed.keys() | failed.keys():
            gcp[stack, check] = {"passed": passed.get(check, []), "failed": failed.get(check, [])}
    broken = {}
    for kind, cases in (("gcp", GCP_BROKEN), ("k8s", K8S_BROKEN), ("k8s-stack", K8S_STACK_BROKEN)):
        for index in range(len(cases)):
            framework = "terraform_plan" if kind == "gcp" else "kubernetes"
            report = by_job[f"{framework}={root / f'{kind}-broken' / str(index)}"]
            broken[kind, index] = [(e["check_id"], e["resource"]) for e in report["results"]["failed_checks"]]
    errors = sum(r["summary"]["parsing_errors"] for r in by_job.values())
    return CisScan(gcp=gcp, plans=plans, broken=broken, network=network, parsing_errors=errors)


CIS_ROWS = cis.CONTROLS
PRODUCTION_STACKS = cis_benchmark.production_stacks()


def _checks(framework: str, held: bool) -> list[tuple[str, str]]:
    """(control, check) for every checkov check of ``framework`` the table names as holding (or not yet)."""
    return [
        (row.number, check)
        for row in CIS_ROWS
        for check in row.checkov(row.held_by if held else row.not_yet, framework)
    ]


def _plan_resource(plan: dict[str, Any], address: str) -> dict[str, Any]:
    (found,) = [r for r in plan["planned_values"]["root_module"]["resources"] if r["address"] == address]
    return found


def test_the_cis_scan_stays_offline_and_reads_every_plan(cis_scan):
    assert cis_scan.network == [], "checkov reached for the network:\n" + "\n".join(cis_scan.network)
    assert cis_scan.parsing_errors == 0
    for stack, plan in cis_scan.plans.items():
        kinds = {r["type"] for r in plan["planned_values"]["root_module"]["resources"]}
        assert {"google_container_cluster", "google_container_node_pool", "google_compute_subnetwork"} <= kinds, stack


def _stacks_holding(check: str) -> list[str]:
    """Where a check the table names must pass: every stack, unless only rows held (or partly) in production name it."""
    statuses = {row.status for row in CIS_ROWS if check in row.held_by}
    return PRODUCTION_STACKS if statuses <= set(cis.IN_PRODUCTION) else STACKS


@pytest.mark.parametrize("control, check", _checks("GCP", held=True))
def test_every_google_cloud_check_the_table_names_passes_on_every_stack(cis_scan, control, check):
    """On every stack, or, for a row held in production, on every production stack (the others may leave it off)."""
    ran = {stack: cis_scan.gcp.get((stack, check)) for stack in _stacks_holding(check)}
    assert all(ran.values()), f"{control}: {check} did not run on {[s for s, r in ran.items() if not r]}"
    failed = [(stack, address) for stack, result in ran.items() for address in (result or {}).get("failed", [])]
    excepted, why = GCP_EXCEPTIONS.get(check, (lambda _kind, _values: False, ""))
    unexpected = [
        f"{stack}: {address}"
        for stack, address in failed
        if not excepted(address.split(".")[0], _plan_resource(cis_scan.plans[stack], address)["values"])
    ]
    assert not unexpected, f"{control}: {check} fails on the render:\n" + "\n".join(unexpected)
    if check in GCP_EXCEPTIONS:
        assert failed, (
            f"{control}: {check} fails nowhere any more ({why}): drop its exception and say so in docs/cis-benchmark.md"
        )
    assert any(result["passed"] for result in ran.values() if result), f"{control}: {check} passes on nothing"


def test_every_exception_is_for_a_check_the_table_names():
    assert set(GCP_EXCEPTIONS) <= {check for _, check in _checks("GCP", held=True)}


@pytest.mark.parametrize("control, check", _checks("GCP", held=False))
def test_every_check_not_yet_held_still_fails_on_the_render(cis_scan, control, check):
    """A pending or gap row's check fails today; when another change makes it pass, the row says held."""
    row = next(r for r in CIS_ROWS if r.number == control)
    results = {stack: cis_scan.gcp.get((stack, check)) or {} for stack in STACKS}
    passing = [stack for stack, result in results.items() if not result.get("failed")]
    assert not passing, (
        f"{control}: {check} passes on {passing} now: move it to held_by in the CIS registry, policy/cis.yaml "
        f"(and the row to held once nothing is left under 'not yet')"
    )
    pytest.skip(
        f"{control} is {row.status}: {check} fails on today's render, as the CIS registry (policy/cis.yaml) says"
    )


@pytest.mark.parametrize("control, check", _checks("GCP", held=True) + _checks("K8S", held=True))
def test_every_check_the_table_names_fails_on_a_broken_copy(cis_scan, scan, control, check):
    gcp = [(i, target) for i, (c, _, _, target) in enumerate(GCP_BROKEN) if c == check]
    k8s = [(i, target) for i, (c, _, target) in enumerate(K8S_BROKEN) if c == check]
    k8s_stack = [(i, target) for i, (c, _, _, target) in enumerate(K8S_STACK_BROKEN) if c == check]
    unskipped = [r for r in scan.failed if r.variant == SKIPS_REMOVED and r.check_id == check]
    assert gcp or k8s or k8s_stack or unskipped, (
        f"{control}: no broken copy for {check}: add one to GCP_BROKEN, K8S_BROKEN or K8S_STACK_BROKEN"
    )
    for index, target in gcp:
        assert (check, target) in cis_scan.broken["gcp", index], (control, check, target, cis_scan.broken["gcp", index])
    for index, target in k8s:
        assert (check, target) in cis_scan.broken["k8s", index], (control, check, target, cis_scan.broken["k8s", index])
    for kind, index, target in (("k8s-stack", i, t) for i, t in k8s_stack):
        assert (check, target) in cis_scan.broken[kind, index], (control, check, target, cis_scan.broken[kind, index])


@pytest.mark.parametrize("control, check", _checks("K8S", held=True))
def test_every_kubernetes_check_the_table_names_runs_on_the_render(scan, control, check):
    """The scan above fails on any failed check; here each one the table relies on must have had
    something to check (passed, or skipped on an object with its reason)."""
    seen = [r for r in scan.passed + scan.skipped if r.variant == AS_RENDERED and r.check_id == check]
    assert seen, f"{control}: {check} ran on no object of any stack"


def test_every_broken_copy_breaks_only_what_it_names(cis_scan):
    """Each broken copy of the Google Cloud resources fails its check, and no other check of the table
    that passes on the render, so each case proves the one argument it changes."""
    held = {check for _, check in _checks("GCP", held=True)}
    for index, (check, stack, _, target) in enumerate(GCP_BROKEN):
        others = {
            (c, r)
            for c, r in cis_scan.broken["gcp", index]
            if c in held and c != check and r not in (cis_scan.gcp.get((stack, c)) or {}).get("failed", [])
        }
        assert not others, f"{check} on {target}: the broken copy also fails {sorted(others)}"


def test_the_plan_translation_names_blocks_as_terraform_does_and_keeps_unknowns_out():
    resource = {
        "type": "gcp:compute/subnetwork:Subnetwork",
        "name": "node-subnet",
        "inputs": {
            "ipCidrRange": "10.0.0.0/8",
            "network": "[unknown]",
            "secondaryIpRanges": [{"rangeName": "pods", "ipCidrRange": "10.1.0.0/16"}],
            "logConfig": {"flowSampling": 0.5},
        },
    }
    (planned,) = terraform_plan.plan([resource])["planned_values"]["root_module"]["resources"]
    assert planned["address"] == "google_compute_subnetwork.node-subnet"
    assert planned["values"] == {
        "ip_cidr_range": "10.0.0.0/8",
        "secondary_ip_range": [{"range_name": "pods", "ip_cidr_range": "10.1.0.0/16"}],
        "log_config": {"flow_sampling": 0.5},
    }
    (change,) = terraform_plan.plan([resource])["resource_changes"]
    assert change["change"]["after_unknown"] == {"network": True}
    unknown_block = {**resource, "inputs": {"logConfigs": [{"a": 1}]}}
    with pytest.raises(ValueError, match=r"node-subnet\.logConfigs: a list of blocks"):
        terraform_plan.plan([unknown_block])
    assert terraform_plan.plan([{**resource, "type": "gcp:storage/bucket:Bucket"}])["resource_changes"] == []
