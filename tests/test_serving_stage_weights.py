"""The weights-staging script (manifests/serving/stage_weights.py), run for real (in a fresh
interpreter, or its main() in this one) against a stub of the Hugging Face Hub (paginated tree
API, resolve redirects to a CDN on another origin) and a stub of Cloud Storage with its metadata
server, all on 127.0.0.1, with a temporary directory or the stub bucket as the store; and its
Job base."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import re
import subprocess
import sys
import threading
import types
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.manifests import container, load_document
from components.tpu.topology import ACCELERATOR_NODE_LABEL
from components.workloads.serving import config as serving_config
from components.workloads.serving.objects import HF_TOKEN_SECRET_KEY, HF_TOKEN_SECRET_NAME
from tests.crd_schemas import core_errors

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "manifests" / "serving" / "stage_weights.py"
JOB_BASE = "serving/weights-staging-job.yaml"

MODEL = "acme/tiny-model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
WEIGHTS = "model-00001-of-00001.safetensors"
GCS_TOKEN = "fake-gcs-token"
CHUNK = 256 * 1024  # the smallest resumable-upload chunk Cloud Storage takes


def repo_files() -> dict[str, bytes]:
    """A small repo: one LFS file of three 256 KiB upload chunks, plain files, one in a folder."""
    return {
        WEIGHTS: bytes(range(256)) * 2600,  # 665,600 bytes
        "config.json": b'{"model_type": "tiny"}\n',
        "tokenizer/tokenizer.json": b'{"version": "1.0"}\n',
        "README.md": b"# tiny\n",
    }


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


# --- The Hub stub ----------------------------------------------------------------------


@dataclass
class HubState:
    files: dict[str, bytes] = field(default_factory=repo_files)
    lfs: set[str] = field(default_factory=lambda: {WEIGHTS})
    served: dict[str, bytes] = field(default_factory=dict)  # bytes the CDN sends instead of files[path]
    branches: dict[str, str] = field(default_factory=dict)
    api_status: int | None = None  # answer every API call with this status
    drop_after: dict[str, list[int]] = field(default_factory=dict)  # path -> body bytes sent before each drop
    page_size: int = 2
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # (server, path, headers)
    cdn_url: str = ""

    def entries(self) -> list[dict[str, Any]]:
        folders = sorted({path.rsplit("/", 1)[0] for path in self.files if "/" in path})
        entries: list[dict[str, Any]] = [{"type": "directory", "path": f, "oid": "0" * 40, "size": 0} for f in folders]
        for path, content in sorted(self.files.items()):
            entry: dict[str, Any] = {"type": "file", "path": path, "size": len(content), "oid": git_blob_sha1(content)}
            if path in self.lfs:
                pointer = (
                    f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(content).hexdigest()}\n"
                )
                entry["oid"] = git_blob_sha1(pointer.encode())
                entry["lfs"] = {"oid": hashlib.sha256(content).hexdigest(), "size": len(content), "pointerSize": 134}
            entries.append(entry)
        return entries

    def hub_requests(self, kind: str) -> list[tuple[str, dict[str, str]]]:
        return [(path, headers) for server, path, headers in self.requests if server == kind]


class StubHandler(BaseHTTPRequestHandler):
    server_kind = ""  # "hub" or "cdn"
    state: HubState

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        self.state.requests.append((self.server_kind, self.path, dict(self.headers.items())))
        path = urllib.parse.unquote(url.path)
        if self.server_kind == "cdn":
            return self.serve_file(path.removeprefix("/cdn/"))
        if path.startswith(f"/api/models/{MODEL}/"):
            return self.serve_api(path.removeprefix(f"/api/models/{MODEL}/"), urllib.parse.parse_qs(url.query))
        if path.startswith(f"/{MODEL}/resolve/"):
            revision, _, file = path.removeprefix(f"/{MODEL}/resolve/").partition("/")
            if revision != COMMIT or file not in self.state.files:
                return self.send(404, b"Entry not found", {"X-Error-Code": "EntryNotFound"})
            return self.send(302, headers={"Location": f"{self.state.cdn_url}/cdn/{urllib.parse.quote(file)}"})
        return self.send(404, b"Repository not found", {"X-Error-Code": "RepoNotFound"})

    def serve_api(self, rest: str, query: dict[str, list[str]]) -> None:
        if self.state.api_status is not None:
            message = "Access to model acme/tiny-model is restricted. You must be authenticated to access it."
            return self.send(
                self.state.api_status, json.dumps({"error": message}).encode(), {"X-Error-Message": message}
            )
        kind, _, revision = rest.partition("/")
        if kind == "revision" and revision in self.state.branches:
            return self.send(200, json.dumps({"id": MODEL, "sha": self.state.branches[revision]}).encode())
        if kind != "tree" or revision != COMMIT or query.get("recursive") != ["true"]:
            message = f"Invalid rev id: {revision}"
            return self.send(404, json.dumps({"error": message}).encode(), {"X-Error-Code": "RevisionNotFound"})
        entries = self.state.entries()
        cursor = int(query.get("cursor", ["0"])[0])
        page = entries[cursor : cursor + self.state.page_size]
        headers = {"Content-Type": "application/json"}
        if cursor + self.state.page_size < len(entries):
            host = f"http://{self.headers['Host']}"
            headers["Link"] = (
                f'<{host}/api/models/{MODEL}/tree/{COMMIT}?recursive=true&cursor={cursor + self.state.page_size}>; rel="next"'
            )
        return self.send(200, json.dumps(page).encode(), headers)

    def serve_file(self, file: str) -> None:
        content = self.state.served.get(file, self.state.files[file])
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if match:
            start = int(match.group(1))
        body = content[start:]
        self.send_response(206 if match else 200)
        if match:
            self.send_header("Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        drops = self.state.drop_after.get(file)
        if drops:  # the next attempts: part of the body, then the connection closes
            self.wfile.write(body[: drops.pop(0)])
            self.close_connection = True
            return
        self.wfile.write(body)


# --- The Cloud Storage stub (JSON API, resumable uploads) and the metadata server ----------


@dataclass
class GcsState:
    objects: dict[str, tuple[bytes, dict[str, str]]] = field(default_factory=dict)  # name -> content, metadata
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_puts: int = 0  # the next chunk PUTs that persist their bytes but answer 503
    forbidden_requests: int = 0  # the next requests that answer 403 (a bucket grant still propagating)
    puts: list[str] = field(default_factory=list)  # Content-Range of every chunk PUT
    token_requests: int = 0
    accepted_token: str = GCS_TOKEN  # the token the buckets accept (the metadata server hands out GCS_TOKEN)


class GcsHandler(BaseHTTPRequestHandler):
    state: GcsState

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def authorized(self) -> bool:
        if self.state.forbidden_requests:
            self.state.forbidden_requests -= 1
            self.send(
                403, json.dumps({"error": {"code": 403, "message": "does not have storage.objects.get"}}).encode()
            )
            return False
        if self.headers.get("Authorization") == f"Bearer {self.state.accepted_token}":
            return True
        self.send(401, json.dumps({"error": {"code": 401, "message": "Invalid Credentials"}}).encode())
        return False

    def object_name(self) -> tuple[str, dict[str, list[str]]]:
        url = urllib.parse.urlsplit(self.path)
        return urllib.parse.unquote(url.path.split("/o/", 1)[1]), urllib.parse.parse_qs(url.query)

    def do_GET(self) -> None:
        if self.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.send(403, b"Missing Metadata-Flavor:Google header")
            self.state.token_requests += 1
            return self.send(200, json.dumps({"access_token": GCS_TOKEN, "expires_in": 3599}).encode())
        if not self.authorized():
            return None
        name, query = self.object_name()
        if name not in self.state.objects:
            return self.send(404, json.dumps({"error": {"code": 404, "message": "No such object"}}).encode())
        content, metadata = self.state.objects[name]
        if query.get("alt") == ["media"]:
            return self.send(200, content)
        return self.send(200, json.dumps({"size": str(len(content)), "metadata": metadata}).encode())

    def do_POST(self) -> None:
        if not self.authorized():
            return None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        body = self.body()
        if query["uploadType"] == ["media"]:
            self.state.objects[query["name"][0]] = (body, {})
            return self.send(200, b"{}")
        resource = json.loads(body)
        assert resource["name"] == query["name"][0]
        session = str(len(self.state.sessions))
        self.state.sessions[session] = {
            "name": resource["name"],
            "metadata": resource["metadata"],
            "total": int(self.headers["X-Upload-Content-Length"]),
            "data": bytearray(),
        }
        return self.send(200, headers={"Location": f"http://{self.headers['Host']}/upload/session/{session}"})

    def do_PUT(self) -> None:
        if not self.authorized():
            return None
        session = self.state.sessions[self.path.rsplit("/", 1)[1]]
        piece = self.body()
        content_range = self.headers["Content-Range"]
        match = re.fullmatch(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)", content_range)
        assert match, content_range
        start, _, total = match.groups()
        if start is not None:
            self.state.puts.append(content_range)
            assert int(start) == len(session["data"]), f"{content_range} after {len(session['data'])} bytes"
            if total == "*":
                assert len(piece) % CHUNK == 0, f"a non-final chunk of {len(piece)} bytes"
            session["data"] += piece
        if total != "*" and len(session["data"]) == int(total) == session["total"]:
            self.state.objects[session["name"]] = (bytes(session["data"]), session["metadata"])
            return self.send(200, b"{}")
        if start is not None and self.state.fail_puts:
            self.state.fail_puts -= 1
            return self.send(503, b"Service Unavailable")
        persisted = len(session["data"])
        return self.send(308, headers={"Range": f"bytes=0-{persisted - 1}"} if persisted else {})

    def do_DELETE(self) -> None:
        if not self.authorized():
            return None
        if self.path.startswith("/upload/session/"):
            return self.send(499)
        name, _ = self.object_name()
        return self.send(204 if self.state.objects.pop(name, None) else 404)


# --- Fixtures and the run --------------------------------------------------------------


@dataclass
class Servers:
    hub: HubState
    hub_url: str
    gcs: GcsState
    gcs_url: str


def _serve(handler: type[BaseHTTPRequestHandler], stack: list[ThreadingHTTPServer]) -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    stack.append(server)
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[Servers]:
    """The Hub and its CDN (two origins, so a token sent to the CDN would show), and Cloud Storage."""
    hub, gcs, started = HubState(), GcsState(), []
    hub_url = _serve(type("Hub", (StubHandler,), {"server_kind": "hub", "state": hub}), started)
    hub.cdn_url = _serve(type("Cdn", (StubHandler,), {"server_kind": "cdn", "state": hub}), started)
    gcs_url = _serve(type("Gcs", (GcsHandler,), {"state": gcs}), started)
    yield Servers(hub, hub_url, gcs, gcs_url)
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return tmp_path / "store" / "models--acme--tiny-model" / "snapshots" / COMMIT


def _load_script() -> types.ModuleType:
    """Import the script by path (its folder is no package); dataclasses need it in sys.modules."""
    spec = importlib.util.spec_from_file_location("stage_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["stage_weights"] = module
    spec.loader.exec_module(module)
    return module


stage_weights = _load_script()


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def stage(servers: Servers, destination: Path | str, *, process: bool = False, **env: str) -> Result:
    """Run the script with settings from the environment only: in a fresh interpreter as the Job
    does (``process``), or its ``main`` in this one (the same code, without the interpreter's start-up)."""
    environment = {
        "HF_ENDPOINT": servers.hub_url,
        "MODEL_ID": MODEL,
        "MODEL_REVISION": COMMIT,
        "DESTINATION": str(destination),
        "PARALLEL": "2",
        "RETRIES": "3",
        "RETRY_BACKOFF_SECONDS": "0",
        "HTTP_TIMEOUT_SECONDS": "10",
        **env,
    }
    if process:
        done = subprocess.run(
            [sys.executable, str(SCRIPT)], env=environment, capture_output=True, text=True, timeout=60, check=False
        )
        return Result(done.returncode, done.stdout, done.stderr)
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        returncode = stage_weights.main(environment)
    return Result(returncode, stdout.getvalue(), stderr.getvalue())


def one_error_line(result: Result) -> str:
    assert result.returncode == 1, result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


def events(result: Result, kind: str) -> list[str]:
    """The files of the stdout lines of one event kind (``copy``, ``done``, ``stale``, ...)."""
    return [
        line.split(" ", 1)[1].split(":", 1)[0] for line in result.stdout.splitlines() if line.startswith(f"{kind} ")
    ]


def downloads(servers: Servers) -> list[str]:
    return sorted(urllib.parse.unquote(path.rsplit("/", 1)[-1]) for path, _ in servers.hub.hub_requests("cdn"))


def marker(snapshot: Path) -> dict[str, Any]:
    return json.loads((snapshot / ".staged-complete").read_text())


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".partial")]


