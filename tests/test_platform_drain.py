"""The waits of the gates, through the kubernetes client, against a stand-in API server on 127.0.0.1: empty,
draining, stuck, CRD absent, gone away; and the kubeconfigs the gates are handed (a token, an exec plugin whose
token expires, the lab's inline CA and client certificate with a TLS server name, a proxy).

The stand-in answers the few paths the gates read (API discovery, Slices, Kueue Workloads,
ServiceNetworkEndpointGroups, the webhook configuration, a Deployment and EndpointSlices) from a state each
test scripts, one state per poll, so a drain can be watched happening.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import ssl
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from components.platform import drain
from components.platform.drain import DrainSpec, KubeClient, ReadySpec, StillHeld


class FakeApi:
    """A scripted API server: ``states`` are served in turn, one per poll (the last one stays)."""

    def __init__(self, states: list[dict[str, Any]]):
        self.states = states
        self.polls = 0
        self.requests: list[tuple[str, str]] = []
        self.client_certificates: list[str] = []

    @property
    def state(self) -> dict[str, Any]:
        return self.states[min(self.polls, len(self.states) - 1)]

    def answer(self, path: str) -> tuple[int, Any]:
        state = self.state
        if "status" in state:  # the server answers every request so (403, 503 ...)
            return state["status"], {"kind": "Status", "apiVersion": "v1", "code": state["status"]}
        groups = state.get("groups", ())
        if path in ("/apis", "/apis/"):  # the client asks for /apis/
            served = [g for g in groups if g != "kueue"]
            version = {g: {"groupVersion": f"{g}/v1beta1", "version": "v1beta1"} for g in served}
            return 200, {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [{"name": g, "versions": [version[g]], "preferredVersion": version[g]} for g in served],
            }
        if path == "/apis/accelerator.gke.io/v1beta1/slices":
            return 200, {"items": [{"metadata": {"name": n}} for n in state.get("slices", [])]}
        if path.startswith("/apis/kueue.x-k8s.io/v1beta2/namespaces/"):
            if "kueue" not in groups:
                return 404, {"kind": "Status", "apiVersion": "v1", "code": 404}
            namespace = path.split("/")[5]
            return 200, {"items": [w for w in state.get("workloads", []) if w["metadata"]["namespace"] == namespace]}
        if path.startswith("/apis/networking.gke.io/v1beta1/namespaces/"):
            namespace = path.split("/")[5]
            negs = [n for n in state.get("negs", []) if n.startswith(f"{namespace}/")]
            return 200, {"items": [{"metadata": {"namespace": namespace, "name": n.split("/")[1]}} for n in negs]}
        if path.startswith("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"):
            return (200, state["webhook"]) if "webhook" in state else (404, {"kind": "Status", "code": 404})
        if path.startswith("/apis/discovery.k8s.io/v1/namespaces/"):
            return 200, {"kind": "EndpointSliceList", "items": state.get("endpointslices", [])}
        if path.startswith("/apis/apps/v1/namespaces/") and "deployment" in state:
            return 200, state["deployment"]
        return 404, {"kind": "Status", "code": 404}


def serve(fake: FakeApi, tls: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path
            if path.startswith("http://"):  # a proxy is asked for the absolute URL
                parts = urlsplit(path)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                fake.requests.append((f"via proxy to {parts.netloc}", self.headers.get("Authorization", "")))
            fake.requests.append((path, self.headers.get("Authorization", "")))
            if tls is not None:
                subject = dict(x[0] for x in self.connection.getpeercert()["subject"])  # type: ignore[attr-defined]
                fake.client_certificates.append(subject["commonName"])
            if fake.state.get("down"):  # a server going away: the connection drops without an answer
                self.close_connection = True
                return
            code, body = fake.answer(path)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    return server, thread


def kubeconfig(server: str, user: dict[str, Any], **cluster: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
            "users": [{"name": "u", "user": user}],
        }
    )


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, KubeClient]]:
    """The stand-in on plain HTTP, and the gates' client for it from a token kubeconfig."""
    fake = FakeApi([{}])
    server, _ = serve(fake)
    try:
        address = f"http://127.0.0.1:{server.server_address[1]}"
        yield fake, drain.client_from_kubeconfig(kubeconfig(address, {"token": "t"}))
    finally:
        server.shutdown()
        server.server_close()


