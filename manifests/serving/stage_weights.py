"""Stage one pinned revision of a Hugging Face model repo into the weights store.

The model servers stream the weights with vLLM's Run:ai streamer from
``gs://<bucket>/models--<org>--<name>/snapshots/<revision>/<files>`` (the Hugging Face cache
layout, files directly under the snapshot directory). This script fills that directory: it
lists the files of the revision on the Hub, streams each one from the Hub into the store while
verifying its digest, and writes the marker ``<snapshot>/.staged-complete`` once every file is
there. It is idempotent and resumable: a file already complete in the store is skipped, and a
run that finds everything complete says so and exits within seconds.

How it runs: the Job ``stage-model-weights`` (manifests/serving/weights-staging-job.yaml) mounts
this file from the ConfigMap ``weights-staging-script`` at /staging/stage_weights.py and runs
``python /staging/stage_weights.py`` in a plain pinned python image, as the model servers'
Kubernetes service account (Workload Identity: the GKE metadata server hands out its token,
which has roles/storage.objectUser on the bucket). Standard library only, Python 3.11 or later.
Locally: ``MODEL_ID=org/name MODEL_REVISION=<sha> DESTINATION=/tmp/snap python stage_weights.py``.

Environment:
  MODEL_ID               org/name of the model repo (required)
  MODEL_REVISION         revision to copy (required); a 40-hex commit is used as is, a branch or
                         tag is resolved to its commit once (GET /api/models/<repo>/revision/<rev>)
                         and that commit is copied, so a moving branch cannot mix two commits
  DESTINATION            the snapshot directory: gs://bucket/prefix, file:///path or a plain path
                         (required)
  HF_ENDPOINT            Hub base URL (default https://huggingface.co)
  HF_TOKEN               optional; sent to the Hub (only) as Authorization: Bearer
  ALLOW_PATTERNS         optional comma list of fnmatch globs over repo paths (default: all files;
                         ``*`` also matches ``/``)
  PARALLEL               files copied at once (default 4)
  RETRIES                attempts in a row on transient errors, per request or file; a download
                         attempt that made progress starts the count again (default 5)
  RETRY_BACKOFF_SECONDS  first backoff, doubled per attempt, capped at 60 s (default 2)
  HTTP_TIMEOUT_SECONDS   socket timeout of each request (default 60)
  UPLOAD_CHUNK_BYTES     GCS resumable-upload chunk, a multiple of 256 KiB (default 64 MiB)
  STORAGE_ENDPOINT       Cloud Storage base URL (default https://storage.googleapis.com)
  METADATA_ENDPOINT      metadata server base URL (default http://metadata.google.internal)
  GRANT_WAIT_SECONDS     how long a 403 from Cloud Storage on the first access is waited out, for
                         a bucket grant made just before the Job still propagating (default 600)

The file list comes from the Hub's tree API, ``GET <endpoint>/api/models/<repo>/tree/<commit>?
recursive=true`` (paginated by ``Link: <...>; rel="next"``), whose entries carry the size and
the digest: ``lfs.oid`` (sha256 of the content) for LFS files, ``oid`` (git blob sha1) for the
others. (``/api/models/<repo>/revision/<rev>`` lists ``siblings`` too, but without sizes or
digests unless asked.) Each file is downloaded from ``<endpoint>/<repo>/resolve/<commit>/<path>``
(redirects followed; the token is not forwarded to another host, such as the CDN), resumed with
a Range request after a dropped connection, and refused unless its size and digest match.

A file is complete in the store when its size and its recorded digest (``sha256:<hex>`` or
``git-sha1:<hex>``) equal the Hub's; existing is not enough. Cloud Storage keeps the digest as
the object's custom metadata ``hf-digest`` (``x-goog-meta-hf-digest`` in the XML API), written
in the resumable-upload session that creates the object, so an object never exists without it;
a local store keeps it in a sidecar ``<snapshot>/.stage-weights/<path>.digest``. Writes are
atomic: a temp file renamed into place locally, the final chunk of a resumable upload on GCS.

The marker ``.staged-complete`` (no .json suffix: loaders that pull a snapshot's *.json configs
skip it) is JSON:
``{"model", "revision" (the commit), "files" (count), "bytes", "allowPatterns", "timestamp"}``.
It is removed before a run changes anything and written after every file is verified.

Output: one line per event on stdout (flushed); exit 0 on success, 1 on any failure with one
line ``error: ...`` on stderr.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DEFAULT_STORAGE_ENDPOINT = "https://storage.googleapis.com"
DEFAULT_METADATA_ENDPOINT = "http://metadata.google.internal"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
MARKER_NAME = ".staged-complete"
SIDECAR_DIR = ".stage-weights"
PARTIAL_SUFFIX = ".stage-weights.partial"
DIGEST_METADATA_KEY = "hf-digest"
GCS_CHUNK_ALIGNMENT = 256 * 1024
DEFAULT_UPLOAD_CHUNK_BYTES = 256 * GCS_CHUNK_ALIGNMENT  # 64 MiB: fewer requests, ~128 MiB of memory per copy
READ_BYTES = 1 << 20
MAX_BACKOFF_SECONDS = 60.0
TOKEN_REFRESH_MARGIN_SECONDS = 300
# A bucket grant made just before the Job starts takes a while to reach Cloud Storage (IAM
# propagation: usually a minute, at worst about seven), so a 403 on the first access is waited out.
DEFAULT_GRANT_WAIT_SECONDS = 600
GRANT_POLL_SECONDS = 15.0
PROGRESS_MIN_BYTES = 64 << 20  # files this large report progress ...
PROGRESS_STEP_PERCENT = 5  # ... every 5 % ...
PROGRESS_SECONDS = 30.0  # ... or every 30 s, whichever comes first
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
MODEL_ID_RE = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
HEX_RE = re.compile(r"[0-9a-f]+")
NEXT_LINK_RE = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class StageError(Exception):
    """A failure the operator can act on; its message is the one-line report."""


class TransientError(StageError):
    """A failure worth retrying: 5xx, 429, a reset or a connection closed early."""


class HttpStatusError(StageError):
    """A non-transient HTTP status (4xx): not retried."""

    def __init__(self, method: str, url: str, status: int, detail: str, headers: Mapping[str, str]):
        super().__init__(f"{method} {url}: HTTP {status}{f': {detail}' if detail else ''}")
        self.status = status
        self.detail = detail
        self.headers = headers


# --- Configuration ---------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    model_id: str
    revision: str
    destination: str
    endpoint: str
    token: str | None
    allow_patterns: tuple[str, ...]
    parallel: int
    retries: int
    backoff_seconds: float
    timeout_seconds: float
    upload_chunk_bytes: int
    storage_endpoint: str
    metadata_endpoint: str
    grant_wait_seconds: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        model_id = env.get("MODEL_ID", "").strip()
        if not MODEL_ID_RE.fullmatch(model_id):
            raise StageError(f"MODEL_ID must be a Hugging Face model id such as org/name, not {model_id!r}")
        revision = env.get("MODEL_REVISION", "").strip()
        if not revision:
            raise StageError("MODEL_REVISION is required (the commit sha of the snapshot to stage)")
        destination = env.get("DESTINATION", "").strip()
        if not destination:
            raise StageError("DESTINATION is required (gs://bucket/prefix or a local directory)")
        patterns = tuple(p.strip() for p in env.get("ALLOW_PATTERNS", "").split(",") if p.strip())
        chunk = _int_setting(env, "UPLOAD_CHUNK_BYTES", DEFAULT_UPLOAD_CHUNK_BYTES)
        if chunk % GCS_CHUNK_ALIGNMENT:
            raise StageError(f"UPLOAD_CHUNK_BYTES must be a multiple of {GCS_CHUNK_ALIGNMENT}, not {chunk}")
        return cls(
            model_id=model_id,
            revision=revision,
            destination=destination,
            endpoint=env.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_HF_ENDPOINT,
            token=env.get("HF_TOKEN", "").strip() or None,
            allow_patterns=patterns,
            parallel=_int_setting(env, "PARALLEL", 4),
            retries=_int_setting(env, "RETRIES", 5),
            backoff_seconds=_float_setting(env, "RETRY_BACKOFF_SECONDS", 2.0),
            timeout_seconds=_float_setting(env, "HTTP_TIMEOUT_SECONDS", 60.0),
            upload_chunk_bytes=chunk,
            storage_endpoint=env.get("STORAGE_ENDPOINT", "").rstrip("/") or DEFAULT_STORAGE_ENDPOINT,
            metadata_endpoint=env.get("METADATA_ENDPOINT", "").rstrip("/") or DEFAULT_METADATA_ENDPOINT,
            grant_wait_seconds=_float_setting(env, "GRANT_WAIT_SECONDS", DEFAULT_GRANT_WAIT_SECONDS),
        )


def _int_setting(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise StageError(f"{name} must be a positive integer, not {text!r}")
    return int(text)


def _float_setting(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise StageError(f"{name} must be a number of seconds >= 0, not {text!r}")
    return value


# --- Output ----------------------------------------------------------------------------


def human_bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def count_of(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def human_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class Reporter:
    """One line per event on stdout, flushed; safe to call from the copy threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            print(text, flush=True)


