"""make bench in the cluster, with kubectl, gcloud and pulumi stood in: what it applies, how it waits, where
it reads the reports, and how each failure ends (exit 1 for a run that failed, 2 for one that cannot start)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.test_operations_benchmark import report
from tools import bench

OUTPUTS = {"openaiBaseUrl": "http://10.10.0.42/v1", "modelName": "Qwen/Qwen3.5-397B-A17B-FP8"}


def pulumi_runner(outputs: dict[str, Any] | None = None):
    def runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert argv[:4] == ["pulumi", "stack", "output", "--json"]
        return subprocess.CompletedProcess(argv, 0, json.dumps(OUTPUTS if outputs is None else outputs), "")

    return runner


class Cluster:
    """kubectl and gcloud as the cluster and the bucket would answer a run."""

    def __init__(self, states: list[str | None], reports: int = 2):
        self.states = list(states)  # the Job's state at each poll
        self.reports = reports
        self.calls: list[list[str]] = []
        self.applied: list[dict[str, Any]] = []

    def __call__(self, argv: list[str], stdin: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[0] == "kubectl" and "apply" in argv:
            self.applied = json.loads(stdin or "{}")["items"]
            return subprocess.CompletedProcess(argv, 0, "applied", "")
        if argv[0] == "kubectl" and "get" in argv:
            state = self.states.pop(0) if self.states else None
            conditions = [{"type": state, "status": "True"}] if state else []
            return subprocess.CompletedProcess(argv, 0, json.dumps({"status": {"conditions": conditions}}), "")
        if argv[0] == "kubectl" and "logs" in argv:
            return subprocess.CompletedProcess(argv, 0, "Traceback: connection refused\n", "")
        if argv[:3] == ["gcloud", "storage", "cp"]:
            target = Path(argv[-1]) / Path(argv[-2]).name
            target.mkdir(parents=True)
            for stage in range(self.reports):
                body = report(2.0**stage, (0.4, 0.6, 0.9), (0.02, 0.025, 0.03))
                (target / f"stage_{stage}_lifecycle_metrics.json").write_text(json.dumps(body))
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(f"unexpected command {argv}")


def main(argv: list[str], cluster: Cluster, outputs: dict[str, Any] | None = None) -> int:
    return bench.main(argv, runner=pulumi_runner(outputs), run=cluster, sleep=lambda _: None)


def test_a_run_applies_the_job_waits_for_it_and_prints_the_reports_table(capsys):
    cluster = Cluster([None, None, "Complete"])
    code = main(["--stack", "dev", "--rates", "1,2", "--run-id", "r1", "--context", "gke_p_r_c"], cluster)
    out = capsys.readouterr().out
    assert code == 0, out
    assert [o["kind"] for o in cluster.applied] == ["ConfigMap", "Job"]
    assert all(call[:3] == ["kubectl", "--context", "gke_p_r_c"] for call in cluster.calls if call[0] == "kubectl")
    gets = [call for call in cluster.calls if "get" in call]
    assert len(gets) == 3 and gets[0][-4:] == ["job", "serving-benchmark-r1", "-o", "json"]
    (copy,) = [call for call in cluster.calls if call[0] == "gcloud"]
    assert copy[:5] == ["gcloud", "storage", "cp", "--recursive", "gs://my-model-weights/results/r1"]
    rows = [line.split() for line in out.splitlines() if line[:1].strip().isdigit() or line.strip()[:1].isdigit()]
    assert [row[1] for row in rows] == ["1.00", "2.00"]
    assert "reports: gs://my-model-weights/results/r1/" in out


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
    assert not [call for call in cluster.calls if call[0] == "gcloud"], "nothing to read"


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
