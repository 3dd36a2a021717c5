"""The weights-staging program (manifests/serving/stage_weights.py) against real servers on 127.0.0.1.

Each run is the program in its own interpreter, with exactly the libraries the Job installs
(build/venv-staging, pip --require-hashes from stage-weights-requirements.txt), talking to the Hub
stand-in of harness/staging_lab.py (tree and resolve endpoints, a CDN on another origin) and to a real
Cloud Storage emulator, fake-gcs-server, through STORAGE_EMULATOR_HOST. Nothing of huggingface_hub or
google-cloud-storage is replaced. `make staging-test` builds both first; without them every test
here fails, naming what to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.staging_lab import HOLD_SECONDS, FakeGcs, HubRepo, fake_gcs, hub_stand_in, refusing_proxy

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = REPO_ROOT / "manifests" / "serving" / "stage_weights.py"
STAGING_PYTHON_ENV = "STAGING_PYTHON"  # make staging-test: build/venv-staging/bin/python

MODEL = "acme/tiny-model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
WEIGHTS = [f"model-0000{i}-of-00006.safetensors" for i in range(1, 7)]
TOKEN = "hf_test_token_0123456789"
MARKER = ".staged-complete"


def staging_python() -> str:
    python = os.environ.get(STAGING_PYTHON_ENV, str(REPO_ROOT / "build" / "venv-staging" / "bin" / "python"))
    if not os.access(python, os.X_OK):
        pytest.fail(f"no staging interpreter at {python}: run `make staging-test` (it builds build/venv-staging)")
    return python


@pytest.fixture(scope="module")
def gcs() -> Iterator[FakeGcs]:
    try:
        with fake_gcs() as server:
            yield server
    except RuntimeError as error:  # not built and not buildable: fail, never skip
        pytest.fail(f"fake-gcs-server is not available: {error}")


@pytest.fixture
def bucket(gcs: FakeGcs, request: pytest.FixtureRequest) -> str:
    name = "w-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:20]
    gcs.create_bucket(name)
    return name


@pytest.fixture
def repo(tmp_path: Path) -> HubRepo:
    """Six LFS shards of 1 MiB (distinct bytes), two plain files, one in a folder."""
    root = tmp_path / "repo"
    (root / "tokenizer").mkdir(parents=True)
    files: dict[str, Path] = {}
    for index, name in enumerate(WEIGHTS):
        files[name] = root / name
        files[name].write_bytes(hashlib.sha256(name.encode()).digest() * (1 << 15) + bytes([index]))
    for name, text in {
        "config.json": '{"model_type": "tiny"}\n',
        "tokenizer/tokenizer.json": '{"version": "1.0"}\n',
    }.items():
        files[name] = root / name
        files[name].write_text(text)
    return HubRepo(MODEL, COMMIT, files, set(WEIGHTS), page_size=3)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def lines(self, kind: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(f"{kind} ")]

    def error(self) -> str:
        (line,) = self.stderr.strip().splitlines()[-1:]
        assert self.returncode == 1 and line.startswith("error: "), (self.returncode, self.stdout, self.stderr)
        return line


def environment(hub: str, storage: str, bucket: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "MODEL_ID": MODEL,
        "MODEL_REVISION": COMMIT,
        "DESTINATION": f"gs://{bucket}/{snapshot(COMMIT)}",
        "HF_ENDPOINT": hub,
        "STORAGE_EMULATOR_HOST": storage,
        "SCRATCH_DIR": str(tmp_path / "scratch"),
        "PARALLEL": "2",
        "RETRY_BACKOFF_SECONDS": "0.05",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        **extra,
    }


def snapshot(commit: str) -> str:
    return f"models--acme--tiny-model/snapshots/{commit}"


def stage(env: dict[str, str]) -> Run:
    done = subprocess.run([staging_python(), str(PROGRAM)], env=env, capture_output=True, text=True, timeout=120)
    return Run(done.returncode, done.stdout, done.stderr)


def stored(gcs: FakeGcs, bucket: str) -> dict[str, dict[str, Any]]:
    prefix = snapshot(COMMIT) + "/"
    return {name.removeprefix(prefix): item for name, item in gcs.objects(bucket, prefix).items()}


def downloads(repo: HubRepo) -> list[str]:
    """Repo paths whose bytes were asked for: GETs of the resolve endpoint for plain files (an LFS file's
    resolve answers with a redirect and no bytes) and GETs of the CDN."""
    resolved = [
        path
        for r in repo.seen("hub")
        if r.method == "GET"
        and "/resolve/" in r.path
        and (path := r.path.split(f"/resolve/{COMMIT}/", 1)[1]) not in repo.lfs
    ]
    return sorted(resolved + [r.path.removeprefix("/cdn/") for r in repo.seen("cdn") if r.method == "GET"])


def assert_complete(gcs: FakeGcs, bucket: str, repo: HubRepo) -> None:
    """Every file byte for byte under snapshots/<commit>/ with its digest recorded, and the marker."""
    objects = stored(gcs, bucket)
    assert set(objects) == set(repo.files) | {MARKER}
    for path, source in repo.files.items():
        data = gcs.read(bucket, f"{snapshot(COMMIT)}/{path}")
        assert hashlib.sha256(data).digest() == hashlib.sha256(source.read_bytes()).digest(), path
        assert objects[path]["metadata"] == {"hf-digest": repo.expected_digest(path)}
    marker = json.loads(gcs.read(bucket, f"{snapshot(COMMIT)}/{MARKER}"))
    total = sum(p.stat().st_size for p in repo.files.values())
    assert {k: marker[k] for k in ("model", "revision", "files", "bytes")} == {
        "model": MODEL,
        "revision": COMMIT,
        "files": len(repo.files),
        "bytes": total,
    }


def test_a_full_copy_lands_in_the_hf_cache_layout_with_its_digests_and_the_marker(gcs, bucket, repo, tmp_path):
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path))
    assert run.returncode == 0, run.stderr
    assert_complete(gcs, bucket, repo)
    assert len(run.lines("done")) == len(repo.files)
    assert downloads(repo) == sorted(repo.files)  # each file once
    assert [r.path for r in repo.seen("hub") if "/tree/" in r.path and "cursor=" in r.path], "the listing paginates"
    assert list((tmp_path / "scratch").glob("stage-*")) == []  # nothing left on the scratch disk


def test_a_second_run_copies_nothing_and_keeps_the_marker(gcs, bucket, repo, tmp_path):
    with hub_stand_in(repo) as hub:
        assert stage(environment(hub, gcs.url, bucket, tmp_path)).returncode == 0
        marker = stored(gcs, bucket)[MARKER]
        repo.requests.clear()
        again = stage(environment(hub, gcs.url, bucket, tmp_path))
    assert again.returncode == 0, again.stderr
    assert downloads(repo) == []
    assert f"summary: all {len(repo.files)} files already complete" in again.stdout
    assert stored(gcs, bucket)[MARKER]["generation"] == marker["generation"]  # not rewritten


def test_a_copy_killed_halfway_resumes_with_only_the_missing_files_and_one_marker(gcs, bucket, repo, tmp_path):
    repo.cdn_delay_seconds = 0.4  # each shard takes a while, so the kill lands between files
    with hub_stand_in(repo) as hub:
        env = environment(hub, gcs.url, bucket, tmp_path)
        process = subprocess.Popen(
            [staging_python(), str(PROGRAM)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while len([p for p in stored(gcs, bucket) if p in WEIGHTS]) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no shard arrived within 60 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        before = stored(gcs, bucket)
        assert MARKER not in before
        assert 2 <= len([p for p in before if p in WEIGHTS]) < len(WEIGHTS)
        repo.requests.clear()
        repo.cdn_delay_seconds = 0
        again = stage(env)
    assert again.returncode == 0, again.stderr
    missing = sorted(set(repo.files) - set(before))
    assert downloads(repo) == missing  # only what was missing moved
    for path in before:  # what was complete stayed as it was
        assert stored(gcs, bucket)[path]["generation"] == before[path]["generation"], path
    assert_complete(gcs, bucket, repo)
    assert len([line for line in again.stdout.splitlines() if "marker" in line]) == 1


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: bytes(len(data)), id="same-size-other-bytes"),
    ],
)
def test_a_damaged_object_in_the_bucket_is_copied_again_and_nothing_else(gcs, bucket, repo, tmp_path, damage):
    with hub_stand_in(repo) as hub:
        env = environment(hub, gcs.url, bucket, tmp_path)
        assert stage(env).returncode == 0
        victim = WEIGHTS[2]
        # what a copy of another revision (or by hand) would leave: other bytes, another digest (or none)
        bad = tmp_path / "bad"
        bad.write_bytes(damage(repo.files[victim].read_bytes()))
        upload = [staging_python(), "-c", UPLOAD_WITHOUT_DIGEST, bucket, f"{snapshot(COMMIT)}/{victim}", str(bad)]
        subprocess.run(upload, env=env, check=True, capture_output=True)
        repo.requests.clear()
        again = stage(env)
    assert again.returncode == 0, again.stderr
    assert downloads(repo) == [victim]
    assert again.lines("stale") and victim in again.lines("stale")[0]
    assert_complete(gcs, bucket, repo)


UPLOAD_WITHOUT_DIGEST = """
import sys
from google.cloud import storage
storage.Client().bucket(sys.argv[1]).blob(sys.argv[2]).upload_from_filename(sys.argv[3])
"""


def test_a_connection_dropped_mid_file_resumes_from_where_it_stopped(gcs, bucket, repo, tmp_path):
    victim = WEIGHTS[0]
    repo.files[victim].write_bytes(os.urandom(24 << 20))  # larger than the pieces the library writes out (10 MiB)
    drops = [12_000_000, 22_000_000]
    repo.drop_after[victim] = list(drops)  # two drops, then the rest
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path))
    assert run.returncode == 0, run.stderr
    ranges = [r.headers.get("range") for r in repo.seen("cdn") if r.path == f"/cdn/{victim}"]
    assert len(ranges) == 3 and ranges[0] is None, ranges
    starts = [int(r.removeprefix("bytes=").removesuffix("-")) for r in ranges[1:] if r]
    # each retry asks for the rest from what it had written, not for the whole file again
    assert len(starts) == 2 and 0 < starts[0] <= drops[0] < starts[1] <= drops[1], ranges
    assert run.lines("retry") == []  # the library resumed; no attempt of ours was spent
    assert_complete(gcs, bucket, repo)


def test_a_file_is_uploaded_while_it_is_still_downloading(gcs, bucket, repo, tmp_path):
    victim = WEIGHTS[0]
    repo.files[victim].write_bytes(os.urandom(24 << 20))
    repo.cdn_hold[victim] = 12 << 20  # the CDN sends half (past the library's first 10 MiB piece), then waits
    # the library's read timeout (10 s) outlasts the hold, so the held answer is the only one it gets
    extra = {"UPLOAD_CHUNK_BYTES": str(4 << 20), "HF_HUB_DOWNLOAD_TIMEOUT": str(HOLD_SECONDS * 2)}
    with hub_stand_in(repo) as hub, refusing_proxy(gcs.url, refuse=0) as (storage, proxy):
        env = environment(hub, storage, bucket, tmp_path, **extra)
        process = subprocess.Popen([staging_python(), str(PROGRAM)], env=env, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        try:
            # only the victim is larger than one request's upload (8 MiB): every PUT is one of its chunks
            while not (chunks := [r for r in proxy.requests if r.method == "PUT"]):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "no chunk was uploaded while the download was held halfway"
                time.sleep(0.05)
            assert not repo.cdn_release.is_set()
            assert [r.path for r in repo.seen("cdn") if victim in r.path] == [f"/cdn/{victim}"]  # still the first
        finally:
            repo.cdn_release.set()
        stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0, stdout
    assert chunks[0].headers["content-range"] == f"bytes 0-{(4 << 20) - 1}/{24 << 20}"
    assert f"done {victim}:" in stdout and "streamed)" in stdout
    assert_complete(gcs, bucket, repo)


def test_a_download_that_fails_halfway_is_resumed_by_the_next_attempt_from_what_is_on_disk(gcs, bucket, repo, tmp_path):
    victim = WEIGHTS[0]
    repo.files[victim].write_bytes(os.urandom(24 << 20))
    # the library's own resumes stop after five drops without a new piece written: one attempt of ours fails
    repo.drop_after[victim] = [12_000_000] * 6
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, UPLOAD_CHUNK_BYTES=str(4 << 20)))
    assert run.returncode == 0, run.stderr
    (retry,) = run.lines("retry")
    assert retry.startswith(f"retry download {victim}: attempt 2 of 5"), retry
    ranges = [r.headers.get("range") for r in repo.seen("cdn") if r.path == f"/cdn/{victim}"]
    assert len(ranges) == 7 and ranges[0] is None, ranges
    # the second attempt asks for the rest from what the first wrote, like the library's resumes did
    assert ranges[6] == ranges[1] and 0 < int(ranges[6].removeprefix("bytes=").removesuffix("-")) < 12_000_000
    assert_complete(gcs, bucket, repo)


def test_a_file_stored_in_xet_is_downloaded_whole_by_the_library_and_the_rest_streamed(gcs, bucket, repo, tmp_path):
    repo.xet = {WEIGHTS[0], WEIGHTS[3]}
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path))
    assert run.returncode == 0, run.stderr
    # done <path>: <size> in <seconds> s (<rate>/s, <route>)
    routes = {
        line.split(":")[0].removeprefix("done "): line.rsplit("/s, ", 1)[1].removesuffix(")")
        for line in run.lines("done")
    }
    assert routes == {path: "downloaded whole, in Xet" if path in repo.xet else "streamed" for path in repo.files}
    # hf_hub_download asks for the metadata first; the stand-in offers no Xet, so the bytes come over HTTP
    heads = [r.path for r in repo.seen("hub") if r.method == "HEAD"]
    assert sorted(h.split(f"/resolve/{COMMIT}/", 1)[1] for h in heads) == sorted(repo.xet)
    assert downloads(repo) == sorted(repo.files)
    assert_complete(gcs, bucket, repo)


@pytest.mark.parametrize("failures, succeeds", [(2, True), (1_000, False)])
def test_transient_failures_get_a_bounded_number_of_attempts(gcs, bucket, repo, tmp_path, failures, succeeds):
    victim = WEIGHTS[3]
    repo.cdn_failures[victim] = failures  # 503 is not retried by the library's download: ours are the attempts
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, RETRIES="3"))
    asked = [r for r in repo.seen("cdn") if r.path == f"/cdn/{victim}"]
    retries = [line for line in run.lines("retry") if victim in line]
    if succeeds:
        assert run.returncode == 0, run.stderr
        assert len(asked) == 3 and len(retries) == 2 and "attempt 2 of 3" in retries[0]
        assert_complete(gcs, bucket, repo)
    else:
        assert f"download {victim}: gave up after 3 attempts" in run.error()
        assert len(asked) == 3 and MARKER not in stored(gcs, bucket)


@pytest.mark.parametrize(
    "size, chunk",
    [
        pytest.param(None, None, id="one-request-upload"),
        pytest.param(20 << 20, 4 << 20, id="resumable-upload-of-five-chunks"),
    ],
)
def test_bytes_that_do_not_match_the_listed_digest_are_refused_and_leave_no_object(
    gcs, bucket, repo, tmp_path, size, chunk
):
    victim = WEIGHTS[1]
    if size:
        repo.files[victim].write_bytes(os.urandom(size))
    other = tmp_path / "other"
    other.write_bytes(bytes(repo.files[victim].stat().st_size))  # the right size, the wrong content
    repo.served[victim] = other
    extra = {"PARALLEL": "1", **({"UPLOAD_CHUNK_BYTES": str(chunk)} if chunk else {})}
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, **extra))
    line = run.error()
    assert f"{victim}: refused, the download's digest is sha256:" in line
    assert repo.expected_digest(victim) in line
    assert victim not in stored(gcs, bucket) and MARKER not in stored(gcs, bucket)


@pytest.mark.parametrize(
    "status, token, says",
    [
        (
            401,
            None,
            "the repo is gated or private (or does not exist), so a Hugging Face token is needed: keep it in Secret "
            "Manager and set serving.hfTokenSecretVersion (or serving.hfToken)",
        ),
        (
            403,
            None,
            "the repo is gated or private (or does not exist), so a Hugging Face token is needed: keep it in Secret "
            "Manager and set serving.hfTokenSecretVersion (or serving.hfToken)",
        ),
        (
            403,
            TOKEN,
            "the Hub refused the token: check the token (serving.hfTokenSecretVersion's secret, or serving.hfToken) "
            "and that its account accepted the model's terms",
        ),
    ],
)
def test_a_refused_listing_says_what_to_set(gcs, bucket, repo, tmp_path, status, token, says):
    repo.api_status = status
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, **({"HF_TOKEN": token} if token else {})))
    line = run.error()
    assert says in line and f"{MODEL} revision {COMMIT}" in line
    assert TOKEN not in run.stdout + run.stderr


def test_a_missing_revision_fails_with_one_line_naming_the_model_and_the_revision(gcs, bucket, repo, tmp_path):
    other = "fedcba9876543210fedcba9876543210fedcba98"
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, MODEL_REVISION=other))
    line = run.error()
    assert f"{MODEL} revision {other}: no such revision on {hub}" in line


def token_file(tmp_path: Path, text: str) -> str:
    """A token file as GKE's Secret Manager add-on mounts it (the secret version's payload, read-only)."""
    path = tmp_path / "secrets" / "token"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(0o444)
    return str(path)


@pytest.mark.parametrize("source", ["variable", "file"])
def test_the_token_goes_to_the_hub_and_nowhere_else(gcs, bucket, repo, tmp_path, source):
    """From HF_TOKEN (serving.hfToken's Secret) or from the file HF_TOKEN_PATH names (serving.hfTokenSecretVersion)."""
    given = {"HF_TOKEN": TOKEN} if source == "variable" else {"HF_TOKEN_PATH": token_file(tmp_path, TOKEN + "\n")}
    with hub_stand_in(repo) as hub, refusing_proxy(gcs.url, refuse=0) as (storage, proxy):
        run = stage(environment(hub, storage, bucket, tmp_path, **given))
    assert run.returncode == 0, run.stderr
    hub_calls = [r for r in repo.seen("hub") if not r.path.startswith("/api/agent-harnesses")]
    assert hub_calls and all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in hub_calls)
    assert repo.seen("cdn") and not [r for r in repo.seen("cdn") if "authorization" in r.headers]
    assert proxy.requests and not [r for r in proxy.requests if TOKEN in json.dumps(r.headers)]
    assert TOKEN not in run.stdout + run.stderr


