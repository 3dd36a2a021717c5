"""The lab's Pulumi tools are the ones lab/versions.lock names, as they report themselves."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.itest.lab import REPO_ROOT, PulumiHome, Tools


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