NOTHING_LISTENS = "http://127.0.0.1:9"  # the discard port: what a deleted cluster's endpoint gives


def unreachable_client() -> KubeClient:
    return drain.client_from_kubeconfig(kubeconfig(NOTHING_LISTENS, {"token": "t"}))


def workload(namespace: str, name: str, admitted: bool) -> dict[str, Any]:
    status = (
        {"admission": {"clusterQueue": "cq"}}
        if admitted
        else {"conditions": [{"type": "QuotaReserved", "status": "False"}]}
    )
    return {"metadata": {"namespace": namespace, "name": name}, "status": status}


TPU = DrainSpec(slices=True, workload_namespaces=("serving",), neg_namespaces=(), timeout_seconds=600)
LOAD_BALANCERS = DrainSpec(slices=False, workload_namespaces=(), neg_namespaces=("serving",), timeout_seconds=600)


class Clock:
    """Virtual time: sleep advances it, and each poll moves the fake API to its next state."""

    def __init__(self, fake: FakeApi):
        self.now, self.fake, self.slept = 0.0, fake, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.fake.polls += 1


def run_wait(fake: FakeApi, client: KubeClient, spec: DrainSpec) -> tuple[list[str], Clock]:
    lines: list[str] = []
    clock = Clock(fake)
    drain.wait_until_gone(client, spec, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    return lines, clock


def test_nothing_to_wait_for_when_the_crds_are_absent(api):
    fake, client = api
    fake.states = [{"groups": []}]  # no Slice CRD, no Kueue, no NEG CRD
    lines, clock = run_wait(fake, client, TPU)
    assert lines == ["gate: nothing holds on any more"] and clock.slept == []
    assert run_wait(fake, client, LOAD_BALANCERS)[0] == ["gate: nothing holds on any more"]


def test_an_empty_cluster_lets_the_layer_below_go_at_once(api):
    fake, client = api
    fake.states = [
        {"groups": ["accelerator.gke.io", "kueue", "networking.gke.io"], "workloads": [workload("serving", "w", False)]}
    ]
    lines, clock = run_wait(fake, client, TPU)
    assert clock.slept == [] and lines[-1] == "gate: nothing holds on any more"
    assert fake.requests[0][1] == "Bearer t"


def test_a_draining_cluster_is_waited_for_and_each_change_reported(api):
    fake, client = api
    groups = ["accelerator.gke.io", "kueue"]
    fake.states = [
        {"groups": groups, "slices": ["s1", "s2"], "workloads": [workload("serving", "lws-a", True)]},
        {"groups": groups, "slices": ["s1", "s2"], "workloads": [workload("serving", "lws-a", True)]},
        {"groups": groups, "slices": ["s2"], "workloads": []},
        {"groups": groups, "slices": [], "workloads": []},
    ]
    lines, clock = run_wait(fake, client, TPU)
    assert lines == [
        "gate: waiting for 3 to go (Slice s1, Slice s2, admitted Workload serving/lws-a); 600 s left",
        "gate: waiting for 1 to go (Slice s2); 580 s left",
        "gate: nothing holds on any more",
    ]
    assert clock.slept == [drain.POLL_SECONDS] * 3


ADMISSION = {"clusterQueue": "cq"}
ADMITTED = {"type": "Admitted", "status": "True"}
FINISHED = {"type": "Finished", "status": "True", "reason": "Succeeded"}


@pytest.mark.parametrize(
    "status, holds",
    [
        pytest.param({}, False, id="new"),
        pytest.param({"conditions": [{"type": "QuotaReserved", "status": "False"}]}, False, id="pending"),
        pytest.param({"admission": ADMISSION}, True, id="quota-reserved-awaiting-its-checks"),
        pytest.param({"conditions": [ADMITTED]}, True, id="admitted"),
        pytest.param({"admission": ADMISSION, "conditions": [ADMITTED]}, True, id="admitted-with-its-admission"),
        # Kueue's Finish sets Finished and keeps status.admission and Admitted: a finished Workload holds no quota
        # and the slice controller deletes its Slices (which the gate waits for on their own).
        pytest.param({"admission": ADMISSION, "conditions": [ADMITTED, FINISHED]}, False, id="finished"),
        pytest.param({"conditions": [FINISHED]}, False, id="finished-before-admission"),
        pytest.param(
            {"admission": ADMISSION, "conditions": [ADMITTED, {**FINISHED, "status": "False"}]},
            True,
            id="finished-false",
        ),
    ],
)
def test_which_workloads_hold_the_tpu_pools(status, holds):
    assert drain.is_admitted({"metadata": {"namespace": "serving", "name": "w"}, "status": status}) is holds


def test_a_workload_that_finishes_lets_the_pools_go_once_its_slice_is_gone(api):
    """A Job or JobSet that ran to the end and was left in its queue's namespace keeps a Workload with its admission:
    the gate waits for its Slice, not for the Workload."""
    fake, client = api
    groups = ["accelerator.gke.io", "kueue"]
    running = workload("serving", "job-a", True)
    finished = copy.deepcopy(running)
    finished["status"]["conditions"] = [ADMITTED, FINISHED]
    fake.states = [
        {"groups": groups, "slices": ["s1"], "workloads": [running]},
        {"groups": groups, "slices": ["s1"], "workloads": [finished]},
        {"groups": groups, "slices": [], "workloads": [finished]},
    ]
    lines, clock = run_wait(fake, client, TPU)
    assert lines == [
        "gate: waiting for 2 to go (Slice s1, admitted Workload serving/job-a); 600 s left",
        "gate: waiting for 1 to go (Slice s1); 590 s left",
        "gate: nothing holds on any more",
    ]
    assert clock.slept == [drain.POLL_SECONDS] * 2


def test_a_stuck_slice_fails_the_delete_naming_what_holds_on_and_how_to_release_it(api):
    fake, client = api
    fake.states = [{"groups": ["accelerator.gke.io"], "slices": ["stuck-slice"]}]
    spec = DrainSpec(slices=True, workload_namespaces=(), neg_namespaces=(), timeout_seconds=35)
    with pytest.raises(StillHeld) as raised:
        run_wait(fake, client, spec)
    message = str(raised.value)
    assert "after 35 s these still hold on: Slice stuck-slice" in message
    assert "slice controller removes a Slice's finalizer" in message and "Run `pulumi destroy` again" in message


def test_leftover_endpoint_groups_hold_the_subnets(api):
    fake, client = api
    fake.states = [
        {"groups": ["networking.gke.io"], "negs": ["serving/k8s1-neg-a", "other/k8s1-neg-b"]},
        {"groups": ["networking.gke.io"], "negs": ["other/k8s1-neg-b"]},
    ]
    lines, _ = run_wait(fake, client, LOAD_BALANCERS)
    assert lines[0].startswith("gate: waiting for 1 to go (ServiceNetworkEndpointGroup serving/k8s1-neg-a)")
    assert lines[-1] == "gate: nothing holds on any more"  # another namespace's NEGs are not ours


def test_an_unreachable_api_is_an_error_not_an_empty_cluster():
    with pytest.raises(drain.KubeError) as raised:
        drain.holding(unreachable_client(), TPU)
    assert raised.value.transient and raised.value.unanswered
    assert f"cannot reach the API server {NOTHING_LISTENS}" in str(raised.value)


def test_a_wait_gives_up_on_an_api_that_never_answers_naming_it_and_assuming_nothing_gone():
    client = unreachable_client()
    fake = FakeApi([{}])
    lines: list[str] = []
    clock = Clock(fake)
    with pytest.raises(drain.KubeError) as raised:
        drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    message = str(raised.value)
    assert message.startswith(f"gate: cannot reach the API server {NOTHING_LISTENS} ")
    assert f"for {drain.UNREACHABLE_GRACE_SECONDS:.0f} s" in message and "nothing was assumed gone" in message
    assert clock.now == drain.UNREACHABLE_GRACE_SECONDS  # bounded by the grace, not by the drain timeout
    assert len(lines) == drain.UNREACHABLE_GRACE_SECONDS / drain.POLL_SECONDS
    assert all("asking again" in line for line in lines) and "nothing holds on" not in " ".join(lines)


def test_an_api_server_that_goes_away_mid_wait_and_returns_is_ridden_out(api):
    fake, client = api
    groups = ["accelerator.gke.io"]
    fake.states = [
        {"groups": groups, "slices": ["s1"]},
        {"down": True},
        {"down": True},
        {"status": 503},
        {"groups": groups, "slices": ["s1"]},
        {"groups": groups, "slices": []},
    ]
    lines, clock = run_wait(fake, client, TPU)
    assert clock.slept == [drain.POLL_SECONDS] * 5  # one poll per state, the unanswered ones too
    assert lines[0] == "gate: waiting for 1 to go (Slice s1); 600 s left"
    assert [line.split(" (GET")[0] for line in lines[1:3]] == [f"gate: cannot reach the API server {client.server}"] * 2
    assert "answered GET /apis with HTTP 503" in lines[3]
    assert lines[4] == "gate: the API server answers again after 30 s"
    assert lines[-1] == "gate: nothing holds on any more"
    assert not any("waiting for 1" in line for line in lines[4:])  # the same Slice is not reported again


def test_an_api_that_refuses_the_gate_fails_at_once(api):
    fake, client = api
    fake.states = [{"status": 403}]
    lines: list[str] = []
    clock = Clock(fake)
    with pytest.raises(drain.KubeError) as raised:
        drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    assert "HTTP 403" in str(raised.value) and client.server in str(raised.value)
    assert clock.slept == [] and lines == []


@pytest.fixture(autouse=True)
def no_operator_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without PULUMI_K8S_DELETE_UNREACHABLE, whatever the shell running the suite has."""
    monkeypatch.delenv(drain.DELETE_UNREACHABLE_ENV, raising=False)


@pytest.mark.parametrize(
    "value, gone",
    [("true", True), ("TRUE", False), (" true", False), ("1", False), ("", False), ("false", False)],
)
def test_only_the_value_the_provider_takes_declares_an_unreachable_cluster_gone(value, gone):
    """The provider compares the variable with \"true\"; the gates must not skip a wait it would not skip."""
    assert drain.unreachable_means_gone({drain.DELETE_UNREACHABLE_ENV: value}) is gone
    assert drain.unreachable_means_gone({}) is False


def test_with_the_operators_word_an_api_server_that_does_not_answer_is_a_cluster_gone(monkeypatch):
    monkeypatch.setenv(drain.DELETE_UNREACHABLE_ENV, "true")
    client = unreachable_client()
    lines: list[str] = []
    clock = Clock(FakeApi([{}]))
    drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    assert clock.slept == []  # at once: the operator said so, there is nothing to ride out
    (line,) = lines
    assert line.startswith(f"gate: cannot reach the API server {NOTHING_LISTENS} ")
    assert line.endswith(
        "PULUMI_K8S_DELETE_UNREACHABLE=true says the cluster is gone, so nothing is left on it to wait for"
    )


@pytest.mark.parametrize("status, waits", [(503, True), (403, False)])
def test_with_the_operators_word_an_api_server_that_answers_is_still_asked(api, monkeypatch, status, waits):
    """A 5xx or a refusal is an answer: the server is there, so its Slices may be too."""
    monkeypatch.setenv(drain.DELETE_UNREACHABLE_ENV, "true")
    fake, client = api
    fake.states = [{"status": status}]
    lines: list[str] = []
    clock = Clock(fake)
    with pytest.raises(drain.KubeError) as raised:
        drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    assert f"HTTP {status}" in str(raised.value) and "nothing was assumed gone" in str(raised.value).lower()
    assert clock.now == (drain.UNREACHABLE_GRACE_SECONDS if waits else 0)
    assert not [line for line in lines if "says the cluster is gone" in line]


def test_a_gate_that_waits_for_nothing_needs_no_cluster():
    assert DrainSpec(slices=False, workload_namespaces=(), neg_namespaces=(), timeout_seconds=1).waits_for_nothing
    assert not TPU.waits_for_nothing


# --- A webhook that can serve ------------------------------------------------------------


WEBHOOK = ReadySpec(
    "slice-controller-system", "slice-controller-webhook-service", 600, webhook_configuration="slice-webhooks"
)


def webhook(ca: bool) -> dict[str, Any]:
    service = {"namespace": "slice-controller-system", "name": "slice-controller-webhook-service"}
    config = {"service": service, **({"caBundle": "Q0E="} if ca else {})}
    hook = {"name": "mjob.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None", "clientConfig": config}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "slice-webhooks"},
        "webhooks": [hook],
    }