# --- HTTP with bounded retries ---------------------------------------------------------


def origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc


class _SameOriginAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects, carrying Authorization only to the same scheme and host (not to a CDN)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        auth = req.unredirected_hdrs.get("Authorization")
        if new is not None and auth and origin(new.full_url) == origin(req.full_url):
            new.add_unredirected_header("Authorization", auth)
        return new


@dataclass
class Http:
    retries: int
    backoff_seconds: float
    timeout_seconds: float
    reporter: Reporter
    _opener: urllib.request.OpenerDirector = field(init=False)

    def __post_init__(self) -> None:
        self._opener = urllib.request.build_opener(_SameOriginAuthRedirect())

    def open(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: str | None = None,
        body: bytes | None = None,
        expect: Iterable[int] = (200,),
    ) -> HTTPResponse:
        """One attempt; the response (to read and close) if its status is in ``expect``.

        Raises TransientError for what a retry may fix and HttpStatusError for other statuses.
        ``auth`` is the Authorization value, kept off redirects to another host.
        """
        request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
        if auth:
            request.add_unredirected_header("Authorization", auth)
        try:
            response: HTTPResponse = self._opener.open(request, timeout=self.timeout_seconds)
        except urllib.error.HTTPError as error:
            response = error  # type: ignore[assignment]  # an HTTPError is a response too
        except (urllib.error.URLError, OSError, HTTPException) as error:
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            raise TransientError(f"{method} {url}: {reason!r}") from error
        if response.status in set(expect):
            return response
        detail = _error_detail(response)
        response.close()
        if response.status in TRANSIENT_STATUSES or response.status >= 500:
            raise TransientError(f"{method} {url}: HTTP {response.status}{f': {detail}' if detail else ''}")
        raise HttpStatusError(method, url, response.status, detail, dict(response.headers.items()))

    def retry(self, what: str, attempt: Callable[[], T], progress: Callable[[], int] | None = None) -> T:
        """Run ``attempt`` until it succeeds, retrying TransientError with exponential backoff.

        At most ``retries`` attempts in a row; with ``progress`` (bytes done so far), an attempt
        that moved it forward starts the count again, so a long download survives several resets.
        """
        number, mark = 1, progress() if progress else 0
        while True:
            try:
                return attempt()
            except TransientError as error:
                if progress and progress() > mark:
                    number, mark = 1, progress()
                if number >= self.retries:
                    raise StageError(f"{what}: gave up after {self.retries} attempts: {error}") from error
                delay = min(self.backoff_seconds * 2 ** (number - 1), MAX_BACKOFF_SECONDS)
                number += 1
                self.reporter.line(f"retry {what}: attempt {number} of {self.retries} in {delay:.1f} s: {error}")
                time.sleep(delay)

    def json(self, method: str, url: str, *, what: str, **kwargs: Any) -> Any:
        def attempt() -> Any:
            with self.open(method, url, **kwargs) as response:
                return _read_json(response, url)

        return self.retry(what, attempt)


