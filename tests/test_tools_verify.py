"""tools.verify against a scripted local OpenAI-compatible stub server and a fake pulumi runner."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from components.workloads.serving.config import served_model_name
from tests.conftest import FIXTURE_STACKS, stack_config
from tools import verify

MODEL = "Qwen/Qwen3.5-397B-A17B-FP8"
COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
BASE_URL = "http://10.0.0.5/v1"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``body`` is a dict to JSON-encode or raw bytes; ``delay`` stalls it first."""

    status: int = 200
    body: dict | bytes | None = None
    delay: float = 0.0


def completion(text: str = "I am fine.", model: str = MODEL) -> dict:
    return {"id": "cmpl-1", "object": "text_completion", "model": model, "choices": [{"index": 0, "text": text}]}


def chat(content: str = "I am fine, thanks.", model: str = MODEL) -> dict:
    message = {"role": "assistant", "content": content}
    return {"id": "chat-1", "object": "chat.completion", "model": model, "choices": [{"index": 0, "message": message}]}


def healthy() -> dict[str, list[Reply]]:
    return {COMPLETIONS: [Reply(body=completion())], CHAT: [Reply(body=chat())]}


class StubServer:
    """Serves scripted replies per path (the last one repeats) and records every request it gets."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = healthy()
        self.requests: dict[str, list[dict]] = defaultdict(list)
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def hits(self, path: str) -> int:
        return len(self.requests[path])

    def _next_reply(self, path: str, body: dict) -> Reply:
        self.requests[path].append(body)
        replies = self.script.get(path, [Reply(404, {"error": "not found"})])
        return replies[min(len(self.requests[path]), len(replies)) - 1]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = stub._next_reply(self.path, request)
                if reply.delay and stub.stopping.wait(reply.delay):
                    return
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def log_message(self, *args) -> None:
                pass

        return Handler


@pytest.fixture(autouse=True)
def no_proxy_for_localhost(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def stub():
    server = StubServer()
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server
    server.stopping.set()
    server.httpd.shutdown()
    server.httpd.server_close()
    thread.join(timeout=5)


class SleepRecorder:
    """Stands in for time.sleep: records backoff delays without waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def no_pulumi(argv):
    raise AssertionError(f"pulumi must not run when --base-url and --model are given: {argv}")


def run_cli(stub_or_url, *extra: str, sleep=None, runner=no_pulumi) -> int:
    base_url = stub_or_url if isinstance(stub_or_url, str) else stub_or_url.base_url
    argv = ["--base-url", base_url, "--model", MODEL, "--backoff", "0.5", *extra]
    return verify.main(argv, runner=runner, sleep=sleep or SleepRecorder())


def report_line(out: str, name: str) -> str:
    (line,) = [line for line in out.splitlines() if line.split()[0] == name]
    return line


# --- end to end against the stub ---------------------------------------------------------------


def test_healthy_endpoint_passes_with_the_reference_request_bodies(stub, capsys):
    assert run_cli(stub) == 0
    out = capsys.readouterr().out
    assert f"endpoint {stub.base_url}  model {MODEL}" in out
    for name in ("completions", "chat"):
        line = report_line(out, name)
        assert " OK " in line and "HTTP 200" in line and "attempts 1" in line and "reason" not in line
    assert stub.requests[COMPLETIONS] == [{"model": MODEL, "prompt": "How are you today?"}]
    assert stub.requests[CHAT] == [
        {"model": MODEL, "messages": [{"role": "user", "content": "How are you today?"}], "max_tokens": 200}
    ]


def test_prompt_flag_reaches_both_requests(stub):
    assert run_cli(stub, "--prompt", "Say hi") == 0
    assert stub.requests[COMPLETIONS][0]["prompt"] == "Say hi"
    assert stub.requests[CHAT][0]["messages"] == [{"role": "user", "content": "Say hi"}]


def test_5xx_is_retried_with_exponential_backoff_then_passes(stub, capsys):
    stub.script[COMPLETIONS] = [Reply(503, {"error": "no healthy upstream"})] * 2 + [Reply(body=completion())]
    sleep = SleepRecorder()
    assert run_cli(stub, "--attempts", "5", sleep=sleep) == 0
    assert stub.hits(COMPLETIONS) == 3
    assert sleep.delays == [0.5, 1.0]
    line = report_line(capsys.readouterr().out, "completions")
    assert " OK " in line and "HTTP 200" in line and "attempts 3" in line


