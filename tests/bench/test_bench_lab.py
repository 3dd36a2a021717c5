"""The benchmark command end to end on this machine (make bench-test): inference-perf, installed from its pinned
PyPI release into build/venv-bench, run by `python -m tools.bench --local` with the config the Job would run
(components/operations/benchmark.py) against a stand-in OpenAI-compatible server on 127.0.0.1; the command
parses the harness's own reports and prints the table, which is held against what the stand-in served.

Needs build/venv-bench (make bench-test builds it); a missing harness fails the test, never skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.operations import benchmark
from harness.openai_standin import StandIn

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = REPO_ROOT / "build" / "venv-bench" / "bin"
MODEL = "standin/model"
TTFT, ITL = 0.15, 0.004  # the stand-in's time to first token and between tokens, in seconds
RATES = (2.0, 4.0)
STAGE_SECONDS = 30

# A word-level tokenizer of the lab's own (no model can be downloaded here): every word one token, the
# stand-in's output word among them, saved in the Hugging Face layout inference-perf loads.
MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0, "tok": 1, **{f"w{i}": i + 2 for i in range(4000)}}
core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""


def venv_tool(name: str) -> Path:
    tool = Path(os.environ.get(f"BENCH_{name.upper().replace('-', '_')}", VENV_BIN / name))
    if not tool.exists():
        pytest.fail(f"no {name} at {tool}: run `make bench-test` (it builds build/venv-bench)")
    return tool


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    subprocess.run([str(venv_tool("python")), "-c", MAKE_TOKENIZER, str(directory)], check=True, timeout=300)
    return directory


@pytest.fixture(scope="module")
def run(tokenizer: Path, tmp_path_factory: pytest.TempPathFactory):
    server = StandIn(MODEL, ttft=TTFT, itl=ITL).start()
    results = tmp_path_factory.mktemp("results")
    try:
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.bench",
                "--local",
                "--inference-perf",
                str(venv_tool("inference-perf")),
                "--base-url",
                server.base_url,
                "--model",
                MODEL,
                "--tokenizer",
                str(tokenizer),
                "--results",
                str(results),
                "--rates",
                ",".join(str(rate) for rate in RATES),
                "--stage-seconds",
                str(STAGE_SECONDS),
                "--run-id",
                "lab",
                "--max-model-len",
                "9216",
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1"},
        )
    finally:
        server.stop()
    return completed, server.served, results


def table_rows(stdout: str) -> list[list[str]]:
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    return [line for line in lines if line and line[0].isdigit()]


def test_the_command_prints_one_row_per_rate_of_the_ramp(run):
    completed, served, _ = run
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = table_rows(completed.stdout)
    assert [float(row[1]) for row in rows] == list(RATES), completed.stdout
    assert "TTFT p50 ms" in completed.stdout and "TPOT p99" in completed.stdout
    for row in rows:
        requested, achieved, ok, failed = float(row[1]), float(row[2]), int(row[3]), int(row[4])
        assert failed == 0
        # a Poisson process of rate r over the stage: within 45 % of r x seconds (about 4 standard deviations)
        assert abs(ok - requested * STAGE_SECONDS) <= 0.45 * requested * STAGE_SECONDS + 3
        assert achieved == pytest.approx(requested, rel=0.5)
    assert served.requests == sum(int(row[3]) for row in rows), "every request the stand-in served is counted"


def test_the_measured_latencies_are_the_stand_ins(run):
    completed, _, _ = run
    for row in table_rows(completed.stdout):
        ttft_p50, tpot_p50 = float(row[7]), float(row[10])
        assert TTFT * 1000 <= ttft_p50 <= TTFT * 1000 + 250, row  # plus the loopback and the harness's own delay
        assert ITL * 1000 * 0.5 <= tpot_p50 <= ITL * 1000 + 20, row


def test_the_requests_are_shaped_like_pd_serving(run):
    """Long prompts and outputs from short to long, streamed, within the model's context: the config's shape."""
    _, served, _ = run
    data = yaml.safe_load((REPO_ROOT / "manifests" / benchmark.CONFIG_FILE).read_text())["data"]
    low, high = data["output_distribution"]["min"], data["output_distribution"]["max"]
    assert served.streamed == served.requests > 0
    assert all(low <= tokens <= high for tokens in served.max_tokens)
    assert min(served.max_tokens) < 128 < max(served.max_tokens), "short and long outputs"
    inputs = data["input_distribution"]
    median_prompt = sorted(served.prompt_words)[len(served.prompt_words) // 2]
    assert inputs["min"] <= median_prompt <= inputs["max"], "long prompts"
    assert served.models == {MODEL}


def test_the_reports_are_inference_perfs_own_and_reprint_the_same_table(run):
    completed, _, results = run
    reports = sorted(p.name for p in (results / "lab").rglob("*_lifecycle_metrics.json"))
    assert "stage_0_lifecycle_metrics.json" in reports and "summary_lifecycle_metrics.json" in reports
    again = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--report", str(results / "lab")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert again.returncode == 0 and table_rows(again.stdout) == table_rows(completed.stdout)
    assert re.search(r"reports: .*lab", again.stdout)
