"""Reads a `Pulumi.<stack>.yaml` as the Pulumi CLI does, refusing what the CLI would refuse, and hands its config to
a program as the CLI would (``stack_config_values``: secure values replaced, since only the CLI can decrypt them).

The CLI decodes stack files with gopkg.in/yaml.v3 into untyped values (pulumi/pulumi
sdk/go/common/encoding/marshal.go and workspace/loaders.go at v3.259.0), whose plain scalars resolve
as YAML 1.2 (gopkg.in/yaml.v3@v3.0.1 resolve.go): only true/True/TRUE and false/False/FALSE are
booleans, so `yes`, `no`, `on` and `off` are strings (a bool setting then refuses them); `1e3` is a
number; `1:30` is a string. PyYAML resolves YAML 1.1, where all of those differ: the loader below
resolves them as yaml.v3 does, and hands them on as the CLI does (config/object.go): a number through
Go's JSON (`1e3` is 1000), an unquoted timestamp as the text of Go's time.Time.String().

Every way a stack file can be malformed (bytes that are not UTF-8, YAML that does not parse, a
duplicate key at any depth, a key that is not a string, the wrong structure at the top or under
`config:`) is one ``StackFileError`` whose message is one line naming the file and, where known,
the line: ``Pulumi.dev.yaml:12: duplicate key 'tpu-dynamic-slicing:tpu' (first at line 7)``.
"""

from __future__ import annotations

import argparse
import calendar
import decimal
import json
import re
from pathlib import Path
from typing import Any

import yaml

from components.config_base import field_at
from components.stack import StackConfig

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_NAME = "tpu-dynamic-slicing"  # Pulumi.yaml's name: a stack file's plain key `k` is `tpu-dynamic-slicing:k`
# Stands in for a `secure:` stack value: its ciphertext can only be decrypted by the CLI.
SECRET_PLACEHOLDER = "offline-placeholder-secret"


class StackFileError(ValueError):
    """A stack file that cannot be read; the message is one line."""


class NoStackFile(FileNotFoundError):
    """There is no stack file of that name: a tool says so, with the stacks there are. Any other file found missing
    (a manifest, a chart) is not this one: it fails as itself, never as a stack file that is not there."""


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
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
# A plain scalar that begins with a sign, a digit or a dot: yaml.v3 reads it as a timestamp, an integer, a float or
# text (resolve.go's 'S', 'D' and '.' hints), resolved here by _number_or_time as the CLI then hands it on.
_NUMBER_OR_TIME = "tag:tpu-gke,2026:number-or-time"
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT, _TIMESTAMP)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_StrictLoader.add_implicit_resolver(_NUMBER_OR_TIME, re.compile(r"^[-+.0-9]"), list("-+.0123456789"))

# strconv.ParseInt(text, 0, 64) after yaml.v3 drops every underscore: a prefix of either case, or 0777 (octal)
_GO_INT = re.compile(r"^[-+]?(?:0[bB][01]+|0[oO][0-7]+|0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$")
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")  # resolve.go's
_NOT_JSON = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")  # resolve.go's infinities and NaN
# The four layouts yaml.v3 tries (resolve.go's allowedTimestampFormats), as Go's time.Parse reads them: one- or
# two-digit fields, a fraction after a dot or a comma, a zone of Z or +hh:mm with the T form only.
_DATE = r"(?P<year>[0-9]{4})-(?P<month>[0-9]{1,2})-(?P<day>[0-9]{1,2})"
_CLOCK = r"(?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{1,2}):(?P<second>[0-9]{1,2})(?:[.,](?P<fraction>[0-9]+))?"
_TIMESTAMPS = (
    re.compile(rf"^{_DATE}[Tt]{_CLOCK}(?P<zone>Z|[-+][0-9]{{2}}:[0-9]{{2}})$"),
    re.compile(rf"^{_DATE} +{_CLOCK}$"),
    re.compile(rf"^{_DATE}$"),
)


