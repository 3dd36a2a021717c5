"""A stand-in for the OpenAI-compatible endpoint the benchmark measures, on 127.0.0.1 only (the lab, tests/bench).

It answers what inference-perf's completion client sends (inference_perf/apis/completion.py): ``GET
/v1/models`` and ``POST /v1/completions`` with ``stream`` and ``stream_options.include_usage``. A
streamed answer is ``max_tokens`` server-sent events of one word each, the first after ``ttft`` seconds
and the next every ``itl`` seconds, then a usage chunk and ``[DONE]``, as vLLM streams them. It counts
what it served, so a test can hold the harness's report against it. Requests are bounded: a prompt or
``max_tokens`` over the limits is refused with 400, and the server stops with its test.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = "tok"  # every generated token: one word, one token of the lab's tokenizer
MAX_TOKENS_LIMIT = 4096
MAX_BODY_BYTES = 4 << 20


@dataclass
class Served:
    """What the stand-in answered, for the test to compare with the report."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    streamed: int = 0
    max_tokens: list[int] = field(default_factory=list)
    prompt_words: list[int] = field(default_factory=list)
    models: set[str] = field(default_factory=set)


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: str, ttft: float, itl: float):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model, self.ttft, self.itl = model, ttft, itl
        self.served = Served()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> StandIn:
        threading.Thread(target=self.serve_forever, name="openai-standin", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: StandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the base class's signature
        """Quiet: the test reads what was served from ``Served``."""

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.server.model, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path != "/v1/completions" or length > MAX_BODY_BYTES:
            self._json(404 if self.path != "/v1/completions" else 413, {"error": {"message": "refused"}})
            return
        body = json.loads(self.rfile.read(length))
        max_tokens = int(body.get("max_tokens") or 16)
        if body.get("model") != self.server.model or not 0 < max_tokens <= MAX_TOKENS_LIMIT:
            self._json(400, {"error": {"message": f"model {body.get('model')!r} or max_tokens {max_tokens}"}})
            return
        prompt_words = len(str(body.get("prompt", "")).split())
        with self.server.served.lock:
            served = self.server.served
            served.requests += 1
            served.streamed += bool(body.get("stream"))
            served.max_tokens.append(max_tokens)
            served.prompt_words.append(prompt_words)
            served.models.add(body["model"])
        usage = {
            "prompt_tokens": prompt_words,
            "completion_tokens": max_tokens,
            "total_tokens": prompt_words + max_tokens,
        }
        if not body.get("stream"):
            time.sleep(self.server.ttft + self.server.itl * (max_tokens - 1))
            text = " ".join([WORD] * max_tokens)
            self._json(200, {"object": "text_completion", "choices": [{"index": 0, "text": text}], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(self.server.ttft)
        for index in range(max_tokens):
            if index:
                time.sleep(self.server.itl)
            text = WORD if index == 0 else f" {WORD}"
            self._event({"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": None}]})
        self._event({"object": "text_completion", "choices": [], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _event(self, payload: dict[str, Any]) -> None:
        self._chunk(f"data: {json.dumps(payload)}\n\n".encode())

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
