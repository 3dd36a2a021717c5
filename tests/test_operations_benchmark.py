"""The serving benchmark's objects and reports as data: the Job and its inference-perf config as the dev stack
would run them, the refusals of a run that would measure the wrong thing, and the table read from reports of
inference-perf's schema (inference_perf/reportgen/base.py, ResponsesSummary, 0.7.0)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import manifests
from components.operations import benchmark
from components.stack import StackConfig
from components.workloads.serving.config import BENCHMARK_IMAGE, weights_uri
from tests.conftest import stack_config, stack_values
from tests.crd_schemas import core_errors
from tools.stack_file import PROJECT_ROOT

DEV = stack_values("dev")  # the tests' dev stack
RAMP = benchmark.Ramp(run_id="20261204-101500", base_url="http://10.10.0.42/v1", rates=(1, 2, 4), stage_seconds=90)


@pytest.fixture(scope="module")
def dev() -> StackConfig:
    return stack_config("dev")


def dev_objects(dev: StackConfig, ramp: benchmark.Ramp = RAMP) -> list[dict[str, Any]]:
    return benchmark.benchmark_objects(dev.serving, dev.project, dev.pull_path(), ramp)


def test_the_job_and_its_config_map_are_valid_objects_of_the_serving_namespace(dev):
    config_map, job = dev_objects(dev)
    for obj in (config_map, job):
        assert core_errors(obj) == []
        assert obj["metadata"]["namespace"] == dev.serving.namespace
        assert obj["metadata"]["name"] == "serving-benchmark-20261204-101500"
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "serving-benchmark", "its own account, not the model servers'"
    (container,) = pod["containers"]
    assert "google.com/tpu" not in container["resources"]["requests"], "a CPU Job: it takes no slice"
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"].get("labels", {}), "Kueue leaves it alone"
    assert job["spec"]["backoffLimit"] == 0


def test_the_tokenizer_is_the_staged_snapshot_read_only_and_the_reports_go_to_the_results_prefix(dev):
    _, job = dev_objects(dev)
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["template"]["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    tokenizer = next(v for v in pod["volumes"] if v["name"] == "tokenizer")["csi"]
    assert tokenizer["driver"] == "gcsfuse.csi.storage.gke.io" and tokenizer["readOnly"] is True
    attributes = tokenizer["volumeAttributes"]
    options = attributes["mountOptions"].split(",")
    assert options[0] == "implicit-dirs" and len(options) == 2
    snapshot = options[1].removeprefix("only-dir=")
    assert options[1] != snapshot and snapshot, "only the snapshot's prefix is mounted"
    assert weights_uri(dev.serving, dev.project) == f"gs://{attributes['bucketName']}/{snapshot}"
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["tokenizer"]["mountPath"] == "/tokenizer" and mounts["tokenizer"]["readOnly"] is True


def test_the_config_is_the_run_asked_for_behind_the_gateway():
    """A served name and a bucket other than the base file's, so an overlay that changed nothing fails."""
    serving = {"serving.model.servedName": "qwen-bench", "serving.weightsBucket.name": "bench-weights"}
    config_map, job = dev_objects(stack_config("dev", serving))
    config = yaml.safe_load(config_map["data"][benchmark.CONFIG_KEY])
    assert config["server"]["base_url"] == "http://10.10.0.42", "inference-perf appends /v1/completions itself"
    assert config["server"]["model_name"] == "qwen-bench"
    assert config["api"] == {"type": "completion", "streaming": True}, "TTFT and TPOT need a streamed answer"
    assert config["server"]["ignore_eos"] is True
    assert config["load"]["stages"] == [{"rate": r, "duration": 90} for r in (1, 2, 4)]
    assert config["tokenizer"]["pretrained_model_name_or_path"] == "/tokenizer"
    assert config["storage"]["google_cloud_storage"] == {
        "bucket_name": "bench-weights",
        "path": "results/20261204-101500",
    }
    stages = 3 * (90 + config["load"]["interval"])
    assert stages < job["spec"]["activeDeadlineSeconds"] <= stages + benchmark.DEADLINE_MARGIN_SECONDS
    assert config["report"]["request_lifecycle"]["per_stage"] is True


