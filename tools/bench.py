"""Benchmark the deployed endpoint with inference-perf and print throughput, TTFT and TPOT per request rate.

    python -m tools.bench --stack STACK [--base-url URL] [--rates 1,2,4,8] [--stage-seconds 120]
                          [--run-id ID] [--context KUBE_CONTEXT] [--dry-run]
    python -m tools.bench --local --inference-perf PATH --base-url URL --model NAME --tokenizer DIR
                          --results DIR [--rates ...] [--stage-seconds ...]
    python -m tools.bench --report DIR

In the cluster (the first form, `make bench`): builds the run's ConfigMap and Job from the stack file
(components/operations/benchmark.py), applies them with kubectl in the serving namespace, waits for the
Job, copies its reports from gs://<weights bucket>/results/<run id>/ with gcloud, and prints one line per
stage of the ramp. The Gateway's address comes from the stack output ``openaiBaseUrl`` unless
``--base-url`` gives it. ``--dry-run`` prints the objects instead of applying them. A run id already used
(its Job, or reports under its prefix) is refused; Ctrl-C while the Job runs deletes it.

``--local`` runs the same inference-perf config on this machine (the lab: tests/bench), reports on the
local disk; ``--report`` prints the table of reports already downloaded. Exits 0 when every stage has a
report, 1 when the run failed or left no report, 2 on a usage or configuration error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from components import naming
from components.operations import benchmark
from components.workloads.serving.config import weights_bucket_name
from tools.stack_file import NoStackFile, StackFileError, add_stack_dir_option, stack_config_values
from tools.stack_outputs import Runner, UsageError, last_line, number_type, read_stack_outputs, run_pulumi
from tools.verify import Sleep

STACK_HINT = "pass --base-url instead"
POLL_SECONDS = 20
WAIT_MARGIN_SECONDS = 300  # past the Job's own deadline, kubectl has had time to say it failed
COMMAND_TIMEOUT_SECONDS = 300
LOG_LINES = 40
TIMED_OUT = 124  # a command past its timeout, as timeout(1) exits
INTERRUPTED = 130  # Ctrl-C, as a shell reports a command ended by SIGINT
# What gcloud storage ls says of a prefix that holds nothing (its wording varies by release; this part stays).
NO_OBJECTS = "matched no objects"
DEFAULT_RATES = (1.0, 2.0, 4.0, 8.0)
DEFAULT_STAGE_SECONDS = 120

if TYPE_CHECKING:
    from components.stack import StackConfig

Run = Callable[[list[str], str | None, float], subprocess.CompletedProcess[str]]


class RunFailed(Exception):
    """Exit 1: the benchmark ran and failed, or left no report."""


class Interrupted(Exception):
    """Exit 130: Ctrl-C; the message says what became of the Job."""


EXIT_CODES: dict[type[Exception], int] = {UsageError: 2, RunFailed: 1, Interrupted: INTERRUPTED}


def run_command(argv: list[str], stdin: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise UsageError(f"{argv[0]} not found: install it (see docs/deploying.md, Prerequisites)") from None


def _rates(text: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(part) for part in text.split(",") if part.strip())
        if all(map(math.isfinite, rates)):  # float() reads nan and inf, which no ramp can send
            return rates
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of request rates")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--local", action="store_true", help="run inference-perf here, not in the cluster")
    mode.add_argument("--report", type=Path, metavar="DIR", help="print the table of downloaded reports")
    parser.add_argument("--stack", help="the stack whose serving to benchmark, Pulumi.<stack>.yaml (in the cluster)")
    add_stack_dir_option(parser)
    parser.add_argument("--base-url", help="the OpenAI base URL, http://<address>/v1 (default: stack output)")
    parser.add_argument("--rates", type=_rates, default=DEFAULT_RATES, help="request rates, one stage each")
    parser.add_argument("--stage-seconds", type=int, default=DEFAULT_STAGE_SECONDS, help="length of each stage")
    parser.add_argument("--run-id", help="names the Job and the results prefix (default: UTC date and time)")
    parser.add_argument("--context", help="kubectl context of the stack's cluster (default: the current one)")
    parser.add_argument("--dry-run", action="store_true", help="print the run's objects, apply nothing")
    parser.add_argument("--model", help="--local: the served model name")
    parser.add_argument("--tokenizer", type=Path, help="--local: a directory with the model's tokenizer files")
    parser.add_argument("--results", type=Path, help="--local: where inference-perf writes its reports")
    parser.add_argument("--inference-perf", type=Path, help="--local: the inference-perf executable")
    # vLLM's -1 or auto (a length fitted to the accelerator's memory) is no length to check against: left out, the
    # requests' length goes unchecked
    context_length = number_type(int, 1, False, "must be a number of tokens (leave it out when the length is unknown)")
    parser.add_argument(
        "--max-model-len", type=context_length, help="--local: the server's context length (unchecked when left out)"
    )
    return parser.parse_args(argv)


def ramp_of(args: argparse.Namespace, base_url: str, context_length: int | None, given_by: str) -> benchmark.Ramp:
    """The run's ramp, refused if the server cannot take it (its context length, as the setting or flag ``given_by``
    gives it; None: not known)."""
    run_id = args.run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    ramp = benchmark.Ramp(run_id=run_id, base_url=base_url, rates=args.rates, stage_seconds=args.stage_seconds)
    if found := benchmark.problems(ramp, context_length, given_by):
        raise UsageError("; ".join(found))
    return ramp


def read_stack(args: argparse.Namespace, runner: Runner) -> tuple[StackConfig, str]:
    """The stack file's config, and the Gateway's URL from the flag or the stack outputs."""
    from components.config_base import ConfigError
    from components.stack import load_pulumi_values

    if args.stack is None:
        raise UsageError("--stack names the stack file to read (Pulumi.<stack>.yaml)")
    try:
        config = load_pulumi_values(*stack_config_values(args.stack, args.stack_dir)).config
    except (NoStackFile, StackFileError, ConfigError) as error:
        raise UsageError(f"cannot read stack {args.stack}: {error}") from None
    if not config.serving.enabled:
        raise UsageError(f"stack {args.stack} does not serve (serving.enabled is false)")
    base_url = args.base_url
    if base_url is None:
        base_url = read_stack_outputs(args.stack, STACK_HINT, runner).get(naming.BASE_URL_OUTPUT)
        if not isinstance(base_url, str) or not base_url:
            raise UsageError(
                f"stack output {naming.BASE_URL_OUTPUT} is missing (is the Gateway programmed?); {STACK_HINT}"
            )
    return config, base_url


def call(run: Run, argv: list[str], stdin: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
    """``run``, a command past its timeout coming back as one that failed, so that each caller reports it as it
    reports any failure (and the wait polls again) instead of a traceback."""
    try:
        return run(argv, stdin, timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, TIMED_OUT, "", f"{argv[0]} timed out after {timeout:.0f} s")


def kubectl_argv(args: argparse.Namespace, *rest: str) -> list[str]:
    return ["kubectl", *(["--context", args.context] if args.context else []), *rest]


def kubectl(
    args: argparse.Namespace, run: Run, *rest: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return call(run, kubectl_argv(args, *rest), stdin, COMMAND_TIMEOUT_SECONDS)


def job_state(job: dict[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` once the Job has finished, None while it runs."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def refuse_used_run_id(ramp: benchmark.Ramp, namespace: str, results: str, args: argparse.Namespace, run: Run) -> None:
    """A run id names the Job and the results prefix: used again, `kubectl apply` leaves the earlier Job as it is (a
    finished one too, for a day) and inference-perf skips a report that already exists (its Cloud Storage client,
    save_report), so the run would print the earlier run's reports as its own."""
    name = benchmark.job_name(ramp.run_id)
    found = kubectl(args, run, "-n", namespace, "get", "job", name, "--ignore-not-found", "-o", "name")
    if found.returncode != 0:
        raise UsageError(f"cannot check for an earlier job {name}: kubectl get failed: {last_line(found.stderr)}")
    if found.stdout.strip():
        delete = " ".join(kubectl_argv(args, "-n", namespace, "delete", "job", name))
        raise UsageError(
            f"job {name} already exists in {namespace} (run id {ramp.run_id} was used): pick another --run-id, "
            f"or delete it first: {delete}"
        )
    listed = call(run, ["gcloud", "storage", "ls", f"{results}/"], None, COMMAND_TIMEOUT_SECONDS)
    if listed.returncode == 0 and listed.stdout.strip():
        raise UsageError(
            f"{results}/ already holds reports (run id {ramp.run_id} was used), which inference-perf would keep "
            f"rather than replace: pick another --run-id, or remove them first: "
            f"gcloud storage rm --recursive {results}/"
        )
    if listed.returncode != 0 and NO_OBJECTS not in listed.stderr:
        raise UsageError(f"cannot list {results}/: gcloud storage ls failed: {last_line(listed.stderr)}")


