"""The JSON Schema of the stack files (schemas/stack.schema.json): generated from the models, and every committed
stack file valid against it, as the CLI reads the file (tools/stack_file.py)."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from components import stack as stack_config
from components.config_base import NAMESPACE, ConfigError
from tests.conftest import FIXTURE_STACKS, PROJECT_ROOT, stack_values, with_overrides
from tools import config_table
from tools.stack_file import read_stack_file

# The user's stacks and the tests' own copies: both must stay valid stack files.
STACK_FILES = sorted(PROJECT_ROOT.glob("Pulumi.*.yaml")) + sorted(FIXTURE_STACKS.glob("Pulumi.*.yaml"))


@functools.cache  # the committed schema, checked once a process
def validator() -> Draft202012Validator:
    committed = json.loads(config_table.SCHEMA.read_text())
    Draft202012Validator.check_schema(committed)
    return Draft202012Validator(committed)


def test_the_committed_schema_is_the_generated_one():
    assert config_table.SCHEMA.read_text() == config_table.schema_text(), "stale: run `make docs`"


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_stack_file_is_valid_against_the_schema(path):
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(_read(path))]
    assert errors == []


def _read(path: Any) -> dict[str, Any]:
    """The stack file as the schema sees it: its ``config:`` mapping read as the CLI reads it (YAML 1.2)."""
    return {"config": read_stack_file(path)}


# Stack files the program refuses for a setting's own value, and the schema with it (the rules across settings are
# the preview's alone): (key under config, its value).
REFUSED = [
    pytest.param(f"{NAMESPACE}:tpu", {"pools": [{"name": "p", "nodeCount": "sixteen"}]}, id="count-not-a-number"),
    pytest.param(f"{NAMESPACE}:tpu", {"machineTyp": "tpu7x-standard-4t"}, id="unknown-key"),
    pytest.param(f"{NAMESPACE}:cluster", {"deletionProtection": "yes"}, id="yaml-1.1-boolean"),
    pytest.param(f"{NAMESPACE}:clusterr", {}, id="unknown-block"),
    pytest.param(f"{NAMESPACE}:serving", {"hfToken": {"secure": 1}}, id="secure-not-text"),
    pytest.param(f"{NAMESPACE}:cluster", {"name": "Qwen_Cluster"}, id="name-not-a-google-cloud-name"),
    pytest.param(f"{NAMESPACE}:tpu", {"pools": [{"name": "p" * 41, "nodeCount": 16}]}, id="pool-name-too-long"),
    pytest.param(f"{NAMESPACE}:cluster", {"rbacSecurityGroup": "admins@example.com"}, id="not-the-rbac-group"),
    pytest.param(f"{NAMESPACE}:queues", {"namespaces": ["Serving_NS"]}, id="namespace-not-a-dns-label"),
    pytest.param(f"{NAMESPACE}:platform", {"kueueController": {"limits": {"cpu": "lots"}}}, id="not-a-quantity"),
    pytest.param(f"{NAMESPACE}:serving", {"priority": "top"}, id="not-a-priority-level"),
    pytest.param(f"{NAMESPACE}:saxml", {"saxCell": "test"}, id="not-a-sax-cell"),
]


@pytest.mark.parametrize("key, value", REFUSED)
def test_the_schema_refuses_what_a_setting_refuses(key, value):
    stack = copy.deepcopy(_read(FIXTURE_STACKS / "Pulumi.dev.yaml"))
    stack["config"][key] = value
    assert list(validator().iter_errors(stack))


def test_the_schema_takes_what_the_stack_file_may_write():
    """Text forms of scalars (`pulumi config set --path` stores text), a partial object, an encrypted secret, any
    other value encrypted (`--secret` takes any key, a block or an item of a list), and other namespaces' keys."""
    stack = copy.deepcopy(_read(FIXTURE_STACKS / "Pulumi.dev.yaml"))
    stack["config"] |= {
        f"{NAMESPACE}:production": "true",
        f"{NAMESPACE}:checks": {"subslicing": {"enabled": "false", "slices": "2"}},
        f"{NAMESPACE}:serving": {"hfToken": {"secure": "v1:abc"}},
        f"{NAMESPACE}:project": {"secure": "v1:abc"},
        f"{NAMESPACE}:alerts": {"enabled": True, "emails": [{"secure": "v1:abc"}]},
        f"{NAMESPACE}:saxml": {"secure": "v1:abc"},
        "gcp:project": "my-tpu-project",
    }
    assert [e.message for e in validator().iter_errors(stack)] == []


# The text a stack file may hold for a number or a boolean (`pulumi config set --path` stores text), within the
# setting's range (the schema's text form carries no range: the preview says it): (setting, text). No text ends in a
# newline: jsonschema matches a pattern with Python's re, whose `$` also matches before a final newline, where an
# editor's ECMA-262 pattern does not. Digits of other scripts (Arabic-Indic 3, superscript 2) and fullwidth letters
# are not ASCII: neither takes them.
TEXT_FORMS = [
    *(("cluster.systemPool.nodesPerZone", text) for text in ["3", "03", "\u0663", "\u00b2", " 3", "3.0", "-3", "3e0"]),
    *(("network.flowLogs.sampling", text) for text in ["0.5", "1", "\u0660.\u0665", ".5", "5e-1"]),
    *(("cluster.deletionProtection", text) for text in ["true", "False", "TRUE", "yes", "\uff54\uff52\uff55\uff45"]),
]


@pytest.mark.parametrize("key, text", TEXT_FORMS)
def test_the_schema_admits_exactly_the_text_forms_the_program_reads(key, text):
    """Editors flag what the preview refuses and nothing else; a text refused is named under its own key."""
    values = with_overrides(stack_values("dev"), {key: text})
    try:
        stack_config.load(values)
        refused_under: list[str] = []
    except ConfigError as error:
        refused_under = [problem.key for problem in error.problems]
    stack = copy.deepcopy(_read(FIXTURE_STACKS / "Pulumi.dev.yaml"))
    block = key.split(".")[0]
    stack["config"][f"{NAMESPACE}:{block}"] = values[block]
    schema_admits = not list(validator().iter_errors(stack))
    assert refused_under == ([] if schema_admits else [key])
