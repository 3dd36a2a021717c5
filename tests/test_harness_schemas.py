"""harness.schemas against a scripted HTTP server on 127.0.0.1, with a temporary lock and cache.

Also: the committed schemas.lock is well formed, covers every pinned CRD folder, and its digests
match ../shared/schemas when that directory exists; tests/crd_schemas.py finds a locked file only
where its digest matches, in the documented order.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness import schemas
from harness.schemas import LockedFile
from tests.crd_schemas import PINNED_CRDS, SHARED_SCHEMAS, find_locked, schema_dirs

GOOD = b"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n" * 40
OTHER = b"x" * len(GOOD)
DRIP_BYTES = 100


@dataclass(frozen=True)
class Reply:
    """One scripted answer; ``sent`` bytes of ``body`` are written (all by default) under its full Content-Length."""

    body: bytes = GOOD
    status: int = 200
    sent: int | None = None
    delay: float = 0.0
    drip: float = 0.0  # seconds between pieces of DRIP_BYTES


class Server:
    """Serves scripted replies per path (404 for any other) and counts the requests per path."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.hits: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] += 1
                reply = server.replies.get(self.path, Reply(b"404: Not Found", status=404))
                if reply.delay and server.stopping.wait(reply.delay):
                    return
                payload = reply.body[: reply.sent] if reply.sent is not None else reply.body
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    step = DRIP_BYTES if reply.drip else len(payload) or 1
                    for start in range(0, len(payload), step):
                        self.wfile.write(payload[start : start + step])
                        self.wfile.flush()
                        if reply.drip and server.stopping.wait(reply.drip):
                            return
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True  # a short body ends with the connection: a truncated transfer

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> Server:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    with Server() as running:
        yield running


def entry(path: str, url: str, body: bytes = GOOD) -> str:
    digest = hashlib.sha256(body).hexdigest()
    return f'[[file]]\npath = "{path}"\nurl = "{url}"\nsize = {len(body)}\nsha256 = "{digest}"\n'


def write_lock(tmp_path: Path, *entries: str) -> Path:
    lock = tmp_path / "schemas.lock"
    lock.write_text("# test lock\n\n" + "\n".join(entries), encoding="utf-8")
    return lock


def run(lock: Path, cache: Path, *extra: str) -> int:
    return schemas.main(["--lock", str(lock), "--cache", str(cache), "--timeout", "5", *extra])