def _read_json(response: HTTPResponse, url: str) -> Any:
    try:
        payload = response.read()
    except (OSError, HTTPException) as error:
        raise TransientError(f"{url}: reading the answer: {error!r}") from error
    try:
        return json.loads(payload)
    except ValueError as error:
        raise StageError(f"{url}: the answer is not JSON: {payload[:200]!r}") from error


def _error_detail(response: HTTPResponse) -> str:
    """The server's own words about an error: Hugging Face's X-Error-Message or a JSON message."""
    header = response.headers.get("X-Error-Message", "")
    if header:
        return header
    try:
        text = response.read(4096).decode("utf-8", "replace")
    except (OSError, HTTPException):
        return ""
    try:
        payload = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:200]
    if isinstance(payload, dict):
        message = payload.get("error", payload.get("message", ""))
        if isinstance(message, dict):  # Cloud Storage: {"error": {"code": ..., "message": ...}}
            message = message.get("message", "")
        return str(message)[:200]
    return ""


# --- The Hub ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HubFile:
    """One file of the revision as the Hub lists it, with the digest to verify."""

    path: str
    size: int
    algorithm: str  # "sha256" (LFS: lfs.oid) or "git-sha1" (the git blob id of a plain file)
    digest: str

    @property
    def recorded_digest(self) -> str:
        return f"{self.algorithm}:{self.digest}"

    def verifier(self) -> Any:
        """A hashlib object that ends equal to ``digest`` for the right content."""
        if self.algorithm == "sha256":
            return hashlib.sha256()
        blob = hashlib.sha1(usedforsecurity=False)
        blob.update(b"blob %d\0" % self.size)
        return blob


def hub_file(entry: Mapping[str, Any]) -> HubFile:
    path = str(entry["path"])
    check_relative_path(path)
    lfs = entry.get("lfs")
    if lfs:
        file = HubFile(path, int(lfs["size"]), "sha256", str(lfs["oid"]).lower())
        expected_length = 64
    else:
        file = HubFile(path, int(entry["size"]), "git-sha1", str(entry["oid"]).lower())
        expected_length = 40
    if len(file.digest) != expected_length or not HEX_RE.fullmatch(file.digest):
        raise StageError(f"{path}: the Hub lists an unusable {file.algorithm} digest {file.digest!r}")
    return file


def check_relative_path(path: str) -> None:
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(part in ("", ".", "..") for part in parts):
        raise StageError(f"refusing the repo path {path!r}: not a plain relative path")
    if parts[0] == SIDECAR_DIR or path == MARKER_NAME:
        raise StageError(f"refusing the repo path {path!r}: the staging step uses that name")


