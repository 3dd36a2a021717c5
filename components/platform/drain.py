"""What must be gone before a layer below can be deleted, and the bounded waits for it.

Pure Python (no Pulumi): the waits the gates of components/platform/gates.py run, asking the cluster through the
official ``kubernetes`` client, which reads the stack's kubeconfig as kubectl does (its server, CA, TLS server name and
proxy; a token, a client certificate or an exec plugin such as gke-gcloud-auth-plugin, run again when its token
expires):

* before the TPU pools and the slice controller go: no ``slices.accelerator.gke.io`` object and no admitted, unfinished
  Kueue Workload in the stack's namespaces (active Slices block node-pool deletion, and only the slice controller removes
  their finalizers);
* before the proxy-only subnet and the cluster go: no ``servicenetworkendpointgroups.networking.gke.io`` left in the
  stack's namespaces (the NEGs GKE made for the Gateway and the load balancers; a NEG left behind blocks the subnet's
  and the VPC's deletion);
* before a workload is created: the slice controller's webhook configuration carries its CA and its Service has a
  ready endpoint (its failurePolicy is Fail);
* for an `up` to finish: the llm-d router's endpoint picker Service has a ready endpoint, once its Deployment runs its
  current template (Helm cannot wait for the release: components/workloads/serving/component.py says why).

A CRD that does not exist means nothing of that kind exists. Every wait is bounded, reports its progress, and on
timeout names what still holds on and how to release it. An API server that cannot be asked is never taken for an
empty cluster: a wait rides out an unreachable server (refused or dropped connections, timeouts, 5xx answers) for
``UNREACHABLE_GRACE_SECONDS``, as during a control plane upgrade, then fails naming the cluster's endpoint; any other
refusal (401, 403) fails at once. The one way past that is the operator's word that the cluster is gone: with the
Kubernetes provider's own switch ``PULUMI_K8S_DELETE_UNREACHABLE=true`` set for the command, a drain wait whose API
server does not answer at all (no HTTP answer: refused, no route, timed out) takes the cluster as deleted out of band
and lets the destroy go on, as the provider does with its objects.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

SLICE_GROUP, SLICE_RESOURCE = "accelerator.gke.io", "slices"
KUEUE_GROUP, KUEUE_VERSION, KUEUE_WORKLOADS = "kueue.x-k8s.io", "v1beta2", "workloads"
NEG_GROUP, NEG_RESOURCE = "networking.gke.io", "servicenetworkendpointgroups"
POLL_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 15.0
UNREACHABLE_GRACE_SECONDS = 60.0
# the Kubernetes provider's switch for a cluster deleted out of band (its objects leave the state unasked)
DELETE_UNREACHABLE_ENV = "PULUMI_K8S_DELETE_UNREACHABLE"

Answer = TypeVar("Answer")


def unreachable_means_gone(environ: Mapping[str, str] = os.environ) -> bool:
    """The operator's word that an API server that does not answer is gone: exactly ``true``, as the provider takes it."""
    return environ.get(DELETE_UNREACHABLE_ENV) == "true"


class KubeError(RuntimeError):
    """The API server could not be asked (other than a missing kind, which means none exist)."""

    def __init__(self, message: str, transient: bool = False, unanswered: bool = False):
        super().__init__(message)
        self.transient = transient  # unreachable or 5xx: worth asking again
        self.unanswered = unanswered  # no HTTP answer at all (a 5xx is an answer: the server is there)