def leftovers(cache: Path) -> list[str]:
    """Every file in the cache, temporary ones included."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.exists() else []


# --- Downloads -----------------------------------------------------------------------------


def test_a_good_file_lands_with_its_bytes(server, tmp_path, capsys):
    server.replies["/v1/a.yaml"] = Reply()
    lock = write_lock(tmp_path, entry("crds/x-v1/a.yaml", f"{server.base}/v1/a.yaml"))
    cache = tmp_path / "cache"
    assert run(lock, cache) == 0
    assert (cache / "crds/x-v1/a.yaml").read_bytes() == GOOD
    assert leftovers(cache) == ["crds/x-v1/a.yaml"]
    out = capsys.readouterr().out
    assert "downloaded crds/x-v1/a.yaml" in out and "1 of 1 locked files in place" in out


def test_a_second_run_downloads_nothing(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply()
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    assert run(lock, cache) == 0
    assert run(lock, cache) == 0
    assert server.hits["/a.yaml"] == 1
    assert "0 fetched, 1 already present" in capsys.readouterr().out.splitlines()[-1]


def test_a_wrong_digest_is_refused_and_leaves_no_file(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply(OTHER)
    lock = write_lock(tmp_path, entry("crds/a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    assert run(lock, cache) == 1
    assert leftovers(cache) == []
    (line, summary) = capsys.readouterr().err.splitlines()
    assert line.startswith("schemas: crds/a.yaml: sha256 ") and "differs from the locked" in line
    assert line.endswith("refused")
    assert "0 of 1 locked files in place" in summary and "1 failed" in summary


def test_a_truncated_transfer_is_refused_and_leaves_no_partial_file(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply(sent=len(GOOD) // 2)
    lock = write_lock(tmp_path, entry("crds/a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    assert run(lock, cache) == 1
    assert leftovers(cache) == []
    line = capsys.readouterr().err.splitlines()[0]
    assert f"crds/a.yaml: truncated transfer: {len(GOOD) // 2} of {len(GOOD)} bytes arrived: refused" in line


def test_more_bytes_than_locked_are_refused(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply(GOOD + b"# appended\n")
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    assert run(lock, cache) == 1
    assert leftovers(cache) == []
    assert f"a.yaml: more than the locked {len(GOOD)} bytes: refused" in capsys.readouterr().err


def test_404_is_one_clear_line(server, tmp_path, capsys):
    url = f"{server.base}/missing.yaml"
    lock = write_lock(tmp_path, entry("crds/a.yaml", url))
    assert run(lock, tmp_path / "cache") == 1
    assert capsys.readouterr().err.splitlines()[0] == f"schemas: crds/a.yaml: HTTP 404 Not Found from {url}"
    assert leftovers(tmp_path / "cache") == []


def test_a_connection_error_is_one_clear_line(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on any more
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.yaml"
    lock = write_lock(tmp_path, entry("a.yaml", url))
    assert run(lock, tmp_path / "cache") == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert line.startswith(f"schemas: a.yaml: connection error for {url}: ")
    assert "refused" in line.lower()


def test_a_stalled_server_times_out(server, tmp_path, capsys):
    server.replies["/slow.yaml"] = Reply(delay=5)
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/slow.yaml"))
    assert schemas.main(["--lock", str(lock), "--cache", str(tmp_path / "cache"), "--timeout", "0.2"]) == 1
    assert "a.yaml: timed out" in capsys.readouterr().err
    assert leftovers(tmp_path / "cache") == []


def test_a_trickle_is_bounded_by_the_transfer_deadline(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(schemas, "CHUNK_BYTES", DRIP_BYTES)
    # 27 pieces, each 0.05 s apart: five times within the read timeout even on a loaded machine, 1.35 s in all
    server.replies["/drip.yaml"] = Reply(drip=0.05)
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/drip.yaml"))
    assert schemas.main(["--lock", str(lock), "--cache", str(tmp_path / "cache"), "--timeout", "0.25"]) == 1
    limit = 0.25 * schemas.TRANSFER_FACTOR
    assert f"a.yaml: timed out: the transfer took over {limit:g} s" in capsys.readouterr().err
    assert leftovers(tmp_path / "cache") == []


def test_one_failure_does_not_stop_the_others(server, tmp_path, capsys):
    server.replies["/good.yaml"] = Reply()
    lock = write_lock(
        tmp_path,
        entry("bad.yaml", f"{server.base}/missing.yaml"),
        entry("good.yaml", f"{server.base}/good.yaml"),
    )
    cache = tmp_path / "cache"
    assert run(lock, cache) == 1
    assert leftovers(cache) == ["good.yaml"]
    assert "1 of 2 locked files in place" in capsys.readouterr().err


def test_a_cached_copy_with_another_digest_is_replaced(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply()
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "a.yaml").write_bytes(b"stale")
    assert run(lock, cache) == 0
    assert (cache / "a.yaml").read_bytes() == GOOD
    assert "replacing a copy with another digest" in capsys.readouterr().out


def test_a_cache_that_cannot_be_written_is_one_clear_line(server, tmp_path, capsys):
    server.replies["/a.yaml"] = Reply()
    lock = write_lock(tmp_path, entry("a.yaml", f"{server.base}/a.yaml"))
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache directory should be")
    assert run(lock, cache) == 1
    assert capsys.readouterr().err.splitlines()[0].startswith(f"schemas: a.yaml: cannot write into {cache}: ")


# --- A local mirror (--from) -----------------------------------------------------------------


def test_from_a_local_mirror_copies_and_verifies(tmp_path, capsys):
    mirror = tmp_path / "mirror"
    (mirror / "crds/x").mkdir(parents=True)
    (mirror / "crds/x/a.yaml").write_bytes(GOOD)
    (mirror / "crds/x/b.yaml").write_bytes(OTHER)
    lock = write_lock(
        tmp_path,
        entry("crds/x/a.yaml", "https://example.invalid/a.yaml"),
        entry("crds/x/b.yaml", "https://example.invalid/b.yaml", GOOD),
        entry("crds/x/c.yaml", "https://example.invalid/c.yaml"),
    )
    cache = tmp_path / "cache"
    assert run(lock, cache, "--from", str(mirror)) == 1
    assert leftovers(cache) == ["crds/x/a.yaml"]
    assert (cache / "crds/x/a.yaml").read_bytes() == GOOD
    captured = capsys.readouterr()
    assert f"copied crds/x/a.yaml from {mirror}" in captured.out
    errors = captured.err.splitlines()
    assert "crds/x/b.yaml: sha256" in errors[0] and errors[0].endswith("refused")
    assert errors[1] == f"schemas: crds/x/c.yaml: not in {mirror}"


def test_from_a_directory_that_does_not_exist_is_a_usage_error(tmp_path, capsys):
    lock = write_lock(tmp_path, entry("a.yaml", "https://example.invalid/a.yaml"))
    assert run(lock, tmp_path / "cache", "--from", str(tmp_path / "nowhere")) == 2
    assert "not a directory" in capsys.readouterr().err


# --- The lock ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "expected only [[file]] tables"),
        ("[[file]]\npath = 'a'\n", "missing key(s) sha256, size, url"),
        (entry("../a.yaml", "https://h/a"), "must be a relative path without '..'"),
        (entry("/abs.yaml", "https://h/a"), "must be a relative path"),
        (entry("a.yaml", "ftp://h/a"), "must be an http(s) URL"),
        (entry("a.yaml", "https://h/a").replace("sha256 = ", "sha = "), "unknown key(s) sha"),
        (entry("a.yaml", "https://h/a").replace('sha256 = "', 'sha256 = "AB'), "64 lowercase hex digits"),
        (entry("a.yaml", "https://h/a") + entry("a.yaml", "https://h/b"), "locked more than once: a.yaml"),
        ("[[file]\n", "not valid TOML"),
    ],
)
def test_a_malformed_lock_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    lock = tmp_path / "bad.lock"
    lock.write_text(text, encoding="utf-8")
    assert run(lock, tmp_path / "cache") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"schemas: {lock}") and message in line


def test_a_missing_lock_is_exit_2(tmp_path, capsys):
    assert run(tmp_path / "none.lock", tmp_path / "cache") == 2
    assert "cannot read the lock" in capsys.readouterr().err


def test_the_committed_lock_pins_each_crd_folder_at_a_release_tag():
    files = schemas.load_lock()
    folders = {f.path.split("/")[1] for f in files}
    assert folders == set(PINNED_CRDS.values()), "every pinned CRD folder is locked, and nothing else"
    for locked in files:
        assert locked.path.startswith("crds/") and locked.path.endswith(".yaml")
        assert locked.url.startswith("https://raw.githubusercontent.com/")
        owner_repo_ref = locked.url.removeprefix("https://raw.githubusercontent.com/").split("/")[:3]
        version = locked.path.split("/")[1].rsplit("-", 1)[1]
        assert owner_repo_ref[2] == version, f"{locked.path}: fetched at {owner_repo_ref[2]}, not at {version}"
        assert locked.url.endswith("/" + Path(locked.path).name)
        assert len(locked.commit) == 40


def test_the_committed_lock_matches_the_shared_schemas():
    if not SHARED_SCHEMAS.is_dir():
        pytest.skip(f"{SHARED_SCHEMAS} is absent: nothing to compare the lock with")
    compared = 0
    for locked in schemas.load_lock():
        if not (SHARED_SCHEMAS / locked.path).exists():
            continue  # pinned after that mirror was made: its URL and digest are the pin
        data = (SHARED_SCHEMAS / locked.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (locked.size, locked.sha256), locked.path
        compared += 1
    assert compared, f"{SHARED_SCHEMAS} holds none of the locked files"


# --- Where the tests look ------------------------------------------------------------------


def test_the_default_cache_is_outside_the_repo():
    assert schemas.cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/tpu-gke/schemas")
    assert schemas.cache_dir({"HOME": "/home/u", "XDG_CACHE_HOME": "/c"}) == Path("/c/tpu-gke/schemas")
    assert schemas.cache_dir({"HOME": "/home/u", "XDG_CACHE_HOME": "rel"}) == Path("/home/u/.cache/tpu-gke/schemas")
    assert schemas.cache_dir({"HOME": "/home/u", "TPU_GKE_SCHEMAS_CACHE": "/s"}) == Path("/s")


def test_lookup_order_is_cache_then_env_then_shared():
    dirs = schema_dirs({"HOME": "/home/u", "TPU_GKE_SCHEMAS_DIR": "/env"})
    assert dirs == [Path("/home/u/.cache/tpu-gke/schemas"), Path("/env"), SHARED_SCHEMAS]
    assert schema_dirs({"HOME": "/home/u"}) == [Path("/home/u/.cache/tpu-gke/schemas"), SHARED_SCHEMAS]


def test_a_directory_counts_only_with_the_locked_digest(tmp_path):
    locked = LockedFile("crds/x/a.yaml", "https://example.invalid/a", hashlib.sha256(GOOD).hexdigest(), len(GOOD))
    stale, good, later = tmp_path / "stale", tmp_path / "good", tmp_path / "later"
    for directory, body in ((stale, OTHER), (good, GOOD), (later, GOOD)):
        (directory / "crds/x").mkdir(parents=True)
        (directory / "crds/x/a.yaml").write_bytes(body)
    assert find_locked(locked, [tmp_path / "empty", stale, good, later]) == (good / locked.path, "")
    path, reason = find_locked(locked, [tmp_path / "empty", stale])
    assert path is None
    assert "run make schemas" in reason and f"a copy with another digest is in {stale}" in reason
