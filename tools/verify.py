"""Smoke-test the OpenAI-compatible vLLM endpoint served behind the GKE Gateway.

    python -m tools.verify [--stack STACK] [--base-url URL] [--model NAME]
                           [--attempts N] [--timeout SECONDS] [--backoff SECONDS] [--prompt TEXT]

Sends one ``/v1/completions`` and one ``/v1/chat/completions`` request (the same two the codelab's
verification script sends) and checks that each answers with generated text from the expected model.
Without ``--base-url``/``--model`` the endpoint comes from the stack outputs ``openaiBaseUrl`` and
``modelName``. Prints one line per request; exits 0 when both pass, 1 when any fails and 2 on a
usage or configuration error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tools.stack_outputs import Runner, StackOutputsError, read_stack_outputs, run_pulumi

BASE_URL_OUTPUT = "openaiBaseUrl"
MODEL_OUTPUT = "modelName"
DEFAULT_PROMPT = "How are you today?"
CHAT_MAX_TOKENS = 200
SNIPPET_CHARS = 120
STACK_HINT = "pass --base-url and --model instead"

Sleep = Callable[[float], None]
Field = tuple[str | int, ...]
_MISSING = object()


class ConfigError(Exception):
    """A usage or configuration problem: reported on one line and mapped to exit code 2."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one request: a model that is still loading answers 503 or times out for a while."""

    attempts: int
    timeout: float
    backoff: float

    def delay(self, attempt: int) -> float:
        """Exponential backoff after failed attempt ``attempt`` (1-based), so a slow start is not hammered."""
        return self.backoff * 2.0 ** (attempt - 1)


@dataclass(frozen=True)
class Probe:
    """One smoke-test request and where the generated text lives in its response."""

    name: str
    path: str
    body: dict[str, Any]
    text_field: Field


@dataclass(frozen=True)
class Exchange:
    """The last attempt of a request and its latency; ``status`` is None when no HTTP response arrived."""

    attempts: int
    latency_ms: float
    status: int | None
    body: bytes = b""
    error: str = ""


@dataclass(frozen=True)
class ProbeResult:
    """The verdict for one probe, with what the report line needs."""

    name: str
    attempts: int
    latency_ms: float
    status: int | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.reason is None

    def line(self) -> str:
        status = "-" if self.status is None else str(self.status)
        text = (
            f"{self.name:<12} {'OK' if self.ok else 'FAIL':<4}  HTTP {status:<3}  "
            f"attempts {self.attempts}  latency {self.latency_ms:.0f} ms"
        )
        return text if self.ok else f"{text}  reason: {self.reason}"


def probes(model: str, prompt: str) -> list[Probe]:
    """The codelab's two verification requests, with the prompt configurable."""
    return [
        Probe("completions", "completions", {"model": model, "prompt": prompt}, ("choices", 0, "text")),
        Probe(
            "chat",
            "chat/completions",
            {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": CHAT_MAX_TOKENS},
            ("choices", 0, "message", "content"),
        ),
    ]


# --- stack outputs ---------------------------------------------------------------------------------


def stack_output(outputs: dict[str, Any], name: str, flag: str) -> str:
    """A required string output, with the flag that can stand in for it when it is absent."""
    value = outputs.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"stack output {name} is missing or empty; pass {flag}")
    return value


def configured_model(stack: str | None) -> str | None:
    """The served model name the stack file configures (as the program derives it), or None."""
    if stack is None:
        return None
    from components.config_base import ConfigError as StackConfigError
    from components.stack import parse_pulumi_values
    from components.workloads.serving.config import served_model_name
    from tools.stack_file import StackFileError, stack_config_values

    try:
        values, _ = stack_config_values(stack)
        return served_model_name(parse_pulumi_values(values).serving)
    except (FileNotFoundError, StackFileError, StackConfigError):
        return None


def resolve_endpoint(args: argparse.Namespace, runner: Runner) -> tuple[str, str]:
    """Base URL and model name: flags win; the model comes next from the stack file (no Pulumi
    needed); pulumi is asked only for what is still missing."""
    base_url, model = args.base_url, args.model or configured_model(args.stack)
    if base_url is None or model is None:
        try:
            outputs = read_stack_outputs(args.stack, STACK_HINT, runner)
        except StackOutputsError as error:
            raise ConfigError(str(error)) from None
        base_url = base_url or stack_output(outputs, BASE_URL_OUTPUT, "--base-url")
        model = model or stack_output(outputs, MODEL_OUTPUT, "--model")
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base URL {base_url!r} is not an http(s) URL")
    return base_url.rstrip("/"), model


# --- HTTP ------------------------------------------------------------------------------------------


