"""The serving benchmark as plain data (no Pulumi imports): the inference-perf config, the Job that runs it in the
cluster, and the reading of its reports.

The harness is kubernetes-sigs/inference-perf (the Gateway API Inference Extension project's benchmark): a ramp of
request rates as load stages, synthetic prompts and outputs of set length distributions, streamed requests, and
per-stage reports of throughput, time to first token (TTFT) and time per output token (TPOT), written to Cloud Storage
by itself. ``make bench`` (tools/bench.py) builds the objects here from the stack file, applies them with kubectl, waits
for the Job and prints the table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components import manifests
from components.config_base import PullPath
from components.workloads.serving.config import (
    RESULTS_DIR,
    ServingConfig,
    served_model_name,
    weights_bucket_name,
    weights_object_prefix,
)

CONFIG_FILE = "operations/benchmark/inference-perf.yaml"
JOB_FILE = "operations/benchmark/job.yaml"
CONFIG_KEY = "config.yml"
# Matched whole (fullmatch): re.match's `$` also matches before a final newline, and "run-1\n" names no Job (the API
# server checks a name with Go's regexp, whose `$` is the end of the text: kubernetes/apimachinery
# pkg/util/validation/validation.go IsDNS1123Subdomain).
RUN_ID = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
# The reports inference-perf writes per stage (inference_perf/reportgen/base.py: stage_<i>_lifecycle_metrics).
STAGE_REPORT = re.compile(r"^stage_(\d+)_lifecycle_metrics\.json$")
DEADLINE_MARGIN_SECONDS = 900  # tokenizer load, the last requests' drain, the report upload


@dataclass(frozen=True)
class Ramp:
    """The run asked for on the command line (tools/bench.py): no stack setting."""

    run_id: str  # names the Job, the ConfigMap and the results/<run_id> prefix
    base_url: str  # the Gateway's OpenAI base URL, http://<address>/v1
    rates: tuple[float, ...]  # requests per second, one stage each
    stage_seconds: int


def problems(ramp: Ramp, context_length: int | None, given_by: str = "serving.maxModelLen") -> list[str]:
    """What would make the run fail or measure something else, as sentences naming the flag that fixes it;
    ``context_length``: the server's, as the setting or flag ``given_by`` gives it (None: not known, not checked)."""
    found = []
    if not RUN_ID.fullmatch(ramp.run_id):
        found.append(f"run id {ramp.run_id!r} is not 1-40 lowercase letters, digits and hyphens (--run-id)")
    if not ramp.rates or any(rate <= 0 for rate in ramp.rates):
        found.append("the ramp needs one or more positive request rates (--rates 1,2,4,8)")
    if list(ramp.rates) != sorted(ramp.rates):
        found.append(f"the rates {list(ramp.rates)} do not ramp up (--rates in increasing order)")
    if ramp.stage_seconds < 30:
        found.append(f"{ramp.stage_seconds} s per stage is too short for percentiles (--stage-seconds 30 or more)")
    # whole, and no white space in the address: "http://10.0.0.1/v1\n" passed `$` and reached inference-perf's config
    if not re.fullmatch(r"https?://[^/\s]+/v1/?", ramp.base_url):
        found.append(f"base URL {ramp.base_url!r} is not http://<address>/v1 (--base-url)")
    data = manifests.load_document(CONFIG_FILE)["data"]
    longest = data["input_distribution"]["max"] + data["output_distribution"]["max"]
    if context_length is not None and longest > context_length:
        found.append(
            f"the longest request ({longest} tokens) exceeds {given_by} {context_length}: "
            f"lower the distributions in {CONFIG_FILE}"
        )
    return found


def job_name(run_id: str) -> str:
    """The Job's, and its ConfigMap's."""
    return f"serving-benchmark-{run_id}"


def results_path(run_id: str) -> str:
    return f"{RESULTS_DIR}/{run_id}"


def inference_perf_config(
    ramp: Ramp, model: str, tokenizer: str, local_results: str, bucket: str | None
) -> dict[str, Any]:
    """The inference-perf config of a run: the base file, overlaid. ``model``: the served model name; ``tokenizer``:
    where its files are mounted; ``local_results``: where inference-perf writes its reports, and ``bucket`` the
    Cloud Storage bucket it uploads them to (None: a run outside the cluster, the lab, keeps them on the local disk)."""
    config = manifests.load_document(CONFIG_FILE)
    config["server"]["model_name"] = model
    config["server"]["base_url"] = ramp.base_url.rstrip("/").removesuffix("/v1")  # inference-perf adds /v1/...
    config["tokenizer"]["pretrained_model_name_or_path"] = tokenizer
    config["load"]["stages"] = [{"rate": rate, "duration": ramp.stage_seconds} for rate in ramp.rates]
    config["storage"]["local_storage"]["path"] = local_results
    if bucket is None:
        del config["storage"]["google_cloud_storage"]
    else:
        config["storage"]["google_cloud_storage"] = {"bucket_name": bucket, "path": results_path(ramp.run_id)}
    return config


