"""Shared test helpers: run the real program under mocks with the dev stack plus overrides."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from components.stack_config import NAMESPACE, ConfigError  # noqa: E402
from tools.mock_engine import ProgramRun, run_program, stack_config_values  # noqa: E402


def stack_values(stack: str = "dev") -> dict[str, Any]:
    """Decoded config of a committed stack: top-level key -> value."""
    values, _ = stack_config_values(stack)
    prefix = f"{NAMESPACE}:"
    decoded = {}
    for key, text in values.items():
        try:
            decoded[key[len(prefix):]] = json.loads(text)
        except json.JSONDecodeError:
            decoded[key[len(prefix):]] = text
    return decoded


def with_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``overrides`` (dotted keys allowed: ``{"tpu.zone": "x"}``) into a copy of ``base``."""
    merged = copy.deepcopy(base)
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        target = merged
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return merged


def as_pulumi_values(raw: dict[str, Any]) -> dict[str, str]:
    return {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def run_stack(overrides: dict[str, Any] | None = None, stack: str = "dev", preview: bool = True) -> ProgramRun:
    raw = with_overrides(stack_values(stack), overrides or {})
    return run_program(as_pulumi_values(raw), stack=stack, preview=preview)


@pytest.fixture(scope="session")
def dev_run() -> ProgramRun:
    return run_stack()


def assert_bad_input(override: dict[str, Any], key: str, fragment: str, stack: str = "dev") -> None:
    """The program refuses ``stack`` with ``override``: a problem under ``key`` saying ``fragment``,
    and not one resource registered."""
    registrations: list = []
    raw = with_overrides(stack_values(stack), override)
    with pytest.raises(ConfigError) as raised:
        run_program(as_pulumi_values(raw), stack=stack, registrations=registrations)
    matching = [p for p in raised.value.problems if p.key == key]
    assert matching, f"no problem for {key}; got:\n{raised.value}"
    assert any(fragment in str(p) for p in matching), str(raised.value)
    assert registrations == []