def test_a_branch_is_resolved_once_and_its_commit_is_staged(gcs, bucket, repo, tmp_path):
    repo.branches["main"] = COMMIT
    with hub_stand_in(repo) as hub:
        env = environment(hub, gcs.url, bucket, tmp_path, MODEL_REVISION="main")
        run = stage({**env, "DESTINATION": f"gs://{bucket}/{snapshot(COMMIT)}"})
    assert run.returncode == 0, run.stderr
    assert f"revision main is commit {COMMIT}" in run.stdout
    assert [r.path for r in repo.seen("hub") if "/revision/" in r.path] == [f"/api/models/{MODEL}/revision/main"]
    assert not [r for r in repo.seen("hub") if "/main" in r.path and "/revision/" not in r.path]
    assert_complete(gcs, bucket, repo)


def test_a_bucket_grant_still_propagating_is_waited_out_and_one_that_never_comes_is_refused(
    gcs, bucket, repo, tmp_path
):
    with hub_stand_in(repo) as hub:
        with refusing_proxy(gcs.url, refuse=3) as (storage, proxy):
            run = stage(environment(hub, storage, bucket, tmp_path, GRANT_POLL_SECONDS="0.1"))
        assert run.returncode == 0, run.stderr
        waits = run.lines("wait")
        refused_probes = [r for r in proxy.requests[:3] if r.path.split("?")[0].endswith(f"%2F{MARKER}")]
        assert waits and len(waits) == len(refused_probes), (waits, proxy.requests[:3])
        assert "the bucket grant may still be propagating" in waits[0]
        assert_complete(gcs, bucket, repo)

        with refusing_proxy(gcs.url, refuse=1_000) as (storage, _):
            refused = stage(
                environment(hub, storage, bucket, tmp_path, GRANT_POLL_SECONDS="0.1", GRANT_WAIT_SECONDS="0.3")
            )
    line = refused.error()
    assert "Cloud Storage refused" in line
    assert (
        f"needs roles/storage.objectViewer on gs://{bucket} and roles/storage.objectUser on its objects under " in line
    )
    assert f"under {snapshot(COMMIT)}/ (Workload Identity" in line


