"""Pod Security (CIS GKE Benchmark v1.9.0 4.2.1), the half the API server cannot check: every namespace a stack makes
enforces a level pinned to the cluster's minor (and warns and audits at restricted), every pod runs in a namespace
the stack labels, every registry chart's pod is at hand (rendered by Helm from charts.lock, or written by hand at
the version the stack installs), and GKE's sidecar joins only the pods that ask for it.

Whether each pod meets its namespace's level, and whether that level is the strictest its pods meet, is asked of
a real API server: the lab's kube-apiserver admits each pod of tests/stack_pods.py with a server-side dry run
(tests/itest/test_lab_pod_security.py, `make itest`).
"""

from __future__ import annotations

from typing import Any

import pytest

from components.operations.config import NODE_AUDIT_NAMESPACE
from tests.conftest import FIXTURE_STACK_NAMES, stack_values
from tests.stack_pods import GCSFUSE_ANNOTATION, HAND_WRITTEN, LABEL, stack_pods, with_gke_sidecars

# Every stack's pods include the registry charts' as Helm renders them from charts.lock: make check-tools
pytestmark = pytest.mark.external

STACKS = FIXTURE_STACK_NAMES
LEVELS = ("privileged", "baseline", "restricted")  # the Pod Security Standards' levels


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_the_stack_makes_enforces_a_level_pinned_to_the_clusters_minor(stack: str) -> None:
    view = stack_pods(stack)
    assert view.namespaces, f"{stack} makes no namespace"
    major, minor = stack_values(stack)["cluster"]["version"].split(".")[:2]
    for name, labels in view.namespaces.items():
        assert labels == {
            f"{LABEL}enforce": labels.get(f"{LABEL}enforce"),
            f"{LABEL}enforce-version": f"v{major}.{minor}",
            f"{LABEL}warn": "restricted",
            f"{LABEL}warn-version": "latest",
            f"{LABEL}audit": "restricted",
            f"{LABEL}audit-version": "latest",
        }, name
        # Privileged only where the node audit logging's DaemonSet runs, and there it must be.
        level = labels[f"{LABEL}enforce"]
        assert level == "privileged" if name == NODE_AUDIT_NAMESPACE else level in LEVELS[1:], (name, level)


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_runs_in_a_namespace_the_stack_labels(stack: str) -> None:
    view = stack_pods(stack)
    assert view.pods
    outside = sorted(f"{p.owner} in {p.namespace}" for p in view.pods if p.namespace not in view.namespaces)
    assert not outside, outside


@pytest.mark.parametrize("stack", STACKS)
def test_every_registry_chart_s_pod_is_rendered_by_helm_or_written_at_the_version_installed(stack: str) -> None:
    """A chart neither charts.lock renders nor tests/stack_pods.py writes fails the render of the pods."""
    view = stack_pods(stack)
    for chart, (version, namespace) in view.releases.items():
        pods = [p for p in view.pods if p.owner.startswith("Helm release ") and f"({chart}): " in p.owner]
        assert pods and {p.namespace for p in pods} == {namespace}, (chart, pods)
        if chart in HAND_WRITTEN:
            assert HAND_WRITTEN[chart].version == version, (
                f"{chart} {version}: read its pod's template and values at that tag into tests/stack_pods.py"
            )
        else:
            assert all(p.owner.endswith(" spec.template") for p in pods), f"{chart}: not rendered by Helm"


def test_the_stacks_hold_every_level_and_each_kind_of_pod() -> None:
    """What the lab's Pod Security check runs over: a pass over nothing would prove nothing."""
    views = [stack_pods(stack) for stack in STACKS]
    levels = {labels[f"{LABEL}enforce"] for view in views for labels in view.namespaces.values()}
    assert levels == set(LEVELS)
    owners = " ".join(p.owner for view in views for p in view.pods)
    for expected in ("LeaderWorkerSet", "JobSet", "Job ", "DaemonSet", "Deployment slice-controller-system/"):
        assert expected in owners, expected
    assert {"Helm release jobset", "Helm release kueue", "Helm release lws"} <= {
        p.owner.split(" (")[0] for view in views for p in view.pods
    }
    assert any(
        c["name"] == "gke-gcsfuse-sidecar" for v in views for p in v.pods for c in p.spec.get("initContainers") or []
    )


def test_the_gcsfuse_sidecar_joins_only_the_pods_that_ask_for_it() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}], "volumes": [{"name": "v", "emptyDir": {}}]}
    assert with_gke_sidecars({"annotations": {}}, spec) == spec
    injected = with_gke_sidecars({"annotations": {GCSFUSE_ANNOTATION: "true"}}, spec)
    assert [c["name"] for c in injected["initContainers"]] == ["gke-gcsfuse-sidecar"]
    assert injected["initContainers"][0]["restartPolicy"] == "Always"  # a native sidecar: it runs beside the pod
    assert len(injected["volumes"]) == 4 and spec["volumes"] == [{"name": "v", "emptyDir": {}}]
