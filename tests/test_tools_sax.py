"""tools.sax against a local stub of sax-http: request shapes from the tutorial, error handling, stack lookup."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from components import naming
from tools import sax

MODEL = "/sax/test/spmd"
MODEL_PATH = "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test"


@dataclass
class Received:
    method: str
    path: str
    content_type: str | None
    body: Any


@dataclass
class Answer:
    status: int
    body: str
    delay_s: float = 0.0


@dataclass
class Stub:
    """Scripted answers by (method, path); anything unscripted gets sax-http's 404."""

    port: int
    script: dict[tuple[str, str], Answer] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.answer()

    def answer(self) -> None:
        stub: Stub = self.server.stub
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        stub.received.append(
            Received(self.command, self.path, self.headers.get("Content-Type"), json.loads(raw) if raw else None)
        )
        scripted = stub.script.get((self.command, self.path), Answer(404, '{"detail": "Not Found"}'))
        time.sleep(scripted.delay_s)
        payload = scripted.body.encode()
        try:
            self.send_response(scripted.status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (timeout test)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("no_proxy", "*")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.stub = Stub(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.stub
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(stub: Stub, *argv: str) -> int:
    return sax.main(["--address", stub.address, "--timeout", "5", *argv])


# argv, method, path, body: the tutorial's curl calls.
TUTORIAL_CALLS = [
    (
        ["publish", "--model-id", MODEL, "--model-path", MODEL_PATH, "--checkpoint", "None", "--replicas", "2"],
        "POST",
        "/publish",
        {"model": MODEL, "model_path": MODEL_PATH, "checkpoint": "None", "replicas": 2},
    ),
    (["listcell", "--model-id", MODEL], "GET", "/listcell", {"model": MODEL}),
    (
        ["generate", "--model-id", MODEL, "--query", "How many days are in a week?"],
        "POST",
        "/generate",
        {"model": MODEL, "query": "How many days are in a week?"},
    ),
    (["unpublish", "--model-id", MODEL], "POST", "/unpublish", {"model": MODEL}),
]


@pytest.mark.parametrize("argv, method, path, body", TUTORIAL_CALLS, ids=[c[2] for c in TUTORIAL_CALLS])
def test_each_command_sends_the_tutorial_request_and_prints_the_answer(stub, capsys, argv, method, path, body):
    answer = {"model": MODEL, "echo": path}
    stub.script[(method, path)] = Answer(200, json.dumps(answer))
    assert run(stub, *argv) == 0
    assert stub.received == [Received(method, path, "application/json", body)]
    out = capsys.readouterr().out
    assert json.loads(out) == answer
    assert out.startswith('{\n  "model"'), "answer is pretty-printed"


def test_replicas_is_sent_as_a_json_number(stub):
    stub.script[("POST", "/publish")] = Answer(200, "{}")
    assert run(stub, *TUTORIAL_CALLS[0][0]) == 0
    assert type(stub.received[0].body["replicas"]) is int


def test_generate_prints_a_plain_text_answer_as_is(stub, capsys):
    stub.script[("POST", "/generate")] = Answer(200, "seven days")
    assert run(stub, "generate", "--model-id", MODEL, "--query", "q") == 0
    assert capsys.readouterr().out == "seven days\n"


def test_server_error_shows_status_and_message(stub, capsys):
    stub.script[("GET", "/listcell")] = Answer(
        500, json.dumps({"detail": "model /sax/test/spmd is not published"}, indent=4)
    )
    assert run(stub, "listcell", "--model-id", MODEL) == 1
    err = capsys.readouterr().err
    assert "GET http://127.0.0.1" in err and "/listcell: HTTP 500" in err
    assert '{ "detail": "model /sax/test/spmd is not published" }' in err
    assert len(err.strip().splitlines()) == 1


def test_not_found_is_a_request_failure(stub, capsys):
    assert run(stub, "unpublish", "--model-id", MODEL) == 1
    assert "HTTP 404" in capsys.readouterr().err


def test_long_error_bodies_are_truncated(stub, capsys):
    stub.script[("POST", "/unpublish")] = Answer(500, "x" * 5000)
    assert run(stub, "unpublish", "--model-id", MODEL) == 1
    err = capsys.readouterr().err
    assert "x" * sax.PREVIEW_CHARS + "…" in err
    assert "x" * (sax.PREVIEW_CHARS + 1) not in err


def test_timeout_is_a_request_failure(stub, capsys):
    stub.script[("POST", "/generate")] = Answer(200, "{}", delay_s=1.0)
    started = time.monotonic()
    code = sax.main(["--address", stub.address, "--timeout", "0.2", "generate", "--model-id", MODEL, "--query", "q"])
    assert code == 1
    assert time.monotonic() - started < 0.9
    assert "no answer within 0.2s" in capsys.readouterr().err


def test_connection_refused_is_a_request_failure(capsys):
    code = sax.main(["--address", f"127.0.0.1:{closed_port()}", "listcell", "--model-id", MODEL])
    assert code == 1
    assert "connection refused" in capsys.readouterr().err


def test_malformed_json_answer_is_a_request_failure(stub, capsys):
    stub.script[("POST", "/publish")] = Answer(200, '{"model": "/sax/test/spmd",')
    assert run(stub, *TUTORIAL_CALLS[0][0]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert 'expected a JSON answer, got: {"model": "/sax/test/spmd",' in captured.err


def fake_pulumi(returncode: int = 0, stdout: str = "", stderr: str = "", raises: Exception | None = None):
    """A runner standing in for the pulumi CLI; it records the argv it was given."""
    calls: list[list[str]] = []

    def runner(args: list[str]) -> subprocess.CompletedProcess:
        calls.append(args)
        if raises:
            raise raises
        return subprocess.CompletedProcess(args, returncode, stdout, stderr)

    runner.calls = calls
    return runner


def test_address_comes_from_the_stack_output(stub, capsys):
    stub.script[("GET", "/listcell")] = Answer(200, '{"active_replicas": 2}')
    runner = fake_pulumi(stdout=json.dumps({"clusterName": "c", naming.SAX_ADDRESS_OUTPUT: stub.address}))
    assert sax.main(["--stack", "dev", "listcell", "--model-id", MODEL], runner=runner) == 0
    assert runner.calls == [["pulumi", "stack", "output", "--json", "--stack", "dev"]]
    assert [r.path for r in stub.received] == ["/listcell"]
    assert json.loads(capsys.readouterr().out) == {"active_replicas": 2}


def test_without_stack_the_selected_stack_is_asked():
    runner = fake_pulumi(stdout=json.dumps({naming.SAX_ADDRESS_OUTPUT: "10.0.0.7"}))
    assert sax.stack_address(None, runner) == "10.0.0.7"
    assert runner.calls == [["pulumi", "stack", "output", "--json"]]


@pytest.mark.parametrize(
    "runner, expected",
    [
        (fake_pulumi(stdout=json.dumps({"clusterName": "c"})), "stack dev has no output saxHttpAddress"),
        (fake_pulumi(stdout=json.dumps({naming.SAX_ADDRESS_OUTPUT: ""})), "stack dev has no output saxHttpAddress"),
        (fake_pulumi(stdout="not json"), "did not print JSON"),
        (
            fake_pulumi(255, stderr="Updating...\nerror: no stack named 'dev' found\n"),
            "failed: error: no stack named 'dev' found",
        ),
        (fake_pulumi(raises=FileNotFoundError("pulumi")), "pulumi CLI not found"),
        (fake_pulumi(raises=subprocess.TimeoutExpired("pulumi", 60)), "timed out"),
    ],
    ids=["missing-output", "empty-output", "not-json", "cli-failure", "no-cli", "cli-timeout"],
)
def test_stack_lookup_problems_exit_2_and_suggest_address(capsys, runner, expected):
    assert sax.main(["--stack", "dev", "listcell", "--model-id", MODEL], runner=runner) == 2
    err = capsys.readouterr().err
    assert expected in err and "--address" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "address, url",
    [
        ("10.0.0.7", "http://10.0.0.7:8888"),
        ("10.0.0.7:9000", "http://10.0.0.7:9000"),
        ("sax.example:80", "http://sax.example:80"),
    ],
)
def test_base_url_defaults_the_port(address, url):
    assert sax.base_url(address) == url


@pytest.mark.parametrize("address", ["10.0.0.7:http", "10.0.0.7:70000", "http://10.0.0.7", "10.0.0.7/publish", ":8888"])
def test_bad_address_exits_2(capsys, address):
    assert sax.main(["--address", address, "listcell", "--model-id", MODEL]) == 2
    assert "bad address" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["listcell"],
        ["publish", "--model-id", MODEL, "--model-path", "p", "--checkpoint", "None", "--replicas", "0"],
        ["--timeout", "0", "listcell", "--model-id", MODEL],
        ["--timeout", "nan", "listcell", "--model-id", MODEL],
    ],
    ids=["no-command", "no-model-id", "zero-replicas", "zero-timeout", "nan-timeout"],
)
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exit_info:
        sax.main(argv)
    assert exit_info.value.code == 2
