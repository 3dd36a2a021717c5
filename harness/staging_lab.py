"""Real local servers for the weights-staging tests and benchmark, all on 127.0.0.1.

- ``HubStandIn``: the part of the Hugging Face Hub that staging calls. Two HTTP servers on two
  ports (two origins): the Hub itself answers ``GET /api/models/<repo>/revision/<rev>`` (a branch
  to its commit), ``GET /api/models/<repo>/tree/<commit>?recursive=...`` (the file list with sizes,
  git blob ids and LFS sha256, paginated by ``Link: <...>; rel="next"`` as the Hub does) and
  ``HEAD``/``GET /<repo>/resolve/<commit>/<path>`` (for an LFS file a 302 to the CDN with
  ``X-Linked-Etag`` and ``X-Linked-Size``, for a plain file the bytes with its git blob id as ETag,
  ``X-Repo-Commit`` on both); the CDN serves the LFS bytes with Range support. Files are served
  from disk with sendfile, so gigabytes cost no memory. Each request is recorded (server, method,
  path, headers), and faults can be injected: an API status for every API call, a connection
  dropped after N bytes, 503s from the CDN, other bytes than the listed ones, a slow CDN, a CDN
  answer paused halfway until the test releases it, and Xet hashes in the tree (the stand-in serves
  no Xet itself, so huggingface_hub falls back to HTTP for those files).
- ``FakeGcs``: the fake-gcs-server binary (lab/build-fake-gcs.sh builds it) with a filesystem
  backend in a temporary directory, its URL for ``STORAGE_EMULATOR_HOST``.
- ``RefusingProxy``: a reverse proxy in front of the emulator that answers 403 to the first N
  requests (a bucket grant still propagating) and records every request's headers; it rewrites the
  emulator's URL in a ``Location`` answer to its own, so the chunks of a resumable upload pass it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKE_GCS_BUILD = REPO_ROOT / "lab" / "build-fake-gcs.sh"
HOLD_SECONDS = 30  # the longest a held CDN answer waits for the test to release it
FAKE_GCS_ENV = "FAKE_GCS_SERVER"  # the binary's path; make staging-test and staging-bench set it


def git_blob_sha1(path: Path) -> str:
    hasher = hashlib.sha1(b"blob %d\0" % path.stat().st_size, usedforsecurity=False)
    with path.open("rb") as stream:
        while piece := stream.read(8 << 20):
            hasher.update(piece)
    return hasher.hexdigest()


def sha256_of(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as stream:
        while piece := stream.read(8 << 20):
            hasher.update(piece)
    return hasher.hexdigest()


@dataclass
class Request:
    server: str  # "hub", "cdn" or "gcs"
    method: str
    path: str
    headers: dict[str, str]  # names in lower case (HTTP/2-style clients send them so)

    @classmethod
    def of(cls, server: str, handler: BaseHTTPRequestHandler) -> Request:
        headers = {name.lower(): value for name, value in handler.headers.items()}
        return cls(server, handler.command, handler.path, headers)


@dataclass
class HubRepo:
    """One model repo at one commit: repo path -> file on disk; LFS files are served by the CDN."""

    model_id: str
    commit: str
    files: dict[str, Path]
    lfs: set[str]
    branches: dict[str, str] = field(default_factory=dict)
    page_size: int = 1000  # tree entries per page (the Hub: 1000)
    api_status: int | None = None  # every API call answers this status (401: a gated repo without a token)
    drop_after: dict[str, list[int]] = field(default_factory=dict)  # path -> bytes sent before each drop
    served: dict[str, Path] = field(default_factory=dict)  # path -> other bytes than the listed ones
    cdn_failures: dict[str, int] = field(default_factory=dict)  # path -> CDN answers of 503 before it serves
    cdn_delay_seconds: float = 0.0  # each CDN answer waits this long first (a slow link, to stop a copy halfway)
    # path -> byte at which the CDN's first answer for it pauses until cdn_release is set (at most HOLD_SECONDS)
    cdn_hold: dict[str, int] = field(default_factory=dict)
    cdn_release: threading.Event = field(default_factory=threading.Event)
    xet: set[str] = field(default_factory=set)  # paths the tree lists with a Xet hash (the bytes still come over HTTP)
    requests: list[Request] = field(default_factory=list)
    _digests: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (git blob sha1, sha256)

    def digests(self, path: str) -> tuple[str, str]:
        if path not in self._digests:
            file = self.files[path]
            self._digests[path] = (git_blob_sha1(file), sha256_of(file) if path in self.lfs else "")
        return self._digests[path]

    def expected_digest(self, path: str) -> str:
        """What staging records with the object: sha256 of an LFS file, the git blob id of another."""
        blob, sha256 = self.digests(path)
        return f"sha256:{sha256}" if path in self.lfs else f"git-sha1:{blob}"

    def entries(self) -> list[dict[str, Any]]:
        folders = sorted({path.rsplit("/", 1)[0] for path in self.files if "/" in path})
        entries: list[dict[str, Any]] = [{"type": "directory", "path": f, "oid": "0" * 40, "size": 0} for f in folders]
        for path in sorted(self.files):
            blob, sha256 = self.digests(path)
            size = self.files[path].stat().st_size
            entry: dict[str, Any] = {"type": "file", "path": path, "size": size, "oid": blob}
            if path in self.lfs:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
                entry["oid"] = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer, usedforsecurity=False).hexdigest()
                entry["lfs"] = {"oid": sha256, "size": size, "pointerSize": len(pointer)}
            if path in self.xet:
                entry["xetHash"] = hashlib.sha256(b"xet " + sha256.encode()).hexdigest()
            entries.append(entry)
        return entries

    def seen(self, server: str) -> list[Request]:
        return [r for r in list(self.requests) if r.server == server]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_kind = ""
    repo: HubRepo
    cdn_url = ""
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send(status, body, {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"})

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self.repo.requests.append(Request.of(self.server_kind, self))
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        model = self.repo.model_id
        if self.server_kind == "cdn":
            time.sleep(self.repo.cdn_delay_seconds)
            file = path.removeprefix("/cdn/")
            with self.lock:
                failing = self.repo.cdn_failures.get(file, 0)
                self.repo.cdn_failures[file] = max(0, failing - 1)
            if failing:
                return self.error(503, "ServiceUnavailable", "the CDN is overloaded")
            return self.serve_file(file, {})
        if path.startswith(f"/api/models/{model}/"):
            return self.serve_api(path.removeprefix(f"/api/models/{model}/"), urllib.parse.parse_qs(url.query))
        if path.startswith(f"/{model}/resolve/"):
            revision, _, file = path.removeprefix(f"/{model}/resolve/").partition("/")
            return self.resolve(revision, file)
        return self.error(404, "RepoNotFound", "Repository not found")

    def serve_api(self, rest: str, query: dict[str, list[str]]) -> None:
        if self.repo.api_status is not None:
            message = f"Access to model {self.repo.model_id} is restricted. You must be authenticated to access it."
            return self.error(self.repo.api_status, "GatedRepo", message)
        kind, _, revision = rest.partition("/")
        if kind == "revision" and revision in ({self.repo.commit} | set(self.repo.branches)):
            sha = self.repo.branches.get(revision, self.repo.commit)
            return self.send(200, json.dumps({"id": self.repo.model_id, "sha": sha}).encode())
        if kind != "tree" or revision != self.repo.commit:
            return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        entries = self.repo.entries()
        if query.get("recursive", ["false"])[0].lower() != "true":
            entries = [e for e in entries if "/" not in e["path"]]
        cursor = int(query.get("cursor", ["0"])[0])
        page = entries[cursor : cursor + self.repo.page_size]
        headers = {"Content-Type": "application/json"}
        if cursor + self.repo.page_size < len(entries):
            following = urllib.parse.urlencode({**{k: v[0] for k, v in query.items()}, "cursor": cursor + len(page)})
            headers["Link"] = (
                f'<http://{self.headers["Host"]}{urllib.parse.urlsplit(self.path).path}?{following}>; rel="next"'
            )
        self.send(200, json.dumps(page).encode(), headers)

    def resolve(self, revision: str, file: str) -> None:
        commit = self.repo.branches.get(revision, revision)
        if commit != self.repo.commit or file not in self.repo.files:
            return self.error(404, "EntryNotFound", f"{file} does not exist at {revision}")
        blob, sha256 = self.repo.digests(file)
        size = self.repo.files[file].stat().st_size
        headers = {"X-Repo-Commit": commit}
        if file in self.repo.lfs:
            headers |= {
                "Location": f"{self.cdn_url}/cdn/{urllib.parse.quote(file)}",
                "X-Linked-Etag": f'"{sha256}"',
                "X-Linked-Size": str(size),
                "ETag": f'"{blob}"',
            }
            return self.send(302, b"", headers)
        return self.serve_file(file, headers | {"ETag": f'"{blob}"'})

    def serve_file(self, file: str, headers: dict[str, str]) -> None:
        source = self.repo.served.get(file, self.repo.files.get(file))
        if source is None:
            return self.error(404, "EntryNotFound", file)
        size = source.stat().st_size
        start, status = 0, 200
        if ranged := self.headers.get("Range", ""):
            start, status = int(ranged.removeprefix("bytes=").split("-")[0]), 206
            headers["Content-Range"] = f"bytes {start}-{size - 1}/{size}"
        self.send_response(status)
        for name, value in (headers | {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        if self.command == "HEAD":
            return
        with self.lock:
            drops = self.repo.drop_after.get(file, [])
            cut = drops.pop(0) if drops else None
            hold = self.repo.cdn_hold.pop(file, None) if self.server_kind == "cdn" else None
        with source.open("rb") as stream:
            if hold is not None and start < hold < size and cut is None:
                self.connection.sendfile(stream, start, hold - start)
                self.repo.cdn_release.wait(HOLD_SECONDS)
                start = hold
            if cut is None:
                self.connection.sendfile(stream, start, size - start)
                return
            self.connection.sendfile(stream, start, max(0, min(cut, size) - start))
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


def serve_http(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@contextlib.contextmanager
def hub_stand_in(repo: HubRepo) -> Iterator[str]:
    """Serve ``repo``: the Hub's URL (for HF_ENDPOINT), its CDN on another port."""
    cdn_handler = type("CdnHandler", (_Handler,), {"server_kind": "cdn", "repo": repo})
    cdn, cdn_url = serve_http(cdn_handler)
    hub_handler = type("HubHandler", (_Handler,), {"server_kind": "hub", "repo": repo, "cdn_url": cdn_url})
    hub, hub_url = serve_http(hub_handler)
    try:
        yield hub_url
    finally:
        for server in (hub, cdn):
            server.shutdown()
            server.server_close()