def post_json(url: str, payload: bytes, timeout: float) -> tuple[int, bytes]:
    """POST a JSON body; an HTTP error status is an answer to inspect, not an exception."""
    request = urllib.request.Request(url, data=payload, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


def attempt_once(url: str, payload: bytes, timeout: float, attempt: int) -> Exchange:
    """One timed attempt; transport failures (refused, reset, timed out) become an Exchange without status."""
    started = time.monotonic()
    try:
        status, body = post_json(url, payload, timeout)
    except (OSError, http.client.HTTPException) as error:
        return Exchange(attempt, _elapsed_ms(started), None, error=_describe(error))
    return Exchange(attempt, _elapsed_ms(started), status, body)


def retryable(exchange: Exchange) -> bool:
    """Transport errors and 5xx can be a gateway or model still warming up; a 4xx will not change."""
    return exchange.status is None or exchange.status >= 500


def send_with_retries(url: str, payload: bytes, policy: RetryPolicy, sleep: Sleep) -> Exchange:
    """Try up to ``policy.attempts`` times, backing off between retryable failures."""
    attempt = 1
    while True:
        exchange = attempt_once(url, payload, policy.timeout, attempt)
        if attempt >= policy.attempts or not retryable(exchange):
            return exchange
        sleep(policy.delay(attempt))
        attempt += 1


# --- response checks -------------------------------------------------------------------------------


def failure_reason(probe: Probe, exchange: Exchange, model: str) -> str | None:
    """Why the final answer does not prove the endpoint serves ``model``, or None when it does."""
    if exchange.status is None:
        return f"no HTTP response: {exchange.error}"
    if not 200 <= exchange.status < 300:
        return f"HTTP {exchange.status}: {_snippet(exchange.body)}"
    try:
        document = json.loads(exchange.body)
    except ValueError:
        return f"response is not JSON: {_snippet(exchange.body)}"
    text = dig(document, probe.text_field)
    if text is _MISSING:
        return f"response has no {field_name(probe.text_field)}"
    if not isinstance(text, str) or not text.strip():
        return f"{field_name(probe.text_field)} is {text!r}, expected non-empty text"
    served = dig(document, ("model",))
    if served != model:
        served_text = "missing" if served is _MISSING else repr(served)
        return f"model is {served_text}, expected {model!r}"
    return None


def dig(document: Any, field: Field) -> Any:
    """The value at ``field`` (dict keys and list indexes), or _MISSING if any step is absent."""
    value = document
    for key in field:
        if isinstance(key, int):
            if not isinstance(value, list) or key >= len(value):
                return _MISSING
        elif not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def field_name(field: Field) -> str:
    """``("choices", 0, "text")`` -> ``choices[0].text``, the way the OpenAI docs spell it."""
    name = ""
    for key in field:
        name += f"[{key}]" if isinstance(key, int) else f".{key}"
    return name.lstrip(".")


def run_probe(probe: Probe, base_url: str, model: str, policy: RetryPolicy, sleep: Sleep) -> ProbeResult:
    payload = json.dumps(probe.body).encode()
    exchange = send_with_retries(f"{base_url}/{probe.path}", payload, policy, sleep)
    reason = failure_reason(probe, exchange, model)
    return ProbeResult(probe.name, exchange.attempts, exchange.latency_ms, exchange.status, reason)


# --- CLI -------------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", help="stack whose outputs name the endpoint (default: the selected stack)")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help=f"OpenAI base URL, e.g. http://10.0.0.5/v1 (default: output {BASE_URL_OUTPUT})",
    )
    parser.add_argument(
        "--model", metavar="NAME", help=f"model the endpoint must report (default: output {MODEL_OUTPUT})"
    )
    parser.add_argument(
        "--attempts", metavar="N", type=_positive_int, default=6, help="attempts per request (default: 6)"
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive_float,
        default=30.0,
        help="how long one attempt may wait to connect or for the response (default: 30)",
    )
    parser.add_argument(
        "--backoff",
        metavar="SECONDS",
        type=_non_negative_float,
        default=2.0,
        help="delay before the first retry, doubled for each further one (default: 2)",
    )
    parser.add_argument(
        "--prompt", metavar="TEXT", default=DEFAULT_PROMPT, help=f"prompt (default: {DEFAULT_PROMPT!r})"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, runner: Runner = run_pulumi, sleep: Sleep = time.sleep) -> int:
    args = parse_args(argv)
    try:
        base_url, model = resolve_endpoint(args, runner)
    except ConfigError as error:
        print(f"verify: error: {error}", file=sys.stderr)
        return 2
    policy = RetryPolicy(args.attempts, args.timeout, args.backoff)
    print(f"endpoint {base_url}  model {model}")
    results = [run_probe(probe, base_url, model, policy, sleep) for probe in probes(model, args.prompt)]
    for result in results:
        print(result.line())
    return 0 if all(result.ok for result in results) else 1


def _elapsed_ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _describe(error: BaseException) -> str:
    """urllib wraps connect-time failures in URLError; name the underlying cause instead."""
    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    return f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) else str(cause)


def _snippet(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "..."


if __name__ == "__main__":
    sys.exit(main())
