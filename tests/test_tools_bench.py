"""make bench in the cluster, with kubectl, gcloud and pulumi stood in: what it applies, how it waits, where
it reads the reports, and how each failure ends (exit 1 for a run that failed, 2 for one that cannot start, 130 for
Ctrl-C)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_STACKS, stack_values
from tests.test_operations_benchmark import report
from tools import bench

BUCKET = stack_values("dev")["serving"]["weightsBucket"]["name"]  # where the tests' dev stack keeps the reports
OUTPUTS = {"openaiBaseUrl": "http://10.10.0.42/v1", "modelName": "Qwen/Qwen3.5-397B-A17B-FP8"}


def pulumi_runner(outputs: dict[str, Any] | None = None):
    def runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert argv[:4] == ["pulumi", "stack", "output", "--json"]
        return subprocess.CompletedProcess(argv, 0, json.dumps(OUTPUTS if outputs is None else outputs), "")

    return runner


TIMEOUT = subprocess.TimeoutExpired(["kubectl"], bench.COMMAND_TIMEOUT_SECONDS)
NO_OBJECTS = "ERROR: (gcloud.storage.ls) One or more URLs matched no objects.\n"
Answer = str | None | BaseException | subprocess.CompletedProcess[str]


def failed(stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], 1, "", stderr)


class Cluster:
    """kubectl and gcloud as the cluster and the bucket would answer a run: the Job exists once applied (or before it,
    ``earlier_job``: the run id was used), the results prefix holds nothing until the Job writes (or holds an earlier
    run's, ``earlier_reports``). ``states``: each poll's answer, the Job's state or what the call returns or raises;
    ``answers``: the same for a command, by its verb (check, ls, apply, delete, cp), instead of its usual answer."""

    def __init__(
        self,
        states: list[Answer],
        reports: int = 2,
        earlier_job: bool = False,
        earlier_reports: bool = False,
        answers: dict[str, BaseException | subprocess.CompletedProcess[str]] | None = None,
    ):
        self.states = list(states)
        self.reports = reports
        self.job = earlier_job
        self.earlier_reports = earlier_reports
        self.answers = answers or {}
        self.calls: list[list[str]] = []
        self.applied: list[dict[str, Any]] = []

    def verb(self, argv: list[str]) -> str:
        if argv[0] == "gcloud":
            return argv[2]
        if "get" in argv:
            return "check" if "--ignore-not-found" in argv else "poll"
        return next(word for word in ("apply", "logs", "delete") if word in argv)

    def __call__(self, argv: list[str], stdin: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        verb = self.verb(argv)
        answer: Answer = self.answers.get(verb)
        if verb == "poll":
            answer = self.states.pop(0) if self.states else None
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, subprocess.CompletedProcess):
            return answer
        if verb == "check":
            name = argv[argv.index("job") + 1]
            return subprocess.CompletedProcess(argv, 0, f"job.batch/{name}\n" if self.job else "", "")
        if verb == "ls":
            if self.earlier_reports:
                return subprocess.CompletedProcess(argv, 0, argv[-1] + "stage_0_lifecycle_metrics.json\n", "")
            return subprocess.CompletedProcess(argv, 1, "", NO_OBJECTS)
        if verb == "apply":
            self.applied = json.loads(stdin or "{}")["items"]
            self.job = True
            return subprocess.CompletedProcess(argv, 0, "applied", "")
        if verb == "delete":
            name, existed, self.job = argv[argv.index("job") + 1], self.job, False
            return subprocess.CompletedProcess(argv, 0, f'job.batch "{name}" deleted\n' if existed else "", "")
        if verb == "poll":
            conditions = [{"type": answer, "status": "True"}] if answer else []
            return subprocess.CompletedProcess(argv, 0, json.dumps({"status": {"conditions": conditions}}), "")
        if verb == "logs":
            return subprocess.CompletedProcess(argv, 0, "Traceback: connection refused\n", "")
        if argv[:3] == ["gcloud", "storage", "cp"]:
            target = Path(argv[-1]) / Path(argv[-2]).name
            target.mkdir(parents=True)
            for stage in range(self.reports):
                body = report(2.0**stage, (0.4, 0.6, 0.9), (0.02, 0.025, 0.03))
                (target / f"stage_{stage}_lifecycle_metrics.json").write_text(json.dumps(body))
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(f"unexpected command {argv}")


def main(argv: list[str], cluster: Cluster, outputs: dict[str, Any] | None = None, sleep=lambda _: None) -> int:
    """make bench on the tests' own stacks (tests/data/stacks), not the user's."""
    try:
        return bench.main(
            [*argv, "--stack-dir", str(FIXTURE_STACKS)], runner=pulumi_runner(outputs), run=cluster, sleep=sleep
        )
    except KeyboardInterrupt:  # a stood-in Ctrl-C let through would stop the whole test session
        pytest.fail("Ctrl-C came out of bench.main as a traceback")


def test_a_run_applies_the_job_waits_for_it_and_prints_the_reports_table(capsys):
    cluster = Cluster([None, None, "Complete"])
    code = main(["--stack", "dev", "--rates", "1,2", "--run-id", "r1", "--context", "gke_p_r_c"], cluster)
    out = capsys.readouterr().out
    assert code == 0, out
    assert [o["kind"] for o in cluster.applied] == ["ConfigMap", "Job"]
    assert all(call[:3] == ["kubectl", "--context", "gke_p_r_c"] for call in cluster.calls if call[0] == "kubectl")
    verbs = [cluster.verb(call) for call in cluster.calls]
    assert verbs[:3] == ["check", "ls", "apply"], "the run id is checked unused before anything is applied"
    polls = [call for call in cluster.calls if cluster.verb(call) == "poll"]
    assert len(polls) == 3 and polls[0][-4:] == ["job", "serving-benchmark-r1", "-o", "json"]
    (copy,) = [call for call in cluster.calls if cluster.verb(call) == "cp"]
    assert copy[:5] == ["gcloud", "storage", "cp", "--recursive", f"gs://{BUCKET}/results/r1"]
    rows = [line.split() for line in out.splitlines() if line[:1].strip().isdigit() or line.strip()[:1].isdigit()]
    assert [row[1] for row in rows] == ["1.00", "2.00"]
    assert f"reports: gs://{BUCKET}/results/r1/" in out


def test_the_gateway_comes_from_the_stack_outputs_unless_given(capsys):
    cluster = Cluster(["Complete"])
    assert main(["--stack", "dev", "--rates", "1,2", "--run-id", "r2"], cluster) == 0
    config = yaml.safe_load(cluster.applied[0]["data"]["config.yml"])
    assert config["server"]["base_url"] == "http://10.10.0.42"
    cluster = Cluster(["Complete"])
    argv = ["--stack", "dev", "--rates", "1,2", "--run-id", "r3", "--base-url", "http://10.9.9.9/v1"]
    assert main(argv, cluster, outputs={}) == 0
    assert yaml.safe_load(cluster.applied[0]["data"]["config.yml"])["server"]["base_url"] == "http://10.9.9.9"


def test_a_failed_job_exits_1_with_the_end_of_its_log(capsys):
    cluster = Cluster([None, "Failed"])
    assert main(["--stack", "dev", "--run-id", "r4"], cluster) == 1
    err = capsys.readouterr().err
    assert "job serving-benchmark-r4 failed" in err and "connection refused" in err
    assert not [call for call in cluster.calls if cluster.verb(call) == "cp"], "nothing to read"


def test_a_run_that_left_fewer_reports_than_stages_exits_1(capsys):
    assert main(["--stack", "dev", "--rates", "1,2,4", "--run-id", "r5"], Cluster(["Complete"], reports=2)) == 1
    assert "2 stage report(s) for a ramp of 3" in capsys.readouterr().err


def test_what_cannot_start_exits_2_before_anything_is_applied(capsys):
    for argv, outputs, fragment in [
        (["--stack", "saxml"], None, "does not serve"),
        (["--stack", "dev"], {}, "stack output openaiBaseUrl is missing"),
        (["--stack", "dev", "--rates", "4,2"], None, "do not ramp up"),
        (["--stack", "nosuch"], None, "cannot read stack nosuch"),
        ([], None, "--stack names the stack file"),
    ]:
        cluster = Cluster([])
        assert main(argv, cluster, outputs) == 2, argv
        assert fragment in capsys.readouterr().err
        assert cluster.calls == []


@pytest.mark.parametrize("rates", ["1,nan", "inf", "1,two"])
def test_rates_that_are_not_request_rates_are_a_usage_error(rates, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--stack", "dev", "--rates", rates], Cluster([]))
    assert exited.value.code == 2 and "is not a comma-separated list of request rates" in capsys.readouterr().err


def test_local_takes_the_servers_context_length_as_a_number_of_tokens_or_leaves_it_unchecked(tmp_path, capsys):
    """--max-model-len is the server's context length (vLLM's own -1, fitted to memory, is no length to check against:
    the flag is left out). A length the requests exceed is refused naming the flag, not the stack's setting."""
    local = ["--local", "--base-url", "http://127.0.0.1:8000/v1", "--model", "m", "--tokenizer", str(tmp_path)]
    local += ["--results", str(tmp_path / "results"), "--inference-perf", str(tmp_path / "missing"), "--run-id", "l1"]
    for length, said in [
        ("0", "must be a number of tokens"),
        ("-1", "must be a number of tokens"),
        ("auto", "invalid int value: 'auto'"),
    ]:
        with pytest.raises(SystemExit) as exited:
            bench.main([*local, "--max-model-len", length])
        assert exited.value.code == 2 and said in capsys.readouterr().err
    assert bench.main([*local, "--max-model-len", "4096"]) == 2
    assert "exceeds --max-model-len 4096" in capsys.readouterr().err
    assert not (tmp_path / "results").exists(), "refused before anything is written"