def endpoints(ready: bool) -> dict[str, Any]:
    return {"addressType": "IPv4", "endpoints": [{"addresses": ["10.8.0.5"], "conditions": {"ready": ready}}]}


def test_the_webhook_is_ready_once_it_has_its_ca_and_a_ready_endpoint(api):
    fake, client = api
    fake.states = [
        {},
        {"webhook": webhook(ca=False), "endpointslices": [endpoints(ready=True)]},
        {"webhook": webhook(ca=True), "endpointslices": [endpoints(ready=False)]},
        {"webhook": webhook(ca=True), "endpointslices": [endpoints(ready=True)]},
    ]
    lines: list[str] = []
    clock = Clock(fake)
    drain.wait_until_ready(client, WEBHOOK, report=lines.append, clock=clock, sleep=clock.sleep)
    assert "MutatingWebhookConfiguration slice-webhooks does not exist" in lines[0]
    assert "no CA injected yet into mjob.kb.io" in lines[1]
    assert "has no ready endpoint" in lines[2]
    assert lines[-1] == "webhook slice-webhooks serves"
    selectors = [parse_qs(urlsplit(p).query).get("labelSelector") for p, _ in fake.requests]
    assert ["kubernetes.io/service-name=slice-controller-webhook-service"] in selectors


def test_a_webhook_that_never_serves_fails_the_create(api):
    fake, client = api
    fake.states = [{"webhook": webhook(ca=False)}]
    clock = Clock(fake)
    spec = ReadySpec("ns", "svc", 25, webhook_configuration="slice-webhooks")
    with pytest.raises(StillHeld, match="cannot serve after 25 s: no CA injected yet"):
        drain.wait_until_ready(client, spec, report=lambda _: None, clock=clock, sleep=clock.sleep)


