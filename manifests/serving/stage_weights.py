"""Stage one pinned revision of a Hugging Face model repo into the weights bucket.

The model servers stream ``gs://<bucket>/models--<org>--<name>/snapshots/<commit>/<files>`` (the
Hugging Face cache layout). This program fills that directory on two libraries made for the job:
``huggingface_hub`` lists the commit's files (``HfApi.list_repo_tree``: sizes and digests) and
downloads each one (``hf_hub_download``: redirects, resume after a dropped connection, the token kept
off the CDN, Xet storage through ``hf_xet``), and ``google-cloud-storage`` uploads it (resumable
uploads with a crc32c check, Workload Identity credentials from the metadata server through
``google-auth``). Both come from stage-weights-requirements.txt, installed with
``pip --require-hashes`` by the Job's init container.

What it promises:
- one commit: MODEL_REVISION is used as is when it is a commit sha, else resolved once
  (``HfApi.model_info``) and that commit is copied;
- a file counts as complete in the bucket when its size and the digest recorded with it (custom
  metadata ``hf-digest``: ``sha256:<hex>`` of an LFS file, ``git-sha1:<hex>`` of another) equal the
  Hub's; each download is hashed as it is uploaded, and the upload's last request, the one that
  creates the object with its metadata, goes out only if the digest is the Hub's, so neither a bad
  download nor a killed run leaves an object behind: a run again copies only what is missing;
- the marker ``<snapshot>/.staged-complete`` is removed before anything changes and written last;
- a 403 from Cloud Storage on the first access (a bucket grant made just before the Job) is waited
  out for GRANT_WAIT_SECONDS;
- each download and upload gets RETRIES attempts on transient errors; any failure ends the run with
  one ``error: ...`` line on stderr (exit 1).

Each file is streamed: its download (huggingface_hub's ``http_get``, which resumes a dropped
connection) fills a file on SCRATCH_DIR while its upload reads behind it, so a file's upload ends
soon after its download and not a whole download later; the upload re-reads a chunk from disk when
it sends it again, and a retry resumes the download from what is on disk. A file the Hub stores in
Xet (its tree entry has a Xet hash) is downloaded whole by ``hf_hub_download`` through hf_xet, in
parallel pieces, and then uploaded. PARALLEL files move at once, never more than SCRATCH_BYTES on
disk; memory stays at about PARALLEL upload chunks whatever the file size.

Environment: MODEL_ID, MODEL_REVISION, DESTINATION (gs://bucket/prefix) are required; HF_ENDPOINT
(default https://huggingface.co), HF_TOKEN (sent to the Hub only), or else HF_TOKEN_PATH, a file holding it
(the token from Secret Manager; the order huggingface_hub's own lookup follows), PARALLEL (4), RETRIES (5),
RETRY_BACKOFF_SECONDS (2), UPLOAD_CHUNK_BYTES (64 MiB, a multiple of 256 KiB), SCRATCH_DIR (/scratch),
SCRATCH_BYTES (32 GiB), GRANT_WAIT_SECONDS (600), GRANT_POLL_SECONDS (15). STORAGE_EMULATOR_HOST points google-cloud-storage
at an emulator (the tests).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import httpx2  # huggingface_hub's HTTP client: its transport errors are worth a retry
import requests  # google-cloud-storage's HTTP client, likewise
from google.api_core import exceptions as gcs_errors
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY
from huggingface_hub import HfApi, RepoFile, constants, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get

# a public helper of the package; its utils/__init__ imports it without listing it in __all__
from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

T = TypeVar("T")
Number = TypeVar("Number", int, float)
MARKER_NAME = ".staged-complete"
DIGEST_METADATA_KEY = "hf-digest"
GCS_CHUNK_ALIGNMENT = 256 * 1024
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
MAX_BACKOFF_SECONDS = 60.0
# huggingface_hub's own test for Xet downloads: hf_xet installed and HF_HUB_DISABLE_XET unset
XET_AVAILABLE = importlib.util.find_spec("hf_xet") is not None and not constants.HF_HUB_DISABLE_XET


class StageError(Exception):
    """A failure the operator can act on; its message is the one-line report."""


@dataclass(frozen=True)
class Settings:
    model_id: str
    revision: str
    bucket: str
    prefix: str
    endpoint: str
    token: str | None
    parallel: int
    retries: int
    backoff_seconds: float
    chunk_bytes: int
    scratch_dir: Path
    scratch_bytes: int
    grant_wait_seconds: float
    grant_poll_seconds: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        def number(name: str, default: Number, parse: Callable[[str], Number], least: Number) -> Number:
            text = env.get(name, "").strip()
            try:
                value: Number | None = parse(text) if text else default
            except ValueError:
                value = None
            if value is None or value < least:
                raise StageError(f"{name} must be a positive number, not {text!r}")
            return value

        model_id, revision = env.get("MODEL_ID", "").strip(), env.get("MODEL_REVISION", "").strip()
        if model_id.count("/") != 1 or not revision:
            raise StageError(f"MODEL_ID (org/name, not {model_id!r}) and MODEL_REVISION (a commit) are required")
        destination = env.get("DESTINATION", "").strip()
        bucket, _, prefix = destination.removeprefix("gs://").partition("/")
        if not destination.startswith("gs://") or not bucket or not prefix.strip("/"):
            raise StageError(f"DESTINATION must be gs://<bucket>/<snapshot directory>, not {destination!r}")
        chunk = number("UPLOAD_CHUNK_BYTES", 256 * GCS_CHUNK_ALIGNMENT, int, 1)
        if chunk % GCS_CHUNK_ALIGNMENT:
            raise StageError(f"UPLOAD_CHUNK_BYTES must be a multiple of {GCS_CHUNK_ALIGNMENT}, not {chunk}")
        return cls(
            model_id=model_id,
            revision=revision,
            bucket=bucket,
            prefix=prefix.strip("/"),
            endpoint=env.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co",
            token=token_from(env),
            parallel=number("PARALLEL", 4, int, 1),
            retries=number("RETRIES", 5, int, 1),
            backoff_seconds=number("RETRY_BACKOFF_SECONDS", 2.0, float, 0.0),
            chunk_bytes=chunk,
            scratch_dir=Path(env.get("SCRATCH_DIR", "").strip() or "/scratch"),
            scratch_bytes=number("SCRATCH_BYTES", 32 << 30, int, 1),
            grant_wait_seconds=number("GRANT_WAIT_SECONDS", 600.0, float, 0.0),
            grant_poll_seconds=number("GRANT_POLL_SECONDS", 15.0, float, 0.0),
        )


def token_from(env: Mapping[str, str]) -> str | None:
    """The Hugging Face token: HF_TOKEN, else the file HF_TOKEN_PATH names (the Job's Secret Manager volume).

    The file is there whenever the variable is set (the pod starts only once its volume is mounted), so a missing
    or empty one is an error, not a download without the token.
    """
    if token := env.get("HF_TOKEN", "").strip():
        return token
    path = env.get("HF_TOKEN_PATH", "").strip()
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise StageError(f"HF_TOKEN_PATH {path}: cannot read the token file ({brief(error)})") from None
    if not token:
        raise StageError(f"HF_TOKEN_PATH {path}: the token file is empty: check the secret version's payload")
    return token


_print_lock = threading.Lock()


def say(text: str) -> None:
    with _print_lock:
        print(text, flush=True)


def gb(count: float) -> str:
    return f"{count / 1e9:.2f} GB"


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    digest: str  # "sha256:<hex>" (LFS) or "git-sha1:<hex>", as recorded in the object's metadata
    in_xet: bool = False  # the Hub stores it in Xet: hf_xet downloads it faster than any stream


class VerifyingReader:
    """The downloaded file as the upload reads it, hashed on the way: the read that completes the file
    raises unless its digest is the Hub's, so the upload fails before its last request, the one that
    creates the object. A re-read after a seek back (a chunk sent again) is not hashed twice."""

    def __init__(self, stream: BinaryIO | SpoolReader, file: HubFile) -> None:
        self.stream, self.file, self.hashed = stream, file, 0
        algorithm = file.digest.partition(":")[0]
        # a git blob id is the sha1 of "blob <size>\0" and the content
        git_blob = hashlib.sha1(b"blob %d\0" % file.size, usedforsecurity=False)
        self.hasher = hashlib.sha256() if algorithm == "sha256" else git_blob
        self.algorithm = algorithm

    def read(self, size: int = -1) -> bytes:
        start = self.stream.tell()
        data = self.stream.read(size)
        if start + len(data) > self.hashed:
            self.hasher.update(memoryview(data)[self.hashed - start :])
            self.hashed = start + len(data)
            if self.hashed >= self.file.size:
                actual = f"{self.algorithm}:{self.hasher.hexdigest()}"
                if actual != self.file.digest or self.hashed != self.file.size:
                    raise StageError(
                        f"{self.file.path}: refused, the download's digest is {actual}, the Hub lists {self.file.digest}"
                    )
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()


class DownloadStopped(Exception):
    """The upload failed, so the download of the same attempt stops writing (not a network error)."""


class Spool:
    """One file's download on scratch disk, read by its upload while it is still being written.

    ``download`` runs the download in a thread of its own, writing through a SpoolWriter (the file
    object ``http_get`` writes to: from byte 0, or from ``written`` when an attempt resumes; it
    rewinds if the server ignores the range). The upload reads through a SpoolReader, whose reads
    wait until the download has written the bytes they ask for, and raise the download's error if it
    ends first. Bytes stay on disk, so an upload that seeks back to send a chunk again, and the next
    attempt's new upload, read them from there."""

    def __init__(self, path: Path, file: HubFile) -> None:
        self.file = file
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.written = 0  # bytes 0..written are on disk
        self.ended = False  # the current download returned or raised
        self.error: BaseException | None = None
        self.stopping = False
        self._changed = threading.Condition()

    def close(self) -> None:
        os.close(self.fd)

    def download(self, fetch: Callable[[SpoolWriter, int], None]) -> threading.Thread:
        """Start ``fetch(writer, resume_at)`` in a thread of its own; bytes already on disk are kept."""
        with self._changed:
            self.ended, self.error, self.stopping = False, None, False
            resume_at = self.written

        def run() -> None:
            error: BaseException | None = None
            try:
                fetch(SpoolWriter(self, resume_at), resume_at)
            except BaseException as failure:  # handed to the upload, which raises it in the caller's thread
                error = failure
            with self._changed:
                self.ended, self.error = True, error
                self._changed.notify_all()

        thread = threading.Thread(target=run, name=f"download {self.file.path}", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        with self._changed:
            self.stopping = True
            self._changed.notify_all()

    def wrote(self, end: int) -> None:
        with self._changed:
            if self.stopping:
                raise DownloadStopped(self.file.path)
            self.written = end
            self._changed.notify_all()

    def wait_for(self, end: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.written >= end or self.ended)
            if self.written < end:
                if self.error is not None:
                    raise self.error
                raise StageError(
                    f"{self.file.path}: the download ended at byte {self.written}, the Hub lists {self.file.size}"
                )


class SpoolWriter:
    """The file object ``http_get`` writes the download to."""

    def __init__(self, spool: Spool, position: int) -> None:
        self.spool, self.position = spool, position

    def write(self, data: bytes) -> int:
        end = self.position + len(data)
        if end > self.spool.file.size:
            raise StageError(
                f"{self.spool.file.path}: the Hub sent more than the {self.spool.file.size} bytes it lists"
            )
        os.pwrite(self.spool.fd, data, self.position)
        self.position = end
        self.spool.wrote(end)
        return len(data)

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = offset if whence == 0 else self.position + offset
        return self.position

    def truncate(self) -> None:
        os.ftruncate(self.spool.fd, self.position)
        self.spool.wrote(self.position)


class SpoolReader:
    """The file object the upload reads; a read waits for the download to get that far."""

    def __init__(self, spool: Spool) -> None:
        self.spool, self.position = spool, 0

    def read(self, size: int = -1) -> bytes:
        total = self.spool.file.size
        end = total if size < 0 else min(self.position + size, total)
        self.spool.wait_for(end)
        data = os.pread(self.spool.fd, end - self.position, self.position)
        self.position += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.spool.file.size}[whence]
        self.position = base + offset
        return self.position

    def tell(self) -> int:
        return self.position


class ScratchBudget:
    """Holds the bytes of the downloads on scratch disk under a limit (the volume's size)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._changed = threading.Condition()

    def hold(self, size: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.used == 0 or self.used + size <= self.limit)
            self.used += size

    def release(self, size: int) -> None:
        with self._changed:
            self.used -= size
            self._changed.notify_all()


class Stager:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.api = HfApi(endpoint=settings.endpoint, token=settings.token or False)
        self.bucket = storage.Client().bucket(settings.bucket)
        self.location = f"gs://{settings.bucket}/{settings.prefix}"
        self.budget = ScratchBudget(settings.scratch_bytes)
        self.commit = ""

    def retry(self, what: str | Callable[[], str], attempt: Callable[[], T]) -> T:
        """``attempt`` until it succeeds, at most RETRIES times on transient errors, backing off.
        ``what`` names the step in messages; a callable names it once the attempt has failed."""
        for number in range(1, self.s.retries + 1):
            try:
                return attempt()
            except Exception as error:
                if not is_transient(error):
                    raise
                step = what() if callable(what) else what
                if number == self.s.retries:
                    raise StageError(f"{step}: gave up after {number} attempts: {brief(error)}") from error
                delay = min(self.s.backoff_seconds * 2 ** (number - 1), MAX_BACKOFF_SECONDS)
                say(f"retry {step}: attempt {number + 1} of {self.s.retries} in {delay:.1f} s: {brief(error)}")
                time.sleep(delay)
        raise AssertionError("unreachable")

    def hub_files(self) -> tuple[str, list[HubFile]]:
        commit = self.s.revision
        if not COMMIT_RE.fullmatch(commit):
            resolved = self.retry(
                "resolve the revision", lambda: self.api.model_info(self.s.model_id, revision=commit)
            ).sha
            if resolved is None:
                raise StageError(f"{self.s.model_id} revision {commit}: the Hub named no commit for it")
            commit = resolved
            say(f"revision {self.s.revision} is commit {commit}")
        entries = self.retry(
            f"list {self.s.model_id}@{commit}",
            lambda: list(self.api.list_repo_tree(self.s.model_id, revision=commit, recursive=True)),
        )
        files = []
        for entry in entries:
            if isinstance(entry, RepoFile):
                if entry.path == MARKER_NAME or entry.path.startswith("/") or ".." in entry.path.split("/"):
                    raise StageError(f"refusing the repo path {entry.path!r}")
                digest = f"sha256:{entry.lfs.sha256}" if entry.lfs else f"git-sha1:{entry.blob_id}"
                files.append(HubFile(entry.path, entry.size, digest.lower(), in_xet=bool(entry.xet_hash)))
        return commit, sorted(files, key=lambda f: f.path)

    def wait_for_access(self) -> None:
        """Fail early without access, but wait out a 403 while a fresh bucket grant propagates."""
        deadline = time.monotonic() + self.s.grant_wait_seconds
        while True:
            try:
                self.retry(f"access {self.location}", lambda: self.bucket.get_blob(self.name(MARKER_NAME)))
                return
            except gcs_errors.Forbidden:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                delay = min(self.s.grant_poll_seconds, left)
                say(
                    f"wait {self.location}: Cloud Storage refused (HTTP 403), the bucket grant may still be "
                    f"propagating; again in {delay:.0f} s ({left:.0f} s left)"
                )
                time.sleep(delay)

    def name(self, path: str) -> str:
        return f"{self.s.prefix}/{path}"

    def copy(self, file: HubFile) -> None:
        """Copy one file through scratch disk: streamed, or downloaded whole when it is in Xet; then delete it."""
        started = time.monotonic()
        self.budget.hold(file.size)
        try:
            with tempfile.TemporaryDirectory(dir=self.s.scratch_dir, prefix="stage-") as work:
                if file.in_xet and XET_AVAILABLE:
                    route = "downloaded whole, in Xet"
                    self.copy_whole(file, Path(work))
                else:
                    route = "streamed"
                    self.copy_streamed(file, Path(work) / "download")
        finally:
            self.budget.release(file.size)
        seconds = time.monotonic() - started
        say(f"done {file.path}: {gb(file.size)} in {seconds:.1f} s ({gb(file.size / max(seconds, 1e-6))}/s, {route})")

    def copy_streamed(self, file: HubFile, scratch: Path) -> None:
        """Upload the file while it downloads. Each attempt resumes the download from what is on disk and
        uploads from the start (a new upload session: an earlier one may hold bytes not yet checked)."""
        url = hf_hub_url(self.s.model_id, file.path, revision=self.commit, endpoint=self.s.endpoint)
        # the token goes with the request to the Hub; the redirect to a CDN on another origin drops it
        headers = build_hf_headers(token=self.s.token or False)
        spool = Spool(scratch, file)
        failed = "download"  # which side ended the last attempt, for the retry's messages

        def fetch(writer: SpoolWriter, resume_at: int) -> None:
            # http_get only writes, tells, seeks and truncates its file: a SpoolWriter does all four
            http_get(url, cast(BinaryIO, writer), resume_size=resume_at, headers=headers, expected_size=file.size)

        def attempt() -> None:
            nonlocal failed
            downloading = spool.download(fetch)
            try:
                self.upload(SpoolReader(spool), file)
            except BaseException as error:
                spool.stop()
                downloading.join()
                # a download error reaches here as itself (the reader raises it), so it is judged by its kind
                failed = "download" if error is spool.error else "upload"
                raise
            downloading.join()

        try:
            self.retry(lambda: f"{failed} {file.path}", attempt)
        finally:
            spool.close()

    def copy_whole(self, file: HubFile, work: Path) -> None:
        local = self.retry(
            f"download {file.path}",
            lambda: hf_hub_download(
                self.s.model_id,
                file.path,
                revision=self.commit,
                local_dir=work,
                endpoint=self.s.endpoint,
                token=self.s.token or False,
            ),
        )
        with Path(local).open("rb") as stream:
            self.retry(f"upload {file.path}", lambda: self.upload(stream, file))

    def upload(self, stream: BinaryIO | SpoolReader, file: HubFile) -> None:
        """One resumable (or, for a small file, one-request) upload of ``stream`` from its start; the
        object is created only if what was read has the Hub's digest."""
        stream.seek(0)
        blob = self.bucket.blob(self.name(file.path), chunk_size=self.s.chunk_bytes)
        blob.metadata = {DIGEST_METADATA_KEY: file.digest}
        blob.upload_from_file(
            VerifyingReader(stream, file),
            size=file.size,
            content_type="application/octet-stream",
            checksum="crc32c",
            retry=DEFAULT_RETRY,
        )

    def run(self) -> None:
        started = time.monotonic()
        who = " (with a Hugging Face token)" if self.s.token else ""
        say(f"stage {self.s.model_id}@{self.s.revision} from {self.s.endpoint}{who} to {self.location}")
        self.commit, files = self.hub_files()
        self.wait_for_access()
        stored = {
            blob.name: blob
            for blob in self.retry("list the bucket", lambda: list(self.bucket.list_blobs(prefix=self.s.prefix + "/")))
        }
        todo = []
        for file in files:
            blob = stored.get(self.name(file.path))
            if (
                blob is not None
                and blob.size == file.size
                and (blob.metadata or {}).get(DIGEST_METADATA_KEY) == file.digest
            ):
                continue
            if blob is not None:
                say(
                    f"stale {file.path}: {blob.size} bytes, digest {(blob.metadata or {}).get(DIGEST_METADATA_KEY)}; copying it again"
                )
            todo.append(file)
        todo_bytes, total = sum(f.size for f in todo), sum(f.size for f in files)
        say(
            f"plan: {len(files)} files, {gb(total)}; to copy: {len(todo)} files, {gb(todo_bytes)} ({self.s.parallel} at once)"
        )
        marker = {"model": self.s.model_id, "revision": self.commit, "files": len(files), "bytes": total}
        marker_blob = self.bucket.blob(self.name(MARKER_NAME))
        if not todo:
            current = stored.get(self.name(MARKER_NAME))
            if current is None or _marker_fields(current.download_as_text()) != marker:
                self.write_marker(marker_blob, marker)
            say(f"summary: all {len(files)} files already complete in {self.location}; marker {marker_blob.name}")
            return
        if todo_bytes and max(f.size for f in todo) > self.s.scratch_bytes:
            raise StageError(
                f"the largest file ({gb(max(f.size for f in todo))}) exceeds SCRATCH_BYTES ({gb(self.s.scratch_bytes)}): raise the Job's scratch volume and SCRATCH_BYTES"
            )
        self.s.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.retry("remove the marker", lambda: marker_blob.delete() if marker_blob.exists() else None)
        stop = threading.Event()

        def one(file: HubFile) -> None:
            if not stop.is_set():
                try:
                    self.copy(file)
                except BaseException:
                    stop.set()  # no new file starts after a failure
                    raise

        largest_first = sorted(todo, key=lambda f: -f.size)  # the longest copy starts first, not last
        with ThreadPoolExecutor(self.s.parallel, thread_name_prefix="copy") as pool:
            for future in [pool.submit(one, f) for f in largest_first]:
                future.result()
        self.write_marker(marker_blob, marker)
        say(
            f"summary: copied {len(todo)} files ({gb(todo_bytes)}) in {time.monotonic() - started:.1f} s; "
            f"{len(files) - len(todo)} already complete; marker {marker_blob.name}"
        )

    def write_marker(self, blob: Any, marker: dict[str, Any]) -> None:
        text = json.dumps({**marker, "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}, indent=2)
        self.retry("write the marker", lambda: blob.upload_from_string(text + "\n", content_type="application/json"))


def _marker_fields(text: str) -> dict[str, Any] | None:
    try:
        marker = json.loads(text)
    except ValueError:
        return None
    return {k: v for k, v in marker.items() if k != "timestamp"} if isinstance(marker, dict) else None


def is_transient(error: BaseException) -> bool:
    """Worth another attempt: 429, 5xx, a dropped or timed-out connection, a download cut short."""
    if isinstance(error, (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError, StageError)):
        return (
            isinstance(error, LocalEntryNotFoundError) and error.__cause__ is not None and is_transient(error.__cause__)
        )
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return error.response.status_code in TRANSIENT_STATUSES or error.response.status_code >= 500
    if isinstance(error, gcs_errors.GoogleAPICallError):
        return error.code in TRANSIENT_STATUSES or (error.code or 0) >= 500
    return isinstance(
        error, (httpx2.TransportError, requests.exceptions.RequestException, ConnectionError, TimeoutError)
    ) or (isinstance(error, OSError) and "Consistency check failed" in str(error))


def brief(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def explain(error: BaseException, settings: Settings) -> str:
    """The one line for an operator: what failed and the setting that fixes it."""
    name = f"{settings.model_id} revision {settings.revision}"
    if isinstance(error, (GatedRepoError, RepositoryNotFoundError)) or (
        isinstance(error, HfHubHTTPError) and error.response is not None and error.response.status_code in (401, 403)
    ):
        if settings.token:
            return f"{name}: the Hub refused the token: check the token (serving.hfTokenSecretVersion's secret, or serving.hfToken) and that its account accepted the model's terms ({brief(error)})"
        return f"{name}: the Hub refused access: the repo is gated or private (or does not exist), so a Hugging Face token is needed: keep it in Secret Manager and set serving.hfTokenSecretVersion (or serving.hfToken) ({brief(error)})"
    if isinstance(error, RevisionNotFoundError):
        return f"{name}: no such revision on {settings.endpoint} ({brief(error)})"
    if isinstance(error, (gcs_errors.Forbidden, gcs_errors.Unauthorized)):
        return f"Cloud Storage refused ({brief(error)}): the Job's Kubernetes service account needs roles/storage.objectViewer on gs://{settings.bucket} and roles/storage.objectUser on its objects under {settings.prefix}/ (Workload Identity; serving.weightsBucket.grantAccess)"
    if isinstance(error, gcs_errors.NotFound):
        return f"gs://{settings.bucket}: not found ({brief(error)})"
    return brief(error)


def main(environ: Mapping[str, str]) -> int:
    try:
        settings = Settings.from_env(environ)
    except StageError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    try:
        Stager(settings).run()
    except Exception as error:
        print(f"error: {explain(error, settings)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
