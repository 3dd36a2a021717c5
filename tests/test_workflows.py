"""GitHub Actions workflows: zizmor finds nothing, and the security/shape rules hold.

Offline and fast: zizmor runs with --offline, the rest only parses the YAML.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.stack_file import stack_names

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
PULL_REQUEST = WORKFLOWS / "pull-request.yaml"
DRIFT = WORKFLOWS / "drift.yaml"
STACKS = WORKFLOWS / "stacks.yaml"
LOCAL_USES = ("$/", "./")  # this repository's own actions and workflows (self-repository and relative forms)
ZIZMOR = Path(sys.executable).parent / "zizmor"

SHA = re.compile(r"[0-9a-f]{40}")
# `uses: owner/repo[/path]@<sha> # vX.Y.Z` on one line.
PINNED_LINE = re.compile(r"uses:\s*(?P<action>[^\s@#]+)@(?P<ref>[^\s#]+)\s*#\s*v\d+\.\d+\.\d+\b")


def workflow_files() -> list[Path]:
    return sorted([*WORKFLOWS.glob("*.yaml"), *WORKFLOWS.glob("*.yml")])


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def uses_of(workflow: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(job, uses) for every step action and every reusable-workflow call."""
    for job_id, job in workflow["jobs"].items():
        if "uses" in job:
            yield job_id, job["uses"]
    for job_id, step in steps(workflow):
        if "uses" in step:
            yield job_id, step["uses"]


@pytest.fixture(scope="module")
def pull_request() -> dict[str, Any]:
    return load(PULL_REQUEST)


def test_workflows_exist() -> None:
    assert {PULL_REQUEST, DRIFT, STACKS} <= set(workflow_files())


