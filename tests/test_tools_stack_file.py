"""Every malformed stack file gets one line naming the file and the line, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_STACKS
from tools import render
from tools.stack_file import StackFileError, read_stack_file

GOOD = "config:\n  tpu-dynamic-slicing:project: my-tpu-project\n"

# (file contents, the message it gets)
MALFORMED = [
    pytest.param(b"config:\n  a: [1, 2\n", "Pulumi.bad.yaml:3: YAML does not parse", id="unclosed-list"),
    pytest.param(b"config:\n\ttpu: {}\n", "Pulumi.bad.yaml:2: YAML does not parse", id="tab-indentation"),
    pytest.param(
        b"- config\n- other\n",
        "Pulumi.bad.yaml:1: must be a mapping with a `config:` key, not a list",
        id="top-level-list",
    ),
    pytest.param(
        b"just text\n", "Pulumi.bad.yaml:1: must be a mapping with a `config:` key, not a str", id="top-level-scalar"
    ),
    pytest.param(b"config: [a, b]\n", "Pulumi.bad.yaml:1: `config:` must be a mapping", id="config-is-a-list"),
    pytest.param(b"x: 1\nconfig: value\n", "Pulumi.bad.yaml:2: `config:` must be a mapping", id="config-is-a-string"),
    pytest.param(
        b"config:\n  tpu-dynamic-slicing:tpu: {zone: a}\n  tpu-dynamic-slicing:tpu: {zone: b}\n",
        "Pulumi.bad.yaml:3: duplicate key 'tpu-dynamic-slicing:tpu' (first at line 2)",
        id="duplicate-top-level-key",
    ),
    pytest.param(
        b"config:\n  tpu-dynamic-slicing:tpu:\n    zone: a\n    zone: b\n",
        "Pulumi.bad.yaml:4: duplicate key 'zone' (first at line 3)",
        id="duplicate-nested-key",
    ),
    pytest.param(b"config:\n  5: five\n", "Pulumi.bad.yaml:2: key 5 is not a string", id="integer-key"),
    pytest.param(
        b"config:\n  tpu-dynamic-slicing:tpu:\n    true: x\n",
        "Pulumi.bad.yaml:3: key True is not a string",
        id="boolean-key",
    ),
    pytest.param(b"config:\n  a: caf\xe9\n", "Pulumi.bad.yaml:2: is not UTF-8 text (byte 0xe9)", id="latin-1-bytes"),
    pytest.param(
        b"\x00\x01\x02", "Pulumi.bad.yaml:1: YAML does not parse: character U+0000 is not allowed", id="binary"
    ),
]


@pytest.mark.parametrize("content, message", MALFORMED)
def test_a_malformed_stack_file_is_one_line(tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(content)
    with pytest.raises(StackFileError) as raised:
        read_stack_file(path)
    assert str(raised.value).startswith(message), str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("content, message", MALFORMED[:3])
def test_render_reports_it_without_a_traceback(tmp_path: Path, capsys, content: bytes, message: str):
    (tmp_path / "Pulumi.bad.yaml").write_bytes(content)
    assert render.main(["--stack", "bad", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_good_files_read_as_their_config(tmp_path: Path):
    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text(GOOD)
    assert read_stack_file(path) == {"tpu-dynamic-slicing:project": "my-tpu-project"}
    path.write_text("encryptionsalt: v1:abc\n")
    assert read_stack_file(path) == {}


def test_a_missing_stack_lists_the_stacks_that_exist(tmp_path: Path, capsys):
    for stack in ("alpha", "beta"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(GOOD)
    assert render.main(["--stack", "gamma", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "there is no Pulumi.gamma.yaml" in capsys.readouterr().err
    assert render.main(["--stack", "gamma", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "the stacks are: alpha, beta" in capsys.readouterr().err


def test_a_failing_golden_render_keeps_the_committed_files(tmp_path: Path):
    """make golden with an invalid stack must not delete that stack's reviewed render."""
    (tmp_path / "Pulumi.broken.yaml").write_text("config:\n  tpu-dynamic-slicing:project: Not_A_Project\n")
    golden = tmp_path / "golden" / "broken"
    golden.mkdir(parents=True)
    (golden / "resources.json").write_text("[reviewed]")
    argv = ["--stack", "broken", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "golden")]
    assert render.main([*argv, "--keep-on-failure"]) == 1
    assert (golden / "resources.json").read_text() == "[reviewed]"
    assert render.main(argv) == 1  # make render: a stale render must not pass for the current one
    assert not golden.exists()


# --- YAML 1.2, as the CLI's gopkg.in/yaml.v3 resolves plain scalars ----------------------------------

