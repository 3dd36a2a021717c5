"""Client for the Saxml HTTP server (sax-http) that the stack exposes behind a load balancer.

    python -m tools.sax publish --model-id /sax/test/spmd \\
        --model-path saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test --checkpoint None --replicas 2
    python -m tools.sax listcell --model-id /sax/test/spmd
    python -m tools.sax generate --model-id /sax/test/spmd --query "How many days are in a week?"
    python -m tools.sax unpublish --model-id /sax/test/spmd

The server address is the stack output `saxHttpAddress` (HOST or HOST:PORT, port 8888 by default),
read with `pulumi stack output`; `--address` skips Pulumi altogether.
Exit codes: 0 success, 1 the request failed, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from components import naming
from tools.stack_outputs import Runner, UsageError, clipped, number_type, read_stack_outputs, run_pulumi

DEFAULT_PORT = 8888
DEFAULT_TIMEOUT_S = 60.0
PREVIEW_CHARS = 300
ADDRESS_HINT = "pass --address HOST[:PORT] to skip the stack lookup"


class RequestFailed(Exception):
    """The server was unreachable or did not give a usable answer (exit 1)."""


@dataclass(frozen=True)
class Command:
    """One sax-http call: the fields its body holds besides ``model``, with exactly the tutorial's fields (some
    sax-http builds reject a body whose field count differs); ``expects_json`` is False where the tutorial does not
    show the answer's shape."""

    method: str
    path: str
    help: str
    fields: tuple[str, ...] = ()
    expects_json: bool = True

    def body(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"model": args.model_id, **{field: getattr(args, field) for field in self.fields}}


# The four calls of the tutorial.
COMMANDS = {
    "publish": Command(
        "POST", "/publish", "publish a model on the model servers", ("model_path", "checkpoint", "replicas")
    ),
    "listcell": Command("GET", "/listcell", "show a published model and its replicas"),
    "generate": Command("POST", "/generate", "send a prompt to a published model", ("query",), expects_json=False),
    "unpublish": Command("POST", "/unpublish", "unpublish a model"),
}


def stack_address(stack: str | None, runner: Runner = run_pulumi) -> str:
    """The `saxHttpAddress` output of `stack` (Pulumi's selected stack when None)."""
    address = read_stack_outputs(stack, ADDRESS_HINT, runner).get(naming.SAX_ADDRESS_OUTPUT)
    if not isinstance(address, str) or not address:
        raise UsageError(f"stack {stack or '(selected)'} has no output {naming.SAX_ADDRESS_OUTPUT}; {ADDRESS_HINT}")
    return address


def base_url(address: str) -> str:
    """`HOST` or `HOST:PORT` as an http URL; the load balancer speaks plain HTTP on 8888 unless told otherwise."""
    parts = urllib.parse.urlsplit(f"//{address}")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"bad address {address!r}: the port must be a number up to 65535") from None
    if parts.netloc != address or not parts.hostname:
        raise UsageError(f"bad address {address!r}: expected HOST or HOST:PORT, without a scheme or path")
    return f"http://{address}" if port is not None else f"http://{address}:{DEFAULT_PORT}"


def send(base: str, call: Command, body: dict[str, Any], timeout: float) -> str:
    """Send `call` with a JSON body (also for GET, as sax-http's /listcell reads one) and return the answer text."""
    request = urllib.request.Request(
        base + call.path,
        data=json.dumps(body).encode(),
        method=call.method,
        headers={"Content-Type": "application/json"},
    )
    where = f"{call.method} {base}{call.path}"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload: bytes = response.read()
            return payload.decode("utf-8", errors="replace")
    except urllib.error.HTTPError as error:
        answer = error.read().decode("utf-8", errors="replace")
        raise RequestFailed(f"{where}: HTTP {error.code} {error.reason}: {preview(answer)}") from None
    except (OSError, http.client.HTTPException) as error:
        # urllib wraps connect-time failures in URLError: describe the underlying cause instead.
        cause = error.reason if isinstance(error, urllib.error.URLError) else error
        raise RequestFailed(f"{where}: {describe(cause, timeout)}") from None


def describe(reason: object, timeout: float) -> str:
    """Name the likely cause: refused means nothing listens yet, a timeout means a slow or unreachable server."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is sax-http running and its load balancer ready?)"
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g}s (raise --timeout for slow calls)"
    return f"request failed: {reason}"


def rendered(text: str, call: Command) -> str:
    """Pretty JSON for JSON answers; a non-JSON answer is an error wherever the tutorial shows JSON."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except json.JSONDecodeError:
        if call.expects_json:
            raise RequestFailed(f"{call.method} {call.path}: expected a JSON answer, got: {preview(text)}") from None
        return text


def preview(text: str) -> str:
    """One line, bounded: error bodies can be multi-line JSON or a whole HTML page."""
    return clipped(" ".join(text.split()), PREVIEW_CHARS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.sax", description=__doc__.splitlines()[0])
    positive_float = number_type(float, 0, True, "must be greater than 0")
    positive_int = number_type(int, 0, True, "must be greater than 0")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack", help=f"Pulumi stack whose {naming.SAX_ADDRESS_OUTPUT} output to use (default: the selected stack)"
    )
    address_help = f"sax-http HOST[:PORT] (default port {DEFAULT_PORT}); skips Pulumi"
    where.add_argument("--address", metavar="HOST[:PORT]", help=address_help)
    timeout_help = f"per request (default {DEFAULT_TIMEOUT_S:g})"
    parser.add_argument(
        "--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS", help=timeout_help
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help)
        sub.add_argument("--model-id", required=True, metavar="ID", help="Saxml model name, e.g. /sax/test/spmd")
        sub.set_defaults(call=command)
    publish, generate = commands.choices["publish"], commands.choices["generate"]
    path_help = "model class, e.g. saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test"
    publish.add_argument("--model-path", required=True, metavar="PATH", help=path_help)
    publish.add_argument(
        "--checkpoint", required=True, metavar="PATH", help="checkpoint path, or None for random weights"
    )
    replicas_help = "number of model server replicas"
    publish.add_argument("--replicas", required=True, type=positive_int, metavar="N", help=replicas_help)
    generate.add_argument("--query", required=True, metavar="TEXT", help="prompt text")
    return parser


def main(argv: list[str] | None = None, runner: Runner = run_pulumi) -> int:
    """Return the exit code so tests can call it (argparse still exits 2 itself); `runner` replaces the pulumi CLI."""
    args = build_parser().parse_args(argv)
    call: Command = args.call
    try:
        base = base_url(args.address or stack_address(args.stack, runner))
        print(rendered(send(base, call, call.body(args), args.timeout), call))
    except (UsageError, RequestFailed) as error:
        print(f"sax: {error}", file=sys.stderr)
        return 2 if isinstance(error, UsageError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