@pytest.mark.parametrize(
    "setting, says",
    [
        ({"MODEL_ID": "no-org"}, "MODEL_ID (org/name, not 'no-org') and MODEL_REVISION (a commit) are required"),
        ({"DESTINATION": "/local/path"}, "DESTINATION must be gs://<bucket>/<snapshot directory>"),
        ({"DESTINATION": "gs://bucket-only"}, "DESTINATION must be gs://<bucket>/<snapshot directory>"),
        ({"PARALLEL": "0"}, "PARALLEL must be a positive number, not '0'"),
        ({"UPLOAD_CHUNK_BYTES": "1000"}, "UPLOAD_CHUNK_BYTES must be a multiple of 262144, not 1000"),
    ],
)
def test_bad_settings_fail_with_one_line(gcs, bucket, tmp_path, setting, says):
    run = stage({**environment("http://127.0.0.1:9", gcs.url, bucket, tmp_path), **setting})
    assert says in run.error()


@pytest.mark.parametrize(
    "content, says",
    [
        pytest.param(None, "cannot read the token file (FileNotFoundError", id="missing"),
        pytest.param(" \n", "the token file is empty: check the secret version's payload", id="empty"),
    ],
)
def test_a_token_file_that_holds_no_token_fails_before_the_hub_is_asked(gcs, bucket, repo, tmp_path, content, says):
    """HF_TOKEN_PATH is set only with the add-on's volume mounted: no token there is an error, never an anonymous
    download that the Hub then refuses as gated."""
    path = token_file(tmp_path, content) if content is not None else str(tmp_path / "absent" / "token")
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, HF_TOKEN_PATH=path))
    assert f"HF_TOKEN_PATH {path}: {says}" in run.error()
    assert [r for r in repo.seen("hub") if not r.path.startswith("/api/agent-harnesses")] == []


def test_a_file_larger_than_the_scratch_budget_is_refused_before_anything_moves(gcs, bucket, repo, tmp_path):
    with hub_stand_in(repo) as hub:
        run = stage(environment(hub, gcs.url, bucket, tmp_path, SCRATCH_BYTES="1000"))
    assert "exceeds SCRATCH_BYTES" in run.error()
    assert downloads(repo) == [] and stored(gcs, bucket) == {}