@dataclass(frozen=True)
class Hub:
    endpoint: str
    model_id: str
    token: str | None
    http: Http

    def auth(self, url: str) -> str | None:
        """The token's Authorization value, for the Hub's own origin only."""
        return f"Bearer {self.token}" if self.token and origin(url) == origin(self.endpoint) else None

    def commit_of(self, revision: str) -> str:
        """The commit sha of ``revision``: itself if it is one, else what the Hub resolves it to."""
        if COMMIT_RE.fullmatch(revision):
            return revision
        url = f"{self.endpoint}/api/models/{self.model_id}/revision/{urllib.parse.quote(revision, safe='')}"
        info = self._api(url, revision)
        sha = info.get("sha") if isinstance(info, dict) else None
        if not isinstance(sha, str) or not COMMIT_RE.fullmatch(sha):
            raise StageError(f"{self.model_id}@{revision}: the Hub gave no commit sha for the revision")
        return sha

    def files(self, commit: str) -> list[HubFile]:
        """Every file of the commit, through the paginated tree API."""
        url: str | None = f"{self.endpoint}/api/models/{self.model_id}/tree/{commit}?recursive=true"
        files: list[HubFile] = []
        while url:
            entries, url = self._tree_page(url, commit)
            try:
                files.extend(hub_file(entry) for entry in entries if entry.get("type") == "file")
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise StageError(f"{self.model_id}@{commit}: unexpected tree entry from the Hub: {error!r}") from error
        return sorted(files, key=lambda f: f.path)

    def _tree_page(self, url: str, commit: str) -> tuple[list[dict[str, Any]], str | None]:
        def attempt() -> tuple[list[dict[str, Any]], str | None]:
            with self.http.open("GET", url, auth=self.auth(url), headers={"Accept": "application/json"}) as response:
                entries = _read_json(response, url)
                link = NEXT_LINK_RE.search(response.headers.get("Link", ""))
            if not isinstance(entries, list):
                raise StageError(f"{url}: expected a list of tree entries")
            return entries, urllib.parse.urljoin(url, link.group(1)) if link else None

        try:
            return self.http.retry(f"list {self.model_id}@{commit}", attempt)
        except HttpStatusError as error:
            raise self._refusal(error, commit) from error

    def _api(self, url: str, revision: str) -> Any:
        try:
            return self.http.json(
                "GET",
                url,
                what=f"resolve {self.model_id}@{revision}",
                auth=self.auth(url),
                headers={"Accept": "application/json"},
            )
        except HttpStatusError as error:
            raise self._refusal(error, revision) from error

    def _refusal(self, error: HttpStatusError, revision: str) -> StageError:
        """The one-line explanation of a Hub refusal, naming the model and the revision."""
        said = f" (the Hub says: {error.detail})" if error.detail else ""
        name = f"{self.model_id} revision {revision}"
        if error.status in (401, 403) and not self.token:
            return StageError(
                f"{name}: the Hub refused access (HTTP {error.status}): the repo is gated or private (or does not "
                f"exist), so a Hugging Face token is needed: set serving.hfToken{said}"
            )
        if error.status in (401, 403):
            return StageError(
                f"{name}: the Hub refused the token (HTTP {error.status}): check serving.hfToken and that its "
                f"account has accepted the model's terms{said}"
            )
        if error.status == 404:
            return StageError(f"{name}: not found on {self.endpoint} (HTTP 404: no such repo or revision){said}")
        return StageError(f"{name}: the Hub answered HTTP {error.status}{said}")

    def download(self, commit: str, file: HubFile, offset: int) -> HTTPResponse:
        """One attempt at the file's bytes from ``offset`` on (a 206, or a 200 if Range was ignored)."""
        url = f"{self.endpoint}/{self.model_id}/resolve/{commit}/{urllib.parse.quote(file.path)}"
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        try:
            return self.http.open("GET", url, auth=self.auth(url), headers=headers, expect=(200, 206))
        except HttpStatusError as error:
            hint = ": a Hugging Face token is needed, set serving.hfToken" if error.status in (401, 403) else ""
            raise StageError(f"{file.path}: download refused: {error}{hint}") from error


def select(files: list[HubFile], patterns: tuple[str, ...]) -> list[HubFile]:
    """The files matching any of the ALLOW_PATTERNS globs (all files without patterns)."""
    if not patterns:
        return files
    chosen = [f for f in files if any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]
    if not chosen:
        raise StageError(
            f"ALLOW_PATTERNS {','.join(patterns)} matches none of the {count_of(len(files), 'file')} of the revision"
        )
    return chosen


# --- Stores ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """What the store holds at a path: its size and the digest recorded with it (if any)."""

    size: int
    digest: str | None


def is_complete(recorded: Recorded | None, file: HubFile) -> bool:
    return recorded is not None and recorded.size == file.size and recorded.digest == file.recorded_digest


class Upload(Protocol):
    """A file being written: invisible in the store until commit, gone after abort."""

    def write(self, data: bytes) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


class Store(Protocol):
    """The snapshot directory: files by repo path, each with its recorded digest."""

    @property
    def location(self) -> str: ...

    def prepare(self) -> None: ...

    def recorded(self, path: str) -> Recorded | None: ...

    def begin(self, file: HubFile) -> Upload: ...

    def read_text(self, name: str) -> str | None: ...

    def write_text(self, name: str, text: str) -> None: ...

    def delete(self, name: str) -> None: ...


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@dataclass
class LocalUpload:
    stream: Any
    temp: Path
    target: Path
    sidecar: Path
    digest: str
    size: int

    def write(self, data: bytes) -> None:
        self.stream.write(data)

    def commit(self) -> None:
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        os.replace(self.temp, self.target)
        # The file lands first, its digest second: in between, the old sidecar (if any) does
        # not match the new file's digest, or the new file is what it already described.
        _write_atomically(self.sidecar, json.dumps({"digest": self.digest, "size": self.size}).encode())

    def abort(self) -> None:
        self.stream.close()
        self.temp.unlink(missing_ok=True)


