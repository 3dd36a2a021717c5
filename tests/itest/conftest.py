"""Session fixtures of the integration lab (make itest): the built tools, a control plane that always
stops, the pinned CRDs installed from the files of schemas.lock, and build/itest/report.json.
"""

from __future__ import annotations

import atexit
import datetime
import importlib.metadata
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.schemas import load_lock
from tests.crd_schemas import find_locked, schema_dirs
from tests.itest.lab import (
    REPORT_DIR,
    ControlPlane,
    KubeApi,
    PulumiHome,
    Tools,
    cache_dir,
    cold_build_seconds,
    read_lock,
)


class Report:
    """What build/itest/report.json says: versions, each test's and operation's result and duration,
    the objects created and deleted, the cold build time and this warm run's time."""

    def __init__(self, tools: Tools):
        self.began = time.monotonic()
        self.tools = tools
        self.data: dict[str, Any] = {
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": {},
            "tests": [],
            "operations": [],
            "objects": {"created": [], "deleted": []},
            "faults": [],
            "not_runnable": [],
        }

    def operation(self, name: str, seconds: float, result: str, **details: Any) -> None:
        self.data["operations"].append({"name": name, "result": result, "seconds": round(seconds, 2), **details})

    def write(self) -> Path:
        info = self.tools.build_info()
        cold = cold_build_seconds(info)
        self.data["build"] = {
            "cache": str(self.tools.cache),
            "lock": {k: v for k, v in self.tools.lock.items() if k.endswith(("VERSION", "PIN", "WANTED", "PSEUDO"))},
            "cold_build_seconds": {**cold, "total": round(sum(cold.values()), 1)},
            "cold_build_note": "compile time from each tool's BUILDINFO (go build and go generate wall "
            "times on this machine); a fresh machine adds about 2 minutes of module downloads",
            "buildinfo": info,
        }
        run = {"pytest_seconds": round(time.monotonic() - self.began, 1)}
        if os.environ.get("LAB_BUILD_SECONDS"):
            run["build_sh_seconds"] = float(os.environ["LAB_BUILD_SECONDS"])
        self.data["warm_run"] = run
        self.data["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        REPORT_DIR.mkdir(parents=True, exist_ok=True)
        path = REPORT_DIR / "report.json"
        path.write_text(json.dumps(self.data, indent=2, sort_keys=False) + "\n")
        return path


_REPORT: Report | None = None


@pytest.fixture(scope="session")
def tools() -> Tools:
    found = Tools(read_lock(), cache_dir())
    if missing := found.missing():
        pytest.exit(
            "the lab's tools are not built: " + ", ".join(missing) + ". Run lab/build.sh (make itest runs it; "
            "cold it takes about 35 minutes on 2 cores).",
            returncode=2,
        )
    return found


@pytest.fixture(scope="session")
def report(tools: Tools) -> Iterator[Report]:
    global _REPORT
    _REPORT = Report(tools)
    yield _REPORT
    path = _REPORT.write()
    print(f"\nintegration lab report: {path}")


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    if _REPORT is None or call.when not in ("setup", "call"):
        return
    if call.when == "setup" and call.excinfo is None:
        return  # a passing setup is part of the test's entry below
    outcome = "passed"
    message = ""
    if call.excinfo is not None:
        outcome = "skipped" if call.excinfo.errisinstance(pytest.skip.Exception) else "failed"
        message = str(call.excinfo.value).strip()[:2000]
        if call.when == "setup" and outcome == "failed":
            outcome = "error"
    _REPORT.data["tests"].append(
        {"test": item.nodeid, "outcome": outcome, "seconds": round(call.duration, 2), "message": message}
    )


def _versions(tools: Tools, api: KubeApi) -> dict[str, Any]:
    def run(*command: str) -> str:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
        )
        return (done.stdout or done.stderr).strip()

    server = api.get("/version") or {}
    return {
        "pulumi version": run(str(tools.pulumi), "version"),
        "kube-apiserver /version": {
            k: server.get(k) for k in ("major", "minor", "gitVersion", "goVersion", "platform")
        },
        "etcd --version": run(str(tools.etcd_dir / "etcd"), "--version").splitlines()[0],
        "kube-controller-manager --version": run(str(tools.kubernetes_dir / "kube-controller-manager"), "--version"),
        "kubectl version --client": run(str(tools.kubectl), "version", "--client", "-o", "json"),
        "python packages": {p: importlib.metadata.version(p) for p in ("pulumi", "pulumi_kubernetes", "pulumi_gcp")},
        "language host": "built" if tools.language_host.exists() else "not built (the proxy refuses the module)",
    }


@pytest.fixture(scope="session")
def control_plane(tools: Tools, report: Report) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-controller-manager in a temporary directory; stopped at the end of the
    session whatever happens (and at interpreter exit, should the session be cut short)."""
    run_dir = Path(tempfile.mkdtemp(prefix="tpu-gke-itest-"))
    plane = ControlPlane(run_dir / "controlplane", tools)

    def stop() -> None:
        plane.stop()
        logs = plane.run_dir / "logs"
        if logs.is_dir():
            target = REPORT_DIR / "logs"
            target.mkdir(parents=True, exist_ok=True)
            for log in logs.iterdir():
                shutil.copy(log, target / log.name)
        shutil.rmtree(run_dir, ignore_errors=True)

    atexit.register(stop)
    try:
        seconds = plane.start()
        report.operation("control plane start", seconds, "ok", ports=plane.ports)
        report.data["versions"] = _versions(tools, plane.api())
        began = time.monotonic()
        installed = install_pinned_crds(plane)
        report.operation("install pinned CRDs", time.monotonic() - began, "ok", crds=installed)
        yield plane
    finally:
        stop()
        atexit.unregister(stop)


def install_pinned_crds(plane: ControlPlane) -> list[str]:
    """Every CRD file of schemas.lock (the files the schema tests validate against), applied and Established."""
    paths = []
    for locked in load_lock():
        path, reason = find_locked(locked, schema_dirs())
        if path is None:
            pytest.fail(f"cannot install the pinned CRDs: {reason}")
        paths.append(path)
    for path in paths:
        plane.kubectl("apply", "--server-side", "-f", str(path))
    names = sorted(
        plane.kubectl("get", "crd", "-o", "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}").stdout.split()
    )
    plane.kubectl("wait", "--for=condition=Established", "--timeout=120s", *[f"crd/{n}" for n in names])
    return names


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> KubeApi:
    return control_plane.api()


@pytest.fixture(scope="session")
def pulumi_home(tools: Tools, control_plane: ControlPlane, report: Report) -> Iterator[PulumiHome]:
    """PULUMI_HOME, a file:// backend and the project's work directory, under the control plane's temporary
    directory; the provider plugin installed from the lab's build as the version it is."""
    home = PulumiHome(control_plane.run_dir.parent / "pulumi", tools)
    began = time.monotonic()
    home.install_provider()
    report.operation("pulumi plugin install resource kubernetes", time.monotonic() - began, "ok")
    listed = json.loads(home.cli("plugin", "ls", "--json").stdout)
    report.data["versions"]["pulumi plugin ls"] = [
        {k: p.get(k) for k in ("name", "kind", "version", "size")} for p in listed
    ]
    yield home
    home.remove()
