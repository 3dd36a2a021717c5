"""Shared test helpers: run the real program under mocks with the dev stack plus overrides."""

from __future__ import annotations

import collections
import copy
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from components.config_base import NAMESPACE, ConfigError
from harness.mock_engine import ProgramRun, run_program
from tests import external
from tools.stack_file import stack_config_values, stack_names

if TYPE_CHECKING:
    from components.stack import StackConfig

# The tests' own stacks: copies of the example stacks as they were when the tests were written. The committed
# Pulumi.<stack>.yaml files are the user's to change, rename or remove; the tests that hold for any stack the program
# accepts read those (tests/test_config_schema.py, tests/test_stack.py, the goldens and the render's own properties in
# tests/test_tools_render.py, the lab's Pod Security check), every other test reads these. A test says what it
# needs of them from their config (names, pools, chips), or sets it (``cubes``), so that they too can change: with a
# third pool in the dev one, the suite passes unchanged.
FIXTURE_STACKS = PROJECT_ROOT / "tests" / "data" / "stacks"
FIXTURE_STACK_NAMES = stack_names(FIXTURE_STACKS)


def stack_values(stack: str = "dev") -> dict[str, Any]:
    """Decoded config of one of the tests' own stacks (tests/data/stacks): top-level key -> value, a copy to edit."""
    return copy.deepcopy(_fixture_stack_values(stack))


@functools.cache  # no test writes the tests' own stacks: a process reads each once (938 of the suite's 1,084 reads)
def _fixture_stack_values(stack: str) -> dict[str, Any]:
    values, _ = stack_config_values(stack, FIXTURE_STACKS)
    prefix = f"{NAMESPACE}:"
    decoded = {}
    for key, text in values.items():
        try:
            decoded[key[len(prefix) :]] = json.loads(text)
        except json.JSONDecodeError:
            decoded[key[len(prefix) :]] = text
    return decoded


def cubes(count: int) -> dict[str, Any]:
    """The override that gives a TPU7x stack (dev, prod) ``count`` TPU pools of one 4x4x4 cube each (16 nodes of 4
    chips): for a test whose property is about a number of cubes, so that it names the number it is about."""
    return {"tpu.pools": [{"name": f"tpu7-pool-{n}", "nodeCount": 16} for n in range(1, count + 1)]}


def stack_config(stack: str = "dev", overrides: dict[str, Any] | None = None) -> StackConfig:
    """The validated config of one of the tests' own stacks, with ``overrides`` (as ``with_overrides`` takes them)."""
    from components.stack import load_pulumi_values

    return load_pulumi_values(
        as_pulumi_values(with_overrides(_fixture_stack_values(stack), overrides or {})), ()
    ).config


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


def run_stack(
    overrides: dict[str, Any] | None = None,
    stack: str = "dev",
    preview: bool = True,
    secrets: tuple[str, ...] = (),
    **engine: Any,
) -> ProgramRun:
    """Run the program for ``stack`` with ``overrides``; ``secrets`` names the top-level keys the
    engine holds as secrets (as `pulumi config set --secret` makes them); ``engine`` stands in for
    what a real engine looks up (``engine_versions``, ``previous_outputs``: see harness/mock_engine.py)."""
    raw = with_overrides(_fixture_stack_values(stack), overrides or {})
    secret_keys = [f"{NAMESPACE}:{key}" for key in secrets]
    values = as_pulumi_values(raw)
    # A run is a function of its config, the engine's stand-ins and the environment: one process runs each once (a
    # copy each time), unless the caller collects what it registers or the test patches what the program runs.
    patched = bool(external.running) and "monkeypatch" in external.running[-1].fixturenames
    if patched or {"registrations", "invocations"} & set(engine):
        return run_program(values, secret_keys, stack=stack, preview=preview, **engine)
    key = repr(
        (
            sorted(values.items()),
            secret_keys,
            stack,
            preview,
            sorted(engine.items()),
            sorted(kv for kv in os.environ.items() if not kv[0].startswith("PYTEST_")),
        )
    )
    if key not in _RUNS:
        _RUNS[key] = run_program(values, secret_keys, stack=stack, preview=preview, **engine)
        while len(_RUNS) > _RUNS_KEPT:
            _RUNS.popitem(last=False)
    _RUNS.move_to_end(key)
    return copy.deepcopy(_RUNS[key])


# run_stack's latest runs in this process, by everything a run depends on (a run of the dev stack holds a few MB)
_RUNS: collections.OrderedDict[str, ProgramRun] = collections.OrderedDict()
_RUNS_KEPT = 48


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """The test being run, for tests/external.py's check that only a test marked external uses an external tool."""
    external.running.append(item)
    try:
        return (yield)
    finally:
        external.running.pop()


@pytest.fixture(scope="session")
def dev_run() -> ProgramRun:
    return run_stack()


def pulled(image: str, stack: str = "dev", overrides: dict[str, Any] | None = None) -> str:
    """``image`` as the nodes of ``stack`` pull it: through its mirror, its pull-through repositories, or from its own
    registry (the stack's PullPath, whose rewrite tests/test_config_base.py holds)."""
    return stack_config(stack, overrides).pull_path().image(image)


def assert_bad_input(override: dict[str, Any], key: str, fragment: str, stack: str = "dev") -> None:
    """The program refuses ``stack`` with ``override``: a problem under ``key`` saying ``fragment``,
    and not one resource registered."""
    registrations: list = []
    raw = with_overrides(_fixture_stack_values(stack), override)
    with pytest.raises(ConfigError) as raised:
        run_program(as_pulumi_values(raw), stack=stack, registrations=registrations)
    matching = [p for p in raised.value.problems if p.key == key]
    assert matching, f"no problem for {key}; got:\n{raised.value}"
    assert any(fragment in str(p) for p in matching), str(raised.value)
    assert registrations == []


def not_checkov(annotations: dict[str, str]) -> dict[str, str]:
    """Annotations other than checkov's inline skips, which tests/test_security_checkov.py checks."""
    return {key: value for key, value in annotations.items() if not key.startswith("checkov.io/skip")}
