"""The configuration reference generated from the stack config's models (components/stack.py and each block's
config.py): the config table of docs/configuration.md, and the JSON Schema of the stack files
(schemas/stack.schema.json), which editors read for `Pulumi.*.yaml` (docs/configuration.md says how); and the
deployer's permissions for the program's reads, docs/deploying.md's list, from components/gcp/config.py's table.

python -m tools.config_table          # print the table
python -m tools.config_table --write  # replace the tables in docs/configuration.md and deploying.md, rewrite the schema
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from components.config_base import NAMESPACE, SCALAR_TEXT, SECRET, documented_settings
from components.gcp.config import DEPLOYER_READS
from components.stack import StackConfig
from tools.stack_file import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "configuration.md"
SCHEMA = PROJECT_ROOT / "schemas" / "stack.schema.json"
DEPLOYING = PROJECT_ROOT / "docs" / "deploying.md"


def table() -> str:
    header = ["| key | default | description |", "| --- | --- | --- |"]
    rows = [f"| `{key}` | `{default}` | {doc} |" for key, default, doc in documented_settings(StackConfig)]
    return "\n".join([f"Keys live in the `{NAMESPACE}` namespace.", "", *header, *rows])


def page_with_table(text: str) -> str:
    return with_section(text, PAGE, "config-table", table())


def deploying_with_reads(text: str) -> str:
    rows = [
        f"| `{token.rsplit(':', 1)[1]}` | {', '.join(f'`{p}`' for p in permissions)} | {on} | {source} |"
        for token, (permissions, on, source) in DEPLOYER_READS.items()
    ]
    reads = "\n".join(["| read | permissions | held on | source |", "| --- | --- | --- | --- |", *rows])
    return with_section(text, DEPLOYING, "deployer-reads", reads)


def with_section(text: str, page: Path, name: str, generated: str) -> str:
    """``text`` of ``page`` with ``generated`` in its section ``<!-- name:start -->`` ... ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page.relative_to(PROJECT_ROOT)} has no {start} ... {end} section")
    return pattern.sub(lambda _: f"{start}\n{generated}\n{end}", text)


# A value Pulumi holds encrypted, as the stack file writes it (`pulumi config set --secret`): {secure: <ciphertext>}.
# Any key or item may be one, not only the settings declared secret: the CLI encrypts whatever it is told to, and the
# program reads the decrypted text.
SECURE_VALUE = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}
SECURE_REF = {"$ref": "#/$defs/SecureValue"}


class _StackFileSchema(GenerateJsonSchema):
    """The models' schema as a stack file may write each value: a scalar also as the text `pulumi config set --path`
    stores (components/config_base.py, Block: ``"true"``, ``"16"``, ``"0.5"``)."""

    def bool_schema(self, schema: core_schema.BoolSchema) -> dict[str, Any]:
        return {"anyOf": [{"type": "boolean"}, {"type": "string", "pattern": SCALAR_TEXT[bool]}]}

    def int_schema(self, schema: core_schema.IntSchema) -> dict[str, Any]:
        return {"anyOf": [super().int_schema(schema), {"type": "string", "pattern": SCALAR_TEXT[int]}]}

    def float_schema(self, schema: core_schema.FloatSchema) -> dict[str, Any]:
        return {"anyOf": [super().float_schema(schema), {"type": "string", "pattern": SCALAR_TEXT[float]}]}


def schema() -> dict[str, Any]:
    """The JSON Schema of a `Pulumi.<stack>.yaml`: this project's keys under `config:`, each `<namespace>:<key>`,
    as the models take them; other namespaces' keys (`gcp:project`) and the file's other keys are not ours to check.

    A block's partial object keeps what it leaves out from the field's default (components/config_base.py, Block),
    so an object under a field that has a default object requires none of its keys."""
    models = StackConfig.model_json_schema(by_alias=True, schema_generator=_StackFileSchema)
    definitions: dict[str, Any] = models.pop("$defs")
    partial: set[str] = set()
    whole: set[str] = set()
    for owner in [models, *definitions.values()]:
        owner.pop("title", None)
        for key, prop in owner.get("properties", {}).items():
            if (ref := _ref(prop)) is not None:
                (partial if isinstance(prop.get("default"), dict) else whole).add(ref)
            prop.pop(SECRET, None)
            prop.pop("title", None)
            if "items" in prop:
                prop["items"] = {"anyOf": [prop["items"], SECURE_REF]}
            owner["properties"][key] = {"description": prop.pop("description", ""), "anyOf": [prop, SECURE_REF]}
    if partial & whole:
        raise SystemExit(f"models used both with and without a default object: {sorted(partial & whole)}")
    for name in partial:
        definitions[name].pop("required", None)
    keys = {f"{NAMESPACE}:{key}": prop for key, prop in models["properties"].items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Pulumi stack file of {NAMESPACE}",
        "description": "Generated by `make docs` (python -m tools.config_table --write) from components/*/config.py.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": keys,
                "required": [f"{NAMESPACE}:{key}" for key in models.get("required", [])],
                "patternProperties": {f"^(?!{NAMESPACE}:)": {}},
                "additionalProperties": False,
            }
        },
        "$defs": {**definitions, "SecureValue": SECURE_VALUE},
    }


def _ref(prop: dict[str, Any]) -> str | None:
    for candidate in [prop, *prop.get("allOf", []), *prop.get("anyOf", [])]:
        if "$ref" in candidate:
            return str(candidate["$ref"]).rsplit("/", 1)[-1]
    return None


def schema_text() -> str:
    return json.dumps(schema(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    if parser.parse_args(argv).write:
        PAGE.write_text(page_with_table(PAGE.read_text()))
        DEPLOYING.write_text(deploying_with_reads(DEPLOYING.read_text()))
        SCHEMA.parent.mkdir(exist_ok=True)
        SCHEMA.write_text(schema_text())
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
