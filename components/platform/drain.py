"""What must be gone before a layer below can be deleted, and the bounded waits for it.

Pure Python (no Pulumi): a small Kubernetes API client (a kubeconfig's server, CA and credentials:
token, client certificate or an exec plugin such as gke-gcloud-auth-plugin) and the waits the
gates of components/platform/gates.py run:

* before the TPU pools and the slice controller go: no ``slices.accelerator.gke.io`` object and no
  admitted Kueue Workload in the stack's namespaces (active Slices block node-pool deletion, and
  only the slice controller removes their finalizers);
* before the proxy-only subnet and the cluster go: no ``servicenetworkendpointgroups.networking.gke.io``
  left in the stack's namespaces (the NEGs GKE made for the Gateway and the load balancers; a NEG
  left behind blocks the subnet's and the VPC's deletion);
* before a workload is created: the slice controller's webhook configuration carries its CA and
  its Service has a ready endpoint (its failurePolicy is Fail).

A CRD that does not exist means nothing of that kind exists. Every wait is bounded, reports its
progress, and on timeout names what still holds on and how to release it. An API server that cannot
be asked is never taken for an empty cluster: a wait rides out an unreachable server (refused or
dropped connections, timeouts, 5xx answers) for ``UNREACHABLE_GRACE_SECONDS``, as during a control
plane upgrade, then fails naming the cluster's endpoint; any other refusal (401, 403) fails at once.
The one way past that is the operator's word that the cluster is gone: with the Kubernetes
provider's own switch ``PULUMI_K8S_DELETE_UNREACHABLE=true`` set for the command, a drain wait whose
API server does not answer at all (no HTTP answer: refused, no route, timed out) takes the cluster
as deleted out of band and lets the destroy go on, as the provider does with its objects.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

SLICE_GROUP = "accelerator.gke.io"
SLICE_RESOURCE = "slices"
KUEUE_WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
NEG_GROUP = "networking.gke.io"
NEG_RESOURCE = "servicenetworkendpointgroups"
POLL_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 15.0
UNREACHABLE_GRACE_SECONDS = 60.0
# the Kubernetes provider's switch for a cluster deleted out of band (its objects leave the state unasked)
DELETE_UNREACHABLE_ENV = "PULUMI_K8S_DELETE_UNREACHABLE"


def unreachable_means_gone(environ: Mapping[str, str] = os.environ) -> bool:
    """True when the command runs with the operator's word that an API server that does not answer is gone:
    the value the provider takes, exactly ``true`` (it compares the string)."""
    return environ.get(DELETE_UNREACHABLE_ENV) == "true"


class KubeError(RuntimeError):
    """The API server could not be asked (other than a missing kind, which means none exist)."""

    def __init__(self, message: str, transient: bool = False, unanswered: bool = False):
        super().__init__(message)
        self.transient = transient  # unreachable or 5xx: worth asking again
        self.unanswered = unanswered  # no HTTP answer at all (a 5xx is an answer: the server is there)


# --- A small API client ----------------------------------------------------------------


@dataclass
class KubeClient:
    server: str
    headers: dict[str, str] = field(default_factory=dict)
    context: ssl.SSLContext | None = None

    def get(self, path: str) -> dict[str, Any] | None:
        """GET ``path`` as JSON; None when the server answers 404 (no such kind or object)."""
        request = urllib.request.Request(
            self.server.rstrip("/") + path, headers={"Accept": "application/json", **self.headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS, context=self.context) as response:
                body: dict[str, Any] = json.loads(response.read())
                return body
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise KubeError(
                f"the API server {self.server} answered GET {path} with HTTP {error.code} {error.reason}",
                transient=error.code >= 500,
            ) from None
        except OSError as error:  # URLError, timeouts, refused and dropped connections
            reason = getattr(error, "reason", None) or error
            raise KubeError(
                f"cannot reach the API server {self.server} (GET {path}: {reason})", transient=True, unanswered=True
            ) from None

    def items(self, path: str) -> list[dict[str, Any]]:
        listing = self.get(path)
        return list((listing or {}).get("items") or [])

    def preferred_version(self, group: str) -> str | None:
        """``group/version`` the server prefers for an API group, or None when the group is not served."""
        discovery = self.get(f"/apis/{group}")
        preferred = (discovery or {}).get("preferredVersion") or {}
        version = preferred.get("groupVersion")
        return str(version) if version else None


def client_from_kubeconfig(
    text: str, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
) -> KubeClient:
    """A client for the current context of a kubeconfig (contents, not a path)."""
    config = yaml.safe_load(text) or {}
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    context = contexts[config["current-context"]]
    cluster = {c["name"]: c["cluster"] for c in config.get("clusters") or []}[context["cluster"]]
    user = {u["name"]: u["user"] for u in config.get("users") or []}.get(context.get("user", ""), {})

    ssl_context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        ssl_context.check_hostname = False
        ssl_context.verify_mode = ssl.CERT_NONE
    elif "certificate-authority-data" in cluster:
        ssl_context.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif "certificate-authority" in cluster:
        ssl_context.load_verify_locations(cafile=cluster["certificate-authority"])

    headers: dict[str, str] = {}
    if token := user.get("token"):
        headers["Authorization"] = f"Bearer {token}"
    elif "exec" in user:
        headers["Authorization"] = f"Bearer {_exec_token(user['exec'], cluster, run)}"
    if "client-certificate-data" in user and "client-key-data" in user:
        _load_client_certificate(ssl_context, user["client-certificate-data"], user["client-key-data"])
    return KubeClient(cluster["server"], headers, ssl_context)


def _exec_token(
    spec: dict[str, Any], cluster: dict[str, Any], run: Callable[..., subprocess.CompletedProcess[str]]
) -> str:
    """The bearer token of an exec credential plugin (client.authentication.k8s.io ExecCredential)."""
    env = {**os.environ, **{e["name"]: e["value"] for e in spec.get("env") or []}}
    if spec.get("provideClusterInfo"):
        info = {
            "server": cluster["server"],
            "certificate-authority-data": cluster.get("certificate-authority-data", ""),
        }
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {
                "apiVersion": spec["apiVersion"],
                "kind": "ExecCredential",
                "spec": {"cluster": info, "interactive": False},
            }
        )
    command = [spec["command"], *(spec.get("args") or [])]
    try:
        done = run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise KubeError(f"{spec['command']} is not installed: {spec.get('installHint', 'install it')}") from None
    if done.returncode != 0:
        raise KubeError(f"{spec['command']} failed: {(done.stderr or '').strip()[:300]}")
    token = (json.loads(done.stdout).get("status") or {}).get("token")
    if not token:
        raise KubeError(f"{spec['command']} returned no token")
    return str(token)


def _load_client_certificate(context: ssl.SSLContext, certificate_data: str, key_data: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        certificate, key = os.path.join(directory, "client.crt"), os.path.join(directory, "client.key")
        for path, data in ((certificate, certificate_data), (key, key_data)):
            with open(path, "wb") as stream:
                stream.write(base64.b64decode(data))
        context.load_cert_chain(certificate, key)


# --- What still holds on ---------------------------------------------------------------


def _name(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


def _listed(client: KubeClient, group: str, resource: str, namespaces: list[str] | None) -> list[str]:
    """Names of every object of ``group``'s ``resource`` (in ``namespaces``, or cluster-wide); none when not served."""
    version = client.preferred_version(group)
    if version is None:
        return []
    if namespaces is None:
        return sorted(_name(o) for o in client.items(f"/apis/{version}/{resource}"))
    return sorted(_name(o) for ns in namespaces for o in client.items(f"/apis/{version}/namespaces/{ns}/{resource}"))


