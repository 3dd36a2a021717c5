"""The README, the documentation site (docs/), Pulumi.yaml and the code agree."""

import re

import yaml

from components.stack import StackConfig
from tests.conftest import PROJECT_ROOT
from tools import config_table

README = (PROJECT_ROOT / "README.md").read_text()
DOCS = PROJECT_ROOT / "docs"
CONFIGURATION = (DOCS / "configuration.md").read_text()
# A page answers the question a reader comes with; past this it holds several (split it by question).
PAGE_MAX_WORDS = 4000
# A generated block (the config table, between <!-- config-table:start --> and its end marker) is reference: not counted.
GENERATED = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.S)


def test_the_config_table_matches_the_schema():
    assert config_table.page_with_table(CONFIGURATION) == CONFIGURATION, (
        "docs/configuration.md's config table is stale: run `make docs`"
    )


def test_the_deployer_s_permissions_match_the_program_s_table():
    page = config_table.DEPLOYING.read_text()
    assert config_table.deploying_with_reads(page) == page, "docs/deploying.md's reads are stale: run `make docs`"


def test_every_page_is_short():
    words = {
        str(page.relative_to(DOCS)): len(GENERATED.sub("", page.read_text()).split()) for page in DOCS.rglob("*.md")
    }
    long = {page: count for page, count in words.items() if count > PAGE_MAX_WORDS}
    assert not long, f"pages over {PAGE_MAX_WORDS} words, split each by the question a reader comes with: {long}"


def test_pulumi_yaml_declares_the_plain_keys_with_type_and_description():
    project = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "tpu-dynamic-slicing"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    types = {str: "string", int: "integer", bool: "boolean"}
    fields = StackConfig.model_fields.values()
    plain = {field.alias: types[field.annotation] for field in fields if field.annotation in types}
    declared = project["config"]
    assert set(declared) == set(plain)
    for key, tp in plain.items():
        assert declared[key]["type"] == tp
        assert declared[key]["description"]


def test_the_configuration_reference_documents_every_stack_output(dev_run):
    outputs = CONFIGURATION.split("\n## Stack outputs\n", 1)[1]
    for name in dev_run.outputs:
        assert f"`{name}`" in outputs, f"stack output {name} is not in docs/configuration.md, Stack outputs"


def test_readme_puts_the_offline_commands_first():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    assert "make render STACK=dev" in first_block and "make test" in first_block


def test_the_config_table_says_required_only_of_what_is_required():
    """A key marked (required) fails a stack that leaves it out; every other default is the real one."""
    import pytest
    from pydantic import BaseModel

    from components import stack as stack_config
    from components.config_base import REQUIRED, ConfigError, documented_settings

    rows = documented_settings(StackConfig)
    with pytest.raises(ConfigError) as raised:
        stack_config.load({})
    missing = {p.key for p in raised.value.problems if p.what == "is required"}
    assert {key for key, default, _ in rows if default == REQUIRED} == missing == {"project"}

    minimal = stack_config.load(
        {"project": "my-tpu-project", "tpu": {"reservation": {"name": "r", "block": "b"}}}
    ).config

    def value_at(key: str):
        value = minimal
        for part in key.split("."):
            value = getattr(value, next(n for n, f in type(value).model_fields.items() if f.alias == part))
        return value

    for key, default, _ in rows:
        if "[]" in key or default.startswith("(") or key.startswith(("cluster.maintenanceWindow.", "tpu.reservation.")):
            continue
        shown = value_at(key)
        expected = default if isinstance(shown, str) else __import__("json").loads(default)
        if isinstance(shown, BaseModel) or (isinstance(shown, list) and shown and isinstance(shown[0], BaseModel)):
            continue
        assert shown == ("" if default == '""' else expected), f"{key}: the table says {default}, the schema {shown!r}"


def test_the_docs_state_the_slice_name_lengths_of_the_defaults():
    from components.config_base import documented_settings

    defaults = {key: default for key, default, _ in documented_settings(StackConfig)}
    namespace = "llm-d-pd-disaggregation"
    lengths = [len(namespace) + 1 + len(defaults[f"checks.{kind}.name"]) + 6 for kind in ("subslicing", "superslicing")]
    assert f"need {lengths[0]} and {lengths[1]}." in (DOCS / "slice-checks.md").read_text()