# --- A Service that can serve, without a webhook (the llm-d router's endpoint pickers) ------------


PICKERS = ReadySpec("serving", "pd-epp", 600, deployment="pd-epp", check="the pickers")


def deployment(generation: int, observed: int, updated: int, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "pd-epp", "namespace": "serving", "generation": generation},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "pd-epp"}}, "template": {}},
        "status": {"observedGeneration": observed, "updatedReplicas": updated},
    }


def picker_slices(*ready: bool) -> list[dict[str, Any]]:
    """One EndpointSlice of the Service, an endpoint per picker: only the lease holder's is ready."""
    points = [{"addresses": [f"10.8.0.{i}"], "conditions": {"ready": r}} for i, r in enumerate(ready)]
    return [{"addressType": "IPv4", "endpoints": points}]


def run_ready(fake: FakeApi, client: KubeClient, spec: ReadySpec) -> tuple[list[str], Clock]:
    lines: list[str] = []
    clock = Clock(fake)
    drain.wait_until_ready(client, spec, report=lines.append, clock=clock, sleep=clock.sleep)
    return lines, clock


def test_one_ready_endpoint_is_enough_and_no_webhook_is_asked_for(api):
    fake, client = api
    fake.states = [{"deployment": deployment(1, 1, 2), "endpointslices": picker_slices(False, True)}]
    lines, clock = run_ready(fake, client, PICKERS)
    assert lines == ["Service serving/pd-epp serves"] and clock.slept == []
    assert not [p for p, _ in fake.requests if "admissionregistration" in p]
    selectors = [parse_qs(urlsplit(p).query).get("labelSelector") for p, _ in fake.requests]
    assert ["kubernetes.io/service-name=pd-epp"] in selectors