@dataclass(frozen=True)
class LocalStore:
    """A local directory (tests, a mounted volume). Digests live in .stage-weights/<path>.digest."""

    root: Path

    @property
    def location(self) -> str:
        return str(self.root)

    def _sidecar(self, path: str) -> Path:
        return self.root / SIDECAR_DIR / f"{path}.digest"

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for leftover in self.root.rglob(f"*{PARTIAL_SUFFIX}"):  # temp files of a killed run
            leftover.unlink(missing_ok=True)

    def recorded(self, path: str) -> Recorded | None:
        target = self.root / path
        if not target.is_file():
            return None
        size = target.stat().st_size
        try:
            sidecar = json.loads(self._sidecar(path).read_text())
            digest = sidecar["digest"] if sidecar["size"] == size else None
        except (OSError, ValueError, KeyError, TypeError):
            digest = None
        return Recorded(size, digest)

    def begin(self, file: HubFile) -> Upload:
        target = self.root / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL_SUFFIX)
        return LocalUpload(
            os.fdopen(fd, "wb"), Path(temp), target, self._sidecar(file.path), file.recorded_digest, file.size
        )

    def read_text(self, name: str) -> str | None:
        try:
            return (self.root / name).read_text()
        except FileNotFoundError:
            return None

    def write_text(self, name: str, text: str) -> None:
        _write_atomically(self.root / name, text.encode())

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


@dataclass
class MetadataToken:
    """OAuth token of the pod's service account from the (GKE) metadata server, cached until near expiry."""

    http: Http
    endpoint: str
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _token: str = ""
    _expires: float = 0.0

    def authorization(self) -> str:
        with self._lock:
            if time.monotonic() >= self._expires - TOKEN_REFRESH_MARGIN_SECONDS:
                self._token, lifetime = self._fetch()
                self._expires = time.monotonic() + lifetime
            return f"Bearer {self._token}"

    def _fetch(self) -> tuple[str, float]:
        url = self.endpoint + TOKEN_PATH
        try:
            answer = self.http.json(
                "GET", url, what="token from the metadata server", headers={"Metadata-Flavor": "Google"}
            )
            return str(answer["access_token"]), float(answer.get("expires_in", 0))
        except HttpStatusError as error:
            raise StageError(
                f"no token from the metadata server ({error}): the pod needs Workload Identity (GKE metadata "
                "server on its node pool) and a Kubernetes service account with access to the bucket"
            ) from error
        except (KeyError, TypeError, ValueError) as error:
            raise StageError(f"{url}: unexpected token answer: {error!r}") from error


@dataclass
class GcsUpload:
    """A resumable upload session: chunks of the store's chunk size, the object appears with the last one."""

    store: GcsStore
    session: str
    total: int
    label: str
    _buffer: bytearray = field(default_factory=bytearray)
    _offset: int = 0  # bytes Cloud Storage has persisted
    _finished: bool = False

    def write(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) > self.store.chunk_bytes:  # at least one byte waits for commit
            self._send(self.store.chunk_bytes, final=False)

    def commit(self) -> None:
        self._send(len(self._buffer), final=True)

    def abort(self) -> None:
        if self._finished:
            return
        try:
            with self.store.http.open("DELETE", self.session, expect=(200, 204, 404, 410, 499)):
                pass
        except StageError:
            pass  # an abandoned session expires on its own within a week

    def _send(self, length: int, final: bool) -> None:
        """Send the first ``length`` buffered bytes; after a failure, ask what arrived and resend the rest."""
        end = self._offset + length
        total = str(self.total) if final else "*"
        first = True

        def attempt() -> None:
            nonlocal first
            if not first:
                self._put(b"", f"bytes */{total}")
            first = False
            while not self._finished and (self._offset < end or final):
                piece = bytes(self._buffer[: end - self._offset])
                span = f"bytes {self._offset}-{self._offset + len(piece) - 1}/{total}" if piece else f"bytes */{total}"
                self._put(piece, span)

        self.store.http.retry(f"upload {self.label}", attempt)

    def _put(self, piece: bytes, content_range: str) -> None:
        headers = {"Content-Range": content_range, "Content-Type": "application/octet-stream"}
        auth = self.store.token.authorization()
        try:
            response = self.store.http.open(
                "PUT", self.session, auth=auth, headers=headers, body=piece, expect=(200, 201, 308)
            )
        except HttpStatusError as error:
            raise self.store.refusal(error, self.label) from error
        with response:
            if response.status in (200, 201):
                self._finished = True
                self._buffer.clear()
                return
            persisted = re.fullmatch(r"bytes=0-(\d+)", response.headers.get("Range", ""))
        offset = int(persisted.group(1)) + 1 if persisted else 0
        if offset < self._offset:
            raise StageError(f"upload {self.label}: Cloud Storage lost bytes (has {offset}, had {self._offset})")
        del self._buffer[: offset - self._offset]
        self._offset = offset