def _number_or_time(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
    """What the CLI hands a program for this plain scalar (checked against the real CLI by the lab's
    tests/itest/test_lab_tools.py): a timestamp as the text of Go's time.Time.String(); an integer of int64; a float,
    or a decimal integer beyond int64, as Go writes a float in JSON (so 1e3 is 1000); anything else as its text."""
    text = loader.construct_scalar(node)
    if _NOT_JSON.match(text):  # the CLI refuses the file: JSON has no infinity or NaN
        raise _KeyProblem(f"{node.start_mark.line + 1}: {text} is no number Pulumi can hold; write a number")
    if text.startswith("."):
        return _as_json_writes(float(text)) if _YAML_STYLE_FLOAT.match(text) else text
    if (time := _time_text(text)) is not None:
        return time
    plain = text.replace("_", "")
    if _GO_INT.match(plain):
        digits = plain.lstrip("-+")
        value = int(plain, 8) if digits[:1] == "0" and digits[1:2].isdigit() else int(plain, 0)  # 0777
        if -(2**63) <= value < 2**63:
            return value
    if _YAML_STYLE_FLOAT.match(plain):
        return _as_json_writes(float(plain))
    return text


def _as_json_writes(number: float) -> int | float:
    """``number`` as a program reads it back from Go's JSON: a whole number below 1e21 is written without a
    fraction (shortest digits, so 2**64 reads as 18446744073709552000), and so reads as an int."""
    if number.is_integer() and abs(number) < 1e21:
        return int(decimal.Decimal(repr(number)))
    return number


def _time_text(text: str) -> str | None:
    """The text of Go's time.Time.String() for a timestamp yaml.v3 reads (None when it reads no timestamp): the
    wall clock as written, then the zone's offset and name (UTC, or the offset again, as on a CLI running in UTC)."""
    match = next((m for pattern in _TIMESTAMPS if (m := pattern.match(text))), None)
    if match is None:
        return None
    written = {name: value for name, value in match.groupdict().items() if value is not None}
    year, month, day = int(written["year"]), int(written["month"]), int(written["day"])
    hour, minute, second = (int(written.get(name, 0)) for name in ("hour", "minute", "second"))
    zone = written.get("zone", "Z")
    zone_hours, zone_minutes = (0, 0) if zone == "Z" else (int(zone[1:3]), int(zone[4:6]))
    # monthrange of a year of the same kind: Go reads year 0, which Python's calendar cannot hold
    days_in_month = calendar.monthrange(2000 if calendar.isleap(year) else 2001, month)[1] if 1 <= month <= 12 else 0
    if not 1 <= day <= days_in_month or hour > 23 or minute > 59 or second > 59 or zone_hours > 23 or zone_minutes > 59:
        return None  # Go's time.Parse refuses it (an offset beyond 23:59, which it half takes, is not followed)
    zoned = zone_hours or zone_minutes
    offset = f"{'-' if zone.startswith('-') and zoned else '+'}{zone_hours:02d}{zone_minutes:02d}"
    fraction = written.get("fraction", "")[:9].rstrip("0")  # Go keeps nanoseconds, and prints no trailing zero
    clock = f"{hour:02d}:{minute:02d}:{second:02d}{'.' + fraction if fraction else ''}"
    return f"{year:04d}-{month:02d}-{day:02d} {clock} {offset} {offset if zoned else 'UTC'}"


_StrictLoader.add_constructor(_NUMBER_OR_TIME, _number_or_time)


class _KeyProblem(Exception):
    """A key or value the loader refuses; its message is ``<line>: <what is wrong>``, the file's name goes in front."""


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file (empty when it has none); NoStackFile where there is none, StackFileError
    where it cannot be read."""
    name = path.name
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise NoStackFile(error.errno, error.strerror, error.filename) from None
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
        value, secret = _replace_secure(value, (key.removeprefix(f"{PROJECT_NAME}:"),))
        if secret:
            secret_keys.append(full_key)
        values[full_key] = value if isinstance(value, str) else json.dumps(value)
    return values, secret_keys


def _replace_secure(value: Any, path: tuple[str | int, ...]) -> tuple[Any, bool]:
    """``value`` at ``path`` (the setting's keys and list indices) with each secure value replaced: by the example
    its setting declares (every setting of a pattern does: alerts.emails' addresses), which passes the setting's own
    checks as the decrypted value does in the CLI's preview, else by SECRET_PLACEHOLDER."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            info = field_at(StackConfig, path)[1]
            return (info.examples[0] if info is not None and info.examples else SECRET_PLACEHOLDER), True
        pairs = {k: _replace_secure(v, (*path, k)) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_replace_secure(v, (*path, index)) for index, v in enumerate(value)]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False
