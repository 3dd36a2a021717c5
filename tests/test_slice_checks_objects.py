"""The slice-check JobSets: the JAX check script (without JAX), the overlays, the slice-name
budget, and strict validation of the JobSets against the JobSet CRD schema."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from components import manifests
from components.config_base import NO_PULL_PATH
from components.gcp.config import TpuConfig
from components.manifests import load_document
from components.naming import slice_name_budget_problem
from components.platform.config import QueuesConfig
from components.platform.kueue_objects import PRIORITY_LABEL, QUEUE_LABEL
from components.tpu.topology import (
    ACCELERATOR_NODE_LABEL,
    SLICE_TOPOLOGY_ANNOTATION,
    TPU_RESOURCE,
    Shape,
)
from components.workloads.slice_checks import objects as slice_checks
from components.workloads.slice_checks.config import IMAGE as DEFAULT_IMAGE
from components.workloads.slice_checks.config import SUBSLICING, SUPERSLICING, ChecksConfig
from components.workloads.slice_checks.objects import slice_check_jobset
from harness.twin_nodes import TPU_TAINT
from tests.conftest import not_checkov
from tests.crd_schemas import core_errors, crd_errors
from tests.stack_pods import pod_templates

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT_PATH = REPO_ROOT / "manifests" / "slice-checks" / "check_devices.py"


def _load_script_module(name: str = "slice_check_devices") -> types.ModuleType:
    """Import the script by path (its folder is no package); dataclasses need it in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, SCRIPT_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


check_devices = _load_script_module()


# --- The check script, with a fake jax -----------------------------------------------------


class FakeJax:
    """The jax calls the script makes, with canned devices (``slice_devices``: the devices of each slice JAX sees, one
    slice by default, each device with its slice's index) and a record of initialize()."""

    def __init__(self, slice_devices: int | list[int], local_devices: int):
        self.initialize_calls = 0
        counts = [slice_devices] if isinstance(slice_devices, int) else slice_devices
        self._devices = [types.SimpleNamespace(slice_index=i) for i, count in enumerate(counts) for _ in range(count)]
        self._local = local_devices
        self.distributed = types.SimpleNamespace(initialize=self._initialize)

    def _initialize(self) -> None:
        self.initialize_calls += 1

    def devices(self) -> list[Any]:
        return self._devices

    def local_device_count(self) -> int:
        return self._local


class FakeSleep:
    def __init__(self):
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _env(**overrides: str) -> dict[str, str]:
    env = {"EXPECTED_SLICE_DEVICES": "16", "EXPECTED_LOCAL_DEVICES": "8", "HOSTNAME": "pod-0"}
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def _report(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.splitlines()[0])


@pytest.mark.parametrize(
    "counts, ok, message",
    [
        (({0: 16}, 8, 16, 8), True, "1 slice(s) of 16 devices and 8 local devices as expected"),
        (({0: 8}, 8, 16, 8), False, "slice 0 device count 8, expected 16"),
        (({0: 16}, 4, 16, 8), False, "local device count 4, expected 8"),
        (({0: 1}, 1, 256, 8), False, "slice 0 device count 1, expected 256; local device count 1, expected 8"),
        # the slices of one JobSet as one multislice cluster (GKE's MEGASCALE_* variables): each slice counted
        ((dict.fromkeys(range(6), 16), 8, 16, 8), True, "6 slice(s) of 16 devices and 8 local devices as expected"),
        (({0: 16, 1: 8, 2: 16}, 8, 16, 8), False, "slice 1 device count 8, expected 16"),
    ],
)
def test_evaluate(counts, ok, message):
    assert check_devices.evaluate(*counts) == (ok, message)


def test_pass_prints_one_json_line_and_exits_at_once(capsys):
    jax, sleep = FakeJax(16, 8), FakeSleep()
    assert check_devices.main(jax, _env(), sleep) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    assert _report(out) == {
        "check": "tpu-slice-devices",
        "ok": True,
        "message": "1 slice(s) of 16 devices and 8 local devices as expected",
        "pod": "pod-0",
        "num_processes": 1,
        "slice_devices": {"0": 16},
        "expected_slice_devices": 16,
        "local_devices": 8,
        "expected_local_devices": 8,
        "hold_seconds": 0,
    }
    assert sleep.calls == []
    assert jax.initialize_calls == 0


