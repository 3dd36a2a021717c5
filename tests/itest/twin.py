"""The TPU7x twin's processes on a lab control plane (issue 34): Kueue's, JobSet's and LeaderWorkerSet's managers
with their webhooks served on 127.0.0.1 under a certificate of the lab's PKI, and kwok keeping the nodes of
harness/twin_nodes.py Ready.

What each piece takes from upstream, read at the versions of lab/versions.lock from the module the lab built
(the Go module cache, never copied into the project):
- Kueue's webhook configurations: sigs.k8s.io/kueue@v<KUEUE_VERSION> config/components/webhook/manifests.yaml,
  each webhook's path and rules as Kueue registers them; the twin points each at
  https://127.0.0.1:<port><path> (clientConfig.url) with the lab CA as caBundle, in place of the chart's Service.
  Only the webhooks of Kueue's own API and of the frameworks the program enables and the lab has CRDs for (batch
  Jobs, JobSets, LeaderWorkerSets, and pods: a LeaderWorkerSet's groups are admitted through the pod integration) are
  registered.
- Kueue's CRDs beyond the ones schemas.lock pins (Workload, Cohort, ...): config/components/crd/bases of the same
  module; Kueue does not start without them (its Workload index).
- Kueue's Configuration: the one the program gives the dev stack's Kueue chart (components.platform.releases.
  kueue_values: manifests/kueue/controller-config.yaml and the workload namespaces Kueue manages) with
  what a process on this host needs instead of a pod: namespace, the webhook server's host, port and certDir
  (Configuration.webhook.{host,port,certDir}, apis/config/v1beta2/configuration_types.go), leader election off,
  internalCertManagement off, probes and metrics on free loopback ports. The visibility server is off
  (--feature-gates=VisibilityOnDemand=false: with internal certificates off it wants a certificate in /visibility,
  pkg/visibility/server.go). Kueue reads its metrics certificate at the fixed path /etc/kueue/metrics/certs when
  internalCertManagement is off (cmd/kueue/main.go): the process runs in a private mount namespace
  (``unshare -m``) where that path holds the lab's certificate, and the host's /etc is left alone.
- kwok's stages: kustomize/stage/node/fast/node-initialize.yaml, node/heartbeat-with-lease, pod/fast of
  sigs.k8s.io/kwok@v<KWOK_VERSION>; kwok manages only the nodes annotated ``kwok.x-k8s.io/node: fake``
  (--manage-nodes-with-annotation-selector).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.platform.releases import kueue_values
from components.stack import StackConfig
from tests.itest.lab import ControlPlane, Tools, free_port

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
KUEUE_NAMESPACE = "kueue-system"
# The API groups whose Kueue webhooks the twin registers: Kueue's own and the enabled frameworks' with a CRD here, and
# the core group's pods: Kueue admits a LeaderWorkerSet's groups through its pod integration, whose webhook gates each
# pod of a group until its workload is admitted (pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go marks
# the templates suspended-by-parent for it); without it the pods would be scheduled past Kueue
KUEUE_WEBHOOK_GROUPS = frozenset({"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "leaderworkerset.x-k8s.io", ""})
# LeaderWorkerSet's own and its pod webhook: it labels each pod with its group's index and key and its worker index
# (sigs.k8s.io/lws pkg/webhooks/pod_webhook.go Default), which its controller and Kueue's group workloads read
LWS_WEBHOOK_GROUPS = frozenset({"leaderworkerset.x-k8s.io", ""})
JOBSET_WEBHOOK_GROUPS = frozenset({"jobset.x-k8s.io"})


@dataclass(frozen=True)
class TwinTools:
    """Where lab/build.sh put the twin's tools."""

    tools: Tools

    def binary(self, tool: str, version_key: str) -> Path:
        return self.tools.cache / f"{tool}-{self.tools.lock[version_key]}" / tool

    @property
    def kueue(self) -> Path:
        return self.binary("kueue", "KUEUE_VERSION")

    @property
    def kwok(self) -> Path:
        return self.binary("kwok", "KWOK_VERSION")

    def missing(self) -> list[str]:
        wanted = [self.kueue, self.kwok, self.binary("kube-scheduler", "K8S_VERSION")]
        wanted += [self.binary("jobset", "JOBSET_VERSION"), self.binary("lws", "LWS_VERSION")]
        return [str(p) for p in wanted if not os.access(p, os.X_OK)]

    def module_dir(self, module: str, version_key: str) -> Path:
        """The module the tool was built from, in the Go module cache (downloaded again if the cache lost it)."""
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@v{self.tools.lock[version_key]}"],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
            env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
        )
        return Path(json.loads(done.stdout)["Dir"])


