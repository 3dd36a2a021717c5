"""README, Pulumi.yaml and the code agree."""

import re

import yaml

from components.config_base import camel
from components.stack import StackConfig
from tests.conftest import PROJECT_ROOT
from tools import config_table

README = (PROJECT_ROOT / "README.md").read_text()


def test_readme_config_table_matches_the_schema():
    assert config_table.readme_with_table(README) == README, "README config table is stale: run `make docs`"


def test_pulumi_yaml_declares_the_plain_keys_with_type_and_description():
    project = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "tpu-dynamic-slicing"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    plain = {camel(name): tp for name, tp in StackConfig.__annotations__.items() if tp in ("str", "int", "bool")}
    declared = project["config"]
    assert set(declared) == set(plain)
    for key, tp in plain.items():
        assert declared[key]["type"] == {"str": "string", "int": "integer", "bool": "boolean"}[tp]
        assert declared[key]["description"]


def test_readme_documents_every_stack_output(dev_run):
    for name in dev_run.outputs:
        assert f"`{name}`" in README, f"stack output {name} is not in the README"


def test_readme_puts_the_offline_commands_first():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    assert "make render STACK=dev" in first_block and "make test" in first_block