def test_the_wait_returns_once_a_picker_becomes_ready_reporting_each_poll(api):
    fake, client = api
    starting = {"deployment": deployment(1, 1, 2), "endpointslices": picker_slices(False, False)}
    fake.states = [{}, starting, starting, {**starting, "endpointslices": picker_slices(True, False)}]
    lines, clock = run_ready(fake, client, PICKERS)
    assert lines == [
        "Service serving/pd-epp: Deployment serving/pd-epp does not exist; "
        "Service serving/pd-epp has no ready endpoint; 600 s left",
        "Service serving/pd-epp: Service serving/pd-epp has no ready endpoint; 590 s left",
        "Service serving/pd-epp: Service serving/pd-epp has no ready endpoint; 580 s left",
        "Service serving/pd-epp serves",
    ]
    assert clock.slept == [drain.POLL_SECONDS] * 3


def test_after_an_upgrade_the_old_pickers_ready_endpoint_does_not_count_until_the_rollout_reaches_every_replica(api):
    """The release upgraded its Deployment (generation 2): the old leader's endpoint stays ready until the controller
    stops it, and Recreate starts the new pods only once the old ones are gone."""
    fake, client = api
    old_leader = picker_slices(True, False)
    fake.states = [
        {"deployment": deployment(2, 1, 2), "endpointslices": old_leader},  # the controller has not seen it yet
        {"deployment": deployment(2, 2, 0), "endpointslices": picker_slices(False, False)},  # old pods stopping
        {"deployment": deployment(2, 2, 2), "endpointslices": picker_slices(False, False)},  # new pods starting
        {"deployment": deployment(2, 2, 2), "endpointslices": picker_slices(False, True)},
    ]
    lines, _ = run_ready(fake, client, PICKERS)
    assert "its controller has not taken up generation 2 yet" in lines[0]
    assert "Deployment serving/pd-epp: 0 of 2 pods run its current template" in lines[1]
    assert lines[2].endswith("Service serving/pd-epp has no ready endpoint; 580 s left")
    assert lines[3] == "Service serving/pd-epp serves"