def test_zizmor_offline_has_no_findings() -> None:
    if not ZIZMOR.exists():
        pytest.skip(f"zizmor is not installed next to the interpreter ({ZIZMOR}); `make test` installs it")
    result = subprocess.run(
        [str(ZIZMOR), "--offline", "--no-progress", "--color=never", "--format=plain", str(WORKFLOWS)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Exit code 0 means no finding at all; informational findings alone already exit 11.
    assert result.returncode == 0, f"zizmor exited {result.returncode}:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_top_level_permissions_are_empty(path: Path) -> None:
    workflow = load(path)
    assert "permissions" in workflow, f"{path.name}: no top-level permissions (defaults to the repo's)"
    assert workflow["permissions"] == {}, f"{path.name}: top-level permissions {workflow['permissions']!r}"
    for job_id, job in workflow["jobs"].items():
        if "uses" not in job:  # reusable-workflow calls inherit from the caller
            assert "permissions" in job, f"{path.name}: job {job_id} sets no permissions"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_actions_are_pinned_to_commit_shas(path: Path) -> None:
    workflow = load(path)
    for job_id, uses in uses_of(workflow):
        if uses.startswith(LOCAL_USES):
            continue  # local action or workflow of this repository
        if uses.startswith("docker://"):
            assert "@sha256:" in uses, f"{path.name}: job {job_id}: image {uses} not pinned by digest"
            continue
        action, _, ref = uses.partition("@")
        assert SHA.fullmatch(ref), f"{path.name}: job {job_id}: {action} pinned to {ref!r}, not a 40-hex commit SHA"
    # Each pin names its release, so a reviewer can tell what the SHA is meant to be.
    text = path.read_text()
    remote_uses = [u for _, u in uses_of(workflow) if not u.startswith((*LOCAL_USES, "docker://"))]
    commented = PINNED_LINE.findall(text)
    assert len(commented) == len(remote_uses), (
        f"{path.name}: every pinned `uses:` line needs a `# vX.Y.Z` comment; "
        f"found {len(commented)} of {len(remote_uses)}"
    )


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_checkouts_do_not_persist_credentials(path: Path) -> None:
    for job_id, step in steps(load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, (
                f"{path.name}: job {job_id}: actions/checkout without persist-credentials: false"
            )


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_run_scripts_do_not_interpolate_expressions(path: Path) -> None:
    for job_id, step in steps(load(path)):
        assert "${{" not in step.get("run", ""), (
            f"{path.name}: job {job_id}: step {step.get('name', '?')!r} expands an expression inside run:; "
            "pass it through env: instead"
        )


def test_pull_request_trigger_and_concurrency(pull_request: dict[str, Any]) -> None:
    triggers = pull_request.get("on", pull_request.get(True))  # PyYAML reads a bare `on` as True
    assert set(triggers) == {"pull_request"}, f"triggers {triggers!r}"
    assert "pull_request_target" not in triggers
    assert "github.event.pull_request.number" in pull_request["concurrency"]["group"]
    assert {"test", "render-diff", "preview"} <= set(pull_request["jobs"])


def test_the_test_job_fetches_the_pinned_schemas_before_the_tests_that_read_them(pull_request: dict[str, Any]) -> None:
    """So that no schema test skips on GitHub (the runner has no ../shared): make check-tools runs them."""
    runs = [s.get("run", "").strip() for s in pull_request["jobs"]["test"]["steps"]]
    assert {"make test", "make schemas", "make check-tools"} <= set(runs)
    assert runs.index("make schemas") < runs.index("make check-tools")


def test_render_diff_publishes_to_step_summary(pull_request: dict[str, Any]) -> None:
    job = pull_request["jobs"]["render-diff"]
    assert job["permissions"] == {"contents": "read"}
    checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert any("base.sha" in s.get("with", {}).get("ref", "") for s in checkouts), "base commit is not checked out"
    scripts = "\n".join(s.get("run", "") for s in job["steps"])
    assert "diff -ru" in scripts and "GITHUB_STEP_SUMMARY" in scripts


def test_preview_job_is_keyless_and_comments(pull_request: dict[str, Any]) -> None:
    job = pull_request["jobs"]["preview"]
    assert job["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    fork_guard = "github.event.pull_request.head.repo.full_name==github.repository"
    assert job["if"].replace(" ", "").split("&&")[0] == fork_guard

    by_action = {s["uses"].partition("@")[0]: s for s in job["steps"] if "uses" in s}
    auth = by_action["google-github-actions/auth"]["with"]
    assert "vars.GCP_WORKLOAD_IDENTITY_PROVIDER" in auth["workload_identity_provider"]
    assert "vars.GCP_SERVICE_ACCOUNT" in auth["service_account"]
    assert "credentials_json" not in auth
    assert "credentials_json" not in PULL_REQUEST.read_text(), "no service-account keys anywhere"

    # The kubeconfig's exec plugin: without it the provider cannot reach an existing cluster.
    gcloud = by_action["google-github-actions/setup-gcloud"]["with"]
    assert "gke-gcloud-auth-plugin" in gcloud["install_components"].split(",")
    steps = [s.get("uses", "").partition("@")[0] for s in job["steps"]]
    assert steps.index("google-github-actions/setup-gcloud") < steps.index("pulumi/actions")

    pulumi = by_action["pulumi/actions"]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["diff"] is True
    assert "matrix.stack" in pulumi["with"]["stack-name"]
    assert pulumi["with"]["pulumi-version-file"] == ".pulumi-version", "the CLI is pinned, not the action's ^3"
    assert "vars.PULUMI_ORG" in pulumi["with"]["stack-name"]
    assert "secrets.PULUMI_ACCESS_TOKEN" in pulumi["env"]["PULUMI_ACCESS_TOKEN"]

    # The policy pack runs on the real preview, from its own virtualenv built before it.
    assert pulumi["with"]["policyPacks"].split() == ["policy"]
    runs = [s.get("run", "") for s in job["steps"]]
    (venv_step,) = [i for i, run in enumerate(runs) if "make policy-venv" in run]
    assert venv_step < steps.index("pulumi/actions")


def _list_stacks(directory: Path, scratch: Path) -> list[str]:
    """Run the reusable stacks workflow's listing step in ``directory`` as the runner would."""
    (step,) = [s for s in load(STACKS)["jobs"]["list"]["steps"] if s.get("id") == "list"]
    output = scratch / "github-output"
    output.write_text("")
    subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=directory,
        env={"GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    (line,) = output.read_text().splitlines()
    name, _, value = line.partition("=")
    assert name == "stacks", line
    listed: list[str] = json.loads(value)
    return listed


def test_the_stacks_workflow_lists_the_stack_files(tmp_path: Path) -> None:
    stacks = load(STACKS)
    assert set(stacks.get("on", stacks.get(True))) == {"workflow_call"}
    assert (
        stacks["on" if "on" in stacks else True]["workflow_call"]["outputs"]["stacks"]["value"].replace(" ", "")
        == "${{jobs.list.outputs.stacks}}"
    )
    assert stacks["jobs"]["list"]["outputs"]["stacks"].replace(" ", "") == "${{steps.list.outputs.stacks}}"
    assert stack_names(PROJECT_ROOT), "no Pulumi.<stack>.yaml at the repository root"
    assert _list_stacks(PROJECT_ROOT, tmp_path) == stack_names(PROJECT_ROOT)

    repository = tmp_path / "repository"
    repository.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod.yaml", "Pulumi.prod.yaml.orig", "README.md"):
        (repository / name).write_text("config: {}\n")
    assert _list_stacks(repository, tmp_path) == ["dev", "prod"], "a copied stack file is picked up by itself"


@pytest.mark.parametrize(("path", "job_id"), [(PULL_REQUEST, "preview"), (DRIFT, "drift")], ids=["preview", "drift"])
def test_per_stack_jobs_follow_the_stack_files(path: Path, job_id: str) -> None:
    workflow = load(path)
    assert workflow["jobs"]["stacks"]["uses"] == "$/.github/workflows/stacks.yaml"
    job = workflow["jobs"][job_id]
    assert job["needs"] == "stacks"
    assert job["strategy"]["matrix"]["stack"].replace(" ", "") == "${{fromJSON(needs.stacks.outputs.stacks)}}"
    assert "needs.stacks.outputs.stacks != '[]'" in job["if"], "an empty matrix is an error, not a skip"


# --- Drift detection -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def drift() -> dict[str, Any]:
    return load(DRIFT)


def test_drift_runs_daily_and_on_demand_one_at_a_time(drift: dict[str, Any]) -> None:
    triggers = drift.get("on", drift.get(True))
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    (schedule,) = triggers["schedule"]
    minute, hour, *rest = schedule["cron"].split()
    assert rest == ["*", "*", "*"] and minute.isdigit() and hour.isdigit(), "once a day at a fixed time"
    assert drift["concurrency"]["cancel-in-progress"] is False


def test_drift_job_is_keyless_with_least_permissions(drift: dict[str, Any]) -> None:
    job = drift["jobs"]["drift"]
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    by_action = {s["uses"].partition("@")[0]: s for s in job["steps"] if "uses" in s}
    auth = by_action["google-github-actions/auth"]["with"]
    assert "vars.GCP_WORKLOAD_IDENTITY_PROVIDER" in auth["workload_identity_provider"]
    assert "credentials_json" not in DRIFT.read_text()
    assert "gke-gcloud-auth-plugin" in by_action["google-github-actions/setup-gcloud"]["with"]["install_components"]
    installer = by_action["pulumi/actions"]["with"]
    assert "command" not in installer, "the action only installs the CLI; the preview runs in a script"
    assert installer["pulumi-version-file"] == ".pulumi-version"
    order = [s.get("uses", s.get("name", "")).partition("@")[0] for s in job["steps"]]
    preview = next(i for i, s in enumerate(job["steps"]) if "pulumi preview" in s.get("run", ""))
    assert order.index("google-github-actions/auth") < order.index("google-github-actions/setup-gcloud") < preview
    assert "secrets.PULUMI_ACCESS_TOKEN" in job["steps"][preview]["env"]["PULUMI_ACCESS_TOKEN"]


def _drift_script(drift: dict[str, Any]) -> str:
    (step,) = [s for s in drift["jobs"]["drift"]["steps"] if "pulumi preview" in s.get("run", "")]
    script: str = step["run"]
    return script


@pytest.mark.parametrize(("exit_code", "says"), [(0, "No drift"), (255, "Drift or a failed preview")])
def test_the_drift_step_fails_on_changes_and_writes_the_diff_to_the_summary(
    drift: dict[str, Any], tmp_path: Path, exit_code: int, says: str
) -> None:
    """The step's script, run with a stand-in `pulumi` on PATH that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    fake.write_text(
        "#!/bin/sh\n"
        'printf \'%s\\n\' "$@" > "$ARGS_FILE"\n'
        "echo '~ kubernetes:core/v1:ConfigMap check-script update [diff: ~data]'\n"
        f"exit {exit_code}\n"
    )
    fake.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GITHUB_STEP_SUMMARY": str(summary),
        "STACK": "acme/prod",
        "ARGS_FILE": str(tmp_path / "args"),
    }
    done = subprocess.run(["bash", "-c", _drift_script(drift)], cwd=tmp_path, env=env, capture_output=True, text=True)

    assert done.returncode == exit_code
    args = (tmp_path / "args").read_text().split()
    assert {"preview", "--refresh", "--expect-no-changes", "--non-interactive"} <= set(args)
    assert args[args.index("--stack") + 1] == "acme/prod"
    text = summary.read_text()
    assert "acme/prod" in text and says in text
    assert ("check-script update" in text) == (exit_code != 0), "the diff is in the summary exactly when it failed"


def test_the_cli_pin_is_exact_and_not_older_than_the_sdk() -> None:
    version = (PROJECT_ROOT / ".pulumi-version").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f".pulumi-version {version!r} is not an exact version"
    (sdk,) = re.findall(r"^pulumi==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert _numbers(version) >= _numbers(sdk), f"CLI {version} is older than the Python SDK {sdk}"


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
