"""The integration lab's machinery for tests/itest: built tools, control plane, API reads, Pulumi workspace.

Nothing here stands in for the engine: the Pulumi CLI, the Kubernetes provider plugin, etcd,
kube-apiserver and kube-controller-manager are the binaries lab/build.sh builds from their Go
modules (lab/versions.lock), and the program is the project's own __main__.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LAB_DIR = REPO_ROOT / "lab"
REPORT_DIR = REPO_ROOT / "build" / "itest"
PROJECT_NAME = "tpu-dynamic-slicing"
STACK_NAME = "lab"
SECRET_MARKER = "4dabf18193072939515e22adb298388d"  # the engine's signature key of a secret value in state


def read_lock(path: Path = LAB_DIR / "versions.lock") -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if match := re.fullmatch(r"([A-Z][A-Z0-9_]*)=(.*)", line):
            values[match[1]] = match[2]
    return values


def cache_dir() -> Path:
    if os.environ.get("LAB_CACHE"):
        return Path(os.environ["LAB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tpu-gke-lab"


@dataclass(frozen=True)
class Tools:
    """Where lab/build.sh put each tool of versions.lock."""

    lock: dict[str, str]
    cache: Path

    @property
    def etcd_dir(self) -> Path:
        return self.cache / f"etcd-{self.lock['ETCD_VERSION']}"

    @property
    def kubernetes_dir(self) -> Path:
        return self.cache / f"kubernetes-{self.lock['K8S_VERSION']}"

    @property
    def pulumi_dir(self) -> Path:
        return self.cache / f"pulumi-{self.lock['PULUMI_VERSION']}"

    @property
    def provider_dir(self) -> Path:
        return self.cache / f"pulumi-kubernetes-{self.lock['K8S_PROVIDER_VERSION']}"

    @property
    def kubectl(self) -> Path:
        return self.kubernetes_dir / "kubectl"

    @property
    def pulumi(self) -> Path:
        return self.pulumi_dir / "pulumi"

    @property
    def provider(self) -> Path:
        return self.provider_dir / "pulumi-resource-kubernetes"

    @property
    def language_host(self) -> Path:
        return self.pulumi_dir / "pulumi-language-python"

    def missing(self) -> list[str]:
        needed = [
            self.etcd_dir / "etcd",
            self.kubernetes_dir / "kube-apiserver",
            self.kubernetes_dir / "kube-controller-manager",
            self.kubectl,
            self.pulumi,
            self.pulumi_dir / "pulumi-resource-pulumi-python",
            self.provider,
        ]
        return [str(p) for p in needed if not os.access(p, os.X_OK)]

    def build_info(self) -> dict[str, dict[str, str]]:
        """Each tool's BUILDINFO (key=value lines; build.<bin> lines hold wall time and max RSS)."""
        info = {}
        for tool, directory in (
            ("etcd", self.etcd_dir),
            ("kubernetes", self.kubernetes_dir),
            ("pulumi", self.pulumi_dir),
            ("pulumi-kubernetes", self.provider_dir),
        ):
            path = directory / "BUILDINFO"
            if path.is_file():
                info[tool] = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        return info