def is_admitted(workload: dict[str, Any]) -> bool:
    status = workload.get("status") or {}
    if status.get("admission"):
        return True
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in status.get("conditions") or [])


@dataclass(frozen=True)
class DrainSpec:
    """What a gate waits to be gone before the layer below it may be deleted."""

    slices: bool  # every slices.accelerator.gke.io object (they are cluster-scoped)
    workload_namespaces: tuple[str, ...]  # admitted Kueue Workloads in these
    neg_namespaces: tuple[str, ...]  # GKE's ServiceNetworkEndpointGroups in these
    timeout_seconds: float

    @property
    def waits_for_nothing(self) -> bool:
        return not (self.slices or self.workload_namespaces or self.neg_namespaces)


def holding(client: KubeClient, spec: DrainSpec) -> list[str]:
    """Everything that still holds on, as ``kind name`` lines; empty when the layer below may go."""
    held = []
    if spec.slices:
        held += [f"Slice {name}" for name in _listed(client, SLICE_GROUP, SLICE_RESOURCE, None)]
    for namespace in spec.workload_namespaces:
        workloads = client.items(KUEUE_WORKLOADS.format(namespace=namespace))
        held += [f"admitted Workload {_name(w)}" for w in workloads if is_admitted(w)]
    if spec.neg_namespaces:
        negs = _listed(client, NEG_GROUP, NEG_RESOURCE, list(spec.neg_namespaces))
        held += [f"ServiceNetworkEndpointGroup {name}" for name in negs]
    return held