def test_persistent_5xx_stops_after_the_bounded_attempts(stub, capsys):
    stub.script[CHAT] = [Reply(500, b"internal error")]
    sleep = SleepRecorder()
    assert run_cli(stub, "--attempts", "4", sleep=sleep) == 1
    assert stub.hits(CHAT) == 4
    assert sleep.delays == [0.5, 1.0, 2.0]
    line = report_line(capsys.readouterr().out, "chat")
    assert "FAIL" in line and "HTTP 500" in line and "attempts 4" in line and "reason: HTTP 500: internal error" in line


def test_timeout_fails_cleanly_after_the_bounded_attempts(stub, capsys):
    stub.script[COMPLETIONS] = [Reply(body=completion(), delay=5.0)]
    started = time.monotonic()
    assert run_cli(stub, "--attempts", "3", "--timeout", "0.2", "--backoff", "0") == 1
    assert time.monotonic() - started < 3.0
    assert stub.hits(COMPLETIONS) == 3
    out = capsys.readouterr().out
    line = report_line(out, "completions")
    assert "FAIL" in line and "HTTP -" in line and "attempts 3" in line
    assert "reason: no HTTP response:" in line and "timed out" in line
    assert " OK " in report_line(out, "chat")


def test_connection_refused_is_retried_then_reported(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    sleep = SleepRecorder()
    assert run_cli(f"http://127.0.0.1:{closed_port}/v1", "--attempts", "2", sleep=sleep) == 1
    assert sleep.delays == [0.5, 0.5]  # one retry per request
    line = report_line(capsys.readouterr().out, "completions")
    assert "attempts 2" in line and "ConnectionRefusedError" in line


def test_4xx_is_not_retried(stub, capsys):
    stub.script[CHAT] = [Reply(404, {"message": "The model `x` does not exist."}), Reply(body=chat())]
    sleep = SleepRecorder()
    assert run_cli(stub, "--attempts", "5", sleep=sleep) == 1
    assert stub.hits(CHAT) == 1
    assert sleep.delays == []
    line = report_line(capsys.readouterr().out, "chat")
    assert "FAIL" in line and "HTTP 404" in line and "attempts 1" in line and "does not exist" in line


def test_malformed_json_fails_without_retry(stub, capsys):
    stub.script[COMPLETIONS] = [Reply(body=b"<html>upstream connect error</html>")]
    assert run_cli(stub, "--attempts", "3") == 1
    assert stub.hits(COMPLETIONS) == 1
    line = report_line(capsys.readouterr().out, "completions")
    assert "FAIL" in line and "HTTP 200" in line
    assert "reason: response is not JSON: <html>upstream connect error" in line


def test_wrong_model_fails(stub, capsys):
    stub.script[CHAT] = [Reply(body=chat(model="meta-llama/Llama-3.1-8B"))]
    assert run_cli(stub) == 1
    out = capsys.readouterr().out
    assert f"reason: model is 'meta-llama/Llama-3.1-8B', expected '{MODEL}'" in report_line(out, "chat")
    assert " OK " in report_line(out, "completions")


def test_missing_and_empty_text_fail_with_the_field_name(stub, capsys):
    stub.script[COMPLETIONS] = [Reply(body={"model": MODEL, "choices": []})]
    stub.script[CHAT] = [Reply(body=chat(content=""))]
    assert run_cli(stub) == 1
    out = capsys.readouterr().out
    assert "reason: response has no choices[0].text" in report_line(out, "completions")
    assert "reason: choices[0].message.content is '', expected non-empty text" in report_line(out, "chat")


# --- response checks in isolation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (json.dumps(completion()).encode(), None),
        (b"[1, 2]", "response has no choices[0].text"),
        (json.dumps({"choices": [{"text": 7}], "model": MODEL}).encode(), "choices[0].text is 7, expected non-empty"),
        (json.dumps({"choices": [{"text": "hi"}]}).encode(), f"model is missing, expected '{MODEL}'"),
        (b"\xff\xfe\x00garbage", "response is not JSON: "),
    ],
)
def test_failure_reason_names_the_problem(body, reason):
    probe = verify.probes(MODEL, "hi")[0]
    found = verify.failure_reason(probe, verify.Exchange(1, 1.0, 200, body), MODEL)
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.startswith(reason)


def test_field_name_reads_like_the_openai_docs():
    assert verify.field_name(("choices", 0, "message", "content")) == "choices[0].message.content"


# --- stack outputs --------------------------------------------------------------------------------


class FakePulumi:
    """Records the argv it was given and plays back one scripted outcome."""

    def __init__(self, stdout: str = "", returncode: int = 0, stderr: str = "", raises: Exception | None = None):
        self.calls: list[list[str]] = []
        self.outcome = subprocess.CompletedProcess([], returncode, stdout, stderr)
        self.raises = raises

    def __call__(self, argv):
        self.calls.append(list(argv))
        if self.raises:
            raise self.raises
        return self.outcome