@dataclass
class KubeClient:
    """The ``kubernetes`` library's client of one cluster; each call's failure as a KubeError."""

    api: k8s.ApiClient

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    def ask(self, what: str, call: Callable[..., Answer], *args: Any, **kwargs: Any) -> Answer | None:
        """The answer of ``call`` (a request of the library, bounded to REQUEST_TIMEOUT_SECONDS); None when the server
        answers 404 (no such kind or object)."""
        try:
            return call(*args, _request_timeout=REQUEST_TIMEOUT_SECONDS, **kwargs)
        except ApiException as error:
            if error.status == 404:
                return None
            if error.status:
                raise KubeError(
                    f"the API server {self.server} answered {what} with HTTP {error.status} {error.reason}",
                    transient=error.status >= 500,
                ) from None
            reason = error.reason  # the library's TLS failure: no HTTP answer
        except (urllib3.exceptions.HTTPError, OSError) as error:  # refused, dropped, timed out
            reason = getattr(error, "reason", None) or error
        message = f"cannot reach the API server {self.server} ({what}: {reason})"
        raise KubeError(message, transient=True, unanswered=True)

    def custom_objects(self, group: str, version: str, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        """Every object of a custom resource, cluster-wide or in ``namespace``; none when it is not served."""
        objects = k8s.CustomObjectsApi(self.api)
        where = f"/apis/{group}/{version}{f'/namespaces/{namespace}' if namespace else ''}/{resource}"
        listing = (
            self.ask(f"GET {where}", objects.list_namespaced_custom_object, group, version, namespace, resource)
            if namespace
            else self.ask(f"GET {where}", objects.list_cluster_custom_object, group, version, resource)
        )
        return list(listing.get("items") or []) if isinstance(listing, dict) else []

    def preferred_version(self, group: str) -> str | None:
        """The version the server prefers for an API group, or None when the group is not served."""
        apis = k8s.ApisApi(self.api)
        groups = self.ask("GET /apis", apis.get_api_versions)
        for served in groups.groups if groups else []:
            if served.name == group and served.preferred_version:
                return str(served.preferred_version.version)
        return None


def client_from_kubeconfig(text: str) -> KubeClient:
    """A client for the current context of a kubeconfig (contents, not a path), loaded by the kubernetes library."""
    config = yaml.safe_load(text) or {}
    # An exec credential plugin that is not installed, named with its install hint (the library would only log it and
    # send the requests without credentials).
    contexts = {c["name"]: c.get("context") or {} for c in config.get("contexts") or []}
    user_name = contexts.get(config.get("current-context", ""), {}).get("user")
    users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
    spec = users.get(user_name, {}).get("exec")
    if spec and shutil.which(spec["command"]) is None:
        raise KubeError(f"{spec['command']} is not installed: {spec.get('installHint', 'install it')}")
    configuration = k8s.Configuration()
    # The waits ask again each poll: one retry covers a pooled connection the server has closed meanwhile.
    configuration.retries = 1
    # the library's config loader carries no annotations (its client does)
    api: k8s.ApiClient = k8s_config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
        config, persist_config=False, client_configuration=configuration
    )
    return KubeClient(api)


