"""The waits of the gates against a fake Kubernetes API on 127.0.0.1: empty, draining, stuck, CRD absent.

The fake answers the few paths the gates read (API group discovery, Slices, Kueue Workloads,
ServiceNetworkEndpointGroups, the webhook configuration and its EndpointSlices) from a state each
test scripts, one state per poll, so a drain can be watched happening.
"""

from __future__ import annotations

import json
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform import drain
from components.platform.drain import DrainSpec, KubeClient, StillHeld, WebhookSpec


class FakeApi:
    """A scripted API server: ``states`` are served in turn, one per poll (the last one stays)."""

    def __init__(self, states: list[dict[str, Any]]):
        self.states = states
        self.polls = 0
        self.requests: list[tuple[str, str]] = []

    @property
    def state(self) -> dict[str, Any]:
        return self.states[min(self.polls, len(self.states) - 1)]

    def answer(self, path: str) -> tuple[int, Any]:
        state = self.state
        if "status" in state:  # the server answers every request so (403, 503 ...)
            return state["status"], {"kind": "Status", "code": state["status"]}
        if path in ("/apis/accelerator.gke.io", "/apis/networking.gke.io"):
            group = path.rsplit("/", 1)[-1]
            if group not in state.get("groups", ()):
                return 404, {"kind": "Status", "code": 404}
            return 200, {"kind": "APIGroup", "preferredVersion": {"groupVersion": f"{group}/v1beta1"}}
        if path == "/apis/accelerator.gke.io/v1beta1/slices":
            return 200, {"items": [{"metadata": {"name": n}} for n in state.get("slices", [])]}
        if path.startswith("/apis/kueue.x-k8s.io/v1beta2/namespaces/"):
            if "kueue" not in state.get("groups", ()):
                return 404, {}
            namespace = path.split("/")[5]
            return 200, {"items": [w for w in state.get("workloads", []) if w["metadata"]["namespace"] == namespace]}
        if path.startswith("/apis/networking.gke.io/v1beta1/namespaces/"):
            namespace = path.split("/")[5]
            negs = [n for n in state.get("negs", []) if n.startswith(f"{namespace}/")]
            return 200, {"items": [{"metadata": {"namespace": namespace, "name": n.split("/")[1]}} for n in negs]}
        if path.startswith("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"):
            return (200, state["webhook"]) if "webhook" in state else (404, {})
        if path.startswith("/apis/discovery.k8s.io/v1/namespaces/"):
            return 200, {"items": state.get("endpointslices", [])}
        return 404, {}


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, KubeClient]]:
    fake = FakeApi([{}])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake.requests.append((self.path, self.headers.get("Authorization", "")))
            if fake.state.get("down"):  # a server going away: the connection drops without an answer
                self.close_connection = True
                return
            code, body = fake.answer(self.path)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield fake, KubeClient(f"http://127.0.0.1:{server.server_address[1]}", {"Authorization": "Bearer t"})
    finally:
        server.shutdown()
        server.server_close()


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
    client = KubeClient("http://127.0.0.1:9", {})  # discard port: nothing listens
    with pytest.raises(drain.KubeError) as raised:
        drain.holding(client, TPU)
    assert raised.value.transient and "cannot reach the API server http://127.0.0.1:9" in str(raised.value)


def test_a_wait_gives_up_on_an_api_that_never_answers_naming_it_and_assuming_nothing_gone():
    client = KubeClient("http://127.0.0.1:9", {})
    fake = FakeApi([{}])
    lines: list[str] = []
    clock = Clock(fake)
    with pytest.raises(drain.KubeError) as raised:
        drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    message = str(raised.value)
    assert message.startswith("gate: cannot reach the API server http://127.0.0.1:9 ")
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
    assert "answered GET /apis/accelerator.gke.io with HTTP 503" in lines[3]
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
    client = KubeClient("http://127.0.0.1:9", {})  # nothing listens: what a deleted cluster's endpoint gives
    lines: list[str] = []
    clock = Clock(FakeApi([{}]))
    drain.wait_until_gone(client, TPU, "gate", report=lines.append, clock=clock, sleep=clock.sleep)
    assert clock.slept == []  # at once: the operator said so, there is nothing to ride out
    (line,) = lines
    assert line.startswith("gate: cannot reach the API server http://127.0.0.1:9 ")
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