def test_dry_run_prints_the_objects_and_applies_nothing(capsys):
    cluster = Cluster([])
    assert main(["--stack", "dev", "--run-id", "r6", "--dry-run"], cluster) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [o["kind"] for o in objects] == ["ConfigMap", "Job"] and cluster.calls == []


def test_the_report_mode_reads_a_downloaded_directory(tmp_path, capsys):
    (tmp_path / "stage_0_lifecycle_metrics.json").write_text(json.dumps(report(1, (0.1, 0.2, 0.3), (0.01, 0.02, 0.03))))
    assert bench.main(["--report", str(tmp_path)]) == 0
    assert "100" in capsys.readouterr().out
    assert bench.main(["--report", str(tmp_path / "empty")]) == 1


# --- A run id used before: its Job stays a day after it ends, and inference-perf keeps a report that exists ----------


@pytest.mark.parametrize(
    ("cluster", "fragments"),
    [
        pytest.param(
            Cluster(["Complete"], earlier_job=True),
            [
                "job serving-benchmark-r7 already exists in llm-d-pd-disaggregation (run id r7 was used)",
                "pick another --run-id, or delete it first: "
                "kubectl --context gke_p_r_c -n llm-d-pd-disaggregation delete job serving-benchmark-r7",
            ],
            id="its-job",
        ),
        pytest.param(
            Cluster(["Complete"], earlier_reports=True),
            [
                f"gs://{BUCKET}/results/r7/ already holds reports (run id r7 was used)",
                f"pick another --run-id, or remove them first: gcloud storage rm --recursive gs://{BUCKET}/results/r7/",
            ],
            id="its-reports",
        ),
        pytest.param(
            Cluster(["Complete"], answers={"check": failed("error: You must be logged in to the server")}),
            ["cannot check for an earlier job serving-benchmark-r7: kubectl get failed: error: You must be logged in"],
            id="no-cluster",
        ),
        pytest.param(
            Cluster(["Complete"], answers={"check": TIMEOUT}),
            ["kubectl get failed: kubectl timed out after 300 s"],
            id="kubectl-timed-out",
        ),
        pytest.param(
            Cluster(["Complete"], answers={"ls": failed("ERROR: (gcloud.storage.ls) HTTPError 403: denied")}),
            [f"cannot list gs://{BUCKET}/results/r7/: gcloud storage ls failed: ERROR: (gcloud.storage.ls) HTTP"],
            id="bucket-unreadable",
        ),
    ],
)
def test_a_run_id_used_before_is_refused_before_anything_is_applied(capsys, cluster, fragments):
    assert main(["--stack", "dev", "--run-id", "r7", "--context", "gke_p_r_c"], cluster) == 2
    err = capsys.readouterr().err
    assert all(fragment in err for fragment in fragments), err
    assert len(err.strip().splitlines()) == 1, err
    assert cluster.applied == [] and not [call for call in cluster.calls if cluster.verb(call) in ("apply", "cp")]