def test_a_deployment_without_a_status_yet_is_not_taken_for_rolled_out(api):
    fake, client = api
    fresh = deployment(1, 0, 0)
    del fresh["status"]
    fake.states = [{"deployment": fresh, "endpointslices": picker_slices(True)}]
    assert drain.not_ready(client, PICKERS) == [
        "Deployment serving/pd-epp: its controller has not taken up generation 1 yet"
    ]


def test_a_service_that_never_gets_a_ready_endpoint_fails_naming_what_to_check(api):
    fake, client = api
    fake.states = [{"deployment": deployment(1, 1, 2), "endpointslices": picker_slices(False, False)}]
    spec = ReadySpec("serving", "pd-epp", 25, deployment="pd-epp", check="the pickers' pods and logs")
    with pytest.raises(StillHeld) as raised:
        run_ready(fake, client, spec)
    assert str(raised.value) == (
        "Service serving/pd-epp cannot serve after 25 s: Service serving/pd-epp has no ready endpoint. "
        "Check the pickers' pods and logs."
    )


def test_a_service_wait_rides_out_an_api_server_that_goes_away_and_returns(api):
    fake, client = api
    ready = {"deployment": deployment(1, 1, 2), "endpointslices": picker_slices(True, False)}
    fake.states = [{"down": True}, {"status": 503}, ready]
    lines, clock = run_ready(fake, client, PICKERS)
    assert lines[0].startswith(f"Service serving/pd-epp: cannot reach the API server {client.server} (GET ")
    assert "answered GET" in lines[1] and "HTTP 503" in lines[1]
    assert lines[2:] == [
        "Service serving/pd-epp: the API server answers again after 20 s",
        "Service serving/pd-epp serves",
    ]
    assert clock.slept == [drain.POLL_SECONDS] * 2


def test_a_service_wait_gives_up_on_an_api_server_that_never_answers_even_with_the_operators_word(monkeypatch):
    """Only a drain takes an unanswering server for a cluster gone: here something is still to be made ready."""
    monkeypatch.setenv(drain.DELETE_UNREACHABLE_ENV, "true")
    fake = FakeApi([{}])
    with pytest.raises(drain.KubeError) as raised:
        run_ready(fake, unreachable_client(), PICKERS)
    assert str(raised.value).startswith(f"Service serving/pd-epp: cannot reach the API server {NOTHING_LISTENS} ")
    assert f"for {drain.UNREACHABLE_GRACE_SECONDS:.0f} s" in str(raised.value)


# --- Credentials from a kubeconfig -------------------------------------------------------


