"""Benchmark: the weights-staging program before and after issue 19, side by side in one run.

    python -m harness.staging_bench [--gigabytes 3] [--largest-gigabytes 0.256 1.5] [--parallel 4] [--rounds 3] [--workdir DIR]

For each ``--largest-gigabytes`` value, generates a model repo of about ``--gigabytes`` of random
bytes (one shard of that size, the rest in 256 MB shards, plus small plain files), serves it from the
Hub stand-in of harness/staging_lab.py, and stages it into fake-gcs-server with both programs, each run
into a bucket of its own: the standard-library script as it was at OLD_PROGRAM_COMMIT (taken from
git) and today's manifests/serving/stage_weights.py in the staging venv, ``--rounds`` times each,
alternating which goes first. Each run is a child process timed from start to exit; its peak memory
is the child's maximum resident set size (wait4); every bucket is checked after its run (each object
with the listed size and digest, and the marker), then emptied. The emulator writes its objects to
the same disk as the new program's scratch files (fake-gcs-server's memory backend does not give
memory back when objects are deleted: it was OOM-killed at 22 GB here). Prints a table per largest file size (the median
throughput of each program, their ratio, the highest peak memory of each) and writes it to
<workdir>/report.json. Not a test: the numbers depend on the machine.
The old script reaches "Cloud Storage" through its own JSON-API client and asks a metadata server
for a token, so the benchmark gives it a token server on 127.0.0.1 too; the new one uses
STORAGE_EMULATOR_HOST.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from harness.staging_lab import REPO_ROOT, FakeGcs, HubRepo, fake_gcs, hub_stand_in, serve_http

# The last commit with the standard-library stage_weights.py (1,200 lines) that issue 19 replaced.
OLD_PROGRAM_COMMIT = "c9cf1f8"
PROGRAM_PATH = "manifests/serving/stage_weights.py"
MODEL = "bench/generated-model"
COMMIT = "1111111111111111111111111111111111111111"
SHARD_BYTES = 256_000_000
PIECE = 16 << 20


@dataclass(frozen=True)
class Result:
    program: str
    seconds: float
    bytes: int
    peak_rss_mib: float
    cpu_seconds: float  # user + system time of the program's process

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes / 1e6 / self.seconds


def generate(root: Path, total: int, largest: int) -> dict[str, Path]:
    """Random shards (reused from an earlier run when their sizes match) and two small plain files."""
    sizes = {"model-00001.safetensors": largest}
    left, index = total - largest, 2
    while left > 0:
        sizes[f"model-{index:05d}.safetensors"] = min(SHARD_BYTES, left)
        left -= SHARD_BYTES
        index += 1
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for name, size in sizes.items():
        path = files.setdefault(name, root / name)
        if not path.exists() or path.stat().st_size != size:
            with path.open("wb") as stream:
                for offset in range(0, size, PIECE):
                    stream.write(os.urandom(min(PIECE, size - offset)))
    for name, text in {"config.json": '{"model_type": "bench"}\n', "tokenizer.json": '{"version": "1.0"}\n'}.items():
        files[name] = root / name
        files[name].write_text(text)
    for stale in set(root.iterdir()) - set(files.values()):
        stale.unlink()
    return files


@contextlib.contextmanager
def token_server() -> Iterator[str]:
    """The GCE metadata server's token endpoint, which the old script asks (fake-gcs-server checks no token)."""

    class Token(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps({"access_token": "benchmark", "expires_in": 3600, "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server, url = serve_http(Token)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def run(program: str, command: list[str], env: dict[str, str], log: Path, total: int) -> Result:
    with log.open("w") as output:
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{program} failed (exit {child.returncode}); its log: {log}\n{log.read_text()[-3000:]}")
    # ru_maxrss is in KiB on Linux
    return Result(program, seconds, total, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def check(gcs: FakeGcs, bucket: str, prefix: str, repo: HubRepo) -> None:
    objects = gcs.objects(bucket, prefix + "/")
    for path, source in repo.files.items():
        item = objects.get(f"{prefix}/{path}")
        if item is None or int(item["size"]) != source.stat().st_size:
            raise SystemExit(f"gs://{bucket}/{prefix}/{path}: missing or of the wrong size")
        if (item.get("metadata") or {}).get("hf-digest") != repo.expected_digest(path):
            raise SystemExit(f"gs://{bucket}/{prefix}/{path}: recorded digest {item.get('metadata')}")
    if f"{prefix}/.staged-complete" not in objects:
        raise SystemExit(f"gs://{bucket}/{prefix}: no marker")


def stage_mix(args: argparse.Namespace, work: Path, old_program: Path, largest: int) -> list[Result]:
    """Both programs over one generated repo whose largest shard is ``largest`` bytes."""
    total = int(args.gigabytes * 1e9)
    print(f"generating {total / 1e9:.2f} GB in {work / 'repo'} (largest shard {largest / 1e9:.2f} GB)", flush=True)
    files = generate(work / "repo", total, largest)
    repo = HubRepo(MODEL, COMMIT, files, {p for p in files if p.endswith(".safetensors")})
    for path in files:
        repo.digests(path)  # computed once, before the clock runs
    size = sum(p.stat().st_size for p in files.values())
    prefix = f"models--bench--generated-model/snapshots/{COMMIT}"
    staging_python = os.environ.get("STAGING_PYTHON", str(REPO_ROOT / "build" / "venv-staging" / "bin" / "python"))
    programs = {
        "old": ([sys.executable, str(old_program)], {"STORAGE_ENDPOINT": "{gcs}", "METADATA_ENDPOINT": "{metadata}"}),
        "new": (
            [staging_python, str(REPO_ROOT / PROGRAM_PATH)],
            {
                "STORAGE_EMULATOR_HOST": "{gcs}",
                "SCRATCH_DIR": str(work / "scratch"),
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            },
        ),
    }
    runs: dict[str, list[Result]] = {"old": [], "new": []}
    with hub_stand_in(repo) as hub, fake_gcs() as gcs, token_server() as metadata:
        common = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "MODEL_ID": MODEL,
            "MODEL_REVISION": COMMIT,
            "HF_ENDPOINT": hub,
            "PARALLEL": str(args.parallel),
        }
        for round_number in range(args.rounds):
            order = ["old", "new"] if round_number % 2 == 0 else ["new", "old"]  # neither always goes first
            for program in order:
                command, extra = programs[program]
                bucket = f"bench-{program}-{round_number}"
                gcs.create_bucket(bucket)
                env = {**common, **{k: v.format(gcs=gcs.url, metadata=metadata) for k, v in extra.items()}}
                env["DESTINATION"] = f"gs://{bucket}/{prefix}"
                print(f"  round {round_number + 1}: staging with the {program} program ...", flush=True)
                result = run(program, command, env, work / f"{bucket}.log", size)
                check(gcs, bucket, prefix, repo)
                for name in gcs.objects(bucket, prefix + "/"):  # 3 GB less on the emulator's disk
                    gcs.delete(bucket, name)
                print(
                    f"  {result.seconds:.1f} s, {result.megabytes_per_second:.0f} MB/s, "
                    f"peak RSS {result.peak_rss_mib:.0f} MiB, CPU {result.cpu_seconds:.1f} s"
                )
                runs[program].append(result)
    # the median run's time, the highest peak memory
    return [
        Result(
            name,
            statistics.median(r.seconds for r in done),
            size,
            max(r.peak_rss_mib for r in done),
            statistics.median(r.cpu_seconds for r in done),
        )
        for name, done in runs.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=3.0, help="size of each generated repo (GB, 1e9 bytes)")
    parser.add_argument(
        "--largest-gigabytes",
        type=float,
        nargs="+",
        default=[0.256, 1.5],
        help="one repo per value, its largest shard of that size (the rest 256 MB shards)",
    )
    parser.add_argument("--parallel", type=int, default=4, help="PARALLEL of both programs (the Job's value)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each program per repo, alternating who goes first"
    )
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "build" / "staging-bench")
    args = parser.parse_args(argv)
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)

    old_program = work / "stage_weights_old.py"
    shown = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{OLD_PROGRAM_COMMIT}:{PROGRAM_PATH}"], capture_output=True, text=True
    )
    if shown.returncode != 0:
        raise SystemExit(f"git show {OLD_PROGRAM_COMMIT}:{PROGRAM_PATH} failed (a shallow clone?): {shown.stderr}")
    old_program.write_text(shown.stdout)

    mixes: list[dict[str, Any]] = []
    for largest_gigabytes in args.largest_gigabytes:
        largest = int(largest_gigabytes * 1e9)
        old, new = stage_mix(args, work, old_program, largest)
        mixes.append(
            {
                "largest_file_bytes": largest,
                "bytes": old.bytes,
                "results": [asdict(r) | {"megabytes_per_second": r.megabytes_per_second} for r in (old, new)],
                "throughput_ratio_new_over_old": new.megabytes_per_second / old.megabytes_per_second,
                "peak_rss_ratio_new_over_old": new.peak_rss_mib / old.peak_rss_mib,
            }
        )
    report = {
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "parallel": args.parallel,
        "rounds": args.rounds,
        "old_program": f"{OLD_PROGRAM_COMMIT}:{PROGRAM_PATH}",
        "mixes": mixes,
    }
    (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"\n{'largest file':>12} | {'old MB/s':>8} | {'new MB/s':>8} | {'new/old':>7} | {'old peak RSS':>12} | {'new peak RSS':>12}"
    )
    for mix in mixes:
        old_result: dict[str, Any] = mix["results"][0]
        new_result: dict[str, Any] = mix["results"][1]
        print(
            f"{mix['largest_file_bytes'] / 1e9:>9.2f} GB | {old_result['megabytes_per_second']:>8.0f} | "
            f"{new_result['megabytes_per_second']:>8.0f} | {mix['throughput_ratio_new_over_old']:>7.2f} | "
            f"{old_result['peak_rss_mib']:>8.0f} MiB | {new_result['peak_rss_mib']:>8.0f} MiB"
        )
    print(f"report: {work / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