def issue_serving_certificate(pki: Path, out: Path, common_name: str) -> None:
    """A serving certificate for 127.0.0.1 signed by the lab's CA (lab/controlplane.sh gen_pki), as tls.crt/tls.key."""
    out.mkdir(parents=True, exist_ok=True)
    ext = out / "ext.cnf"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n"
    )
    run = {"capture_output": True, "check": True}
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(out / "tls.key"),
                    "-out", str(out / "tls.csr"), "-subj", f"/CN={common_name}"], **run)  # fmt: skip
    subprocess.run(["openssl", "x509", "-req", "-in", str(out / "tls.csr"), "-CA", str(pki / "ca.crt"),
                    "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-out", str(out / "tls.crt"), "-days", "2",
                    "-sha256", "-extfile", str(ext)], **run)  # fmt: skip
    (out / "tls.csr").unlink()
    ext.unlink()


def kueue_configuration(stack: StackConfig, cert_dir: Path, ports: dict[str, int]) -> dict[str, Any]:
    """The Kueue Configuration the program gives ``stack``'s chart, with what a process on 127.0.0.1 needs in place
    of a pod's."""
    values = kueue_values(stack.platform.kueue_controller, list(stack.queues.namespaces))
    configuration: dict[str, Any] = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    configuration["namespace"] = KUEUE_NAMESPACE
    configuration["health"] = {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"}
    configuration["metrics"] = {**configuration.get("metrics", {}), "bindAddress": f"127.0.0.1:{ports['metrics']}"}
    configuration["webhook"] = {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(cert_dir)}
    configuration["leaderElection"] = {"leaderElect": False}
    configuration["internalCertManagement"] = {"enable": False}
    return configuration


def webhook_configurations(
    manifests: Path, prefix: str, port: int, ca: bytes, groups: frozenset[str]
) -> list[dict[str, Any]]:
    """A controller's webhook configurations (its module's config/.../webhook/manifests.yaml), each webhook whose API
    groups are all in ``groups`` pointed at the process on 127.0.0.1 (see the module doc), the others left out."""
    documents = [d for d in yaml.safe_load_all(manifests.read_text()) if d]
    bundle = base64.b64encode(ca).decode()
    for document in documents:
        document["metadata"]["name"] = f"{prefix}-{document['metadata']['name']}"
        kept = []
        for webhook in document["webhooks"]:
            if {g for rule in webhook["rules"] for g in rule["apiGroups"]} <= groups:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
                kept.append(webhook)
        document["webhooks"] = kept
    return documents


@dataclass
class TwinProcess:
    """A process of the twin, its log in the run directory; stop() ends it (and only it)."""

    name: str
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, command: list[str], env: dict[str, str] | None = None) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@dataclass
class Twin:
    """Kueue and kwok on the lab's control plane."""

    plane: ControlPlane
    twin_tools: TwinTools
    run_dir: Path
    stack: StackConfig  # the stack whose Kueue Configuration the twin's Kueue runs
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[TwinProcess] = field(default_factory=list)

    def start_kueue(self, timeout: float = 120) -> TwinProcess:
        self.ports = {name: free_port() for name in ("webhook", "health", "metrics")}
        module = self.twin_tools.module_dir("sigs.k8s.io/kueue", "KUEUE_VERSION")
        self.install_missing_crds(module / "config/components/crd/bases")
        self.plane.kubectl("create", "namespace", KUEUE_NAMESPACE, check=False)
        certs = self.run_dir / "kueue-certs"
        issue_serving_certificate(self.plane.run_dir / "pki", certs, "kueue-webhook")
        config = self.run_dir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(kueue_configuration(self.stack, certs, self.ports), sort_keys=False))
        # the metrics certificate's fixed path, in a mount namespace of the process's own
        wrapper = self.run_dir / "kueue-mounts.sh"
        wrapper.write_text(
            "#!/bin/sh\nset -e\nmount -t tmpfs -o mode=0755 tmpfs /etc\nmkdir -p /etc/kueue/metrics/certs\n"
            f'cp {certs}/tls.crt {certs}/tls.key /etc/kueue/metrics/certs/\nexec "$@"\n'
        )
        wrapper.chmod(0o755)
        kueue = TwinProcess("kueue", self.run_dir / "kueue.log")
        kueue.start(
            ["unshare", "-m", "--propagation", "private", str(wrapper), str(self.twin_tools.kueue),
             f"--config={config}", "--feature-gates=VisibilityOnDemand=false"],
            env={**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)},
        )  # fmt: skip
        self.processes.append(kueue)
        self.wait(kueue, f"http://127.0.0.1:{self.ports['health']}/readyz", timeout)
        ca = (self.plane.run_dir / "pki" / "ca.crt").read_bytes()
        manifests = module / "config/components/webhook/manifests.yaml"
        for document in webhook_configurations(
            manifests, "twin-kueue", self.ports["webhook"], ca, KUEUE_WEBHOOK_GROUPS
        ):
            self.plane.kubectl("apply", "-f", "-", stdin=json.dumps(document))
        return kueue

    def start_lws(self) -> TwinProcess:
        """LeaderWorkerSet's manager, its LeaderWorkerSet webhooks on 127.0.0.1. Its module's other CRD
        (DisaggregatedSet, config/crd/bases) is installed first: the manager runs a controller for it and exits two
        minutes after start when the kind is not served (controller-runtime's cache-sync timeout)."""
        return self.start_manager(
            "lws",
            "sigs.k8s.io/lws",
            "LWS_VERSION",
            "config/webhook/manifests.yaml",
            "config.lws",
            LWS_WEBHOOK_GROUPS,
            crds="config/crd/bases",
        )

    def start_jobset(self) -> TwinProcess:
        """JobSet's manager, its JobSet webhooks on 127.0.0.1."""
        return self.start_manager(
            "jobset",
            "sigs.k8s.io/jobset",
            "JOBSET_VERSION",
            "config/components/webhook/manifests.yaml",
            "config.jobset",
            JOBSET_WEBHOOK_GROUPS,
        )

    def start_manager(
        self,
        tool: str,
        module_path: str,
        version_key: str,
        manifests: str,
        config_group: str,
        groups: frozenset[str],
        crds: str | None = None,
        timeout: float = 120,
    ) -> TwinProcess:
        """A manager of JobSet's or LeaderWorkerSet's shape (a Configuration of <config_group>.x-k8s.io/v1alpha1:
        api/config/v1alpha1/configuration_types.go of each module, webhook host, port and certDir, internal
        certificate management off), with the lab's certificate; only the webhooks whose API groups are all in
        ``groups`` are registered (JobSet's pod webhooks are not: they act for exclusive placement only, which the
        stack does not ask for); the CRDs of the module's ``crds`` directory the lab has not installed are."""
        ports = {name: free_port() for name in ("webhook", "health", "metrics")}
        module = self.twin_tools.module_dir(module_path, version_key)
        if crds:
            self.install_missing_crds(module / crds)
        namespace = f"{tool}-system"
        self.plane.kubectl("create", "namespace", namespace, check=False)
        certs = self.run_dir / f"{tool}-certs"
        issue_serving_certificate(self.plane.run_dir / "pki", certs, f"{tool}-webhook")
        configuration = {
            "apiVersion": f"{config_group}.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"},
            "metrics": {"bindAddress": f"127.0.0.1:{ports['metrics']}"},
        }
        config = self.run_dir / f"{tool}-config.yaml"
        config.write_text(yaml.safe_dump(configuration, sort_keys=False))
        manager = TwinProcess(tool, self.run_dir / f"{tool}.log")
        manager.start(
            [str(self.twin_tools.binary(tool, version_key)), f"--config={config}"],
            env={**os.environ, "KUBECONFIG": str(self.plane.kubeconfig), "POD_NAMESPACE": namespace},
        )
        self.processes.append(manager)
        self.wait(manager, f"http://127.0.0.1:{ports['health']}/readyz", timeout)
        ca = (self.plane.run_dir / "pki" / "ca.crt").read_bytes()
        for document in webhook_configurations(module / manifests, f"twin-{tool}", ports["webhook"], ca, groups):
            self.plane.kubectl("apply", "-f", "-", stdin=json.dumps(document))
        return manager

    def start_scheduler(self, timeout: float = 60) -> TwinProcess:
        """kube-scheduler of the lab's Kubernetes release, its default profile, as the admin user (the lab's
        kube-controller-manager runs the same way); its /healthz on a free loopback port (self-signed, so read
        without verification)."""
        port = free_port()
        kubeconfig = str(self.plane.kubeconfig)
        scheduler = TwinProcess("kube-scheduler", self.run_dir / "kube-scheduler.log")
        scheduler.start(
            [str(self.twin_tools.binary("kube-scheduler", "K8S_VERSION")), f"--kubeconfig={kubeconfig}",
             f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
             "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={port}", "--profiling=false"],
        )  # fmt: skip
        self.processes.append(scheduler)
        self.wait(scheduler, f"https://127.0.0.1:{port}/healthz", timeout)
        return scheduler

    def start_kwok(self, timeout: float = 60, jobs_complete: bool = True) -> TwinProcess:
        """kwok with its fast stages. ``jobs_complete=False`` leaves out pod-complete (which ends every Running pod
        a Job owns at once): the slice checks' pods then hold their slices, as the real ones do for holdSeconds,
        longer than any scenario of the twin lasts."""
        module = self.twin_tools.module_dir("sigs.k8s.io/kwok", "KWOK_VERSION")
        stages = ["node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                  "pod/fast/pod-ready.yaml", "pod/fast/pod-delete.yaml"]  # fmt: skip
        if jobs_complete:
            stages.append("pod/fast/pod-complete.yaml")
        port = free_port()
        home = self.run_dir / "kwok-home"
        home.mkdir(exist_ok=True)
        kwok = TwinProcess("kwok", self.run_dir / "kwok.log")
        kwok.start(
            [str(self.twin_tools.kwok), f"--kubeconfig={self.plane.kubeconfig}",
             *[f"--config={module / 'kustomize/stage' / s}" for s in stages],
             "--manage-nodes-with-annotation-selector=" + ",".join(f"{k}={v}" for k, v in KWOK_ANNOTATION.items()),
             "--node-lease-duration-seconds=40", f"--server-address=127.0.0.1:{port}"],
            env={**os.environ, "HOME": str(home)},
        )  # fmt: skip
        self.processes.append(kwok)
        self.wait(kwok, f"http://127.0.0.1:{port}/healthz", timeout)
        return kwok

    def install_missing_crds(self, bases: Path) -> list[str]:
        """The module's CRDs that the lab has not installed from schemas.lock (those stay the pinned ones)."""
        have = set(self.plane.kubectl("get", "crd", "-o", "name").stdout.split())
        added = []
        for path in sorted(bases.glob("*.yaml")):
            name = yaml.safe_load(path.read_text())["metadata"]["name"]
            if f"customresourcedefinition.apiextensions.k8s.io/{name}" not in have:
                self.plane.kubectl("apply", "--server-side", "-f", str(path))
                added.append(name)
        if added:
            self.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in added])
        return added

    @staticmethod
    def wait(process: TwinProcess, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not process.alive():
                raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=3, context=ssl._create_unverified_context()) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"{process.name} not ready at {url} after {timeout}s:\n{process.tail()}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def keep_logs(self, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        for process in self.processes:
            if process.log.exists():
                shutil.copy(process.log, target / f"twin-{process.name}.log")