def test_the_workload_is_shaped_like_pd_serving_within_the_context(dev):
    data = manifests.load_document(benchmark.CONFIG_FILE)["data"]
    prompts, outputs = data["input_distribution"], data["output_distribution"]
    assert prompts["mean"] >= 2048, "long prompts: prefill's work"
    assert outputs["min"] <= 32 and outputs["max"] >= 1024, "short and long outputs: decode's work"
    assert prompts["max"] + outputs["max"] <= dev.serving.max_model_len


def test_the_job_runs_the_harness_release_the_lab_installs(dev):
    image = dev.serving.benchmark_image
    match = re.fullmatch(r"quay\.io/inference-perf/inference-perf:v(\d+\.\d+\.\d+)", image)
    assert match, image
    pins = (PROJECT_ROOT / "lab" / "bench-requirements.txt").read_text()
    assert f"inference-perf=={match.group(1)}\n" in pins
    # The base Job names the setting's default, so a reader of the manifest sees the image it runs.
    (_, base) = manifests.load_documents(benchmark.JOB_FILE)
    assert base["spec"]["template"]["spec"]["containers"][0]["image"] == BENCHMARK_IMAGE


@pytest.mark.parametrize(
    "overrides, registry",
    [
        ({}, f"-docker.pkg.dev/{DEV['project']}/{DEV['cluster']['name']}-quay-io/"),  # dev: its pull-through repository
        (
            {"images": {"mirror": "europe-docker.pkg.dev/my-org-artifacts/mirror"}},
            "europe-docker.pkg.dev/my-org-artifacts/mirror/quay.io/",
        ),
        ({"cluster": {**stack_values()["cluster"], "privateNodes": False}}, "quay.io/"),  # public nodes: its own
    ],
)
def test_the_job_pulls_its_image_the_way_the_stack_pulls_every_image(overrides, registry):
    """R3-3: `make bench` bypassed images.mirror. Its image now takes the stack's pull path, and the `images` output
    lists it as it is pulled."""
    config = stack_config("dev", overrides)
    _, job = dev_objects(config)
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert registry in image and image.endswith("inference-perf/inference-perf:v0.7.0"), image
    (listed,) = [i for i in config.stack_images() if i.key == "serving.benchmarkImage"]
    assert config.pull_path().image(listed.image) == image


@pytest.mark.parametrize(
    ("overrides", "max_model_len", "fragment"),
    [
        ({"run_id": "Run_1"}, None, "--run-id"),
        ({"rates": ()}, None, "--rates 1,2,4,8"),
        ({"rates": (4, 2)}, None, "do not ramp up"),
        ({"rates": (0, 1)}, None, "positive request rates"),
        ({"stage_seconds": 10}, None, "--stage-seconds 30"),
        ({"base_url": "http://10.10.0.42"}, None, "is not http://<address>/v1"),
        ({"run_id": "run-1\n"}, None, "--run-id"),  # a final newline, which no Job name holds
        ({"base_url": "http://10.10.0.42/v1\n"}, None, "is not http://<address>/v1"),
        ({"base_url": "http://10.10.0.42 /v1"}, None, "is not http://<address>/v1"),
        ({}, 4096, "exceeds serving.maxModelLen 4096"),
    ],
)
def test_a_run_that_would_measure_the_wrong_thing_is_refused(dev, overrides, max_model_len, fragment):
    found = benchmark.problems(dataclasses.replace(RAMP, **overrides), max_model_len or dev.serving.max_model_len)
    assert len(found) == 1 and fragment in found[0], found


def test_a_good_run_has_no_problem(dev):
    assert benchmark.problems(RAMP, dev.serving.max_model_len) == []


