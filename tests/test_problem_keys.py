"""Every problem names a key a user can set: the one `pulumi config set --path <key>` fixes.

Two checks: every row of every bad-input table names a documented setting (list indices as
``[]``), and every ``problems.add`` / ``Problem`` call in components/ reports under a key whose
literal part is a documented setting or the start of one (the rest is an index or a name filled
in at run time). A rule that reported under the wrong block, or a typo in a key, fails here.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from components.config_base import documented_settings
from components.stack import StackConfig
from tests.conftest import PROJECT_ROOT

TABLES = (  # (module, table)
    ("tests.test_stack", "BAD_INPUTS"),
    ("tests.test_gcp_config", "GCP_BAD_INPUTS"),
    ("tests.test_gcp_config", "GCP_SAXML_BAD_INPUTS"),
    ("tests.test_platform_config", "PLATFORM_BAD_INPUTS"),
    ("tests.test_slice_checks_config", "CHECKS_BAD_INPUTS"),
    ("tests.test_serving_config", "SERVING_BAD_INPUTS"),
    ("tests.test_saxml_config", "SAXML_BAD_INPUTS"),
    ("tests.test_operations_config", "OPERATIONS_BAD_INPUTS"),
)
# The serving LWS self-check reports under the block: it means a bug of ours, not a setting.
BLOCK_KEYS = {"serving"}


def settable_keys() -> set[str]:
    """Every documented setting and every object or list above one (``tpu``, ``tpu.pools``, ...)."""
    keys = set(BLOCK_KEYS)
    for key, _, _ in documented_settings(StackConfig):
        parts = key.split(".")
        keys.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        keys.update(k.removesuffix("[]") for k in list(keys))
    return keys


def normalized(key: str) -> str:
    """``tpu.pools[1].name`` -> ``tpu.pools[].name``; an item of a list of values is the list."""
    return re.sub(r"\[\d+\]", "[]", key).removesuffix("[]")


def table_rows() -> list[tuple[str, str, str]]:
    rows = []
    for module, table in TABLES:
        for param in getattr(importlib.import_module(module), table):
            key, fragment = param.values[-2:]  # (override[, stack], key, fragment)
            rows.append((f"{module}::{param.id}", key, fragment))
    return rows


@pytest.mark.parametrize(
    "row, key, fragment", table_rows(), ids=lambda v: v if isinstance(v, str) and "::" in v else ""
)
def test_every_bad_input_names_a_settable_key(row, key, fragment):
    if "did you mean" in fragment or "is not a known setting" in fragment:
        return  # the misspelled key itself, by design
    assert normalized(key) in settable_keys(), f"{row} reports under {key!r}, which no one can set"


def _reported_keys(path: Path) -> list[tuple[int, ast.expr]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("add", "unparsable", "Problem") and (name == "Problem" or _is_problems(func)):
            found.append((node.lineno, node.args[0]))
    return found


def _is_problems(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "problems"


def _literal_head(expr: ast.expr) -> str | None:
    """The fixed start of a key expression ("serving." of f"serving.{role}.name"); None if none."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr) and expr.values and isinstance(expr.values[0], ast.Constant):
        return str(expr.values[0].value)
    return None


def test_every_rule_reports_under_a_settable_key():
    keys = settable_keys()
    checked, bad = 0, []
    for path in sorted((PROJECT_ROOT / "components").rglob("*.py")):
        for line, expr in _reported_keys(path):
            head = _literal_head(expr)
            if head is None:
                continue  # a variable key: covered by the tables above
            checked += 1
            whole = isinstance(expr, ast.Constant)
            stem = normalized(head).rstrip(".[")
            ok = stem in keys if whole else any(k == stem or k.startswith(stem) for k in keys)
            if not ok:
                bad.append(f"{path.relative_to(PROJECT_ROOT)}:{line}: {head!r}")
    assert checked > 60, f"only {checked} rule keys found: the scan is broken"
    assert bad == []