def test_the_slices_of_one_jobset_pass_as_one_multislice_cluster(capsys):
    """GKE gives the pods of a JobSet of several TPU Jobs the multislice variables, and JAX then sees every Job's
    devices (the sub-slicing check's six 2x2x2 slices: 96): each slice holds its 16."""
    jax = FakeJax([16] * 6, 8)
    assert check_devices.main(jax, _env(NUM_PROCESSES="2"), FakeSleep()) == 0
    assert _report(capsys.readouterr().out)["slice_devices"] == {str(i): 16 for i in range(6)}
    assert check_devices.main(FakeJax([16] * 5 + [8], 8), _env(NUM_PROCESSES="2"), FakeSleep()) == 1


def test_pass_holds_the_slice_with_the_injected_sleep(capsys):
    sleep = FakeSleep()
    assert check_devices.main(FakeJax(16, 8), _env(HOLD_SECONDS="900"), sleep) == 0
    assert sleep.calls == [900]
    out = capsys.readouterr().out
    assert _report(out)["hold_seconds"] == 900
    assert "holding the slice for 900 s" in out


@pytest.mark.parametrize("slice_devices, local_devices", [(8, 8), (16, 4), (0, 0), (0, 8), ([16, 15], 8)])
def test_mismatch_exits_1_without_holding(capsys, slice_devices, local_devices):
    sleep = FakeSleep()
    status = check_devices.main(FakeJax(slice_devices, local_devices), _env(HOLD_SECONDS="900"), sleep)
    assert status == 1
    assert sleep.calls == []
    captured = capsys.readouterr()
    assert _report(captured.out)["ok"] is False
    assert "slice check FAILED" in captured.err
    assert "expected" in captured.err


def test_mismatch_message_names_the_counts(capsys):
    check_devices.main(FakeJax(8, 8), _env(), FakeSleep())
    assert "slice 0 device count 8, expected 16" in capsys.readouterr().err


@pytest.mark.parametrize("num_processes, calls", [(None, 0), ("1", 0), ("2", 1), ("32", 1)])
def test_distributed_initialize_only_when_multi_process(capsys, num_processes, calls):
    jax = FakeJax(16, 8)
    check_devices.main(jax, _env(NUM_PROCESSES=num_processes), FakeSleep())
    assert jax.initialize_calls == calls


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"EXPECTED_SLICE_DEVICES": None}, "EXPECTED_SLICE_DEVICES is not set"),
        ({"EXPECTED_LOCAL_DEVICES": ""}, "EXPECTED_LOCAL_DEVICES is not set"),
        ({"EXPECTED_SLICE_DEVICES": "sixteen"}, "EXPECTED_SLICE_DEVICES='sixteen' is not an integer"),
        ({"EXPECTED_LOCAL_DEVICES": "0"}, "EXPECTED_LOCAL_DEVICES=0 is below 1"),
        ({"HOLD_SECONDS": "-1"}, "HOLD_SECONDS=-1 is below 0"),
        ({"HOLD_SECONDS": "1.5"}, "HOLD_SECONDS='1.5' is not an integer"),
        ({"NUM_PROCESSES": "0"}, "NUM_PROCESSES=0 is below 1"),
    ],
)
def test_bad_environment_exits_2_before_touching_jax(capsys, overrides, fragment):
    jax, sleep = FakeJax(16, 8), FakeSleep()
    assert check_devices.main(jax, _env(**overrides), sleep) == 2
    assert fragment in capsys.readouterr().err
    assert jax.initialize_calls == 0 and sleep.calls == []


