"""Edge cases of tools.stack_outputs that the sax and verify tests do not reach through their CLIs."""

from __future__ import annotations

import subprocess

import pytest

from tools import stack_outputs

HINT = "pass --flag instead"


def returning(returncode: int = 0, stdout: str = "", stderr: str = ""):
    return lambda argv: subprocess.CompletedProcess(argv, returncode, stdout, stderr)


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        (returning(stdout="[1, 2]"), "`pulumi stack output --json` did not print a JSON object; pass --flag instead"),
        (returning(1, stderr=" \n"), "`pulumi stack output --json` failed: exit code 1; pass --flag instead"),
    ],
    ids=["not-an-object", "silent-failure"],
)
def test_failures_name_the_command_and_end_with_the_hint(runner, message):
    with pytest.raises(stack_outputs.UsageError) as error:
        stack_outputs.read_stack_outputs(None, HINT, runner)
    assert str(error.value) == message


def test_a_long_stderr_line_is_truncated():
    with pytest.raises(stack_outputs.UsageError) as error:
        stack_outputs.read_stack_outputs(None, HINT, returning(1, stderr="error: " + "x" * 5000))
    assert str(error.value).endswith("x…; " + HINT)
    assert len(str(error.value)) < stack_outputs.STDERR_CHARS + 100


def test_run_pulumi_is_bounded_and_runs_from_the_project_root(monkeypatch):
    seen = {}

    def fake_run(argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return subprocess.CompletedProcess(argv, 0, "{}", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    stack_outputs.run_pulumi(["pulumi", "version"])
    assert seen == {
        "argv": ["pulumi", "version"],
        "cwd": stack_outputs.PROJECT_ROOT,
        "capture_output": True,
        "text": True,
        "timeout": stack_outputs.PULUMI_TIMEOUT_S,
        "check": False,
    }
