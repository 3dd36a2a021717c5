"""Reads a `Pulumi.<stack>.yaml` as the Pulumi CLI does, refusing what the CLI would refuse, and hands its config to
a program as the CLI would (``stack_config_values``: secure values replaced, since only the CLI can decrypt them).

The CLI decodes stack files with gopkg.in/yaml.v3 into untyped values (pulumi/pulumi
sdk/go/common/encoding/marshal.go and workspace/loaders.go at v3.259.0), whose plain scalars resolve
as YAML 1.2 (gopkg.in/yaml.v3@v3.0.1 resolve.go): only true/True/TRUE and false/False/FALSE are
booleans, so `yes`, `no`, `on` and `off` are strings (a bool setting then refuses them); `1e3` is a
number; `1:30` is a string. PyYAML resolves YAML 1.1, where all of those differ: the loader below
resolves them as yaml.v3 does.

Every way a stack file can be malformed (bytes that are not UTF-8, YAML that does not parse, a
duplicate key at any depth, a key that is not a string, the wrong structure at the top or under
`config:`) is one ``StackFileError`` whose message is one line naming the file and, where known,
the line: ``Pulumi.dev.yaml:12: duplicate key 'tpu-dynamic-slicing:tpu' (first at line 7)``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_NAME = "tpu-dynamic-slicing"  # Pulumi.yaml's name: a stack file's plain key `k` is `tpu-dynamic-slicing:k`
# Stands in for a `secure:` stack value: its ciphertext can only be decrypted by the CLI.
SECRET_PLACEHOLDER = "offline-placeholder-secret"


class StackFileError(ValueError):
    """A stack file that cannot be read; the message is one line."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that resolves plain scalars as yaml.v3 does (see the module's docstring) and refuses
    duplicate keys and keys that are not strings (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise _KeyProblem(f"{line}: key {key!r} is not a string; quote it")
            if key in seen:
                raise _KeyProblem(f"{line}: duplicate key {key!r} (first at line {seen[key]}); keep one of them")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_BOOL, _INT, _FLOAT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# In this order: a plain scalar that is both an int and a float is an int (yaml.v3 tries ParseInt first).
_StrictLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_StrictLoader.add_implicit_resolver(
    _INT,  # 0b.., 0o.., 0x.., 0777 (octal, kept by yaml.v3 for compatibility), decimals; no sexagesimal 1:30
    re.compile(r"^[-+]?(?:0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$"),
    list("-+0123456789"),
)
_StrictLoader.add_implicit_resolver(
    _FLOAT,  # yaml.v3's yamlStyleFloat, plus .inf and .nan
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


class _KeyProblem(Exception):
    """A key the loader refuses; its message is ``<line>: <what is wrong>``, the file's name goes in front."""


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file (empty when it has none); StackFileError otherwise."""
    name = path.name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as error:
        raise StackFileError(f"{name}: cannot be read ({error.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise StackFileError(
            f"{name}:{line}: is not UTF-8 text (byte 0x{data[error.start]:02x}); save it as UTF-8"
        ) from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except _KeyProblem as problem:
        raise StackFileError(f"{name}:{problem}") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{name}:{mark.line + 1}" if mark else name
        raise StackFileError(f"{where}: YAML does not parse: {error.problem or error.context}") from None
    except yaml.reader.ReaderError as error:
        line = text[: error.position].count("\n") + 1
        code = error.character if isinstance(error.character, int) else ord(error.character)
        raise StackFileError(
            f"{name}:{line}: YAML does not parse: character U+{code:04X} is not allowed in YAML text"
        ) from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{name}: YAML does not parse: {' '.join(str(error).split())}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackFileError(f"{name}:1: must be a mapping with a `config:` key, not a {type(document).__name__}")
    config = document.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        line = next((n for n, line in enumerate(text.splitlines(), 1) if line.startswith("config:")), 1)
        raise StackFileError(
            f"{name}:{line}: `config:` must be a mapping of `<namespace>:<key>: value`, not a {type(config).__name__}"
        )
    return config


def add_stack_dir_option(parser: argparse.ArgumentParser) -> None:
    """``--stack-dir``, where a tool reads ``Pulumi.<stack>.yaml`` (the tests point it at their own stacks)."""
    parser.add_argument("--stack-dir", type=Path, default=PROJECT_ROOT, help="folder holding Pulumi.<stack>.yaml")


def stack_names(stack_dir: Path = PROJECT_ROOT) -> list[str]:
    """The stacks of ``stack_dir``: the X of each ``Pulumi.X.yaml``, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stack_dir.glob("Pulumi.*.yaml"))


def stack_config_values(stack: str, stack_dir: Path = PROJECT_ROOT) -> tuple[dict[str, str], list[str]]:
    """Config of ``Pulumi.<stack>.yaml`` as Pulumi hands it to a program, secure values replaced."""
    path = stack_dir / f"Pulumi.{stack}.yaml"
    values, secret_keys = {}, []
    for key, value in read_stack_file(path).items():
        full_key = key if ":" in key else f"{PROJECT_NAME}:{key}"
        value, secret = _replace_secure(value)
        if secret:
            secret_keys.append(full_key)
        values[full_key] = value if isinstance(value, str) else json.dumps(value)
    return values, secret_keys


def _replace_secure(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER, True
        pairs = {k: _replace_secure(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_replace_secure(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False
