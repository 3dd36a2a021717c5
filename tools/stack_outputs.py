"""Read a stack's outputs through `pulumi stack output --json`, shared by the CLI tools.

Every failure becomes one UsageError line ending with the caller's hint, so each tool can
report it as its own usage error and say which flags make Pulumi unnecessary. The tools' other shared helpers
(quoting a command's output, argparse's number types) live here too.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from collections.abc import Callable
from typing import Any

from tools.stack_file import PROJECT_ROOT

PULUMI_TIMEOUT_S = 60
STDERR_CHARS = 300

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


class UsageError(ValueError):
    """What the user fixes by calling a tool otherwise (its exit code 2), on one line; outputs that cannot be read
    end with the caller's hint."""


def run_pulumi(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the Pulumi CLI in the project folder, bounded so a stuck backend login cannot hang a tool."""
    return subprocess.run(
        list(argv), cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=PULUMI_TIMEOUT_S, check=False
    )


def read_stack_outputs(stack: str | None, hint: str, runner: Runner = run_pulumi) -> dict[str, Any]:
    """The outputs of `stack` (Pulumi's selected stack when None); `runner` stands in for the CLI in tests."""
    argv = ["pulumi", "stack", "output", "--json", *(["--stack", stack] if stack else [])]
    command = " ".join(argv)
    try:
        completed = runner(argv)
    except FileNotFoundError:
        raise UsageError(f"pulumi CLI not found; {hint}") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"`{command}` timed out; {hint}") from None
    if completed.returncode != 0:
        detail = clipped(last_line(completed.stderr, ""), STDERR_CHARS) or f"exit code {completed.returncode}"
        raise UsageError(f"`{command}` failed: {detail}; {hint}")
    try:
        outputs = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise UsageError(f"`{command}` did not print JSON; {hint}") from None
    if not isinstance(outputs, dict):
        raise UsageError(f"`{command}` did not print a JSON object; {hint}")
    return outputs


def last_line(text: str | None, otherwise: str = "no message") -> str:
    """The last line a command printed, ``otherwise`` when it printed none: a command ends its error output with the
    actual reason (Pulumi's earlier lines are progress noise)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else otherwise


def clipped(text: str, limit: int, more: str = "…") -> str:
    """``text`` cut to its first ``limit`` characters, ``more`` marking the cut: a reply quoted in one message."""
    return text if len(text) <= limit else text[:limit] + more


def number_type(convert: Callable[[str], float], least: float, strict: bool, must: str) -> Callable[[str], Any]:
    """An argparse type: ``convert`` the text, refused below ``least`` (or at it, when ``strict``) with ``must`` and
    the text as typed."""

    def parse(text: str) -> Any:
        value = convert(text)
        if not math.isfinite(value):  # float() reads nan and inf, which no wait or count can be
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < least or (strict and value == least):
            raise argparse.ArgumentTypeError(f"{must}, got {text}")
        return value

    parse.__name__ = convert.__name__  # argparse names it in "invalid int value"
    return parse