# --- Reading inference-perf's reports ---------------------------------------------------------------


def report(rate: float, ttft: tuple[float, float, float], tpot: tuple[float, float, float], ok: int = 100) -> dict:
    """A stage report of inference-perf's schema (ResponsesSummary), with percentiles 50, 90 and 99."""

    def summary(values: tuple[float, float, float]) -> dict[str, float]:
        return {
            "mean": values[0],
            "min": 0.0,
            "max": values[2],
            "median": values[0],
            "p90": values[1],
            "p99": values[2],
        }

    return {
        "benchmark_time_seconds": 91.0,
        "load_summary": {"count": ok + 2, "requested_rate": rate, "achieved_rate": rate * 0.98, "send_duration": 90.0},
        "successes": {
            "count": ok,
            "latency": {"time_to_first_token": summary(ttft), "time_per_output_token": summary(tpot)},
            "throughput": {"requests_per_sec": rate * 0.97, "output_tokens_per_sec": rate * 250.0},
        },
        "failures": {"count": 2},
    }


def write_reports(directory: Path, reports: dict[str, dict]) -> None:
    for name, body in reports.items():
        (directory / name).write_text(json.dumps(body))


def test_the_table_has_one_row_per_stage_in_stage_order(tmp_path):
    nested = tmp_path / "results" / "run"
    nested.mkdir(parents=True)
    write_reports(
        nested,
        {
            "stage_10_lifecycle_metrics.json": report(16, (2.0, 3.0, 4.0), (0.05, 0.06, 0.07)),
            "stage_2_lifecycle_metrics.json": report(4, (0.5, 0.8, 1.2), (0.02, 0.03, 0.04)),
            "summary_lifecycle_metrics.json": report(0, (0, 0, 0), (0, 0, 0)),
            "stage_2_prometheus_metrics.json": {},
        },
    )
    rows = benchmark.read_reports(tmp_path)
    assert [(row.stage, row.requested_rate) for row in rows] == [(2, 4), (10, 16)]
    assert rows[0].ttft == (0.5, 0.8, 1.2) and rows[0].tpot == (0.02, 0.03, 0.04)
    assert (rows[0].succeeded, rows[0].failed) == (100, 2)
    lines = benchmark.table(rows).splitlines()
    assert lines[0].split()[:3] == ["stage", "rate", "req/s"]
    assert lines[1].split() == [
        "2",
        "4.00",
        "3.92",
        "100",
        "2",
        "3.88",
        "1000.0",
        "500",
        "800",
        "1200",
        "20",
        "30",
        "40",
    ]


def test_a_stage_without_streamed_answers_shows_no_latency(tmp_path):
    body = report(1, (0.1, 0.2, 0.3), (0.01, 0.02, 0.03))
    body["successes"]["latency"] = {"time_to_first_token": None, "time_per_output_token": None}
    write_reports(tmp_path, {"stage_0_lifecycle_metrics.json": body})
    (row,) = benchmark.read_reports(tmp_path)
    assert row.ttft == (None, None, None)
    assert benchmark.table([row]).splitlines()[1].split()[-6:] == ["-"] * 6


def test_the_job_runs_as_an_account_the_stack_makes(dev):
    """The Job is not the stack's, but its identity is: the ServiceAccount it names exists in the dev render. What
    that account may do in Google Cloud (look the bucket up, read it, write its reports only) is held with every
    other program's calls by tests/test_iam_stack.py."""
    from tests.conftest import run_stack

    _, job = dev_objects(dev)
    account = job["spec"]["template"]["spec"]["serviceAccountName"]
    run = run_stack(stack="dev")
    accounts = [r for r in run.of_type("kubernetes:core/v1:ServiceAccount") if r.input("metadata")["name"] == account]
    assert [a.input("metadata")["namespace"] for a in accounts] == [dev.serving.namespace]
