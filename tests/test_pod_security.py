"""Pod Security (CIS GKE Benchmark v1.9.0 4.2.1): every namespace a stack makes enforces a level, every pod created
in it meets that level, and the level is the strictest its pods meet.

The pods are every pod template of the render (the program's objects and the local slice controller chart, as
kubernetes.yaml holds them), the pods of the registry charts the stack installs, built from the values the program
hands each release (tests/chart_pods.py), and the Job `make bench` runs in the serving namespace; each as the API
server admits it, with GKE's Cloud Storage FUSE sidecar where a pod asks for it. The levels are checked by
tests/pod_security.py, written from the standard; every control it checks fails on a copy broken on purpose (below).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from components.operations import benchmark
from components.operations.config import NODE_AUDIT_NAMESPACE
from components.stack import load_pulumi_values
from harness.mock_engine import ProgramRun
from tests import pod_security
from tests.chart_pods import CHART_PODS, with_gke_sidecars
from tests.conftest import PROJECT_ROOT, run_stack, stack_values
from tools.render import kubernetes_objects
from tools.stack_file import stack_config_values

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_ROOT.glob("Pulumi.*.yaml"))
LABEL = "pod-security.kubernetes.io/"
RELEASE = "kubernetes:helm.sh/v3:Release"
BASELINE, RESTRICTED, PRIVILEGED = pod_security.BASELINE, pod_security.RESTRICTED, pod_security.PRIVILEGED


@dataclass(frozen=True)
class Pod:
    owner: str  # what declares it, and where its template is
    namespace: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


def pod_templates(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, metadata, spec) of every pod template in an object, the object itself when it is a Pod: a mapping
    whose spec lists containers."""
    if isinstance(value, dict):
        spec = value.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield path or "(the pod)", value.get("metadata") or {}, spec
        for key, child in value.items():
            yield from pod_templates(child, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from pod_templates(child, f"{path}[{index}]")


def rendered_pods(objects: list[dict[str, Any]]) -> list[Pod]:
    pods = []
    for obj in objects:
        metadata = obj["metadata"]
        for where, pod_metadata, spec in pod_templates(obj):
            owner = f"{obj['kind']} {metadata.get('namespace')}/{metadata['name']} {where}"
            pods.append(Pod(owner, metadata["namespace"], pod_metadata, spec))
    return pods


def chart_pods(run: ProgramRun) -> list[Pod]:
    """The pod of every registry chart the stack installs (a local chart's objects are in the render)."""
    pods = []
    for release in (r for r in run.registrations if r.type == RELEASE):
        chart = release.input("chart")
        if chart.startswith("./"):
            continue
        name = chart.rsplit("/", 1)[-1]
        assert name in CHART_PODS, f"the stack installs the chart {chart}, whose pod tests/chart_pods.py has not read"
        metadata, spec = CHART_PODS[name].pod(release.inputs.get("values") or {})
        pods.append(Pod(f"Helm release {release.name} ({name})", release.input("namespace"), metadata, spec))
    return pods


def bench_pods(stack: str) -> list[Pod]:
    """The Job `make bench` runs in the serving namespace (tools/bench.py builds it from the stack file)."""
    config = load_pulumi_values(stack_config_values(stack)[0]).config
    if not config.serving.enabled:
        return []
    spec = benchmark.benchmark_input(
        config.serving,
        config.project,
        "pod-security",
        "http://10.0.0.1/v1",
        rates=(1.0,),
        stage_seconds=60,
        pull_path=config.pull_path(),
    )
    return rendered_pods(benchmark.benchmark_objects(spec))


@dataclass(frozen=True)
class StackPods:
    namespaces: dict[str, dict[str, str]]  # namespace -> its Pod Security labels
    pods: list[Pod]  # as the API server admits them: with GKE's sidecars
    releases: dict[str, tuple[str, str]]  # registry chart name -> (version, namespace)


def admitted(pod: Pod) -> Pod:
    return Pod(pod.owner, pod.namespace, pod.metadata, with_gke_sidecars(pod.metadata, pod.spec))


@functools.cache
def _stack_pods(stack: str) -> StackPods:
    run = run_stack(stack=stack)
    objects = kubernetes_objects(run.registrations)
    namespaces = {
        o["metadata"]["name"]: {k: v for k, v in (o["metadata"].get("labels") or {}).items() if k.startswith(LABEL)}
        for o in objects
        if o["kind"] == "Namespace"
    }
    pods = [admitted(p) for p in [*rendered_pods(objects), *chart_pods(run), *bench_pods(stack)]]
    releases = {
        r.input("chart").rsplit("/", 1)[-1]: (r.input("version"), r.input("namespace"))
        for r in run.registrations
        if r.type == RELEASE and not r.input("chart").startswith("./")
    }
    return StackPods(namespaces, pods, releases)


def stack_pods(stack: str) -> StackPods:
    """A fresh copy, free to break."""
    return copy.deepcopy(_stack_pods(stack))


def enforced(view: StackPods, namespace: str) -> str:
    return view.namespaces[namespace][f"{LABEL}enforce"]


def refused(view: StackPods) -> list[str]:
    """Every pod the API server would refuse in its namespace, with why."""
    return [
        f"{pod.owner}: {control}: {problem}"
        for pod in view.pods
        for control, problem in pod_security.violations(enforced(view, pod.namespace), pod.metadata, pod.spec)
    ]


# --- The stacks --------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_the_stack_makes_enforces_a_level_pinned_to_the_clusters_minor(stack: str) -> None:
    view = stack_pods(stack)
    assert view.namespaces, f"{stack} makes no namespace"
    major, minor = stack_values(stack)["cluster"]["version"].split(".")[:2]
    for name, labels in view.namespaces.items():
        assert labels == {
            f"{LABEL}enforce": labels.get(f"{LABEL}enforce"),
            f"{LABEL}enforce-version": f"v{major}.{minor}",
            f"{LABEL}warn": RESTRICTED,
            f"{LABEL}warn-version": "latest",
            f"{LABEL}audit": RESTRICTED,
            f"{LABEL}audit-version": "latest",
        }, name
        # Privileged only where the node audit logging's DaemonSet runs, and there it must be.
        level = labels[f"{LABEL}enforce"]
        assert level == PRIVILEGED if name == NODE_AUDIT_NAMESPACE else level in pod_security.LEVELS, (name, level)


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_runs_in_a_namespace_the_stack_labels(stack: str) -> None:
    view = stack_pods(stack)
    assert view.pods
    outside = sorted(f"{p.owner} in {p.namespace}" for p in view.pods if p.namespace not in view.namespaces)
    assert not outside, outside


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_meets_the_level_its_namespace_enforces(stack: str) -> None:
    problems = refused(stack_pods(stack))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", STACKS)
def test_each_namespace_enforces_the_strictest_level_its_pods_meet(stack: str) -> None:
    """restricted wherever every pod meets it: a baseline namespace holds a pod restricted would refuse, and a
    privileged one a pod baseline would refuse (and nothing but the node audit logging's pods)."""
    view = stack_pods(stack)
    for namespace, level, stricter in (
        (n, level, stricter)
        for level, stricter in ((BASELINE, RESTRICTED), (PRIVILEGED, BASELINE))
        for n in view.namespaces
        if enforced(view, n) == level
    ):
        pods = [p for p in view.pods if p.namespace == namespace]
        assert any(pod_security.violations(stricter, p.metadata, p.spec) for p in pods), (
            f"every pod of {namespace} meets {stricter}: enforce it ({[p.owner for p in pods]})"
        )
        if level == PRIVILEGED:
            assert {p.owner.split(" spec")[0] for p in pods} == {f"DaemonSet {namespace}/node-audit-logging"}, pods


def test_the_production_stack_holds_the_privileged_namespace_of_the_node_audit_logging_alone() -> None:
    """What the privileged half of the test above runs over (the other stacks deploy no node audit logging)."""
    prod = stack_pods("prod")
    assert [n for n in prod.namespaces if enforced(prod, n) == PRIVILEGED] == [NODE_AUDIT_NAMESPACE]
    for stack in ("dev", "saxml"):
        assert NODE_AUDIT_NAMESPACE not in stack_pods(stack).namespaces


def test_the_stacks_hold_both_levels_and_each_kind_of_pod() -> None:
    """What the tests above run over: a pass over nothing would prove nothing."""
    dev, saxml = stack_pods("dev"), stack_pods("saxml")
    assert {enforced(dev, n) for n in dev.namespaces} == {BASELINE, RESTRICTED}
    owners = " ".join(p.owner for p in dev.pods)
    for expected in ("LeaderWorkerSet", "JobSet", "Job ", "Deployment slice-controller-system/", "Helm release"):
        assert expected in owners, expected
    assert {p.namespace for p in dev.pods} == set(dev.namespaces)
    assert any(c["name"] == "gke-gcsfuse-sidecar" for p in dev.pods for c in p.spec.get("initContainers") or [])
    assert enforced(saxml, "sax") == BASELINE and enforced(saxml, "jobset-system") == RESTRICTED


@pytest.mark.parametrize("stack", STACKS)
def test_every_registry_chart_pod_was_read_at_the_version_the_stack_installs(stack: str) -> None:
    for chart, (version, _) in stack_pods(stack).releases.items():
        assert CHART_PODS[chart].version == version, (
            f"{chart} {version}: read its pod's template and values at that tag into tests/chart_pods.py"
        )


# --- The stacks broken on purpose: each must be refused ------------------------------------------


def _pod(view: StackPods, owner_starts: str) -> Pod:
    (found,) = [p for p in view.pods if p.owner.startswith(owner_starts)]
    return found


def _lws_release_without_the_seccomp_value(view: StackPods) -> None:
    index = next(i for i, p in enumerate(view.pods) if p.owner.startswith("Helm release lws"))
    metadata, spec = CHART_PODS["lws"].pod({})  # the chart's own values only
    view.pods[index] = Pod(view.pods[index].owner, "lws-system", metadata, spec)


def _enforce(namespace: str, level: str) -> Callable[[StackPods], None]:
    return lambda view: view.namespaces[namespace].update({f"{LABEL}enforce": level})


def _spec(owner_starts: str, change: Callable[[dict[str, Any]], Any]) -> Callable[[StackPods], None]:
    return lambda view: change(_pod(view, owner_starts).spec)


def _first_container(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda spec: change(spec["containers"][0].setdefault("securityContext", {}))


MANAGER = "Deployment slice-controller-system/slice-controller-controller-manager"
DECODE = "LeaderWorkerSet llm-d-pd-disaggregation/vllm-decode spec.leaderWorkerTemplate.leaderTemplate"
STAGING = "Job llm-d-pd-disaggregation/stage-model-weights"
NODE_AUDIT = f"DaemonSet {NODE_AUDIT_NAMESPACE}/node-audit-logging"

# (stack, breakage, the pod that must then be refused, the control it breaks)
STACK_BROKEN: list[tuple[str, Callable[[StackPods], None], str, str]] = [
    ("dev", _spec(MANAGER, lambda s: s["securityContext"].pop("runAsNonRoot")), MANAGER, "Running as Non-root"),
    ("dev", _spec(MANAGER, lambda s: s["securityContext"].pop("seccompProfile")), MANAGER, "Seccomp (restricted)"),
    ("dev", _lws_release_without_the_seccomp_value, "Helm release lws", "Seccomp (restricted)"),
    ("dev", _spec(DECODE, _first_container(lambda c: c.update(privileged=True))), DECODE, "Privileged Containers"),
    ("prod", _spec(STAGING, lambda s: s.update(hostNetwork=True)), STAGING, "Host Namespaces"),
    ("dev", _enforce("llm-d-pd-disaggregation", RESTRICTED), DECODE, "Running as Non-root"),
    ("saxml", _enforce("sax", RESTRICTED), "Deployment sax/sax-admin-server", "Running as Non-root"),
    ("saxml", _spec("Helm release jobset", lambda s: s.update(hostPID=True)), "Helm release jobset", "Host Namespaces"),
    ("prod", _enforce(NODE_AUDIT_NAMESPACE, BASELINE), NODE_AUDIT, "Privileged Containers"),
    ("prod", _enforce(NODE_AUDIT_NAMESPACE, BASELINE), NODE_AUDIT, "HostPath Volumes"),
]  # fmt: skip


@pytest.mark.parametrize(
    "stack, breakage, owner, control", STACK_BROKEN, ids=[f"{s}-{o}-{c}" for s, _, o, c in STACK_BROKEN]
)
def test_a_stack_broken_on_purpose_has_a_pod_refused(
    stack: str, breakage: Callable[[StackPods], None], owner: str, control: str
) -> None:
    view = stack_pods(stack)
    breakage(view)
    problems = refused(view)
    assert any(p.startswith(owner) and f": {control}: " in p for p in problems), problems


# --- The checks, control by control ------------------------------------------------------------


def restricted_pod() -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod that meets restricted with nothing to spare: every field restricted asks for, set once."""
    return {"annotations": {}}, {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [
            {"name": "init", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        ],
        "containers": [
            {
                "name": "main",
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"port": 8080, "path": "/"}},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "volumes": [{"name": "config", "configMap": {"name": "c"}}, {"name": "scratch", "emptyDir": {}}],
    }


Change = Callable[[dict[str, Any], dict[str, Any]], Any]  # (metadata, spec) -> None


def _main(change: Callable[[dict[str, Any]], Any]) -> Change:
    return lambda _m, spec: change(spec["containers"][0]["securityContext"])


def _init(change: Callable[[dict[str, Any]], Any]) -> Change:
    return lambda _m, spec: change(spec["initContainers"][0]["securityContext"])


def _pod_context(change: Callable[[dict[str, Any]], Any]) -> Change:
    return lambda _m, spec: change(spec["securityContext"])


def _ephemeral(context: dict[str, Any]) -> Change:
    return lambda _m, spec: spec.update(ephemeralContainers=[{"name": "debug", "securityContext": context}])


def _probe_host(probe: str, action: str, host: str = "169.254.169.254") -> Change:
    def change(_m: dict[str, Any], spec: dict[str, Any]) -> None:
        handler = {action: {"port": 8080, "host": host}}
        if probe.startswith("lifecycle."):
            spec["containers"][0]["lifecycle"] = {probe.removeprefix("lifecycle."): handler}
        else:
            spec["containers"][0][probe] = handler

    return change


# (the control that must fire, the change) from the restricted pod: each breaks exactly that control, at its level
BROKEN: list[tuple[str, Change]] = [
    ("HostProcess", _pod_context(lambda c: c.update(windowsOptions={"hostProcess": True}))),
    ("HostProcess", _init(lambda c: c.update(windowsOptions={"hostProcess": True}))),
    ("Host Namespaces", lambda _m, s: s.update(hostNetwork=True)),
    ("Host Namespaces", lambda _m, s: s.update(hostPID=True)),
    ("Host Namespaces", lambda _m, s: s.update(hostIPC=True)),
    ("Privileged Containers", _main(lambda c: c.update(privileged=True))),
    ("Privileged Containers", _ephemeral({"privileged": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}})),
    ("Capabilities", _main(lambda c: c["capabilities"].update(add=["NET_BIND_SERVICE", "SYS_ADMIN"]))),
    ("Capabilities", _init(lambda c: c["capabilities"].update(add=["NET_RAW"]))),
    ("HostPath Volumes", lambda _m, s: s["volumes"].append({"name": "host", "hostPath": {"path": "/"}})),
    ("Host Ports", lambda _m, s: s["containers"][0]["ports"].append({"containerPort": 9090, "hostPort": 9090})),
    ("Host Probes / Lifecycle Hooks", _probe_host("readinessProbe", "httpGet")),
    ("Host Probes / Lifecycle Hooks", _probe_host("livenessProbe", "tcpSocket")),
    ("Host Probes / Lifecycle Hooks", _probe_host("lifecycle.preStop", "httpGet")),
    ("AppArmor", _pod_context(lambda c: c.update(appArmorProfile={"type": "Unconfined"}))),
    ("AppArmor", _main(lambda c: c.update(appArmorProfile={"type": "Unconfined"}))),
    ("AppArmor", lambda m, _s: m["annotations"].update({"container.apparmor.security.beta.kubernetes.io/main": "unconfined"})),
    ("SELinux", _pod_context(lambda c: c.update(seLinuxOptions={"type": "spc_t"}))),
    ("SELinux", _main(lambda c: c.update(seLinuxOptions={"user": "system_u"}))),
    ("SELinux", _init(lambda c: c.update(seLinuxOptions={"role": "sysadm_r"}))),
    ("/proc Mount Type", _main(lambda c: c.update(procMount="Unmasked"))),
    ("Seccomp", _pod_context(lambda c: c.update(seccompProfile={"type": "Unconfined"}))),
    ("Seccomp", _main(lambda c: c.update(seccompProfile={"type": "Unconfined"}))),
    ("Sysctls", _pod_context(lambda c: c.update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]))),
    ("Volume Types", lambda _m, s: s["volumes"].append({"name": "nfs", "nfs": {"server": "x", "path": "/"}})),
    ("Volume Types", lambda _m, s: s["volumes"].append({"name": "repo", "gitRepo": {"repository": "x"}})),
    ("Privilege Escalation", _main(lambda c: c.pop("allowPrivilegeEscalation"))),
    ("Privilege Escalation", _init(lambda c: c.update(allowPrivilegeEscalation=True))),
    ("Running as Non-root", _pod_context(lambda c: c.pop("runAsNonRoot"))),
    ("Running as Non-root", _main(lambda c: c.update(runAsNonRoot=False))),
    ("Running as Non-root user", _pod_context(lambda c: c.update(runAsUser=0))),
    ("Running as Non-root user", _init(lambda c: c.update(runAsUser=0))),
    ("Seccomp (restricted)", _pod_context(lambda c: c.pop("seccompProfile"))),
    ("Capabilities (restricted)", _main(lambda c: c["capabilities"].pop("drop"))),
    ("Capabilities (restricted)", _init(lambda c: c["capabilities"].update(add=["CHOWN"]))),
    ("/proc Mount Type (restricted)", lambda _m, s: (s.update(hostUsers=False), s["containers"][0]["securityContext"].update(procMount="Unmasked"))),
]  # fmt: skip


def _broken(change: Change) -> tuple[dict[str, Any], dict[str, Any]]:
    metadata, spec = restricted_pod()
    change(metadata, spec)
    return metadata, spec


def test_the_restricted_pod_meets_both_levels() -> None:
    assert pod_security.violations(RESTRICTED, *restricted_pod()) == []
    assert pod_security.violations(BASELINE, *restricted_pod()) == []


@pytest.mark.parametrize("control, change", BROKEN, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BROKEN)])
def test_each_control_refuses_a_pod_broken_for_it_at_its_level(control: str, change: Change) -> None:
    (level,) = [c.level for c in pod_security.CONTROLS if c.name == control]
    metadata, spec = _broken(change)
    at_restricted = {name for name, _ in pod_security.violations(RESTRICTED, metadata, spec)}
    at_baseline = {name for name, _ in pod_security.violations(BASELINE, metadata, spec)}
    assert control in at_restricted
    if level == BASELINE:
        assert at_baseline == {control}, at_baseline
    else:
        assert at_baseline == set(), "a restricted control must not refuse the pod at baseline"
        assert at_restricted == {control}, at_restricted


def test_every_control_is_broken_at_least_once() -> None:
    assert {c.name for c in pod_security.CONTROLS} == {control for control, _ in BROKEN}


# What each level still admits: the standard's allowed values other than "undefined".
ALLOWED: list[tuple[str, str, Change]] = [
    (BASELINE, "capabilities from the default set", _main(lambda c: c["capabilities"].update(add=["CHOWN", "NET_BIND_SERVICE"]))),
    (RESTRICTED, "NET_BIND_SERVICE alone", _main(lambda c: c["capabilities"].update(add=["NET_BIND_SERVICE"]))),
    (RESTRICTED, "hostPort 0", lambda _m, s: s["containers"][0]["ports"].append({"containerPort": 9090, "hostPort": 0})),
    (RESTRICTED, "a Localhost seccomp profile", _pod_context(lambda c: c.update(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}))),
    (RESTRICTED, "the profile set on every container instead of the pod", lambda _m, s: (s["securityContext"].pop("seccompProfile"), [c["securityContext"].update(seccompProfile={"type": "RuntimeDefault"}) for c in s["initContainers"] + s["containers"]])),
    (RESTRICTED, "runAsNonRoot set on every container instead of the pod", lambda _m, s: (s["securityContext"].pop("runAsNonRoot"), [c["securityContext"].update(runAsNonRoot=True) for c in s["initContainers"] + s["containers"]])),
    (RESTRICTED, "root in a user namespace", lambda _m, s: (s.update(hostUsers=False), s["securityContext"].update(runAsUser=0, runAsNonRoot=False))),
    (BASELINE, "an unmasked /proc in a user namespace", lambda _m, s: (s.update(hostUsers=False), s["containers"][0]["securityContext"].update(procMount="Unmasked"))),
    (RESTRICTED, "a safe sysctl", _pod_context(lambda c: c.update(sysctls=[{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]))),
    (RESTRICTED, "AppArmor by localhost profile", lambda m, s: (m["annotations"].update({"container.apparmor.security.beta.kubernetes.io/main": "localhost/p"}), s["securityContext"].update(appArmorProfile={"type": "Localhost", "localhostProfile": "p"}))),
    (RESTRICTED, "an SELinux container type", _main(lambda c: c.update(seLinuxOptions={"type": "container_engine_t", "level": "s0:c1"}))),
    (RESTRICTED, "the core volume types", lambda _m, s: s["volumes"].extend([{"name": "pvc", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "csi", "csi": {"driver": "gcsfuse.csi.storage.gke.io"}}, {"name": "token", "projected": {"sources": []}}])),
    (RESTRICTED, "a probe whose host is empty: the pod's own address", _probe_host("startupProbe", "httpGet", host="")),
    (BASELINE, "a Windows pod without the Linux-only fields", lambda _m, s: (s.update(os={"name": "windows"}), s.pop("securityContext"), [c.pop("securityContext") for c in s["initContainers"] + s["containers"]])),
]  # fmt: skip


@pytest.mark.parametrize("level, what, change", ALLOWED, ids=[w for _, w, _ in ALLOWED])
def test_what_each_level_still_admits(level: str, what: str, change: Change) -> None:
    metadata, spec = _broken(change)
    assert pod_security.violations(level, metadata, spec) == []


def test_a_windows_pod_is_exempt_from_restricted_linux_controls_but_not_from_running_as_non_root() -> None:
    metadata, spec = _broken(lambda _m, s: (s.update(os={"name": "windows"}), s.pop("securityContext")))
    assert {name for name, _ in pod_security.violations(RESTRICTED, metadata, spec)} == {"Running as Non-root"}


def test_a_chart_pod_is_built_from_the_release_values_over_the_charts_own() -> None:
    """Helm merges mappings key by key: the program's seccomp profile joins the LWS chart's runAsNonRoot."""
    lws = CHART_PODS["lws"]
    _, own = lws.pod({})
    _, ours = lws.pod({"podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}}})
    assert own["securityContext"] == {"runAsNonRoot": True}
    assert ours["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert {n for n, _ in pod_security.violations(RESTRICTED, {}, own)} == {"Seccomp (restricted)"}
    assert pod_security.violations(RESTRICTED, {}, ours) == []


def test_the_gcsfuse_sidecar_joins_only_the_pods_that_ask_for_it() -> None:
    spec: Mapping[str, Any] = restricted_pod()[1]
    assert with_gke_sidecars({"annotations": {}}, spec) == spec
    injected = with_gke_sidecars({"annotations": {"gke-gcsfuse/volumes": "true"}}, spec)
    assert injected["initContainers"][0]["name"] == "gke-gcsfuse-sidecar"
    assert pod_security.violations(RESTRICTED, {}, injected) == []