def poll(name: str, namespace: str, args: argparse.Namespace, run: Run) -> tuple[str | None, str | None]:
    """The Job's state (None while it runs), and why it could not be read (None when it was)."""
    completed = kubectl(args, run, "-n", namespace, "get", "job", name, "-o", "json")
    if completed.returncode != 0:
        return None, last_line(completed.stderr)
    try:
        return job_state(json.loads(completed.stdout)), None
    except (json.JSONDecodeError, AttributeError):
        return None, "kubectl get job printed no Job"


def wait_for(ramp: benchmark.Ramp, namespace: str, args: argparse.Namespace, run: Run, sleep: Sleep) -> None:
    """Until the Job ends; a poll that fails (kubectl's error, or its timeout) is said and polled again, up to the
    deadline."""
    name = benchmark.job_name(ramp.run_id)
    deadline = time.monotonic() + benchmark.deadline_seconds(ramp) + WAIT_MARGIN_SECONDS
    started = time.monotonic()
    while True:
        state, error = poll(name, namespace, args, run)
        if state == "Complete":
            return
        if state == "Failed":
            logs = kubectl(args, run, "-n", namespace, "logs", f"job/{name}", f"--tail={LOG_LINES}")
            raise RunFailed(f"job {name} failed; its log ends:\n{logs.stdout}{logs.stderr}")
        unread = f"; the last poll failed: {error}" if error else ""
        if time.monotonic() > deadline:
            raise RunFailed(f"job {name} did not finish in time{unread}: kubectl -n {namespace} describe job {name}")
        print(f"waiting for job {name} ({time.monotonic() - started:.0f} s){unread}", file=sys.stderr, flush=True)
        sleep(POLL_SECONDS)