def _name(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


def _listed(client: KubeClient, group: str, resource: str, namespaces: list[str] | None) -> list[str]:
    """Names of every object of ``group``'s ``resource`` (in ``namespaces``, or cluster-wide); none when not served."""
    version = client.preferred_version(group)
    if version is None:
        return []
    return sorted(
        _name(o)
        for namespace in (namespaces if namespaces is not None else [None])
        for o in client.custom_objects(group, version, resource, namespace)
    )


def _condition_true(status: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def is_admitted(workload: dict[str, Any]) -> bool:
    """Whether a Kueue Workload holds the TPU pools: its quota reserved or admitted, and not finished. Finishing keeps
    ``status.admission`` and the Admitted condition, and only adds Finished=True; a finished Workload holds no quota
    (kubernetes-sigs/kueue v0.17.8 pkg/workload/workload.go: Finish, HasActiveQuotaReservation), and the slice
    controller deletes its Slices (AI-Hypercomputer/xpk 250d4b3c slice/internal/util/workload/workload.go
    ShouldFinalize), which the gate waits for on their own. So a finished Job or JobSet left in a queue's namespace
    does not hold ``pulumi destroy``."""
    status = workload.get("status") or {}
    if _condition_true(status, "Finished"):
        return False
    return bool(status.get("admission")) or _condition_true(status, "Admitted")


@dataclass(frozen=True)
class DrainSpec:
    """What a gate waits to be gone before the layer below it may be deleted."""

    slices: bool  # every slices.accelerator.gke.io object (they are cluster-scoped)
    workload_namespaces: Sequence[str]  # admitted Kueue Workloads in these
    neg_namespaces: Sequence[str]  # GKE's ServiceNetworkEndpointGroups in these
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
        workloads = client.custom_objects(KUEUE_GROUP, KUEUE_VERSION, KUEUE_WORKLOADS, namespace)
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


def _polls(
    what: str,
    question: Callable[[], list[str]],
    timeout_seconds: float,
    report: Callable[[str], None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    gone_if_unanswered: bool = False,
) -> Iterator[tuple[list[str], float]]:
    """Each answer to ``question``, one poll apart, with the seconds left of ``timeout_seconds``: the caller stops
    once it has what it waits for. An API server that cannot be asked is ridden out for a bounded grace, then given up
    on, naming it; with ``gone_if_unanswered``, one that does not answer at all ends the polls at once, said so (the
    operator's word that the cluster is gone)."""
    deadline = clock() + timeout_seconds
    unreachable_since: float | None = None
    while True:
        try:
            answer = question()
        except KubeError as error:
            if not error.transient:
                raise KubeError(
                    f"{what}: {error}. Nothing was assumed gone; fix the access, then run the command again."
                ) from None
            if error.unanswered and gone_if_unanswered:
                report(
                    f"{what}: {error}; {DELETE_UNREACHABLE_ENV}=true says the cluster is gone, "
                    "so nothing is left on it to wait for"
                )
                return
            now = clock()
            unreachable_since = now if unreachable_since is None else unreachable_since
            waited = now - unreachable_since
            if waited >= UNREACHABLE_GRACE_SECONDS or now >= deadline:
                raise KubeError(
                    f"{what}: {error}, for {waited:.0f} s. The cluster cannot be asked what still holds on, "
                    "so nothing was assumed gone. Run the command again once the API server answers."
                ) from None
            report(f"{what}: {error}; asking again ({UNREACHABLE_GRACE_SECONDS - waited:.0f} s before giving up)")
            sleep(min(POLL_SECONDS, max(deadline - clock(), 0.0)))
            continue
        if unreachable_since is not None:
            report(f"{what}: the API server answers again after {clock() - unreachable_since:.0f} s")
            unreachable_since = None
        left = deadline - clock()
        yield answer, left
        sleep(min(POLL_SECONDS, max(left, 0.0)))


def wait_until_gone(
    client: KubeClient,
    spec: DrainSpec,
    what: str,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll until nothing holds on, reporting each change; StillHeld after ``spec.timeout_seconds``. An unreachable
    API server is handled as the module says."""
    last: list[str] | None = None
    polls = _polls(
        what, lambda: holding(client, spec), spec.timeout_seconds, report, clock, sleep, unreachable_means_gone()
    )
    for held, left in polls:
        if not held:
            report(f"{what}: nothing holds on any more")
            return
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


@dataclass(frozen=True)
class ReadySpec:
    """What a ReadyGate waits for: a Service with a ready endpoint; for a webhook, also the MutatingWebhookConfiguration
    that calls it carrying its CA; for a Deployment behind the Service, also its current template on every replica."""

    service_namespace: str
    service_name: str
    timeout_seconds: float
    webhook_configuration: str | None = None  # None: nothing calls the Service as a webhook
    # A Deployment of the Recreate strategy in service_namespace, behind the Service. Right after an upgrade its old
    # pods are still ready until its controller stops them; it makes the new ReplicaSet's pods only once no old pod
    # runs (kubernetes/kubernetes v1.36.5 pkg/controller/deployment/recreate.go, rolloutRecreate), so with the new
    # generation observed and every replica of the current template there, a ready endpoint is a new pod's.
    deployment: str | None = None
    check: str = ""  # what to look at when it never serves; empty: the namespace's pods and the controller's logs

    @property
    def what(self) -> str:
        if self.webhook_configuration:
            return f"webhook {self.webhook_configuration}"
        return f"Service {self.service_namespace}/{self.service_name}"


def _webhook_not_ready(client: KubeClient, configuration_name: str) -> list[str]:
    admission = k8s.AdmissionregistrationV1Api(client.api)
    configuration = client.ask(
        f"GET /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{configuration_name}",
        admission.read_mutating_webhook_configuration,
        configuration_name,
    )
    if configuration is None:
        return [f"MutatingWebhookConfiguration {configuration_name} does not exist"]
    if missing := [w.name for w in configuration.webhooks or [] if not w.client_config.ca_bundle]:
        return [f"no CA injected yet into {', '.join(missing)}"]
    return []


def _rollout_not_done(client: KubeClient, namespace: str, name: str) -> list[str]:
    apps = k8s.AppsV1Api(client.api)
    deployment = client.ask(
        f"GET /apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        apps.read_namespaced_deployment,
        name,
        namespace,
    )
    if deployment is None:
        return [f"Deployment {namespace}/{name} does not exist"]
    status = deployment.status or k8s.V1DeploymentStatus()  # none yet: its controller has not seen it
    generation = (deployment.metadata.generation if deployment.metadata else None) or 0
    if (status.observed_generation or 0) < generation:
        return [f"Deployment {namespace}/{name}: its controller has not taken up generation {generation} yet"]
    replicas = 1 if deployment.spec.replicas is None else deployment.spec.replicas
    if (updated := status.updated_replicas or 0) < replicas:
        return [f"Deployment {namespace}/{name}: {updated} of {replicas} pods run its current template"]
    return []


def not_ready(client: KubeClient, spec: ReadySpec) -> list[str]:
    """Why what ``spec`` names cannot serve yet; empty when it can."""
    reasons = []
    if spec.webhook_configuration:
        reasons += _webhook_not_ready(client, spec.webhook_configuration)
    if spec.deployment:
        reasons += _rollout_not_done(client, spec.service_namespace, spec.deployment)
    discovery = k8s.DiscoveryV1Api(client.api)
    selector = f"kubernetes.io/service-name={spec.service_name}"
    slices = client.ask(
        f"GET /apis/discovery.k8s.io/v1/namespaces/{spec.service_namespace}/endpointslices?labelSelector={selector}",
        discovery.list_namespaced_endpoint_slice,
        spec.service_namespace,
        label_selector=selector,
    )
    ready = [
        e for s in (slices.items if slices else []) for e in s.endpoints or [] if e.conditions and e.conditions.ready
    ]
    if not ready:
        reasons.append(f"Service {spec.service_namespace}/{spec.service_name} has no ready endpoint")
    return reasons


def wait_until_ready(
    client: KubeClient,
    spec: ReadySpec,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll until ``spec`` can serve, reporting why not at each poll; StillHeld after ``spec.timeout_seconds``, naming
    what to check. An unreachable API server is ridden out as the module says."""
    what = spec.what
    for reasons, left in _polls(what, lambda: not_ready(client, spec), spec.timeout_seconds, report, clock, sleep):
        if not reasons:
            report(f"{what} serves")
            return
        if left <= 0:
            check = (
                spec.check or f"`kubectl -n {spec.service_namespace} get pods,endpointslices` and the controller's logs"
            )
            raise StillHeld(
                f"{what} cannot serve after {spec.timeout_seconds:.0f} s: {'; '.join(reasons)}. Check {check}."
            )
        report(f"{what}: {'; '.join(reasons)}; {left:.0f} s left")