# --- Ctrl-C, and kubectl that fails or hangs while the Job runs ------------------------------------------------------


def _interrupt_at_second_sleep():
    sleeps = iter([None])

    def sleep(_: float) -> None:
        if next(sleeps, KeyboardInterrupt) is KeyboardInterrupt:
            raise KeyboardInterrupt

    return sleep


@pytest.mark.parametrize(
    ("cluster", "sleep"),
    [
        pytest.param(Cluster([None, KeyboardInterrupt()]), lambda _: None, id="in-a-poll"),
        pytest.param(Cluster([None, None, None]), _interrupt_at_second_sleep(), id="between-polls"),
        pytest.param(Cluster([], answers={"apply": KeyboardInterrupt()}), lambda _: None, id="in-the-apply"),
    ],
)
def test_ctrl_c_deletes_the_job_where_it_runs_and_exits_130_in_one_line(capsys, cluster, sleep):
    argv = ["--stack", "dev", "--run-id", "r8", "--context", "gke_p_r_c"]
    assert main(argv, cluster, sleep=sleep) == bench.INTERRUPTED
    (deleted,) = [call for call in cluster.calls if cluster.verb(call) == "delete"]
    assert deleted == [
        *["kubectl", "--context", "gke_p_r_c", "-n", "llm-d-pd-disaggregation", "delete", "job"],
        *["serving-benchmark-r8", "--ignore-not-found", "--wait=false"],
    ]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    if cluster.applied:
        assert last == "bench: interrupted; deleted job serving-benchmark-r8 in llm-d-pd-disaggregation"
    else:  # stopped before kubectl applied anything: nothing was there to delete
        assert last == "bench: interrupted before job serving-benchmark-r8 was made"
    assert not [call for call in cluster.calls if cluster.verb(call) == "cp"]