def deadline_seconds(ramp: Ramp) -> int:
    interval = int(manifests.load_document(CONFIG_FILE)["load"]["interval"])
    return len(ramp.rates) * (ramp.stage_seconds + interval) + DEADLINE_MARGIN_SECONDS


def benchmark_objects(serving: ServingConfig, project: str, pull_path: PullPath, ramp: Ramp) -> list[dict[str, Any]]:
    """The ConfigMap holding the run's config and the Job running it, in the serving namespace. ``pull_path``: where
    the nodes pull from, the stack's (images.mirror or the pull-through repositories), so the Job's image comes the
    way every image of the stack does."""
    name = job_name(ramp.run_id)
    bucket = weights_bucket_name(serving, project)
    config_map, job = manifests.load_documents(JOB_FILE, serving.namespace)
    for obj in (config_map, job):
        obj["metadata"]["name"] = name
    config = inference_perf_config(
        ramp, served_model_name(serving), tokenizer="/tokenizer", local_results=f"/results/{ramp.run_id}", bucket=bucket
    )
    config_map["data"][CONFIG_KEY] = yaml.safe_dump(config, sort_keys=False)
    job["spec"]["activeDeadlineSeconds"] = deadline_seconds(ramp)
    pod = job["spec"]["template"]["spec"]
    manifests.container(pod, "inference-perf")["image"] = pull_path.image(serving.benchmark_image)
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    volumes["config"]["configMap"]["name"] = name
    attributes = volumes["tokenizer"]["csi"]["volumeAttributes"]
    attributes["bucketName"] = bucket
    snapshot = weights_object_prefix(serving, project).removesuffix("/")  # the staged snapshot: its tokenizer files
    attributes["mountOptions"] = f"implicit-dirs,only-dir={snapshot}"
    return [config_map, job]


# --- Reading the reports ---------------------------------------------------------------------------

PERCENTILES = ("median", "p90", "p99")  # the keys inference-perf gives percentiles 50, 90 and 99


@dataclass(frozen=True)
class StageRow:
    stage: int
    requested_rate: float | None
    achieved_rate: float | None
    succeeded: int
    failed: int
    requests_per_sec: float | None
    output_tokens_per_sec: float | None
    ttft: tuple[float | None, ...]  # seconds, PERCENTILES
    tpot: tuple[float | None, ...]


def _percentiles(summary: Mapping[str, Any] | None) -> tuple[float | None, ...]:
    return tuple((summary or {}).get(key) for key in PERCENTILES)


def read_reports(directory: Path) -> list[StageRow]:
    """Every stage's row, in stage order, from a directory of inference-perf reports (searched recursively), each
    read from its stage's report (inference-perf's ResponsesSummary as JSON)."""
    rows = []
    for path in sorted(directory.rglob("stage_*_lifecycle_metrics.json")):
        if not (match := STAGE_REPORT.match(path.name)):
            continue
        report = json.loads(path.read_text())
        load = report.get("load_summary") or {}
        successes = report.get("successes") or {}
        latency = successes.get("latency") or {}
        throughput = successes.get("throughput") or {}
        row = StageRow(
            stage=int(match.group(1)),
            requested_rate=load.get("requested_rate"),
            achieved_rate=load.get("achieved_rate"),
            succeeded=int(successes.get("count") or 0),
            failed=int((report.get("failures") or {}).get("count") or 0),
            requests_per_sec=throughput.get("requests_per_sec"),
            output_tokens_per_sec=throughput.get("output_tokens_per_sec"),
            ttft=_percentiles(latency.get("time_to_first_token")),
            tpot=_percentiles(latency.get("time_per_output_token")),
        )
        rows.append(row)
    return sorted(rows, key=lambda row: row.stage)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[StageRow]) -> str:
    """The run as a fixed-width table: one line per stage of the ramp."""
    latencies = ("TTFT p50 ms", "TTFT p90", "TTFT p99", "TPOT p50 ms", "TPOT p90", "TPOT p99")
    lines: list[tuple[str, ...]] = [("stage", "rate req/s", "achieved", "ok", "failed", "req/s", "out tok/s")]
    lines[0] += latencies
    for row in rows:
        load = (_num(row.requested_rate), _num(row.achieved_rate), str(row.succeeded), str(row.failed))
        throughput = (_num(row.requests_per_sec), _num(row.output_tokens_per_sec, 1))
        lines.append((str(row.stage), *load, *throughput, *(_ms(value) for value in (*row.ttft, *row.tpot))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) for line in lines)