def test_script_imports_without_jax(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # any `import jax` now raises ImportError
    monkeypatch.delitem(sys.modules, "slice_check_devices_without_jax", raising=False)
    module = _load_script_module("slice_check_devices_without_jax")
    assert callable(module.main)


@pytest.mark.parametrize("slice_devices, status", [(16, 0), (8, 1)])
def test_script_runs_as_main_with_a_stub_jax_package(tmp_path, slice_devices, status):
    stub = tmp_path / "jax"
    stub.mkdir()
    (stub / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            from . import distributed
            def devices(): return [object()] * {slice_devices}
            def local_device_count(): return 8
            """
        )
    )
    (stub / "distributed.py").write_text("def initialize(): print('initialized')\n")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(tmp_path),
        "EXPECTED_SLICE_DEVICES": "16",
        "EXPECTED_LOCAL_DEVICES": "8",
        "NUM_PROCESSES": "2",
        "HOLD_SECONDS": "0",
    }
    result = subprocess.run([sys.executable, str(SCRIPT_PATH)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == status, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "initialized"
    assert json.loads(lines[1])["slice_devices"] == {"0": slice_devices}


# --- The overlays --------------------------------------------------------------------------

IMAGE = "registry.example/jax-tpu:test"
MACHINE = TpuConfig().machine


QUEUES = QueuesConfig(local_queue_name="tpu-lq")


def _expected(check: str, queues: QueuesConfig = QUEUES) -> dict[str, Any]:
    """What the ``check`` JobSet of the block's defaults carries: its block's settings, and its slice counted on the
    machine (pods: the hosts of one slice; JAX devices: a TPU7x chip's TensorCores, each one device)."""
    block = ChecksConfig().by_kind()[check]
    shape = Shape.parse(block.shape)
    return {
        "name": block.name,
        "priority": queues.priority_class(block.priority).name,
        "replicas": block.slices,
        "hosts": shape.chips // MACHINE.chips_per_host,
        "shape": block.shape,
        "slice_devices": shape.chips * MACHINE.tensorcores_per_chip,
        "local_devices": MACHINE.chips_per_host * MACHINE.tensorcores_per_chip,
        "hold": block.hold_seconds,
    }


def _overlaid(
    kind: str, namespace: str = "tpu-checks", image: str = IMAGE, queues: QueuesConfig = QUEUES, **settings: Any
) -> dict[str, Any]:
    """The ``kind`` check JobSet of the block's defaults with ``settings`` (the block's fields) changed."""
    check = ChecksConfig().by_kind()[kind].model_copy(update=settings)
    return slice_check_jobset(kind, check, namespace, image, queues, TpuConfig().machine)


def _parts(jobset: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
    (replicated_job,) = jobset["spec"]["replicatedJobs"]
    job_spec = replicated_job["template"]["spec"]
    pod_template = job_spec["template"]
    (container,) = pod_template["spec"]["containers"]
    return replicated_job, job_spec, pod_template, pod_template["spec"], container


def _env_of(container: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in container["env"]}


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_overlay_sets_what_varies_and_keeps_the_reference_shape(check):
    want = _expected(check)
    hold = 120
    jobset = _overlaid(check, hold_seconds=hold)
    replicated_job, job_spec, pod_template, pod_spec, container = _parts(jobset)

    assert {**jobset["metadata"], "annotations": not_checkov(jobset["metadata"]["annotations"])} == {
        "annotations": {},
        "name": want["name"],
        "namespace": "tpu-checks",
        "labels": {QUEUE_LABEL: QUEUES.local_queue_name, PRIORITY_LABEL: want["priority"]},
    }
    assert replicated_job["replicas"] == want["replicas"]
    assert job_spec["parallelism"] == job_spec["completions"] == want["hosts"]
    assert job_spec["completionMode"] == "Indexed"  # a pod's index is its JAX process id
    assert pod_template["metadata"]["annotations"] == {
        SLICE_TOPOLOGY_ANNOTATION: want["shape"],
        manifests.SCRIPT_DIGEST_ANNOTATION: manifests.files_digest(slice_checks.check_files()),
    }
    assert pod_spec["automountServiceAccountToken"] is False  # the check calls no API
    # the base's account is the one the stack makes (service-account.yaml): the builder no longer sets it
    assert pod_spec["serviceAccountName"] == slice_checks.check_service_account("tpu-checks")["metadata"]["name"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}}
    assert pod_spec["nodeSelector"] == {ACCELERATOR_NODE_LABEL: MACHINE.accelerator_label}
    # the pods tolerate the taint GKE puts on every TPU node
    assert any(
        t["key"] == TPU_TAINT["key"] and t["operator"] == "Exists" and t["effect"] == TPU_TAINT["effect"]
        for t in pod_spec["tolerations"]
    )
    assert container["image"] == IMAGE
    chips = {TPU_RESOURCE: str(MACHINE.chips_per_host)}  # every chip of its host, asked for and limited alike
    assert container["resources"] == {"requests": chips, "limits": chips}
    assert _env_of(container) == {
        "EXPECTED_SLICE_DEVICES": str(want["slice_devices"]),
        "EXPECTED_LOCAL_DEVICES": str(want["local_devices"]),
        "NUM_PROCESSES": str(want["hosts"]),
        "HOLD_SECONDS": str(hold),
        "JAX_PLATFORMS": "tpu",
    }


def test_every_pod_of_the_checks_runs_under_the_runtimes_seccomp_profile():
    """The restricted Pod Security profile's seccomp rule, which the checks' baseline namespace does not enforce
    (checkov's CKV_K8S_31 holds the render to it too, in make check-tools)."""
    built = slice_checks.slice_checks_objects(ChecksConfig(), TpuConfig(), QueuesConfig(), NO_PULL_PATH)
    assert built is not None
    templates = [t for jobset in built.jobsets for t in pod_templates(jobset)]
    assert len(templates) == len(built.jobsets)
    for where, _, spec in templates:
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_overlay_mounts_the_script_configmap(check):
    _, _, _, pod_spec, container = _parts(_overlaid(check))
    assert container["command"] == ["python", f"/checks/{slice_checks.SCRIPT_FILE}"]
    (mount,) = container["volumeMounts"]
    (volume,) = pod_spec["volumes"]
    assert mount == {"name": volume["name"], "mountPath": "/checks", "readOnly": True}
    configmap = slice_checks.check_script_configmap("tpu-checks")
    assert configmap["metadata"] == {"name": volume["configMap"]["name"], "namespace": "tpu-checks"}
    assert list(configmap["data"]) == [container["command"][1].rsplit("/", 1)[1]]


def test_configmap_carries_the_script_verbatim():
    configmap = slice_checks.check_script_configmap("ns")
    assert configmap["data"][slice_checks.SCRIPT_FILE] == SCRIPT_PATH.read_text(encoding="utf-8")


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_each_check_pod_carries_the_digest_of_the_script_it_mounts(check):
    _, _, pod_template, _, _ = _parts(_overlaid(check))
    configmap = slice_checks.check_script_configmap("tpu-checks")
    digest = manifests.files_digest(configmap["data"])
    assert pod_template["metadata"]["annotations"][manifests.SCRIPT_DIGEST_ANNOTATION] == digest


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_a_new_check_script_changes_the_jobset_which_is_then_replaced_and_reruns(check, monkeypatch, tmp_path):
    """The ConfigMap updates in place; the JobSet's pod template is in its spec, whose change replaces it
    (components/resources.py REPLACE_ON_SPEC_CHANGE), so the check runs again on the new script."""
    before = _overlaid(check)
    edited = tmp_path / slice_checks.SCRIPT_FILE
    edited.write_text(SCRIPT_PATH.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    monkeypatch.setattr(slice_checks, "SCRIPT_PATH", edited)
    after = _overlaid(check)
    assert before["spec"] != after["spec"]
    annotations = [_parts(jobset)[2]["metadata"]["annotations"] for jobset in (before, after)]
    assert [set(a) for a in annotations] == [{SLICE_TOPOLOGY_ANNOTATION, manifests.SCRIPT_DIGEST_ANNOTATION}] * 2
    new_script = slice_checks.check_script_configmap("tpu-checks")["data"]
    assert annotations[1][manifests.SCRIPT_DIGEST_ANNOTATION] == manifests.files_digest(new_script)
    # nothing else of the JobSet moved
    for jobset in (before, after):
        del _parts(jobset)[2]["metadata"]["annotations"][manifests.SCRIPT_DIGEST_ANNOTATION]
    assert before == after


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_the_default_hold_time_is_the_base_s_and_overlaid(check):
    _, _, _, _, container = _parts(_overlaid(check))
    assert _env_of(container)["HOLD_SECONDS"] == str(_expected(check)["hold"])
    _, _, _, _, container = _parts(_overlaid(check, hold_seconds=0))
    assert _env_of(container)["HOLD_SECONDS"] == "0"


@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_bases_agree_with_their_own_derivation(check):
    """Overlaying the base's own placeholders changes nothing but the script's digest (which a base, applied by hand
    next to `kubectl create configmap`, does without): its numbers follow from its shape."""
    base = load_document(slice_checks.BASE_FILES[check])
    same = _overlaid(check, namespace=base["metadata"]["namespace"], image=DEFAULT_IMAGE, queues=QueuesConfig())
    del _parts(same)[2]["metadata"]["annotations"][manifests.SCRIPT_DIGEST_ANNOTATION]
    assert same == base, "the block's defaults and the base's placeholders disagree"
    assert base["metadata"]["labels"][PRIORITY_LABEL] == _expected(check, QueuesConfig())["priority"]


@pytest.mark.parametrize(
    "check, shape, hosts, slice_devices",
    [
        (SUBSLICING, "2x2x1", 1, 8),
        (SUBSLICING, "2x2x4", 4, 32),
        (SUBSLICING, "2x4x4", 8, 64),
        (SUPERSLICING, "4x4x4", 16, 128),
        (SUPERSLICING, "4x4x8", 32, 256),
        (SUPERSLICING, "4x8x8", 64, 512),
    ],
)
def test_shape_drives_parallelism_and_device_counts(check, shape, hosts, slice_devices):
    slices = 3
    replicated_job, job_spec, pod_template, _, container = _parts(_overlaid(check, shape=shape, slices=slices))
    assert replicated_job["replicas"] == slices
    assert job_spec["parallelism"] == job_spec["completions"] == hosts
    assert pod_template["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] == shape
    env = _env_of(container)
    assert env["EXPECTED_SLICE_DEVICES"] == str(slice_devices)
    assert env["EXPECTED_LOCAL_DEVICES"] == str(_expected(check)["local_devices"])  # one host's, whatever the slice
    assert env["NUM_PROCESSES"] == str(hosts)


def test_a_shape_that_splits_a_host_cannot_be_built():
    with pytest.raises(ValueError, match="not a multiple of the 4 chips"):
        _overlaid(SUBSLICING, shape="1x1x2")


def test_overlays_work_on_copies():
    base = load_document(slice_checks.BASE_FILES[SUBSLICING])
    first = _overlaid(SUBSLICING)
    first["spec"]["replicatedJobs"][0]["replicas"] = 99
    second = _overlaid(SUBSLICING, namespace="other")
    assert second["spec"]["replicatedJobs"][0]["replicas"] == ChecksConfig().subslicing.slices
    assert load_document(slice_checks.BASE_FILES[SUBSLICING]) == base


# --- Slice name budget ---------------------------------------------------------------------


def test_name_budget_accepts_names_within_49():
    assert slice_name_budget_problem("default", "kueue-jobset-simple-subslicing") is None  # 7+1+30+6 = 44
    assert slice_name_budget_problem("ns", "w" * 40) is None  # 2+1+40+6 = 49, the limit itself


def test_name_budget_rejects_one_over():
    problem = slice_name_budget_problem("ns", "w" * 41)
    assert problem is not None
    assert "2 + 1 + 41 + 6 = 50" in problem and "budget is 49" in problem


def test_name_budget_of_the_reference_namespace():
    """The codelab's namespace leaves no room for its check JobSet names."""
    problem = slice_name_budget_problem("llm-d-pd-disaggregation", "kueue-jobset-simple-subslicing")
    assert problem is not None and "= 60 characters" in problem
    assert "within 19 characters" in problem


def test_name_budget_limit_is_a_parameter():
    assert slice_name_budget_problem("default", "kueue-jobset-simple-subslicing", limit=44) is None
    assert slice_name_budget_problem("default", "kueue-jobset-simple-subslicing", limit=43) is not None


# --- Strict validation against the JobSet CRD schema ----------------------------------------


def schema_errors(obj: dict[str, Any]) -> list[str]:
    return sorted(crd_errors(obj))


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_bases_validate_strictly(check):
    assert schema_errors(load_document(slice_checks.BASE_FILES[check])) == []


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize("check", [SUBSLICING, SUPERSLICING])
def test_overlaid_jobsets_validate_strictly(check):
    jobset = _overlaid(check, hold_seconds=30, shape=_expected(check)["shape"], slices=2)
    assert schema_errors(jobset) == []


def _misspell(jobset: dict[str, Any], where: str) -> None:
    replicated_job = jobset["spec"]["replicatedJobs"][0]
    job_spec = replicated_job["template"]["spec"]
    if where == "job":
        job_spec["parallelizm"] = job_spec.pop("parallelism")
    elif where == "pod":
        pod_spec = job_spec["template"]["spec"]
        pod_spec["nodeSelecter"] = pod_spec.pop("nodeSelector")
    elif where == "container":
        container = job_spec["template"]["spec"]["containers"][0]
        container["volumeMount"] = container.pop("volumeMounts")
    elif where == "metadata":
        jobset["metadata"]["lables"] = jobset["metadata"].pop("labels")


@pytest.mark.external  # the CRD files of schemas.lock
@pytest.mark.parametrize(
    "where, field",
    [("job", "parallelizm"), ("pod", "nodeSelecter"), ("container", "volumeMount"), ("metadata", "lables")],
)
def test_misspelled_fields_are_rejected(where, field):
    jobset = _overlaid(SUBSLICING)
    _misspell(jobset, where)
    errors = schema_errors(jobset)
    assert len(errors) == 1, errors
    assert f"'{field}' was unexpected" in errors[0]


@pytest.mark.external  # the CRD files of schemas.lock
def test_wrong_types_are_rejected():
    jobset = _overlaid(SUPERSLICING)
    jobset["spec"]["replicatedJobs"][0]["replicas"] = "1"
    assert any("replicas" in e and "is not of type 'integer'" in e for e in schema_errors(jobset))


# --- NetworkPolicies -----------------------------------------------------------------------


def test_each_check_has_a_network_policy_its_own_pods_reach_each_other_by():
    """Named after its JobSet, in its namespace, selecting by the name the JobSet controller labels its pods with."""
    built = slice_checks.slice_checks_objects(ChecksConfig(namespace="work"), TpuConfig(), QueuesConfig(), NO_PULL_PATH)
    assert built is not None and len(built.jobsets) == len(ChecksConfig().by_kind())  # both on by default
    assert [p["metadata"] for p in built.network_policies] == [
        {"name": j["metadata"]["name"], "namespace": "work"} for j in built.jobsets
    ]
    for policy, jobset in zip(built.network_policies, built.jobsets, strict=True):
        pods = {"matchLabels": {slice_checks.JOBSET_NAME_LABEL: jobset["metadata"]["name"]}}
        assert policy["spec"] == {
            "podSelector": pods,
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": pods}]}],  # each other, on any port; nothing else
        }
        assert core_errors(policy) == []


def test_the_network_policy_base_agrees_with_its_own_overlay():
    base = load_document(slice_checks.NETWORK_POLICY_FILE)
    jobset = {"metadata": {"name": base["metadata"]["name"], "namespace": base["metadata"]["namespace"]}}
    assert slice_checks.network_policy(jobset) == base
