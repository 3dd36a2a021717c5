"""The lab's Pulumi tools are the ones lab/versions.lock names, as they report themselves; the offline reading of
stack files is the CLI's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.itest.lab import REPO_ROOT, PulumiHome, Tools
from tests.test_tools_stack_file import MALFORMED, YAML_12_SCALARS
from tools.stack_file import PROJECT_NAME, StackFileError, stack_config_values


def test_the_pulumi_cli_reports_the_locked_version(tools: Tools, pulumi_home: PulumiHome):
    reported = pulumi_home.cli("version").stdout.strip()
    assert reported == f"v{tools.lock['PULUMI_VERSION']}", f"pulumi version says {reported}"
    pinned = REPO_ROOT / ".pulumi-version"
    if pinned.is_file():
        assert reported == f"v{pinned.read_text().strip()}", f"the project pins the CLI at {pinned.read_text().strip()}"


def test_the_provider_plugin_is_the_version_the_lab_sdk_asks_for(tools: Tools, pulumi_home: PulumiHome):
    listed = json.loads(pulumi_home.cli("plugin", "ls", "--json").stdout)
    kubernetes = [(p["kind"], p["version"]) for p in listed if p["name"] == "kubernetes"]
    wanted = tools.lock["K8S_PROVIDER_VERSION"]
    assert kubernetes == [("resource", wanted)], f"pulumi plugin ls lists kubernetes as {kubernetes}"
    spec = importlib.util.find_spec("pulumi_kubernetes")
    assert spec is not None and spec.origin is not None
    plugin = json.loads((Path(spec.origin).parent / "pulumi-plugin.json").read_text())
    # the engine loads exactly the plugin version the SDK's pulumi-plugin.json names
    assert plugin["version"] == wanted, f"the lab venv's pulumi_kubernetes asks for {plugin['version']}"


def test_stack_files_read_offline_as_the_cli_reads_them(tools: Tools, tmp_path: Path):
    """tools/stack_file.py reads stack files for make render and the tests: each plain scalar of its table, nested in
    a block and at the top, reaches the program as `pulumi config` says the CLI hands it on; a value JSON cannot hold
    is refused by both. The CLI runs in UTC, the zone the offline reading assumes."""
    env = {
        **os.environ,
        "PULUMI_HOME": str(tmp_path / "home"),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "stack-file-oracle",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "TZ": "UTC",
    }

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(tools.pulumi), *args, "--non-interactive"]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    (tmp_path / "state").mkdir()
    (tmp_path / "Pulumi.yaml").write_text(f"name: {PROJECT_NAME}\nruntime: python\n")
    created = pulumi("stack", "init", "oracle")
    assert created.returncode == 0, created.stderr
    stack_file = tmp_path / "Pulumi.oracle.yaml"
    salt = stack_file.read_text()
    block = "".join(f"    k{i}: {scalar}\n" for i, (scalar, _) in enumerate(YAML_12_SCALARS))
    tops = "".join(f"  {PROJECT_NAME}:top{i}: {scalar}\n" for i, (scalar, _) in enumerate(YAML_12_SCALARS))
    stack_file.write_text(f"{salt}config:\n  {PROJECT_NAME}:block:\n{block}{tops}")

    shown = pulumi("config", "--json", "--stack", "oracle")
    assert shown.returncode == 0, shown.stderr
    by_cli = {key: entry["value"] for key, entry in json.loads(shown.stdout).items()}
    offline, _ = stack_config_values("oracle", tmp_path)
    assert offline.keys() == by_cli.keys()
    nested_cli, nested_offline = (
        json.loads(by_cli.pop(f"{PROJECT_NAME}:block")),
        json.loads(offline.pop(f"{PROJECT_NAME}:block")),
    )
    for i, (scalar, _) in enumerate(YAML_12_SCALARS):
        cli, ours = nested_cli[f"k{i}"], nested_offline[f"k{i}"]
        assert (ours, type(ours)) == (cli, type(cli)), f"{scalar} nested: the CLI hands on {cli!r}, offline {ours!r}"
        assert offline[f"{PROJECT_NAME}:top{i}"] == by_cli[f"{PROJECT_NAME}:top{i}"], f"{scalar} at the top"

    stack_file.write_text(f"{salt}config:\n  {PROJECT_NAME}:block:\n    k: .inf\n")
    refused = pulumi("config", "--json", "--stack", "oracle")
    assert refused.returncode != 0 and "unsupported value: +Inf" in refused.stderr, refused.stderr
    with pytest.raises(StackFileError, match="is no number Pulumi can hold"):
        stack_config_values("oracle", tmp_path)

    # What the offline reader refuses, the CLI refuses too; but a key that is no string inside a block, which the
    # CLI hands on as its text (`true` -> "true") for the program to refuse as a setting it does not know.
    for malformed in MALFORMED:
        content, _ = malformed.values
        stack_file.write_bytes(salt.encode() + content if content.startswith((b"config", b"x:")) else content)
        shown = pulumi("config", "--json", "--stack", "oracle")
        assert (shown.returncode == 0) is (malformed.id == "boolean-key"), f"{malformed.id}: {shown.stderr}"