def stop(name: str, namespace: str, args: argparse.Namespace, run: Run) -> str:
    """Delete the Job (its pod with it), not waiting for the deletion; what Ctrl-C leaves, said in one line. The run
    id was checked unused, so a Job of this name is this run's."""
    rest = ("-n", namespace, "delete", "job", name, "--ignore-not-found", "--wait=false")
    deleted = kubectl(args, run, *rest)
    if deleted.returncode != 0:
        command = " ".join(kubectl_argv(args, *rest))
        return f"interrupted; deleting job {name} failed ({last_line(deleted.stderr)}), delete it: {command}"
    if not deleted.stdout.strip():  # --ignore-not-found: nothing to delete, so says nothing
        return f"interrupted before job {name} was made"
    return f"interrupted; deleted job {name} in {namespace}"


def in_cluster(args: argparse.Namespace, runner: Runner, run: Run, sleep: Sleep) -> int:
    config, base_url = read_stack(args, runner)
    serving = config.serving
    ramp = ramp_of(args, base_url, serving.max_model_len, "serving.maxModelLen")
    objects = benchmark.benchmark_objects(serving, config.project, config.pull_path(), ramp)
    if args.dry_run:
        print(yaml.safe_dump_all(objects, sort_keys=False), end="")
        return 0
    results = f"gs://{weights_bucket_name(serving, config.project)}/{benchmark.results_path(ramp.run_id)}"
    refuse_used_run_id(ramp, serving.namespace, results, args, run)
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    name = benchmark.job_name(ramp.run_id)
    try:
        applied = kubectl(args, run, "apply", "-f", "-", stdin=document)
        if applied.returncode != 0:
            raise UsageError(f"kubectl apply failed: {last_line(applied.stderr)}")
        print(f"started job {name} in {serving.namespace}", file=sys.stderr, flush=True)
        wait_for(ramp, serving.namespace, args, run, sleep)
    except KeyboardInterrupt:
        # left, the Job would go on loading the endpoint for the rest of its ramp, its reports read by no one
        raise Interrupted(stop(name, serving.namespace, args, run)) from None
    with tempfile.TemporaryDirectory() as scratch:
        copied = call(run, ["gcloud", "storage", "cp", "--recursive", results, scratch], None, COMMAND_TIMEOUT_SECONDS)
        if copied.returncode != 0:
            raise RunFailed(f"gcloud storage cp {results} failed: {last_line(copied.stderr)}")
        return print_table(Path(scratch), f"{results}/", len(ramp.rates))


def local(args: argparse.Namespace, run: Run) -> int:
    missing = [
        flag for flag in ("base_url", "model", "tokenizer", "results", "inference_perf") if not getattr(args, flag)
    ]
    if missing:
        raise UsageError("--local needs " + ", ".join("--" + flag.replace("_", "-") for flag in missing))
    ramp = ramp_of(args, args.base_url, args.max_model_len, "--max-model-len")
    results = args.results / ramp.run_id
    config = benchmark.inference_perf_config(ramp, args.model, str(args.tokenizer), str(results), bucket=None)
    args.results.mkdir(parents=True, exist_ok=True)
    config_file = args.results / f"{ramp.run_id}-config.yml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    completed = call(
        run, [str(args.inference_perf), "--config_file", str(config_file)], None, benchmark.deadline_seconds(ramp)
    )
    if completed.returncode != 0:
        raise RunFailed(f"inference-perf exited {completed.returncode}: {last_line(completed.stderr)}")
    return print_table(results, str(results), len(ramp.rates))


def print_table(directory: Path, where: str, stages: int | None) -> int:
    rows = benchmark.read_reports(directory)
    if not rows:
        raise RunFailed(f"no stage report (stage_<n>_lifecycle_metrics.json) under {where}")
    print(benchmark.table(rows))
    print(f"reports: {where}")
    if stages is not None and len(rows) != stages:
        raise RunFailed(f"{len(rows)} stage report(s) for a ramp of {stages}")
    return 0


def main(
    argv: Sequence[str] | None = None, *, runner: Runner = run_pulumi, run: Run = run_command, sleep: Sleep = time.sleep
) -> int:
    args = parse_args(argv)
    try:
        if args.report is not None:
            return print_table(args.report, str(args.report), None)
        if args.local:
            return local(args, run)
        return in_cluster(args, runner, run, sleep)
    except (UsageError, RunFailed, Interrupted) as error:
        print(f"bench: {error}", file=sys.stderr)
        return next(code for kind, code in EXIT_CODES.items() if isinstance(error, kind))  # a subclass too
    except KeyboardInterrupt:  # before a Job was applied, or after it ended (--local: inference-perf gets it too)
        print("bench: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