@dataclass(frozen=True)
class GcsStore:
    """gs://bucket/prefix through the JSON API; each object's hub digest is its metadata hf-digest."""

    bucket: str
    prefix: str
    http: Http
    token: MetadataToken
    endpoint: str
    chunk_bytes: int
    grant_wait_seconds: float

    @property
    def location(self) -> str:
        return f"gs://{self.bucket}/{self.prefix}" if self.prefix else f"gs://{self.bucket}"

    def _name(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def _object_url(self, path: str) -> str:
        bucket, name = urllib.parse.quote(self.bucket, safe=""), urllib.parse.quote(self._name(path), safe="")
        return f"{self.endpoint}/storage/v1/b/{bucket}/o/{name}"

    def _upload_url(self, path: str, upload_type: str) -> str:
        bucket, name = urllib.parse.quote(self.bucket, safe=""), urllib.parse.quote(self._name(path), safe="")
        return f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType={upload_type}&name={name}"

    def refusal(self, error: HttpStatusError, what: str) -> StageError:
        if error.status in (401, 403):
            return StageError(
                f"{what}: Cloud Storage refused (HTTP {error.status}: {error.detail}): the Job's Kubernetes service "
                f"account needs roles/storage.objectUser on gs://{self.bucket} (Workload Identity)"
            )
        return StageError(f"{what}: {error}")

    def prepare(self) -> None:
        """Fail early, before the plan, if the pod has no identity; wait out a grant still propagating."""
        self.token.authorization()
        url = self._object_url(MARKER_NAME) + "?fields=size"
        what = f"access to {self.location}"
        deadline = time.monotonic() + self.grant_wait_seconds
        while True:
            try:
                with self.http.retry(
                    what, lambda: self.http.open("GET", url, auth=self.token.authorization(), expect=(200, 404))
                ):
                    return
            except HttpStatusError as error:
                left = deadline - time.monotonic()
                if error.status != 403 or left <= 0:
                    raise self.refusal(error, what) from error
                delay = min(GRANT_POLL_SECONDS, left)
                self.http.reporter.line(
                    f"wait {what}: Cloud Storage refused (HTTP 403), the bucket grant may still be propagating; "
                    f"again in {delay:.0f} s ({left:.0f} s left)"
                )
                time.sleep(delay)

    def recorded(self, path: str) -> Recorded | None:
        url = self._object_url(path) + "?fields=size,metadata"
        what = f"stat {self.location}/{path}"
        try:
            info = self.http.json("GET", url, what=what, auth=self.token.authorization())
        except HttpStatusError as error:
            if error.status == 404:
                return None
            raise self.refusal(error, what) from error
        digest = (info.get("metadata") or {}).get(DIGEST_METADATA_KEY)
        return Recorded(int(info["size"]), digest)

    def begin(self, file: HubFile) -> Upload:
        label = f"{self.location}/{file.path}"
        metadata = {
            "name": self._name(file.path),
            "contentType": "application/octet-stream",
            "metadata": {DIGEST_METADATA_KEY: file.recorded_digest},
        }
        headers = {
            "Content-Type": "application/json; charset=UTF-8",
            "X-Upload-Content-Type": "application/octet-stream",
            "X-Upload-Content-Length": str(file.size),
        }

        def attempt() -> str:
            url = self._upload_url(file.path, "resumable")
            auth = self.token.authorization()
            with self.http.open(
                "POST", url, auth=auth, headers=headers, body=json.dumps(metadata).encode()
            ) as response:
                session = response.headers.get("Location", "")
            if not session:
                raise StageError(f"start upload {label}: Cloud Storage gave no session URI")
            return session

        try:
            session = self.http.retry(f"start upload {label}", attempt)
        except HttpStatusError as error:
            raise self.refusal(error, f"start upload {label}") from error
        return GcsUpload(self, session, file.size, label)

    def read_text(self, name: str) -> str | None:
        what = f"read {self.location}/{name}"

        def attempt() -> bytes:
            with self.http.open(
                "GET", self._object_url(name) + "?alt=media", auth=self.token.authorization()
            ) as response:
                return response.read()

        try:
            return self.http.retry(what, attempt).decode("utf-8", "replace")
        except HttpStatusError as error:
            if error.status == 404:
                return None
            raise self.refusal(error, what) from error

    def write_text(self, name: str, text: str) -> None:
        what = f"write {self.location}/{name}"

        def attempt() -> None:
            url = self._upload_url(name, "media")
            headers = {"Content-Type": "application/json"}
            with self.http.open("POST", url, auth=self.token.authorization(), headers=headers, body=text.encode()):
                pass

        try:
            self.http.retry(what, attempt)
        except HttpStatusError as error:
            raise self.refusal(error, what) from error

    def delete(self, name: str) -> None:
        what = f"delete {self.location}/{name}"

        def attempt() -> None:
            url = self._object_url(name)
            with self.http.open("DELETE", url, auth=self.token.authorization(), expect=(200, 204, 404)):
                pass

        try:
            self.http.retry(what, attempt)
        except HttpStatusError as error:
            raise self.refusal(error, what) from error


def open_store(settings: Settings, http: Http) -> Store:
    """The store DESTINATION names: gs://bucket/prefix, file:///path or a plain path."""
    destination = settings.destination
    if destination.startswith("gs://"):
        bucket, _, prefix = destination[len("gs://") :].partition("/")
        if not bucket:
            raise StageError(f"DESTINATION {destination!r} names no bucket")
        token = MetadataToken(http, settings.metadata_endpoint)
        return GcsStore(
            bucket,
            prefix.strip("/"),
            http,
            token,
            settings.storage_endpoint,
            settings.upload_chunk_bytes,
            settings.grant_wait_seconds,
        )
    if destination.startswith("file://"):
        parts = urllib.parse.urlsplit(destination)
        if parts.netloc not in ("", "localhost"):
            raise StageError(f"DESTINATION {destination!r}: a file:// URL names a local path, not a host")
        return LocalStore(Path(urllib.parse.unquote(parts.path)))
    if "://" in destination:
        raise StageError(f"DESTINATION {destination!r}: use gs://bucket/prefix, file:///path or a plain path")
    return LocalStore(Path(destination))


# --- Copying ---------------------------------------------------------------------------


@dataclass
class Totals:
    """The run's counts, shared by the copy threads."""

    files: int
    bytes: int
    files_done: int = 0
    bytes_done: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, size: int) -> tuple[int, int]:
        with self._lock:
            self.files_done += 1
            self.bytes_done += size
            return self.files_done, self.bytes_done