# --- The local store -------------------------------------------------------------------


def test_a_full_copy_lands_in_the_snapshot_layout_with_the_right_bytes_and_the_marker(servers, snapshot):
    result = stage(servers, snapshot, process=True)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for path, content in repo_files().items():
        assert (snapshot / path).read_bytes() == content, path
    assert marker(snapshot) == {
        "model": MODEL,
        "revision": COMMIT,
        "files": 4,
        "bytes": sum(len(c) for c in repo_files().values()),
        "allowPatterns": [],
        "timestamp": marker(snapshot)["timestamp"],
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", marker(snapshot)["timestamp"])
    assert leftovers(snapshot) == []
    assert sorted(events(result, "done")) == sorted(repo_files())
    assert "plan: 4 files, 665.6 kB; already complete: 0 files, 0 B; to copy: 4 files, 665.6 kB" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("summary: copied 4 files (665.6 kB) in ")
    tree_pages = [p for p, _ in servers.hub.hub_requests("hub") if "/tree/" in p]
    assert len(tree_pages) == 3, "five entries two by two: the Link header was followed"
    assert all("Authorization" not in headers for _, _, headers in servers.hub.requests)


def test_a_second_run_copies_nothing_and_says_so(servers, snapshot):
    assert stage(servers, snapshot).returncode == 0
    first_marker = (snapshot / ".staged-complete").read_text()
    servers.hub.requests.clear()

    result = stage(servers, snapshot)

    assert result.returncode == 0, result.stderr
    assert events(result, "copy") == []
    assert downloads(servers) == []
    assert "already complete: 4 files" in result.stdout
    assert "summary: all 4 files (665.6 kB) already complete" in result.stdout
    assert "nothing to copy" in result.stdout
    assert (snapshot / ".staged-complete").read_text() == first_marker, "a current marker is left as it is"


def test_a_truncated_file_left_in_the_store_is_copied_again_and_nothing_else(servers, snapshot):
    assert stage(servers, snapshot).returncode == 0
    weights = snapshot / WEIGHTS
    weights.write_bytes(weights.read_bytes()[:300_000])  # its recorded digest still says complete
    servers.hub.requests.clear()

    result = stage(servers, snapshot)

    assert result.returncode == 0, result.stderr
    assert f"stale {WEIGHTS}: 300000 of 665600 bytes; copying it again" in result.stdout
    assert downloads(servers) == [WEIGHTS]
    assert weights.read_bytes() == repo_files()[WEIGHTS]
    assert "summary: copied 1 file (665.6 kB)" in result.stdout


def test_a_connection_dropped_mid_file_resumes_where_it_stopped(servers, snapshot):
    servers.hub.drop_after[WEIGHTS] = [100_000]

    result = stage(servers, snapshot)

    assert result.returncode == 0, result.stderr
    assert f"retry download {WEIGHTS}: attempt 2 of 3" in result.stdout
    assert "connection closed after 100000 of 665600 bytes" in result.stdout
    ranges = [h.get("Range") for p, h in servers.hub.hub_requests("cdn") if p.endswith(WEIGHTS)]
    assert ranges == [None, "bytes=100000-"]
    assert (snapshot / WEIGHTS).read_bytes() == repo_files()[WEIGHTS]
    assert marker(snapshot)["files"] == 4


def test_a_download_that_keeps_moving_outlives_the_retry_count_and_one_that_stalls_does_not(servers, snapshot):
    servers.hub.drop_after[WEIGHTS] = [100_000, 100_000, 100_000]  # three resets, each after progress

    result = stage(servers, snapshot, RETRIES="2")

    assert result.returncode == 0, result.stderr
    ranges = [h.get("Range") for p, h in servers.hub.hub_requests("cdn") if p.endswith(WEIGHTS)]
    assert ranges == [None, "bytes=100000-", "bytes=200000-", "bytes=300000-"]
    assert (snapshot / WEIGHTS).read_bytes() == repo_files()[WEIGHTS]

    (snapshot / WEIGHTS).unlink()
    servers.hub.drop_after[WEIGHTS] = [0, 0]  # no byte at all, twice
    line = one_error_line(stage(servers, snapshot, RETRIES="2"))
    assert line.startswith(f"error: download {WEIGHTS}: gave up after 2 attempts: {WEIGHTS}: connection closed after 0")
    assert not (snapshot / WEIGHTS).exists()


def test_a_store_file_whose_digest_differs_from_the_hubs_is_replaced(servers, snapshot):
    assert stage(servers, snapshot).returncode == 0
    old = repo_files()["config.json"]
    new = b'{"model_type": "TINY"}\n'  # the same size: only the digest tells
    assert len(new) == len(old)
    servers.hub.files["config.json"] = new
    servers.hub.requests.clear()

    result = stage(servers, snapshot)

    assert result.returncode == 0, result.stderr
    assert (
        f"stale config.json: recorded digest git-sha1:{git_blob_sha1(old)}, the Hub lists git-sha1:{git_blob_sha1(new)}"
        in result.stdout
    )
    assert downloads(servers) == ["config.json"]
    assert (snapshot / "config.json").read_bytes() == new
    assert (snapshot / ".staged-complete").exists()


def test_a_missing_revision_fails_with_one_line_naming_the_model_and_the_revision(servers, snapshot):
    result = stage(servers, snapshot, process=True, MODEL_REVISION=OTHER_COMMIT)

    line = one_error_line(result)
    assert line.startswith(f"error: {MODEL} revision {OTHER_COMMIT}: not found on {servers.hub_url} (HTTP 404")
    assert not snapshot.exists(), "nothing is written before the listing succeeds"


@pytest.mark.parametrize(
    "token, status, says",
    [
        ("", 401, "a Hugging Face token is needed: set serving.hfToken"),
        ("", 403, "a Hugging Face token is needed: set serving.hfToken"),
        ("hf_wrong", 401, "the Hub refused the token (HTTP 401): check serving.hfToken"),
    ],
)
def test_a_refused_listing_says_a_token_is_needed(servers, snapshot, token, status, says):
    servers.hub.api_status = status

    line = one_error_line(stage(servers, snapshot, HF_TOKEN=token))

    assert line.startswith(f"error: {MODEL} revision {COMMIT}: ")
    assert says in line
    assert "You must be authenticated" in line, "the Hub's own message is kept"


def test_the_token_is_sent_to_the_hub_and_not_to_the_cdn(servers, snapshot):
    result = stage(servers, snapshot, HF_TOKEN="hf_secret")

    assert result.returncode == 0, result.stderr
    hub_requests = servers.hub.hub_requests("hub")
    assert {"api" if p.startswith("/api/models/") else p.split("/")[3] for p, _ in hub_requests} == {"api", "resolve"}
    assert all(h.get("Authorization") == "Bearer hf_secret" for _, h in hub_requests)
    cdn_requests = servers.hub.hub_requests("cdn")
    assert len(cdn_requests) == 4
    assert all("Authorization" not in h for _, h in cdn_requests), "a redirect to another host drops the token"
    assert "hf_secret" not in result.stdout


def test_a_digest_mismatch_from_the_hub_is_refused_and_leaves_no_file(servers, snapshot):
    tampered = bytearray(repo_files()[WEIGHTS])
    tampered[1234] ^= 0xFF
    servers.hub.served[WEIGHTS] = bytes(tampered)

    line = one_error_line(stage(servers, snapshot))

    assert line.startswith(
        f"error: {WEIGHTS}: refused, the download's sha256 is {hashlib.sha256(tampered).hexdigest()}"
    )
    assert f"the Hub lists {hashlib.sha256(repo_files()[WEIGHTS]).hexdigest()}" in line
    assert not (snapshot / WEIGHTS).exists()
    assert not (snapshot / ".staged-complete").exists()
    assert leftovers(snapshot) == []


def test_allow_patterns_stage_only_the_matching_files(servers, snapshot):
    result = stage(servers, snapshot, ALLOW_PATTERNS="*.json, README.*")

    assert result.returncode == 0, result.stderr
    staged = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
    assert [p for p in staged if not p.startswith(".")] == ["README.md", "config.json", "tokenizer/tokenizer.json"]
    assert downloads(servers) == ["README.md", "config.json", "tokenizer.json"]
    assert marker(snapshot)["files"] == 3
    assert marker(snapshot)["allowPatterns"] == ["*.json", "README.*"]

    line = one_error_line(stage(servers, snapshot, ALLOW_PATTERNS="*.bin"))
    assert line == "error: ALLOW_PATTERNS *.bin matches none of the 4 files of the revision"


def test_a_branch_is_resolved_once_and_its_commit_is_staged(servers, snapshot):
    servers.hub.branches["main"] = COMMIT

    result = stage(servers, snapshot, MODEL_REVISION="main", ALLOW_PATTERNS="config.json")

    assert result.returncode == 0, result.stderr
    assert f"revision main is commit {COMMIT}" in result.stdout
    assert marker(snapshot)["revision"] == COMMIT
    assert all("/main" not in p for p, _ in servers.hub.hub_requests("hub") if "/revision/" not in p)


@pytest.mark.parametrize(
    "env, says",
    [
        ({"MODEL_ID": "not a model"}, "MODEL_ID must be a Hugging Face model id such as org/name"),
        ({"MODEL_REVISION": ""}, "MODEL_REVISION is required"),
        ({"DESTINATION": "s3://bucket/x"}, "use gs://bucket/prefix, file:///path or a plain path"),
        ({"DESTINATION": "gs:///x"}, "names no bucket"),
        ({"PARALLEL": "0"}, "PARALLEL must be a positive integer"),
        ({"UPLOAD_CHUNK_BYTES": "1000"}, "UPLOAD_CHUNK_BYTES must be a multiple of 262144"),
    ],
)
def test_bad_settings_fail_with_one_line(servers, snapshot, env, says):
    assert says in one_error_line(stage(servers, snapshot, **env))


def test_a_file_url_names_a_local_directory(servers, snapshot):
    result = stage(servers, f"file://{snapshot}", ALLOW_PATTERNS="config.json")

    assert result.returncode == 0, result.stderr
    assert (snapshot / "config.json").read_bytes() == repo_files()["config.json"]


# --- The Cloud Storage store -----------------------------------------------------------


def test_cloud_storage_gets_the_objects_with_their_digests_through_resumable_uploads(servers):
    prefix = f"models--acme--tiny-model/snapshots/{COMMIT}"
    gcs = {"STORAGE_ENDPOINT": servers.gcs_url, "METADATA_ENDPOINT": servers.gcs_url, "UPLOAD_CHUNK_BYTES": str(CHUNK)}
    servers.gcs.fail_puts = 1  # the first chunk arrives, but its answer is a 503

    result = stage(servers, f"gs://weights-bucket/{prefix}", **gcs)

    assert result.returncode == 0, result.stderr
    objects = servers.gcs.objects
    for path, content in repo_files().items():
        stored, metadata = objects[f"{prefix}/{path}"]
        assert stored == content, path
    assert objects[f"{prefix}/{WEIGHTS}"][1] == {
        "hf-digest": f"sha256:{hashlib.sha256(repo_files()[WEIGHTS]).hexdigest()}"
    }
    assert objects[f"{prefix}/config.json"][1] == {
        "hf-digest": f"git-sha1:{git_blob_sha1(repo_files()['config.json'])}"
    }
    assert json.loads(objects[f"{prefix}/.staged-complete"][0])["files"] == 4
    weights_chunks = [r for r in servers.gcs.puts if r.endswith(("/*", "/665600"))]
    assert weights_chunks == ["bytes 0-262143/*", "bytes 262144-524287/*", "bytes 524288-665599/665600"], (
        "the 503 was answered by asking Cloud Storage what it had, not by sending the chunk twice"
    )
    assert f"retry upload gs://weights-bucket/{prefix}/{WEIGHTS}: attempt 2 of 3" in result.stdout
    assert servers.gcs.token_requests == 1, "the metadata server's token is cached"

    again = stage(servers, f"gs://weights-bucket/{prefix}", **gcs)
    assert again.returncode == 0, again.stderr
    assert "nothing to copy" in again.stdout

    truncated, metadata = objects[f"{prefix}/{WEIGHTS}"]
    objects[f"{prefix}/{WEIGHTS}"] = (truncated[:1000], metadata)
    third = stage(servers, f"gs://weights-bucket/{prefix}", **gcs)
    assert third.returncode == 0, third.stderr
    assert events(third, "done") == [WEIGHTS]
    assert objects[f"{prefix}/{WEIGHTS}"][0] == repo_files()[WEIGHTS]


def test_cloud_storage_refusals_name_the_service_account_grant(servers):
    gcs = {"STORAGE_ENDPOINT": servers.gcs_url, "METADATA_ENDPOINT": servers.gcs_url}
    servers.gcs.accepted_token = "another-token"  # the bucket refuses the pod's token

    line = one_error_line(stage(servers, "gs://weights-bucket/snap", **gcs))

    assert "Cloud Storage refused (HTTP 401" in line
    assert "needs roles/storage.objectUser on gs://weights-bucket" in line


def test_a_bucket_grant_still_propagating_is_waited_out_and_one_that_never_comes_is_refused(servers, monkeypatch):
    monkeypatch.setattr(stage_weights, "GRANT_POLL_SECONDS", 0.01)
    gcs = {"STORAGE_ENDPOINT": servers.gcs_url, "METADATA_ENDPOINT": servers.gcs_url, "GRANT_WAIT_SECONDS": "30"}
    servers.gcs.forbidden_requests = 2

    result = stage(servers, "gs://weights-bucket/snap", **gcs)

    assert result.returncode == 0, result.stderr
    waits = [line for line in result.stdout.splitlines() if line.startswith("wait ")]
    assert len(waits) == 2, result.stdout
    assert "the bucket grant may still be propagating" in waits[0]
    assert "snap/.staged-complete" in servers.gcs.objects

    servers.gcs.forbidden_requests = 1_000
    line = one_error_line(stage(servers, "gs://weights-bucket/other", **{**gcs, "GRANT_WAIT_SECONDS": "0"}))
    assert "access to gs://weights-bucket/other: Cloud Storage refused (HTTP 403" in line
    assert "needs roles/storage.objectUser on gs://weights-bucket" in line


# --- The Job base ----------------------------------------------------------------------


def test_the_job_base_runs_the_script_from_its_configmap_off_the_tpu_nodes():
    job = load_document(JOB_BASE)
    pod = job["spec"]["template"]["spec"]
    stager = container(pod, "stage-weights")
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in stager["env"]}

    assert core_errors(job) == []
    assert (job["apiVersion"], job["kind"], job["metadata"]["name"]) == ("batch/v1", "Job", "stage-model-weights")
    assert job["metadata"]["namespace"] == serving_config.WORKLOAD_NAMESPACE
    assert job["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == "21600"
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert job["spec"]["backoffLimit"] == 3
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == serving_config.ServingConfig().service_account_name

    image = stager["image"]
    assert re.fullmatch(r"docker\.io/library/python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image
    (mount,) = [m for m in stager["volumeMounts"] if m["name"] == "weights-staging-script"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "weights-staging-script"]
    assert volume["configMap"]["name"] == "weights-staging-script"
    assert stager["command"] == ["python", f"{mount['mountPath']}/{SCRIPT.name}"]
    assert f"at {mount['mountPath']}/{SCRIPT.name}" in SCRIPT.read_text()

    assert env["MODEL_ID"] == serving_config.MODEL_ID
    assert env["MODEL_REVISION"] == serving_config.MODEL_REVISION
    assert env["DESTINATION"] == serving_config.hf_cache_weights_uri(
        "my-model-weights", serving_config.MODEL_ID, serving_config.MODEL_REVISION
    )
    assert env["HF_TOKEN"] == {
        "secretKeyRef": {"name": HF_TOKEN_SECRET_NAME, "key": HF_TOKEN_SECRET_KEY, "optional": True}
    }

    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ACCELERATOR_NODE_LABEL, "operator": "DoesNotExist"}]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert stager["securityContext"]["readOnlyRootFilesystem"] is True
    (tmp,) = [m for m in stager["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])
    assert stager["resources"]["requests"] == {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "1Gi"}