def wall_seconds(text: str) -> float:
    """Seconds of a /usr/bin/time wall clock: ``m:ss.ss`` or ``h:mm:ss``."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def cold_build_seconds(info: dict[str, dict[str, str]]) -> dict[str, float]:
    """Compile time of each tool from its BUILDINFO: every ``build.*`` and ``generate`` wall time."""
    result = {}
    for tool, fields in info.items():
        total = 0.0
        for key, value in fields.items():
            if key.startswith("build.") or key == "generate wall":
                match = re.search(r"wall=(\S+)", f"{key}={value}")
                if match:
                    total += wall_seconds(match[1])
        result[tool] = round(total, 1)
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- The control plane ---------------------------------------------------------------------


@dataclass
class ControlPlane:
    """lab/controlplane.sh in a run directory of its own, on free loopback ports."""

    run_dir: Path
    tools: Tools
    ports: dict[str, int] = field(default_factory=dict)
    started: bool = False

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "LAB_RUN": str(self.run_dir),
            "LAB_CACHE": str(self.tools.cache),
            **{name: str(port) for name, port in self.ports.items()},
        }

    def start(self) -> float:
        if not self.ports:
            self.ports = {n: free_port() for n in ("ETCD_PORT", "ETCD_PEER_PORT", "APISERVER_PORT", "KCM_PORT")}
        began = time.monotonic()
        self.started = True  # even a failed start may leave processes for stop()
        done = subprocess.run(
            [str(LAB_DIR / "controlplane.sh"), "start"], env=self.env(), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"lab/controlplane.sh start failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return time.monotonic() - began

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        subprocess.run([str(LAB_DIR / "controlplane.sh"), "stop"], env=self.env(), capture_output=True, check=False)

    def stop_component(self, name: str) -> None:
        """Stop one of the three processes (a fault to inject); ``start()`` brings it back."""
        done = subprocess.run(
            [str(LAB_DIR / "controlplane.sh"), "stop", name],
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"lab/controlplane.sh stop {name} failed ({done.returncode}):\n{done.stderr[-2000:]}")

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['APISERVER_PORT']}"

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kubeconfig"

    @property
    def inline_kubeconfig(self) -> str:
        return (self.run_dir / "kubeconfig.inline").read_text()

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.tools.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
        return done

    def api(self) -> KubeApi:
        pki = self.run_dir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return KubeApi(self.server, context)


class KubeApi:
    """Reads of the API server with the lab's admin certificate (writes go through kubectl)."""

    def __init__(self, server: str, context: ssl.SSLContext):
        self.server = server
        self.context = context
        self._resources: dict[str, list[dict[str, Any]]] = {}

    def get(self, path: str) -> dict[str, Any] | None:
        request = urllib.request.Request(self.server + path, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:
                body: dict[str, Any] = json.loads(response.read())
                return body
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def path_of(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
        """The REST path of one object, from the server's discovery of its group version."""
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if api_version not in self._resources:
            listing = self.get(base)
            if listing is None:
                raise AssertionError(f"the API server does not serve {api_version}")
            self._resources[api_version] = listing["resources"]
        matches = [r for r in self._resources[api_version] if r["kind"] == kind and "/" not in r["name"]]
        if not matches:
            raise AssertionError(f"the API server serves no {kind} in {api_version}")
        resource = matches[0]
        scope = f"/namespaces/{namespace}" if resource["namespaced"] else ""
        return f"{base}{scope}/{resource['name']}/{name}"

    def object(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The server's copy of a rendered object, or None."""
        metadata = obj["metadata"]
        return self.get(self.path_of(obj["apiVersion"], obj["kind"], metadata["name"], metadata.get("namespace")))


def object_key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{metadata.get('name')}"


MASKED = ("[secret]", "[unknown]")  # what a render shows instead of a value only the engine knows


def differences(rendered: Any, served: Any, path: str = "", other: str = "the server") -> list[str]:
    """Where ``served`` (the server's object, or the engine's plan) does not hold what the render shows;
    it may hold more (defaults, the provider's annotations)."""
    if isinstance(rendered, str) and rendered in MASKED:
        return []
    if isinstance(rendered, dict):
        if not isinstance(served, dict):
            return [f"{path or '<root>'}: rendered a map, {other} has {served!r}"[:300]]
        found = []
        for key, value in rendered.items():
            where = f"{path}.{key}" if path else key
            if key not in served:
                found.append(f"{where}: rendered {value!r}, absent from {other}"[:300])
            else:
                found += differences(value, served[key], where, other)
        return found
    if isinstance(rendered, list):
        if not isinstance(served, list) or len(served) != len(rendered):
            return [f"{path}: rendered {len(rendered)} items, the server has {served!r}"[:300]]
        return [
            d for i, (a, b) in enumerate(zip(rendered, served, strict=True)) for d in differences(a, b, f"{path}[{i}]")
        ]
    if rendered != served:
        return [f"{path}: rendered {rendered!r}, the server has {served!r}"]
    return []


# --- The Pulumi side ---------------------------------------------------------------------


def flatten_config(value: Any, prefix: str = "") -> dict[str, Any]:
    """A config value as `pulumi config set --path` keys (``tpu.pools[0].name``) and leaf values."""
    if isinstance(value, dict):
        if not value and prefix:
            raise ValueError(f"{prefix}: an empty map cannot be set with --path")
        return {
            k: v
            for key, item in value.items()
            for k, v in flatten_config(item, f"{prefix}.{key}" if prefix else key).items()
        }
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{prefix}: an empty list cannot be set with --path")
        return {k: v for i, item in enumerate(value) for k, v in flatten_config(item, f"{prefix}[{i}]").items()}
    if isinstance(value, str) and re.fullmatch(r"-?\d+|true|false", value):
        raise ValueError(f"{prefix}: the string {value!r} would be set as a number or boolean with --path")
    return {prefix: value}


def config_text(value: Any) -> str:
    """How `pulumi config set --path` takes a leaf: booleans as true/false, numbers as digits."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


MOCK_RENDER = textwrap.dedent(
    """
    import json, sys
    from tests.conftest import run_stack
    from tools.render import kubernetes_objects
    args = json.load(sys.stdin)
    run = run_stack(args["overrides"], secrets=tuple(args["secrets"]))
    json.dump({
        "objects": kubernetes_objects(run.registrations),
        "registrations": [[r.type, r.name] for r in run.registrations],
    }, sys.stdout)
    """
)


def mock_render(overrides: dict[str, Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    """The offline render (tests/conftest.run_stack under the SDK's mocks) of the same config, in a fresh
    interpreter: the mocks and the Automation API both set the SDK's process-wide settings."""
    done = subprocess.run(
        [sys.executable, "-c", MOCK_RENDER],
        input=json.dumps({"overrides": overrides, "secrets": list(secrets)}),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the mock render of the lab stack failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@dataclass
class PulumiHome:
    """A local file backend, a passphrase secrets provider and plugins in one temporary directory."""

    root: Path
    tools: Tools
    passphrase: str = "tpu-gke-lab-passphrase"

    def __post_init__(self) -> None:
        for sub in ("home", "state", "project", "cli/bin"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # auto.PulumiCommand(root=...) runs <root>/bin/pulumi; the symlink resolves to the cache, where the
        # engine also finds pulumi-resource-pulumi-python (dynamic providers) next to the binary.
        link = self.root / "cli/bin/pulumi"
        if not link.exists():
            link.symlink_to(self.tools.pulumi)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def project_dir(self) -> Path:
        return self.root / "project"

    @property
    def cli_root(self) -> Path:
        return self.root / "cli"

    def env(self) -> dict[str, str]:
        venv = Path(sys.prefix)
        return {
            "PULUMI_HOME": str(self.root / "home"),
            # metadata=skip: the file backend otherwise rewrites a sidecar <file>.attrs in place (truncate,
            # then write) with each checkpoint, and the program's StackReference to its own stack, read
            # meanwhile, fails with "failed to load checkpoint: EOF" (docs/deploying.md, "Deploying for real")
            "PULUMI_BACKEND_URL": f"file://{self.state_dir}?metadata=skip",
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            # the dynamic providers (the drain gates) run `python -m pulumi.dynamic` from this venv, and
            # unpickle components.platform.gates from the repository
            "PULUMI_RUNTIME_VIRTUALENV": str(venv),
            "PYTHONPATH": str(REPO_ROOT),
            "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        }

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.tools.pulumi), *args, "--non-interactive"],
            env={**os.environ, **self.env()},
            cwd=self.project_dir,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def install_provider(self) -> None:
        self.cli(
            "plugin", "install", "resource", "kubernetes", self.tools.lock["K8S_PROVIDER_VERSION"],
            "--file", str(self.tools.provider),
        )  # fmt: skip

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
