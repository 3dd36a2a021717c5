"""The weights-staging Job base and what it installs, offline: the Job runs the program of its ConfigMap on
libraries pinned with hashes, off the TPU nodes. The program itself runs against real servers in
tests/staging (make staging-test)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from components.config_base import parse_quantity
from components.manifests import MANIFESTS, container, load_document
from components.tpu.topology import ACCELERATOR_NODE_LABEL
from components.workloads.serving import config as serving_config
from components.workloads.serving.objects import (
    HF_TOKEN_SECRET_KEY,
    HF_TOKEN_SECRET_NAME,
    STAGING_CONTAINER,
    STAGING_FILES,
    STAGING_INSTALL_CONTAINER,
    STAGING_REQUIREMENTS_FILE,
    STAGING_SCRIPT_FILE,
)
from tests.crd_schemas import core_errors

SERVING = MANIFESTS / "serving"
JOB_BASE = "serving/weights-staging-job.yaml"
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")
# import name -> the distribution that provides it (stage-weights-requirements.in names the first three)
DISTRIBUTIONS = {
    "huggingface_hub": "huggingface-hub",
    "google.cloud.storage": "google-cloud-storage",
    "google.api_core": "google-api-core",
    "httpx2": "httpx2",
    "requests": "requests",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of every ``name==version`` line (continuation lines and comments skipped)."""
    found = {}
    for line in path.read_text().splitlines():
        if match := REQUIREMENT.match(line):
            found[normalized(match.group(1))] = match.group(2)
    return found


def requirement_blocks(path: Path) -> dict[str, list[str]]:
    """name -> the sha256 hashes listed under it."""
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if match := REQUIREMENT.match(line):
            current = normalized(match.group(1))
            blocks[current] = []
        blocks.setdefault(current, []).extend(re.findall(r"--hash=sha256:([0-9a-f]{64})\b", line))
    blocks.pop("", None)
    return blocks


def test_every_requirement_is_pinned_exactly_with_the_hashes_of_its_files():
    text = (SERVING / STAGING_REQUIREMENTS_FILE).read_text()
    blocks = requirement_blocks(SERVING / STAGING_REQUIREMENTS_FILE)
    assert len(blocks) >= 10  # the libraries and what they need, not just the three named
    assert {name for name, hashes in blocks.items() if not hashes} == set()
    for line in text.splitlines():  # nothing loose: no ranges, URLs, editable or index options
        assert not line.strip() or line.startswith(("    ", "#")) or REQUIREMENT.match(line), line


def test_the_compiled_requirements_hold_the_pins_of_their_source():
    wanted = pins(SERVING / "stage-weights-requirements.in")
    compiled = pins(SERVING / STAGING_REQUIREMENTS_FILE)
    assert {"huggingface-hub", "hf-xet", "google-cloud-storage"} <= set(wanted)
    assert {name: compiled.get(name) for name in wanted} == wanted