# (plain scalar, what the CLI hands the program): the lab holds each row to the real CLI (tests/itest/test_lab_tools.py)
YAML_12_SCALARS = [
    ("yes", "yes"),
    ("no", "no"),
    ("on", "on"),
    ("off", "off"),
    ("Yes", "Yes"),
    ("true", True),
    ("False", False),
    ("TRUE", True),
    ("1e3", 1000),  # a string in YAML 1.1; a float, which Go's JSON writes as 1000
    ("1.0", 1),
    ("1.5", 1.5),
    (".5", 0.5),
    ("1:30", "1:30"),  # 90 in YAML 1.1 (sexagesimal)
    ("0o17", 15),  # a string in YAML 1.1
    ("0O17", 15),
    ("0X1F", 31),
    ("-0b11", -3),
    ("0777", 511),  # yaml.v3 keeps 1.1's octal
    ("09", 9),  # no octal: a float
    ("1_000", 1000),
    ("1_000.5", 1000.5),
    ("+12", 12),
    ("12", 12),
    ("0x", "0x"),
    ("99999999999999999999", 100000000000000000000),  # beyond uint64: a float
    ("1e21", 1e21),
    ("'yes'", "yes"),
    ("2026-12-05T02:00:00Z", "2026-12-05 02:00:00 +0000 UTC"),  # a timestamp, as Go's time.Time.String()
    ("2026-1-5t2:0:0.5+02:00", "2026-01-05 02:00:00.5 +0200 +0200"),
    ("2026-12-05T02:00:00.123456789-00:00", "2026-12-05 02:00:00.123456789 +0000 UTC"),
    ("2026-12-05 02:00:00", "2026-12-05 02:00:00 +0000 UTC"),
    ("2026-12-05", "2026-12-05 00:00:00 +0000 UTC"),
    ("'2026-12-05'", "2026-12-05"),
    ("2026-12-05T02:00:00", "2026-12-05T02:00:00"),  # no zone: no timestamp
    ("2026-12-05T02:00:00+0200", "2026-12-05T02:00:00+0200"),
    ("2026-02-30", "2026-02-30"),  # no such day: no timestamp
    ("2024-02-29", "2024-02-29 00:00:00 +0000 UTC"),
]


@pytest.mark.parametrize("scalar, value", YAML_12_SCALARS)
def test_plain_scalars_resolve_as_the_cli_reads_them(tmp_path: Path, scalar: str, value: object):
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(f"config:\n  tpu-dynamic-slicing:x: {scalar}\n")
    read = read_stack_file(path)["tpu-dynamic-slicing:x"]
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize("scalar", [".inf", "-.Inf", ".nan"])
def test_a_value_json_cannot_hold_is_refused_as_the_cli_refuses_it(tmp_path: Path, scalar: str):
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(f"config:\n  tpu-dynamic-slicing:x:\n    y: {scalar}\n")
    with pytest.raises(StackFileError, match=rf"^Pulumi.s.yaml:3: {re.escape(scalar)} is no number Pulumi can hold"):
        read_stack_file(path)
    path.write_text(f"config:\n  tpu-dynamic-slicing:x:\n    y: '{scalar}'\n")
    assert read_stack_file(path) == {"tpu-dynamic-slicing:x": {"y": scalar}}


def test_an_unquoted_time_is_refused_with_how_to_fix_it(tmp_path: Path, capsys):
    """An unquoted maintenance window reaches the program as Go's text for the timestamp; the problem says to quote
    it, and the quoted window renders."""
    stack_file = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    quoted = 'start: "2026-12-05T02:00:00Z"'
    assert quoted in stack_file
    (tmp_path / "Pulumi.s.yaml").write_text(stack_file.replace(quoted, "start: 2026-12-05T02:00:00Z"))
    argv = ["--stack", "s", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")]
    assert render.main(argv) == 1
    err = capsys.readouterr().err
    assert "cluster.maintenanceWindow.start: '2026-12-05 02:00:00 +0000 UTC' is not an RFC 3339 time" in err
    assert "quote it in the stack file" in err
    (tmp_path / "Pulumi.s.yaml").write_text(stack_file)
    assert render.main(argv) == 0


@pytest.mark.parametrize("word", ["yes", "no", "on", "off"])
def test_a_yaml_1_1_boolean_is_refused_as_the_real_preview_refuses_it(tmp_path: Path, capsys, word: str):
    """`deletionProtection: yes` reaches the program as the string 'yes' under the CLI."""
    stack_file = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    assert "deletionProtection: false" in stack_file
    (tmp_path / "Pulumi.s.yaml").write_text(
        stack_file.replace("deletionProtection: false", f"deletionProtection: {word}")
    )
    assert render.main(["--stack", "s", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert f"cluster.deletionProtection: {word!r} is not true or false" in capsys.readouterr().err


def test_every_operator_tool_reads_a_stack_with_an_encrypted_setting(tmp_path: Path, capsys):
    """`pulumi config set --secret --path serving.hfToken` writes the token encrypted, as the stack file says to: each
    tool that reads the stack file takes it for the secret it is, not for a token typed in plain text."""
    import yaml

    from tests.test_tools_bench import Cluster, pulumi_runner
    from tools import bench, verify

    stack = yaml.safe_load((FIXTURE_STACKS / "Pulumi.dev.yaml").read_text())
    stack["config"]["tpu-dynamic-slicing:serving"]["hfToken"] = {"secure": "v1:c2VjcmV0LWNpcGhlcnRleHQ="}
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    plain = verify.configured_model("dev", FIXTURE_STACKS)
    assert plain is not None and verify.configured_model("dev", tmp_path) == plain
    argv = ["--stack", "dev", "--stack-dir", str(tmp_path), "--run-id", "enc", "--dry-run"]
    assert bench.main(argv, runner=pulumi_runner(None), run=Cluster([])) == 0, capsys.readouterr().err
    _, run = render.render("dev", tmp_path)
    assert render.summary("dev", run, tmp_path)[0].startswith("stack dev: ")
