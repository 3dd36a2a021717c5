"""The API server accepts every object the dev stack renders: `kubectl apply --server-side --dry-run=server`
of each object of build/render/dev/kubernetes.yaml (make render STACK=dev), the slice controller's chart
objects included, against the pinned CRDs. This is where CEL rules, defaulting and schema pruning of
the real API server first meet the manifests; nothing is persisted but the namespaces the objects need.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.itest.lab import REPO_ROOT, ControlPlane, KubeApi, object_key

RENDER = REPO_ROOT / "build" / "render" / "dev" / "kubernetes.yaml"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    if not RENDER.is_file():
        pytest.fail(f"{RENDER.relative_to(REPO_ROOT)} is missing: run make render STACK=dev (make itest does)")
    return [doc for doc in yaml.safe_load_all(RENDER.read_text()) if doc]


@pytest.fixture(scope="module")
def namespaces(rendered: list[dict[str, Any]], control_plane: ControlPlane, api: KubeApi) -> Iterator[list[str]]:
    """The namespaces the objects live in, created for real: a dry-run creates nothing, so a Namespace of the
    render (the workload namespace, and the controllers', which the program applies as patches) does not exist yet
    for the objects in it. Deleted again (and waited for) before the lifecycle."""
    wanted = sorted({o["metadata"]["namespace"] for o in rendered if o["metadata"].get("namespace")})
    for name in wanted:
        control_plane.kubectl("create", "namespace", name)
    yield wanted
    for name in wanted:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(api.get(f"/api/v1/namespaces/{n}") for n in wanted):
        time.sleep(1)
    left = [n for n in wanted if api.get(f"/api/v1/namespaces/{n}")]
    assert not left, f"namespaces of the dry run still exist after 120 s: {left}"


def test_the_pinned_crds_are_established(control_plane: ControlPlane):
    crds = control_plane.kubectl(
        "get",
        "crd",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=='Established')].status}{'\\n'}{end}",
    ).stdout.split()
    assert crds, "no CRD is installed"
    not_established = [c for c in crds if not c.endswith("=True")]
    assert not not_established, f"CRDs not Established: {not_established}"


def test_every_object_of_the_dev_render_passes_a_server_side_dry_run(
    rendered: list[dict[str, Any]], namespaces: list[str], control_plane: ControlPlane
):
    refused = []
    for obj in rendered:
        done = control_plane.kubectl(
            "apply", "--server-side", "--dry-run=server", "--field-manager=tpu-gke-itest", "-f", "-",
            stdin=yaml.safe_dump(obj), check=False,
        )  # fmt: skip
        if done.returncode != 0:
            refused.append(f"{object_key(obj)}: {done.stderr.strip()}")
    assert not refused, f"the API server refuses {len(refused)} of {len(rendered)} objects:\n" + "\n".join(refused)