HOW_TO_RELEASE = {
    "Slice": "the slice controller removes a Slice's finalizer once its workload is gone; check "
    "`kubectl get slices.accelerator.gke.io` and the controller's logs in slice-controller-system",
    "admitted Workload": "Kueue releases a Workload when its JobSet or LeaderWorkerSet is deleted; "
    "check `kubectl get workloads.kueue.x-k8s.io -A`",
    "ServiceNetworkEndpointGroup": "GKE's NEG controller deletes them after their Service or Gateway; "
    "check `kubectl get svcneg -A` and `gcloud compute network-endpoint-groups list`",
}


class StillHeld(RuntimeError):
    """The wait ran out: the message names what still holds on and how to release it."""


class DeclaredGone(Exception):
    """The API server does not answer and the operator said an unreachable cluster is gone."""


class Unreachable:
    """Rides out an API server that cannot be asked for a bounded grace, then gives up naming it."""

    def __init__(
        self, what: str, report: Callable[[str], None], clock: Callable[[], float], gone_if_unanswered: bool = False
    ):
        self.what, self.report, self.clock, self.grace = what, report, clock, UNREACHABLE_GRACE_SECONDS
        self.gone_if_unanswered = gone_if_unanswered
        self.since: float | None = None

    def ask(self, question: Callable[[], Any], deadline: float) -> tuple[bool, Any]:
        """(True, answer) once the server answers; (False, None) to ask again after a poll."""
        try:
            answer = question()
        except KubeError as error:
            if not error.transient:
                raise KubeError(
                    f"{self.what}: {error}. Nothing was assumed gone; fix the access, then run the command again."
                ) from None
            if error.unanswered and self.gone_if_unanswered:
                raise DeclaredGone(
                    f"{self.what}: {error}; {DELETE_UNREACHABLE_ENV}=true says the cluster is gone, "
                    "so nothing is left on it to wait for"
                ) from None
            now = self.clock()
            self.since = now if self.since is None else self.since
            waited = now - self.since
            if waited >= self.grace or now >= deadline:
                raise KubeError(
                    f"{self.what}: {error}, for {waited:.0f} s. The cluster cannot be asked what still holds on, "
                    "so nothing was assumed gone. Run the command again once the API server answers."
                ) from None
            self.report(f"{self.what}: {error}; asking again ({self.grace - waited:.0f} s before giving up)")
            return False, None
        if self.since is not None:
            self.report(f"{self.what}: the API server answers again after {self.clock() - self.since:.0f} s")
            self.since = None
        return True, answer