def test_the_program_imports_only_the_standard_library_and_pinned_distributions():
    tree = ast.parse((SERVING / STAGING_SCRIPT_FILE).read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    third_party = {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names}
    unknown = {m for m in third_party if not any(m == k or m.startswith(f"{k}.") for k in DISTRIBUTIONS)}
    assert unknown == set()
    used = {DISTRIBUTIONS[k] for k in DISTRIBUTIONS if any(m == k or m.startswith(f"{k}.") for m in third_party)}
    assert used - set(pins(SERVING / STAGING_REQUIREMENTS_FILE)) == set()
    assert {"huggingface-hub", "google-cloud-storage"} <= used


@pytest.fixture
def job() -> dict:
    return load_document(JOB_BASE)


def test_the_job_is_the_batch_job_the_model_servers_wait_for(job):
    pod = job["spec"]["template"]["spec"]
    assert core_errors(job) == []
    assert (job["apiVersion"], job["kind"], job["metadata"]["name"]) == ("batch/v1", "Job", "stage-model-weights")
    assert job["metadata"]["namespace"] == serving_config.WORKLOAD_NAMESPACE
    assert job["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == "21600"
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert job["spec"]["backoffLimit"] == 3
    assert pod["restartPolicy"] == "Never"
    # The base runs as the staging account's default, never the model servers': the one writer of the weights.
    assert pod["serviceAccountName"] == serving_config.ServingConfig().weights_staging.service_account_name
    assert pod["serviceAccountName"] != serving_config.ServingConfig().service_account_name
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ACCELERATOR_NODE_LABEL, "operator": "DoesNotExist"}]
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_init_container_installs_only_the_hash_pinned_wheels_and_the_program_runs_on_them(job):
    pod = job["spec"]["template"]["spec"]
    installer = container(pod, STAGING_INSTALL_CONTAINER, key="initContainers")
    stager = container(pod, STAGING_CONTAINER)
    mounts = {c["name"]: {m["name"]: m for m in c["volumeMounts"]} for c in (installer, stager)}
    (files,) = [v for v in pod["volumes"] if "configMap" in v]
    assert files["configMap"]["name"] == "weights-staging-script"
    staging = mounts[STAGING_INSTALL_CONTAINER][files["name"]]["mountPath"]
    assert mounts[STAGING_CONTAINER][files["name"]]["mountPath"] == staging

    command = installer["command"]
    assert command[:4] == ["python", "-m", "pip", "install"]
    assert {"--require-hashes", "--only-binary=:all:", f"--requirement={staging}/{STAGING_REQUIREMENTS_FILE}"} <= set(
        command
    )
    target = next(c.removeprefix("--target=") for c in command if c.startswith("--target="))
    (deps,) = [m for m in installer["volumeMounts"] if m["mountPath"] == target]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in stager["env"]}
    assert env["PYTHONPATH"] == target and mounts[STAGING_CONTAINER][deps["name"]]["readOnly"] is True
    assert stager["command"] == ["python", f"{staging}/{STAGING_SCRIPT_FILE}"]
    assert installer["image"] == stager["image"] == serving_config.STAGING_IMAGE
    assert set(STAGING_FILES) == {STAGING_SCRIPT_FILE, STAGING_REQUIREMENTS_FILE}
    for each in (installer, stager):
        assert each["securityContext"]["readOnlyRootFilesystem"] is True
        assert each["resources"]["requests"] == each["resources"]["limits"] | {
            "ephemeral-storage": each["resources"]["requests"]["ephemeral-storage"]
        }


def test_the_program_copies_the_served_snapshot_with_the_optional_token(job):
    stager = container(job["spec"]["template"]["spec"], STAGING_CONTAINER)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in stager["env"]}
    assert env["MODEL_ID"] == serving_config.MODEL_ID
    assert env["MODEL_REVISION"] == serving_config.MODEL_REVISION
    assert env["DESTINATION"] == serving_config.hf_cache_weights_uri(
        "my-model-weights", serving_config.MODEL_ID, serving_config.MODEL_REVISION
    )
    assert env["HF_TOKEN"] == {
        "secretKeyRef": {"name": HF_TOKEN_SECRET_NAME, "key": HF_TOKEN_SECRET_KEY, "optional": True}
    }


def test_the_downloads_held_at_once_fit_the_scratch_volume_and_the_pods_disk_request(job):
    pod = job["spec"]["template"]["spec"]
    stager = container(pod, STAGING_CONTAINER)
    env = {e["name"]: e.get("value") for e in stager["env"]}
    (scratch,) = [m for m in stager["volumeMounts"] if m["mountPath"] == env["SCRATCH_DIR"]]
    volume = next(v for v in pod["volumes"] if v["name"] == scratch["name"])
    size_limit = parse_quantity(volume["emptyDir"]["sizeLimit"])
    assert int(env["SCRATCH_BYTES"]) < size_limit  # the program's own files (HF_HOME) live there too
    assert env["HF_HOME"].startswith(env["SCRATCH_DIR"] + "/")
    assert parse_quantity(stager["resources"]["requests"]["ephemeral-storage"]) >= size_limit
