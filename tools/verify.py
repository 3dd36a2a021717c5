"""Smoke-test the OpenAI-compatible vLLM endpoint served behind the GKE Gateway.

Sends one ``/v1/completions`` and one ``/v1/chat/completions`` request (the same two the codelab's
verification script sends) and checks that each answers with generated text from the expected model.
Without ``--base-url``/``--model`` the endpoint comes from the stack outputs ``openaiBaseUrl`` and
``modelName``. Prints one line per request; exits 0 when both pass, 1 when any fails and 2 on a
usage or configuration error.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import operator
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import naming
from tools.stack_file import NoStackFile, StackFileError, add_stack_dir_option, stack_config_values
from tools.stack_outputs import Runner, UsageError, clipped, number_type, read_stack_outputs, run_pulumi

DEFAULT_PROMPT = "How are you today?"
CHAT_MAX_TOKENS = 200
SNIPPET_CHARS = 120
STACK_HINT = "pass --base-url and --model instead"

Sleep = Callable[[float], None]
Field = tuple[str | int, ...]
_MISSING = object()


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


def stack_output(outputs: dict[str, Any], name: str, flag: str) -> str:
    value = outputs.get(name)
    if not isinstance(value, str) or not value:
        raise UsageError(f"stack output {name} is missing or empty; pass {flag}")
    return value


def configured_model(stack: str | None, stack_dir: Path) -> str | None:
    """The served model name the stack file configures (as the program derives it), or None."""
    if stack is None:
        return None
    from components.config_base import ConfigError
    from components.stack import load_pulumi_values
    from components.workloads.serving.config import served_model_name

    try:
        return served_model_name(load_pulumi_values(*stack_config_values(stack, stack_dir)).config.serving)
    except (NoStackFile, StackFileError, ConfigError):
        return None


def resolve_endpoint(args: argparse.Namespace, runner: Runner) -> tuple[str, str]:
    """Base URL and model name: flags win; the model comes next from the stack file (no Pulumi
    needed); pulumi is asked only for what is still missing."""
    base_url, model = args.base_url, args.model or configured_model(args.stack, args.stack_dir)
    if base_url is None or model is None:
        outputs = read_stack_outputs(args.stack, STACK_HINT, runner)
        base_url = base_url or stack_output(outputs, naming.BASE_URL_OUTPUT, "--base-url")
        model = model or stack_output(outputs, naming.MODEL_NAME_OUTPUT, "--model")
    if not base_url.startswith(("http://", "https://")):
        raise UsageError(f"base URL {base_url!r} is not an http(s) URL")
    return base_url.rstrip("/"), model


def attempt_once(url: str, payload: bytes, timeout: float, attempt: int) -> Exchange:
    """One timed POST; an HTTP error status is an answer to inspect, and a transport failure (refused, reset,
    timed out) an Exchange without status."""
    request = urllib.request.Request(url, data=payload, headers={"Content-Type": "application/json"}, method="POST")
    started = time.monotonic()
    try:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as error:
            with error:
                status, body = error.code, error.read()
    except (OSError, http.client.HTTPException) as error:
        # urllib wraps connect-time failures in URLError: name the underlying cause instead.
        cause = error.reason if isinstance(error, urllib.error.URLError) else error
        described = f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) else str(cause)
        return Exchange(attempt, (time.monotonic() - started) * 1000, None, error=described)
    return Exchange(attempt, (time.monotonic() - started) * 1000, status, body)


def send_with_retries(url: str, payload: bytes, args: argparse.Namespace, sleep: Sleep) -> Exchange:
    """Up to ``--attempts`` tries: a model still loading answers 5xx or times out for a while (a 4xx will not
    change); the backoff doubles after each failed attempt, so a slow start is not hammered."""
    attempt = 1
    while True:
        exchange = attempt_once(url, payload, args.timeout, attempt)
        if attempt >= args.attempts or not (exchange.status is None or exchange.status >= 500):
            return exchange
        sleep(args.backoff * 2.0 ** (attempt - 1))
        attempt += 1


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
        return f"model is {'missing' if served is _MISSING else repr(served)}, expected {model!r}"
    return None


def dig(document: Any, field: Field) -> Any:
    """The value at ``field`` (dict keys and list indexes), or _MISSING if any step is absent. Each field ends with a
    key, so an index that lands in text fails at that key, as a step into any other scalar does."""
    try:
        return functools.reduce(operator.getitem, field, document)
    except (KeyError, IndexError, TypeError):
        return _MISSING


def field_name(field: Field) -> str:
    """``("choices", 0, "text")`` -> ``choices[0].text``, the way the OpenAI docs spell it."""
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in field).lstrip(".")


def probe_line(probe: Probe, base_url: str, model: str, args: argparse.Namespace, sleep: Sleep) -> tuple[bool, str]:
    """Whether the probe passed, and its report line."""
    exchange = send_with_retries(f"{base_url}/{probe.path}", json.dumps(probe.body).encode(), args, sleep)
    reason = failure_reason(probe, exchange, model)
    status = "-" if exchange.status is None else str(exchange.status)
    line = (
        f"{probe.name:<12} {'OK' if reason is None else 'FAIL':<4}  HTTP {status:<3}  "
        f"attempts {exchange.attempts}  latency {exchange.latency_ms:.0f} ms"
    )
    return reason is None, line if reason is None else f"{line}  reason: {reason}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.verify", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--stack", help="stack whose outputs name the endpoint (default: the selected stack)")
    add_stack_dir_option(parser)
    url_help = f"OpenAI base URL, e.g. http://10.0.0.5/v1 (default: output {naming.BASE_URL_OUTPUT})"
    add("--base-url", metavar="URL", help=url_help)
    add("--model", metavar="NAME", help=f"model the endpoint must report (default: output {naming.MODEL_NAME_OUTPUT})")
    at_least_one = number_type(int, 1, False, "must be at least 1")
    positive = number_type(float, 0, True, "must be greater than 0")
    not_negative = number_type(float, 0, False, "must not be negative")
    add("--attempts", metavar="N", type=at_least_one, default=6, help="attempts per request (default: 6)")
    timeout_help = "how long one attempt may wait to connect or for the response (default: 30)"
    add("--timeout", metavar="SECONDS", type=positive, default=30.0, help=timeout_help)
    backoff_help = "delay before the first retry, doubled for each further one (default: 2)"
    add("--backoff", metavar="SECONDS", type=not_negative, default=2.0, help=backoff_help)
    add("--prompt", metavar="TEXT", default=DEFAULT_PROMPT, help=f"prompt (default: {DEFAULT_PROMPT!r})")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, runner: Runner = run_pulumi, sleep: Sleep = time.sleep) -> int:
    args = parse_args(argv)
    try:
        base_url, model = resolve_endpoint(args, runner)
    except UsageError as error:
        print(f"verify: error: {error}", file=sys.stderr)
        return 2
    print(f"endpoint {base_url}  model {model}")
    results = [probe_line(probe, base_url, model, args, sleep) for probe in probes(model, args.prompt)]
    for _, line in results:
        print(line)
    return 0 if all(ok for ok, _ in results) else 1


def _snippet(body: bytes) -> str:
    return clipped(" ".join(body.decode("utf-8", "replace").split()), SNIPPET_CHARS, "...")


if __name__ == "__main__":
    sys.exit(main())