def wait_until_gone(
    client: KubeClient,
    spec: DrainSpec,
    what: str,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = POLL_SECONDS,
    gone_if_unanswered: bool | None = None,
) -> None:
    """Poll until nothing holds on; report each change; raise StillHeld after ``spec.timeout_seconds``,
    KubeError once the API server has not answered for ``UNREACHABLE_GRACE_SECONDS``. An API server
    that does not answer at all ends the wait at once when ``gone_if_unanswered`` (by default: when
    the command runs with PULUMI_K8S_DELETE_UNREACHABLE=true)."""
    deadline = clock() + spec.timeout_seconds
    last: list[str] | None = None
    gone = unreachable_means_gone() if gone_if_unanswered is None else gone_if_unanswered
    unreachable = Unreachable(what, report, clock, gone_if_unanswered=gone)
    while True:
        try:
            answered, held = unreachable.ask(lambda: holding(client, spec), deadline)
        except DeclaredGone as declared:
            report(str(declared))
            return
        if not answered:
            sleep(min(poll_seconds, max(deadline - clock(), 0.0)))
            continue
        if not held:
            report(f"{what}: nothing holds on any more")
            return
        left = deadline - clock()
        if held != last:
            report(
                f"{what}: waiting for {len(held)} to go ({', '.join(held[:5])}{' ...' if len(held) > 5 else ''}); {left:.0f} s left"
            )
            last = held
        if left <= 0:
            kinds = sorted({line.rsplit(" ", 1)[0] for line in held})
            hints = "; ".join(HOW_TO_RELEASE.get(kind, "") for kind in kinds)
            raise StillHeld(
                f"{what}: after {spec.timeout_seconds:.0f} s these still hold on: {', '.join(held)}. {hints}. "
                "Run `pulumi destroy` again once they are gone."
            )
        sleep(min(poll_seconds, max(left, 0.0)))


# --- A webhook that can serve ----------------------------------------------------------


@dataclass(frozen=True)
class WebhookSpec:
    configuration: str  # MutatingWebhookConfiguration name
    service_namespace: str
    service_name: str
    timeout_seconds: float


def webhook_not_ready(client: KubeClient, spec: WebhookSpec) -> list[str]:
    """Why the webhook cannot serve yet; empty when it can."""
    reasons = []
    configuration = client.get(
        f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{spec.configuration}"
    )
    if configuration is None:
        reasons.append(f"MutatingWebhookConfiguration {spec.configuration} does not exist")
    else:
        missing = [
            w["name"] for w in configuration.get("webhooks") or [] if not (w.get("clientConfig") or {}).get("caBundle")
        ]
        if missing:
            reasons.append(f"no CA injected yet into {', '.join(missing)}")
    slices = client.items(
        f"/apis/discovery.k8s.io/v1/namespaces/{spec.service_namespace}/endpointslices"
        f"?labelSelector=kubernetes.io%2Fservice-name%3D{spec.service_name}"
    )
    ready = [e for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")]
    if not ready:
        reasons.append(f"Service {spec.service_namespace}/{spec.service_name} has no ready endpoint")
    return reasons


def wait_until_webhook_serves(
    client: KubeClient,
    spec: WebhookSpec,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    deadline = clock() + spec.timeout_seconds
    unreachable = Unreachable(f"webhook {spec.configuration}", report, clock)
    while True:
        answered, reasons = unreachable.ask(lambda: webhook_not_ready(client, spec), deadline)
        if not answered:
            sleep(min(poll_seconds, max(deadline - clock(), 0.0)))
            continue
        if not reasons:
            report(f"webhook {spec.configuration} serves")
            return
        left = deadline - clock()
        if left <= 0:
            raise StillHeld(
                f"webhook {spec.configuration} cannot serve after {spec.timeout_seconds:.0f} s: {'; '.join(reasons)}. "
                f"Check `kubectl -n {spec.service_namespace} get pods,endpointslices` and the controller's logs."
            )
        report(f"webhook {spec.configuration}: {'; '.join(reasons)}; {left:.0f} s left")
        sleep(min(poll_seconds, max(left, 0.0)))