def plugin(tmp_path: Path, expires_in_seconds: int) -> Path:
    """An exec credential plugin as gke-gcloud-auth-plugin is run: an ExecCredential on stdout, KUBERNETES_EXEC_INFO
    in its environment; each run hands out a new token (numbered), valid for ``expires_in_seconds``."""
    script, count = tmp_path / "auth-plugin", tmp_path / "runs"
    script.write_text(
        f"#!{sys.executable}\n"
        "import datetime, json, os, pathlib\n"
        f"count = pathlib.Path({str(count)!r})\n"
        "runs = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(runs))\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "port = info['spec']['cluster']['server'].rsplit(':', 1)[-1]\n"
        "expiry = datetime.datetime.now(datetime.UTC) + "
        f"datetime.timedelta(seconds={expires_in_seconds})\n"
        "status = {'token': f'from-plugin-{port}-{runs}', 'expirationTimestamp': expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential', 'status': status}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


EXEC_API = "client.authentication.k8s.io/v1beta1"


@pytest.mark.parametrize("expires_in_seconds, tokens", [(3600, 1), (60, 3)])
def test_an_exec_plugin_kubeconfig_runs_the_plugin_again_once_its_token_expires(
    api, tmp_path: Path, expires_in_seconds: int, tokens: int
):
    """The plugin is run with the cluster's info; a token valid for an hour serves every request, one about to
    expire (the library keeps a margin of minutes) is asked for again before each."""
    fake, client = api
    spec = {"apiVersion": EXEC_API, "command": str(plugin(tmp_path, expires_in_seconds)), "provideClusterInfo": True}
    made = drain.client_from_kubeconfig(kubeconfig(client.server, {"exec": spec}))
    fake.states = [{"groups": []}]
    port = client.server.rsplit(":", 1)[-1]
    for _ in range(2):
        drain.holding(made, LOAD_BALANCERS)
    headers = [header for _, header in fake.requests]
    assert len(headers) == 2 and all(h.startswith(f"Bearer from-plugin-{port}-") for h in headers), headers
    assert int((tmp_path / "runs").read_text()) == tokens and len(set(headers)) == min(tokens, 2)


def test_a_missing_exec_plugin_says_how_to_install_it(api):
    _, client = api
    spec = {"apiVersion": EXEC_API, "command": "no-such-plugin-xyz", "installHint": "gcloud components install x"}
    with pytest.raises(drain.KubeError, match="no-such-plugin-xyz is not installed: gcloud components install x"):
        drain.client_from_kubeconfig(kubeconfig(client.server, {"exec": spec}))


def _certificate(
    name: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None, server_name: str | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if server_name:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(server_name)]), critical=False)
    elif issuer is None:
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if issuer is not None:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key())
        builder = builder.add_extension(aki, critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256()), key


def _pem(obj: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


SERVER_NAME = "kubernetes.lab.test"  # the name on the server's certificate; not 127.0.0.1, where it listens


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[FakeApi, str, dict[str, str], dict[str, str]]]:
    """The stand-in over TLS with a certificate for SERVER_NAME alone, asking for a client certificate from its CA;
    yields the fake, its address, and the lab's inline kubeconfig fields (CA, client certificate and key)."""
    ca = _certificate("lab-ca", None)
    server_certificate = _certificate("kube-apiserver", ca, SERVER_NAME)
    admin = _certificate("lab-admin", ca)
    (tmp_path / "server.pem").write_bytes(_pem(server_certificate[0]) + _pem(server_certificate[1]))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.pem")
    context.load_verify_locations(cadata=_pem(ca[0]).decode())
    context.verify_mode = ssl.CERT_REQUIRED
    fake = FakeApi([{"groups": []}])
    server, _ = serve(fake, context)

    def data(obj: x509.Certificate | ec.EllipticCurvePrivateKey) -> str:
        return base64.b64encode(_pem(obj)).decode()

    try:
        yield (
            fake,
            f"https://127.0.0.1:{server.server_address[1]}",
            {"certificate-authority-data": data(ca[0])},
            {"client-certificate-data": data(admin[0]), "client-key-data": data(admin[1])},
        )
    finally:
        server.shutdown()
        server.server_close()


def test_the_labs_kubeconfig_with_a_tls_server_name_reaches_the_server_by_its_certificates_name(tls_api):
    """The CA, client certificate and key inline (the lab's kubeconfig.inline), and tls-server-name: the server is
    checked against its certificate's name and shown the client certificate. Without the name, the certificate
    (not for 127.0.0.1) is refused: nothing is taken for an empty cluster."""
    fake, address, cluster, user = tls_api
    named = drain.client_from_kubeconfig(kubeconfig(address, user, **cluster, **{"tls-server-name": SERVER_NAME}))
    assert drain.holding(named, LOAD_BALANCERS) == []
    assert fake.client_certificates == ["lab-admin"]
    unnamed = drain.client_from_kubeconfig(kubeconfig(address, user, **cluster))
    with pytest.raises(drain.KubeError) as raised:
        drain.holding(unnamed, LOAD_BALANCERS)
    assert raised.value.unanswered and f"cannot reach the API server {address}" in str(raised.value)