@dataclass
class FileProgress:
    """Byte progress of one large file: a line every PROGRESS_STEP_PERCENT or PROGRESS_SECONDS."""

    file: HubFile
    reporter: Reporter
    started: float = field(default_factory=time.monotonic)
    received: int = 0
    _last_line: float = field(default_factory=time.monotonic)
    _last_step: int = 0

    def advance(self, count: int) -> None:
        self.received += count
        if self.file.size < PROGRESS_MIN_BYTES or self.received >= self.file.size:
            return
        now = time.monotonic()
        step = self.received * 100 // self.file.size // PROGRESS_STEP_PERCENT
        if step > self._last_step or now - self._last_line >= PROGRESS_SECONDS:
            self._last_step, self._last_line = step, now
            rate = self.received / max(now - self.started, 1e-6)
            self.reporter.line(
                f"progress {self.file.path}: {human_bytes(self.received)} of {human_bytes(self.file.size)} "
                f"({self.received * 100 // self.file.size}%), {human_bytes(rate)}/s"
            )


@dataclass
class Copier:
    hub: Hub
    commit: str
    store: Store
    http: Http
    reporter: Reporter
    totals: Totals

    def copy(self, file: HubFile) -> None:
        """Stream one file from the Hub into the store, verified before it becomes visible."""
        self.reporter.line(f"copy {file.path}: {human_bytes(file.size)}")
        progress = FileProgress(file, self.reporter)
        upload = self.store.begin(file)
        try:
            verifier = self._transfer(file, upload, progress)
            actual = verifier.hexdigest()
            if actual != file.digest:
                raise StageError(
                    f"{file.path}: refused, the download's {file.algorithm} is {actual} but the Hub lists {file.digest}"
                )
            upload.commit()
        except BaseException:
            upload.abort()
            raise
        elapsed = time.monotonic() - progress.started
        files_done, bytes_done = self.totals.add(file.size)
        self.reporter.line(
            f"done {file.path}: {human_bytes(file.size)} in {human_seconds(elapsed)} "
            f"({human_bytes(file.size / max(elapsed, 1e-6))}/s); {files_done} of {self.totals.files} files, "
            f"{human_bytes(bytes_done)} of {human_bytes(self.totals.bytes)}"
        )

    def _transfer(self, file: HubFile, upload: Upload, progress: FileProgress) -> Any:
        """Download with retries, resuming by Range where the last attempt stopped."""
        verifier = file.verifier()

        def attempt() -> None:
            with self.hub.download(self.commit, file, progress.received) as response:
                skip = self._bytes_to_skip(file, response, progress.received)
                while True:
                    try:
                        chunk = response.read(READ_BYTES)
                    except (OSError, HTTPException) as error:
                        raise TransientError(
                            f"{file.path}: connection lost after {progress.received} bytes: {error!r}"
                        ) from error
                    if not chunk:
                        break
                    if skip:
                        chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                    if progress.received + len(chunk) > file.size:
                        raise StageError(f"{file.path}: refused, the Hub sent more than the {file.size} bytes it lists")
                    verifier.update(chunk)
                    upload.write(chunk)
                    progress.advance(len(chunk))
            if progress.received < file.size:
                raise TransientError(f"{file.path}: connection closed after {progress.received} of {file.size} bytes")

        self.http.retry(f"download {file.path}", attempt, progress=lambda: progress.received)
        return verifier

    @staticmethod
    def _bytes_to_skip(file: HubFile, response: HTTPResponse, offset: int) -> int:
        """0 for a 206 that starts at ``offset``; ``offset`` for a 200 (the server ignored Range)."""
        if response.status == 200:
            return offset
        start = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
        if not start or int(start.group(1)) != offset:
            raise StageError(
                f"{file.path}: asked for bytes from {offset}, got {response.headers.get('Content-Range')!r}"
            )
        return 0


def copy_all(copier: Copier, files: list[HubFile], parallel: int) -> list[str]:
    """Copy the files, ``parallel`` at once; after a failure no new file starts. The failures' messages."""
    failures: list[str] = []
    stop = threading.Event()

    def one(file: HubFile) -> None:
        if stop.is_set():
            return
        try:
            copier.copy(file)
        except (StageError, OSError) as error:  # OSError: writing to a local store
            stop.set()
            failures.append(str(error))
            copier.reporter.line(f"failed {file.path}: {error}")

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="copy") as pool:
        list(pool.map(one, files))
    return failures