def outputs_runner(**outputs) -> FakePulumi:
    return FakePulumi(stdout=json.dumps({"clusterName": "c", **outputs}))


# A stack with no stack file here (a CI runner's, say): everything comes from its outputs. The committed stacks are
# the user's, so the tests do not depend on what they serve.
UNFILED = "ci-only"


def test_resolve_endpoint_runs_pulumi_for_the_named_stack():
    runner = outputs_runner(openaiBaseUrl=BASE_URL, modelName=MODEL)
    assert verify.resolve_endpoint(verify.parse_args(["--stack", UNFILED]), runner) == (BASE_URL, MODEL)
    assert runner.calls == [["pulumi", "stack", "output", "--json", "--stack", UNFILED]]


def test_resolve_endpoint_without_stack_uses_the_selected_stack():
    runner = outputs_runner(openaiBaseUrl=BASE_URL, modelName=MODEL)
    verify.resolve_endpoint(verify.parse_args([]), runner)
    assert runner.calls == [["pulumi", "stack", "output", "--json"]]


def test_main_takes_endpoint_and_model_from_stack_outputs(stub, capsys):
    runner = outputs_runner(openaiBaseUrl=stub.base_url + "/", modelName=MODEL)
    assert verify.main(["--stack", UNFILED], runner=runner, sleep=SleepRecorder()) == 0
    assert runner.calls == [["pulumi", "stack", "output", "--json", "--stack", UNFILED]]
    assert f"endpoint {stub.base_url}  model {MODEL}" in capsys.readouterr().out
    assert stub.hits(COMPLETIONS) == 1 and stub.hits(CHAT) == 1


def test_a_flag_overrides_its_output_and_pulumi_fills_in_the_rest(stub):
    runner = outputs_runner(openaiBaseUrl="not-a-url", modelName=MODEL)
    assert verify.main(["--base-url", stub.base_url], runner=runner, sleep=SleepRecorder()) == 0
    assert len(runner.calls) == 1
    assert stub.requests[COMPLETIONS][0]["model"] == MODEL


def test_base_url_with_a_stack_needs_no_pulumi_the_model_comes_from_the_stack_file(stub):
    model = served_model_name(stack_config("dev").serving)  # the tests' dev stack, as the program names its model
    stub.script[COMPLETIONS] = [Reply(body=completion(model=model))]
    stub.script[CHAT] = [Reply(body=chat(model=model))]
    argv = ["--stack", "dev", "--stack-dir", str(FIXTURE_STACKS), "--base-url", stub.base_url]
    assert verify.main(argv, runner=no_pulumi, sleep=SleepRecorder()) == 0
    assert stub.requests[COMPLETIONS][0]["model"] == model


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        (outputs_runner(modelName=MODEL), "stack output openaiBaseUrl is missing or empty; pass --base-url"),
        (outputs_runner(openaiBaseUrl=BASE_URL), "stack output modelName is missing or empty; pass --model"),
        (outputs_runner(openaiBaseUrl="10.0.0.5/v1", modelName=MODEL), "base URL '10.0.0.5/v1' is not an http(s) URL"),
        (FakePulumi(raises=FileNotFoundError("pulumi")), "pulumi CLI not found; pass --base-url and --model instead"),
        (
            FakePulumi(returncode=255, stderr="\nerror: no stack named 'qa' found\n"),
            "failed: error: no stack named 'qa' found; pass --base-url and --model instead",
        ),
        (FakePulumi(raises=subprocess.TimeoutExpired("pulumi", 60)), "timed out; pass --base-url and --model instead"),
        (FakePulumi(stdout="not json"), "did not print JSON; pass --base-url and --model instead"),
    ],
)
def test_config_problems_exit_2_with_one_line(runner, message, capsys):
    assert verify.main(["--stack", "qa"], runner=runner, sleep=SleepRecorder()) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("verify: error: ") and message in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    "flags",
    [
        ["--attempts", "0"],
        ["--timeout", "0"],
        ["--backoff", "-1"],
        ["--bogus"],
        ["--timeout", "nan"],  # float() reads it, and every comparison with it is false
        ["--backoff", "inf"],
    ],
)
def test_bad_flags_are_usage_errors(flags):
    with pytest.raises(SystemExit) as exit_info:
        verify.main(["--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, *flags], runner=no_pulumi)
    assert exit_info.value.code == 2