# --- Cloud Storage: the emulator -------------------------------------------------------------


def fake_gcs_binary() -> Path:
    """The fake-gcs-server binary: $FAKE_GCS_SERVER, else what lab/build-fake-gcs.sh built (built if missing)."""
    if given := os.environ.get(FAKE_GCS_ENV):
        binary = Path(given)
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"{FAKE_GCS_ENV}={given} is not an executable (build it with {FAKE_GCS_BUILD})")
        return binary
    built = subprocess.run([str(FAKE_GCS_BUILD)], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise RuntimeError(f"{FAKE_GCS_BUILD} failed (exit {built.returncode}):\n{built.stderr[-3000:]}")
    return Path(built.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class FakeGcs:
    url: str  # http://127.0.0.1:<port>, for STORAGE_EMULATOR_HOST
    root: Path  # the filesystem backend's directory
    process: subprocess.Popen[bytes]

    def create_bucket(self, name: str) -> None:
        body = json.dumps({"name": name}).encode()
        request = urllib.request.Request(
            f"{self.url}/storage/v1/b?project=test",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def objects(self, bucket: str, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every object under ``prefix``: name -> the JSON API's object resource (size, metadata, updated, ...)."""
        found: dict[str, dict[str, Any]] = {}
        token = ""
        while True:
            query = urllib.parse.urlencode({"prefix": prefix, **({"pageToken": token} if token else {})})
            with urllib.request.urlopen(f"{self.url}/storage/v1/b/{bucket}/o?{query}", timeout=30) as answer:
                page = json.load(answer)
            found |= {item["name"]: item for item in page.get("items", [])}
            token = page.get("nextPageToken", "")
            if not token:
                return found

    def delete(self, bucket: str, name: str) -> None:
        quoted = urllib.parse.quote(name, safe="")
        request = urllib.request.Request(f"{self.url}/storage/v1/b/{bucket}/o/{quoted}", method="DELETE")
        with urllib.request.urlopen(request, timeout=30):
            pass

    def read(self, bucket: str, name: str) -> bytes:
        quoted = urllib.parse.quote(name, safe="")
        with urllib.request.urlopen(
            f"{self.url}/download/storage/v1/b/{bucket}/o/{quoted}?alt=media", timeout=60
        ) as answer:
            data: bytes = answer.read()
            return data


@contextlib.contextmanager
def fake_gcs(binary: Path | None = None) -> Iterator[FakeGcs]:
    """fake-gcs-server on 127.0.0.1 with a filesystem backend in a temporary directory, stopped after."""
    binary = binary or fake_gcs_binary()
    root = Path(tempfile.mkdtemp(prefix="fake-gcs-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    arguments = [str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "filesystem"]
    arguments += ["-filesystem-root", str(root / "data"), "-external-url", url, "-log-level", "error"]
    log = (root / "server.log").open("wb")
    process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_internal/healthcheck", timeout=1):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"fake-gcs-server did not start: {(root / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.05)
        yield FakeGcs(url, root, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class RefusingProxy:
    """Forwards to ``target``, answering 403 to the first ``refuse`` requests; records each request."""

    target: str
    refuse: int
    requests: list[Request] = field(default_factory=list)


@contextlib.contextmanager
def refusing_proxy(target: str, refuse: int) -> Iterator[tuple[str, RefusingProxy]]:
    state = RefusingProxy(target, refuse)
    upstream = urllib.parse.urlsplit(target)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def forward(self) -> None:
            state.requests.append(Request.of("gcs", self))
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if len(state.requests) <= state.refuse:
                refusal = json.dumps({"error": {"code": 403, "message": "caller does not have storage.objects.get"}})
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(refusal)))
                self.end_headers()
                self.wfile.write(refusal.encode())
                return
            connection = http.client.HTTPConnection(upstream.hostname or "", upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() == "location":  # a resumable upload's session URL: its chunks come here too
                    value = value.replace(state.target.rstrip("/"), f"http://{self.headers['Host']}", 1)
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            connection.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = forward

    server, url = serve_http(Forward)
    try:
        yield url, state
    finally:
        server.shutdown()
        server.server_close()