# --- The run ---------------------------------------------------------------------------


def marker_text(settings: Settings, commit: str, files: list[HubFile], timestamp: str) -> str:
    marker = {
        "model": settings.model_id,
        "revision": commit,
        "files": len(files),
        "bytes": sum(f.size for f in files),
        "allowPatterns": list(settings.allow_patterns),
        "timestamp": timestamp,
    }
    return json.dumps(marker, indent=2) + "\n"


def marker_is_current(existing: str | None, expected: str) -> bool:
    """The marker in the store says the same as ``expected`` but for the timestamp."""
    try:
        old, new = json.loads(existing or ""), json.loads(expected)
    except ValueError:
        return False
    return isinstance(old, dict) and {k: v for k, v in old.items() if k != "timestamp"} == {
        k: v for k, v in new.items() if k != "timestamp"
    }


def stale_reason(recorded: Recorded | None, file: HubFile) -> str | None:
    """Why a file present in the store is not complete (None when it is absent)."""
    if recorded is None:
        return None
    if recorded.size != file.size:
        return f"{recorded.size} of {file.size} bytes"
    if recorded.digest is None:
        return "no recorded digest"
    return f"recorded digest {recorded.digest}, the Hub lists {file.recorded_digest}"


@dataclass(frozen=True)
class Plan:
    """The files of the revision (after ALLOW_PATTERNS) and those the store lacks."""

    commit: str
    files: list[HubFile]
    todo: list[HubFile]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def todo_bytes(self) -> int:
        return sum(f.size for f in self.todo)


def make_plan(settings: Settings, hub: Hub, store: Store, reporter: Reporter) -> Plan:
    """List the revision on the Hub and compare each file with what the store records."""
    commit = hub.commit_of(settings.revision)
    if commit != settings.revision:
        reporter.line(f"revision {settings.revision} is commit {commit}")
    files = select(hub.files(commit), settings.allow_patterns)
    store.prepare()
    with ThreadPoolExecutor(max_workers=settings.parallel, thread_name_prefix="stat") as pool:
        records = list(pool.map(lambda f: store.recorded(f.path), files))
    todo = []
    for file, recorded in zip(files, records, strict=True):
        if is_complete(recorded, file):
            continue
        todo.append(file)
        reason = stale_reason(recorded, file)
        if reason:
            reporter.line(f"stale {file.path}: {reason}; copying it again")
    plan = Plan(commit, files, todo)
    done_files, done_bytes = len(files) - len(todo), plan.total_bytes - plan.todo_bytes
    reporter.line(
        f"plan: {count_of(len(files), 'file')}, {human_bytes(plan.total_bytes)}; already complete: "
        f"{count_of(done_files, 'file')}, {human_bytes(done_bytes)}; to copy: {count_of(len(todo), 'file')}, "
        f"{human_bytes(plan.todo_bytes)}{f' ({settings.parallel} at once)' if todo else ''}"
    )
    return plan


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stage(settings: Settings, http: Http, store: Store, reporter: Reporter) -> None:
    """Copy what the store lacks of the revision, then write the marker."""
    started = time.monotonic()
    hub = Hub(settings.endpoint, settings.model_id, settings.token, http)
    token = " (with HF_TOKEN)" if settings.token else ""
    reporter.line(f"stage {settings.model_id}@{settings.revision} from {settings.endpoint}{token} to {store.location}")
    plan = make_plan(settings, hub, store, reporter)
    marker_location = f"{store.location}/{MARKER_NAME}"

    if not plan.todo:
        marker = marker_text(settings, plan.commit, plan.files, now_utc())
        if not marker_is_current(store.read_text(MARKER_NAME), marker):
            store.write_text(MARKER_NAME, marker)
        reporter.line(
            f"summary: all {count_of(len(plan.files), 'file')} ({human_bytes(plan.total_bytes)}) already complete "
            f"in {store.location}; nothing to copy; marker {marker_location}"
        )
        return

    store.delete(MARKER_NAME)  # the store is about to change: no marker until it is complete again
    copier = Copier(hub, plan.commit, store, http, reporter, Totals(len(plan.todo), plan.todo_bytes))
    failures = copy_all(copier, plan.todo, settings.parallel)
    if failures:
        more = f" (and {len(failures) - 1} more failed)" if len(failures) > 1 else ""
        raise StageError(f"{failures[0]}{more}")
    store.write_text(MARKER_NAME, marker_text(settings, plan.commit, plan.files, now_utc()))
    reporter.line(
        f"summary: copied {count_of(len(plan.todo), 'file')} ({human_bytes(plan.todo_bytes)}) in "
        f"{human_seconds(time.monotonic() - started)}; {len(plan.files) - len(plan.todo)} already complete; "
        f"marker {marker_location}"
    )


def main(environ: Mapping[str, str]) -> int:
    reporter = Reporter()
    try:
        settings = Settings.from_env(environ)
        http = Http(settings.retries, settings.backoff_seconds, settings.timeout_seconds, reporter)
        stage(settings, http, open_store(settings, http), reporter)
    except StageError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    except Exception as error:  # a bug: the traceback goes to the log, the one line to stderr
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        print(f"error: unexpected {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