def test_ctrl_c_says_how_to_delete_the_job_when_the_delete_fails(capsys):
    cluster = Cluster([None, KeyboardInterrupt()], answers={"delete": TIMEOUT})
    assert main(["--stack", "dev", "--run-id", "r8"], cluster) == bench.INTERRUPTED
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "bench: interrupted; deleting job serving-benchmark-r8 failed (kubectl timed out after 300 s), delete it: "
        "kubectl -n llm-d-pd-disaggregation delete job serving-benchmark-r8 --ignore-not-found --wait=false"
    )


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        pytest.param(TIMEOUT, "the last poll failed: kubectl timed out after 300 s", id="timed-out"),
        pytest.param(
            failed("Unable to connect to the server: dial tcp 10.0.0.2:443: i/o timeout\n"),
            "the last poll failed: Unable to connect to the server: dial tcp 10.0.0.2:443: i/o timeout",
            id="kubectl-error",
        ),
        pytest.param(
            subprocess.CompletedProcess([], 0, "<html>", ""),
            "the last poll failed: kubectl get job printed no Job",
            id="not-a-job",
        ),
    ],
)
def test_a_failed_poll_is_said_while_waiting_and_the_next_poll_goes_on(capsys, failure, said):
    cluster = Cluster([None, failure, None, "Complete"])
    assert main(["--stack", "dev", "--rates", "1,2", "--run-id", "r9"], cluster) == 0
    captured = capsys.readouterr()
    waiting = [line for line in captured.err.splitlines() if line.startswith("waiting for job serving-benchmark-r9")]
    assert len(waiting) == 3
    assert [said in line for line in waiting] == [False, True, False], "each line says the poll it follows"
    assert f"reports: gs://{BUCKET}/results/r9/" in captured.out


def test_polls_failing_to_the_deadline_exit_1_with_the_last_error(capsys, monkeypatch):
    monkeypatch.setattr(bench, "WAIT_MARGIN_SECONDS", -(10**6))  # the deadline has passed at the first poll
    cluster = Cluster([TIMEOUT])
    assert main(["--stack", "dev", "--run-id", "r10"], cluster) == 1
    err = capsys.readouterr().err
    assert (
        "job serving-benchmark-r10 did not finish in time; the last poll failed: kubectl timed out after 300 s" in err
    )


def test_copying_the_reports_past_its_timeout_exits_1(capsys):
    cluster = Cluster(["Complete"], answers={"cp": subprocess.TimeoutExpired(["gcloud"], 300)})
    assert main(["--stack", "dev", "--run-id", "r11"], cluster) == 1
    assert f"gcloud storage cp gs://{BUCKET}/results/r11 failed: gcloud timed out after 300 s" in (
        capsys.readouterr().err
    )


def test_the_stack_is_required_in_the_cluster_and_the_help_says_so(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--stack STACK the stack whose serving to benchmark, Pulumi.<stack>.yaml (in the cluster)" in help_text
    assert "selected stack" not in help_text
    assert main([], Cluster([])) == 2
    assert "--stack names the stack file to read" in capsys.readouterr().err