def test_a_kubeconfigs_proxy_carries_the_requests(api):
    """proxy-url: the cluster's name need not resolve here, the proxy (the stand-in, answering as the server) is
    asked for it."""
    fake, client = api
    behind = "http://cluster.internal.invalid"
    proxied = drain.client_from_kubeconfig(kubeconfig(behind, {"token": "t"}, **{"proxy-url": client.server}))
    fake.states = [{"groups": []}]
    assert drain.holding(proxied, LOAD_BALANCERS) == []
    assert fake.requests[0] == ("via proxy to cluster.internal.invalid", "Bearer t")


# --- The dynamic providers the engine runs --------------------------------------------------


def test_the_providers_survive_the_round_trip_through_state():
    """The engine stores a dynamic provider serialized and runs it from there at destroy time."""
    import base64

    import dill
    from pulumi.dynamic.dynamic import serialize_provider

    from components.platform.gates import DrainGateProvider, ReadyGateProvider

    for provider in (DrainGateProvider(), ReadyGateProvider()):
        restored = dill.loads(base64.b64decode(serialize_provider(provider)))
        assert type(restored).__module__ == "components.platform.gates"  # the path the state refers to
        assert type(restored).__name__ == type(provider).__name__


def test_the_drain_gate_creates_at_once_and_waits_on_delete(api, capsys):
    from components.platform.gates import DrainGateProvider

    fake, client = api
    fake.states = [{"groups": ["accelerator.gke.io"], "slices": []}]
    props = {
        "name": "tpu-drain-gate",
        "kubeconfig": kubeconfig(client.server, {"token": "t"}),
        "slices": True,
        "workload_namespaces": [],
        "neg_namespaces": [],
        "timeout_seconds": 60,
    }
    provider = DrainGateProvider()
    created = provider.create(props)
    assert created.id == "tpu-drain-gate" and fake.requests == []  # creating asks the cluster nothing
    assert provider.diff("tpu-drain-gate", props, {**props, "timeout_seconds": 90}).replaces == []
    provider.delete("tpu-drain-gate", props)
    assert "tpu-drain-gate: nothing holds on any more" in capsys.readouterr().err
    provider.delete("tpu-drain-gate", {**props, "slices": False, "kubeconfig": "not: a kubeconfig"})  # nothing to ask


def test_the_ready_gate_waits_at_create_and_at_each_update_and_asks_nothing_on_delete(api, capsys):
    """An update is what an upgrade of the release behind the Service makes (``release_revision``): the pickers
    restart, so it waits as the create does. Destroy must pass without the cluster, even one that is gone."""
    from components.platform.gates import ReadyGateProvider

    fake, client = api
    serving = {"deployment": deployment(1, 1, 2), "endpointslices": picker_slices(True, False)}
    props = {
        "name": "router-endpoint-picker",
        "kubeconfig": kubeconfig(client.server, {"token": "t"}),
        "service_namespace": "serving",
        "service_name": "pd-epp",
        "deployment": "pd-epp",
        "check": "the pickers",
        "release_revision": 1,
        "timeout_seconds": 60,
    }
    provider = ReadyGateProvider()
    fake.states = [serving]
    assert provider.create(props).id == "router-endpoint-picker"
    assert "Service serving/pd-epp serves" in capsys.readouterr().err
    upgraded = {**props, "release_revision": 2}
    assert provider.diff("router-endpoint-picker", props, upgraded).changes
    fake.states, fake.polls = [{"deployment": deployment(2, 2, 0), "endpointslices": picker_slices(False, False)}], 0
    with pytest.raises(StillHeld, match=r"0 of 2 pods run its current template.*Check the pickers"):
        provider.update("router-endpoint-picker", props, {**upgraded, "timeout_seconds": 0})
    fake.states = [{**serving, "deployment": deployment(2, 2, 2)}]
    assert provider.update("router-endpoint-picker", props, upgraded).outs == upgraded
    asked = len(fake.requests)
    provider.delete("router-endpoint-picker", upgraded)
    assert len(fake.requests) == asked
    provider.delete("router-endpoint-picker", {**upgraded, "kubeconfig": "not: a kubeconfig"})