WEBHOOK = WebhookSpec("slice-webhooks", "slice-controller-system", "slice-controller-webhook-service", 600)


def webhook(ca: bool) -> dict[str, Any]:
    config = {"clientConfig": {"caBundle": "Q0E="}} if ca else {"clientConfig": {"service": {}}}
    return {"webhooks": [{"name": "mjob.kb.io", **config}]}


def test_the_webhook_is_ready_once_it_has_its_ca_and_a_ready_endpoint(api):
    fake, client = api
    ready_slice = {"endpoints": [{"conditions": {"ready": True}}]}
    fake.states = [
        {},
        {"webhook": webhook(ca=False), "endpointslices": [ready_slice]},
        {"webhook": webhook(ca=True), "endpointslices": [{"endpoints": [{"conditions": {"ready": False}}]}]},
        {"webhook": webhook(ca=True), "endpointslices": [ready_slice]},
    ]
    lines: list[str] = []
    clock = Clock(fake)
    drain.wait_until_webhook_serves(client, WEBHOOK, report=lines.append, clock=clock, sleep=clock.sleep)
    assert "MutatingWebhookConfiguration slice-webhooks does not exist" in lines[0]
    assert "no CA injected yet into mjob.kb.io" in lines[1]
    assert "has no ready endpoint" in lines[2]
    assert lines[-1] == "webhook slice-webhooks serves"
    assert any(
        "labelSelector=kubernetes.io%2Fservice-name%3Dslice-controller-webhook-service" in p for p, _ in fake.requests
    )


def test_a_webhook_that_never_serves_fails_the_create(api):
    fake, client = api
    fake.states = [{"webhook": webhook(ca=False)}]
    clock = Clock(fake)
    spec = WebhookSpec("slice-webhooks", "ns", "svc", 25)
    with pytest.raises(StillHeld, match="cannot serve after 25 s: no CA injected yet"):
        drain.wait_until_webhook_serves(client, spec, report=lambda _: None, clock=clock, sleep=clock.sleep)


# --- Credentials from a kubeconfig -------------------------------------------------------


def kubeconfig(server: str, user: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
            "users": [{"name": "u", "user": user}],
        }
    )


def test_a_token_kubeconfig(api):
    fake, client = api
    made = drain.client_from_kubeconfig(kubeconfig(client.server, {"token": "lab-admin-token"}))
    fake.states = [{"groups": []}]
    drain.holding(made, TPU)
    assert fake.requests[-1][1] == "Bearer lab-admin-token"


def test_an_exec_plugin_kubeconfig_runs_the_plugin_with_the_cluster_info(api, tmp_path: Path):
    """As gke-gcloud-auth-plugin is run: an ExecCredential on stdout, KUBERNETES_EXEC_INFO in the env."""
    _, client = api
    plugin = tmp_path / "auth-plugin"
    plugin.write_text(
        f"#!{sys.executable}\n"
        "import json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "token = 'from-plugin-' + info['spec']['cluster']['server'].rsplit(':', 1)[-1]\n"
        "print(json.dumps({'kind': 'ExecCredential', 'status': {'token': token}}))\n"
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    spec = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin), "provideClusterInfo": True}
    made = drain.client_from_kubeconfig(kubeconfig(client.server, {"exec": spec}))
    port = client.server.rsplit(":", 1)[-1]
    assert made.headers["Authorization"] == f"Bearer from-plugin-{port}"


def test_a_missing_exec_plugin_says_how_to_install_it(api):
    _, client = api
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "no-such-plugin-xyz",
        "installHint": "gcloud components install x",
    }
    with pytest.raises(drain.KubeError, match="no-such-plugin-xyz is not installed: gcloud components install x"):
        drain.client_from_kubeconfig(kubeconfig(client.server, {"exec": spec}))


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
