"""Pod Security, checked by the lab's kube-apiserver (its PodSecurity admission, on by default): every pod each stack
runs (tests/stack_pods.py: the pod templates of its render, the registry charts' pods as Helm renders them from
charts.lock with the program's values, the benchmark Job, GKE's Cloud Storage FUSE sidecar where a pod asks for
it) is created with `dryRun=All` in a namespace labelled as the stack labels its own (enforce level and version),
and must be admitted; a copy broken on purpose must be refused, and each namespace's pods must not all pass the
next stricter level (else the stack should enforce it). Nothing is persisted but the namespaces and the service
accounts the pods name (the ServiceAccount admission plugin, which runs before PodSecurity, refuses a pod whose
account does not exist: kubernetes v1.36.5 plugin/pkg/admission/serviceaccount/admission.go), deleted again.

PodSecurity enforces on Pods alone (it only warns of a Deployment's or a Job's template), so each template is
sent as a Pod: the check the API server runs on the pod a controller creates from it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from tests.itest.lab import REPO_ROOT, ControlPlane
from tools.stack_file import stack_names

STACKS = stack_names(REPO_ROOT)
LABEL = "pod-security.kubernetes.io/"
STRICTER = {"baseline": "restricted", "privileged": "baseline"}
# tests/stack_pods.py renders the registry charts with Helm's SDK, which the project's venv has (make itest builds
# it for `make render`) and the lab's does not.
PROJECT_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Pod:
    stack: str
    owner: str
    namespace: str  # the stack's namespace it runs in
    metadata: dict[str, Any]
    spec: dict[str, Any]


@pytest.fixture(scope="module")
def stacks() -> dict[str, Any]:
    if not PROJECT_PYTHON.exists():
        pytest.fail(f"{PROJECT_PYTHON.relative_to(REPO_ROOT)} is missing: make itest builds it (make render)")
    done = subprocess.run(
        [str(PROJECT_PYTHON), "-m", "tests.stack_pods", *STACKS],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        pytest.fail(f"python -m tests.stack_pods failed:\n{done.stderr[-4000:]}")
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def pods_of(stacks: dict[str, Any], key: str = "pods") -> list[Pod]:
    return [
        Pod(stack, pod["owner"], pod["namespace"], pod["metadata"], pod["spec"])
        for stack, view in stacks.items()
        for pod in view[key]
    ]


def test_the_stacks_hold_pods_in_namespaces_of_every_level(stacks: dict[str, Any]):
    """What the tests below run over: a pass over nothing would prove nothing."""
    levels = {labels[f"{LABEL}enforce"] for view in stacks.values() for labels in view["namespaces"].values()}
    assert levels == {"restricted", "baseline", "privileged"}
    assert any(p.owner.startswith("Helm release lws (lws): Deployment") for p in pods_of(stacks))


@dataclass(frozen=True)
class Cluster:
    core: k8s.CoreV1Api  # namespaces and service accounts
    pods: Any  # the dynamic client's Pod resource: sends a pod as written (the typed one re-validates it, and
    # takes no integer quantity such as `cpu: 2`)


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Cluster:
    api = k8s_config.new_client_from_config(config_file=str(control_plane.kubeconfig), persist_config=False)
    dynamic = DynamicClient(api, cache_file=str(control_plane.run_dir / "discovery-cache.json"))
    return Cluster(k8s.CoreV1Api(api), dynamic.resources.get(api_version="v1", kind="Pod"))


def lab_namespace(stack: str, namespace: str, level: str | None = None) -> str:
    return f"psa-{stack}-{namespace}" + (f"-{level}" if level else "")


def create_namespace(core: k8s.CoreV1Api, name: str, labels: dict[str, str], accounts: set[str]) -> None:
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    for account in sorted(accounts | {"default"}):  # "default" too: the controller manager may not have made it yet
        try:
            core.create_namespaced_service_account(name, {"metadata": {"name": account}})
        except ApiException as error:
            if error.status != 409:
                raise


@pytest.fixture(scope="module")
def namespaces(stacks: dict[str, Any], cluster: Cluster) -> Iterator[dict[tuple[str, str, str | None], str]]:
    """(stack, namespace, None) -> a namespace labelled as the stack labels that one; (stack, namespace, level) ->
    one labelled the next stricter level, for the namespaces that enforce baseline or privileged."""
    core = cluster.core
    made: dict[tuple[str, str, str | None], str] = {}
    pods = pods_of(stacks) + pods_of(stacks, "chart_defaults")
    try:
        for stack, view in stacks.items():
            for namespace, labels in view["namespaces"].items():
                accounts = {
                    p.spec.get("serviceAccountName") or "default"
                    for p in pods
                    if p.stack == stack and p.namespace == namespace
                }
                made[(stack, namespace, None)] = lab_namespace(stack, namespace)
                create_namespace(core, made[(stack, namespace, None)], labels, accounts)
                stricter = STRICTER.get(labels[f"{LABEL}enforce"])
                if stricter:
                    made[(stack, namespace, stricter)] = lab_namespace(stack, namespace, stricter)
                    relabelled = {**labels, f"{LABEL}enforce": stricter}
                    create_namespace(core, made[(stack, namespace, stricter)], relabelled, accounts)
        yield made
    finally:
        for name in made.values():
            try:
                core.delete_namespace(name)
            except ApiException as error:
                if error.status != 404:
                    raise
        deadline = time.monotonic() + 120
        left = list(made.values())
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = [n for n in left if _exists(core, n)]
        assert not left, f"namespaces of the Pod Security check still exist after 120 s: {left}"


def _exists(core: k8s.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def refusal(cluster: Cluster, namespace: str, pod: Pod, index: int) -> str | None:
    """Why the API server refuses the pod in ``namespace`` (a server-side dry run: nothing is created), or None."""
    metadata = {k: v for k, v in pod.metadata.items() if k in ("labels", "annotations")}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {**metadata, "name": f"pod-{index}"}, "spec": pod.spec}
    try:
        cluster.pods.create(body=body, namespace=namespace, dry_run="All")
    except ApiException as error:
        if error.status != 403:
            raise AssertionError(f"{pod.owner}: HTTP {error.status} {error.body}") from None
        return str(json.loads(error.body).get("message") or error.body)
    return None


def test_every_pod_of_every_stack_is_admitted_at_its_namespaces_level(
    stacks: dict[str, Any], namespaces: dict[tuple[str, str, str | None], str], cluster: Cluster
):
    pods = pods_of(stacks)
    refused = []
    for index, pod in enumerate(pods):
        why = refusal(cluster, namespaces[(pod.stack, pod.namespace, None)], pod, index)
        if why:
            refused.append(f"{pod.stack}: {pod.owner}: {why}")
    assert not refused, f"the API server refuses {len(refused)} of {len(pods)} pods:\n" + "\n".join(refused)


def _privileged(spec: dict[str, Any]) -> None:
    context = spec["containers"][0].setdefault("securityContext", {})
    context["privileged"] = True
    context.pop("allowPrivilegeEscalation", None)  # false with privileged is invalid, refused before PodSecurity


def _root(spec: dict[str, Any]) -> None:
    spec.setdefault("securityContext", {})["runAsUser"] = 0


# (what is broken, the levels that refuse it, the change, a word of the refusal)
BROKEN = [
    ("a privileged container", ("baseline", "restricted"), _privileged, "securityContext.privileged=true"),
    ("the pod run as root", ("restricted",), _root, "runAsUser=0"),
]


@pytest.mark.parametrize("what, levels, change, said", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_copy_of_each_pod_broken_on_purpose_is_refused(
    stacks: dict[str, Any],
    namespaces: dict[tuple[str, str, str | None], str],
    cluster: Cluster,
    what: str,
    levels: tuple[str, ...],
    change: Any,
    said: str,
):
    checked, admitted = 0, []
    for index, pod in enumerate(pods_of(stacks)):
        if stacks[pod.stack]["namespaces"][pod.namespace][f"{LABEL}enforce"] not in levels:
            continue
        broken = copy.deepcopy(pod.spec)
        change(broken)
        why = refusal(
            cluster, namespaces[(pod.stack, pod.namespace, None)], Pod(**{**pod.__dict__, "spec": broken}), index
        )
        checked += 1
        if not (why and "violates PodSecurity" in why and said in why):
            admitted.append(f"{pod.stack}: {pod.owner}: {why or 'admitted'}")
    assert checked, f"no pod runs where {what} is refused"
    assert not admitted, f"{what}, not refused as such:\n" + "\n".join(admitted)


def test_each_namespace_enforces_the_strictest_level_its_pods_meet(
    stacks: dict[str, Any], namespaces: dict[tuple[str, str, str | None], str], cluster: Cluster
):
    """restricted wherever every pod meets it: a baseline namespace holds a pod restricted refuses, and a privileged
    one a pod baseline refuses (and nothing but the node audit logging's DaemonSet)."""
    pods = pods_of(stacks)
    loose = []
    for (stack, namespace, level), name in namespaces.items():
        if level is None:
            continue
        here = [p for p in pods if p.stack == stack and p.namespace == namespace]
        if not any(refusal(cluster, name, pod, index) for index, pod in enumerate(here)):
            loose.append(f"{stack}: every pod of {namespace} meets {level}: enforce it ({[p.owner for p in here]})")
        if level == "baseline":  # the namespace enforces privileged
            assert {p.owner.split(" spec")[0] for p in here} == {f"DaemonSet {namespace}/node-audit-logging"}, here
    assert not loose, "\n".join(loose)


def test_the_program_s_values_are_what_the_leaderworkerset_chart_needs_to_be_admitted(
    stacks: dict[str, Any], namespaces: dict[tuple[str, str, str | None], str], cluster: Cluster
):
    """The LWS chart's own values leave its manager's pod without a seccomp profile, which restricted refuses; the
    program's values add it (the test above admits that pod)."""
    own = [p for p in pods_of(stacks, "chart_defaults") if p.owner.startswith("Helm release lws (lws): Deployment")]
    assert own
    for index, pod in enumerate(own):
        why = refusal(cluster, namespaces[(pod.stack, pod.namespace, None)], pod, index)
        assert why and "violates PodSecurity" in why and "seccompProfile" in why, (pod.owner, why)
