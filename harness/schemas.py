"""Fetch the upstream CRD files the tests validate against, pinned by sha256 in schemas.lock.

Every ``[[file]]`` of the lock lands in the cache as ``<cache>/<path>``: by default
``${XDG_CACHE_HOME:-~/.cache}/tpu-gke/schemas``, or ``$TPU_GKE_SCHEMAS_CACHE``. A file already
there with the locked digest is left alone; any other is downloaded from its ``url`` (or, with
``--from DIR``, copied from ``DIR/<path>``, a local mirror such as ../shared/schemas) into a
temporary file beside its target, checked against the locked size and sha256, synced and only then
renamed into place, so the cache never holds a partial or unverified file. Prints one line per file
fetched and one per failure; exits 0 when every locked file is in place, 1 when any is not and 2 on
a usage error or an unreadable lock.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import os
import re
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from tools.stack_file import PROJECT_ROOT

DEFAULT_LOCK = PROJECT_ROOT / "schemas.lock"
CACHE_ENV = "TPU_GKE_SCHEMAS_CACHE"
# Bounds one connect or read; the whole transfer of one file is bounded by TRANSFER_FACTOR times it.
DEFAULT_TIMEOUT_S = 30.0
TRANSFER_FACTOR = 4
CHUNK_BYTES = 64 * 1024
USER_AGENT = "tpu-gke-schemas/1 (+python urllib)"
SHA256 = re.compile(r"[0-9a-f]{64}")
LOCK_KEYS = {"path", "url", "sha256", "size", "commit"}
REQUIRED_KEYS = LOCK_KEYS - {"commit"}


class LockError(ValueError):
    """The lock file is missing or malformed: one line naming the file (exit code 2)."""


class FetchError(Exception):
    """One locked file could not be put in place: one line naming the file and the reason."""


class _DeadlineExceeded(Exception):
    """The whole transfer of one file took longer than its bound."""


@dataclass(frozen=True)
class LockedFile:
    """One upstream file: where it goes (relative to a schema directory), where it comes from, what it is."""

    path: str
    url: str
    sha256: str
    size: int
    commit: str = ""


def load_lock(lock: Path = DEFAULT_LOCK) -> list[LockedFile]:
    """Every entry of the lock, validated; a LockError names the first problem."""
    files = [_locked_file(entry, where) for entry, where in lock_entries(lock, "file")]
    once_each(lock, "path", [f.path for f in files])
    return files


def lock_entries(lock: Path, table: str) -> list[tuple[object, str]]:
    """The lock's ``[[table]]`` tables, its only content, each with where it is for a LockError's message."""
    try:
        data = tomllib.loads(lock.read_text(encoding="utf-8"))
    except OSError as error:
        raise LockError(f"{lock}: cannot read the lock: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise LockError(f"{lock}: not valid TOML: {error}") from None
    entries = data.get(table)
    if set(data) != {table} or not isinstance(entries, list) or not entries:
        raise LockError(f"{lock}: expected only [[{table}]] tables, at least one")
    return [(entry, f"{lock}: [[{table}]] #{number}") for number, entry in enumerate(entries, start=1)]


def once_each(lock: Path, what: str, names: list[str]) -> None:
    if duplicates := sorted({name for name in names if names.count(name) > 1}):
        raise LockError(f"{lock}: {what} locked more than once: {', '.join(duplicates)}")


def checked_keys(entry: object, where: str, keys: set[str], required: set[str]) -> dict[str, object]:
    """``entry`` as a table of ``keys``, holding every one of ``required``."""
    if not isinstance(entry, dict):
        raise LockError(f"{where}: not a table")
    if unknown := sorted(set(entry) - keys):
        raise LockError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing := sorted(required - set(entry)):
        raise LockError(f"{where}: missing key(s) {', '.join(missing)}")
    return entry


def checked_digest(where: str, sha256: object, size: object) -> tuple[str, int]:
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise LockError(f"{where}: sha256 {sha256!r} must be 64 lowercase hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise LockError(f"{where}: size {size!r} must be a positive number of bytes")
    return sha256, size


def _locked_file(entry: object, where: str) -> LockedFile:
    fields = checked_keys(entry, where, LOCK_KEYS, REQUIRED_KEYS)
    path, url, sha256, size, commit = (fields.get(k, "") for k in ("path", "url", "sha256", "size", "commit"))
    if not isinstance(path, str) or not _is_plain_relative(path):
        raise LockError(f"{where}: path {path!r} must be a relative path without '..'")
    where = f"{where} ({path})"
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise LockError(f"{where}: url {url!r} must be an http(s) URL")
    sha256, size = checked_digest(where, sha256, size)
    if not isinstance(commit, str):
        raise LockError(f"{where}: commit {commit!r} must be a string")
    return LockedFile(path=path, url=url, sha256=sha256, size=size, commit=commit)


def _is_plain_relative(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and "\\" not in path and not pure.is_absolute() and ".." not in pure.parts and str(pure) == path


def cache_dir(environ: Mapping[str, str] | None = None, *, env_var: str = CACHE_ENV, name: str = "schemas") -> Path:
    """$TPU_GKE_SCHEMAS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/schemas (outside every clone); ``env_var``
    and ``name`` are those of another cache (harness/charts.py)."""
    env = os.environ if environ is None else environ
    if override := env.get(env_var):
        return Path(override).expanduser()
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "tpu-gke" / name


def file_sha256(path: Path) -> str | None:
    """The sha256 of a regular file, or None when there is none at `path`."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                digest.update(chunk)
    except OSError:  # absent, a directory, unreadable: not the locked file
        return None
    return digest.hexdigest()


def holds(directory: Path, locked: LockedFile) -> bool:
    return file_sha256(directory / locked.path) == locked.sha256


def install(locked: LockedFile, destination: Path, chunks: Iterator[bytes], *, announced: int | None) -> None:
    """Write `chunks` to `destination` only if they are the locked file. `announced` is the length the source
    promised (Content-Length), so a transfer cut short is reported as truncated rather than as a different file.
    Errors reading `chunks` propagate as they are; errors writing the cache become a FetchError."""
    with _writing(locked, destination.parent):
        destination.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        received = 0
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                received += len(chunk)
                if received > locked.size:
                    raise FetchError(f"{locked.path}: more than the locked {locked.size} bytes: refused")
                digest.update(chunk)
                with _writing(locked, destination.parent):
                    out.write(chunk)
            if announced is not None and received < announced:
                raise FetchError(f"{locked.path}: truncated transfer: {received} of {announced} bytes arrived: refused")
            if digest.hexdigest() != locked.sha256:
                raise FetchError(
                    f"{locked.path}: sha256 {digest.hexdigest()[:12]}… ({received} bytes) differs from the locked "
                    f"{locked.sha256[:12]}… ({locked.size} bytes): refused"
                )
            with _writing(locked, destination.parent):
                out.flush()
                os.fsync(out.fileno())
        with _writing(locked, destination.parent):
            os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # persist the rename itself, where a directory can be opened
        fd = os.open(destination.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _writing(locked: LockedFile, directory: Path) -> Iterator[None]:
    """A local write error (read-only or full cache) as one FetchError line, not as a network error."""
    try:
        yield
    except OSError as error:
        raise FetchError(f"{locked.path}: cannot write into {directory}: {error.strerror or error}") from None


def _read_chunks(source: IO[bytes], deadline: float | None = None) -> Iterator[bytes]:
    while chunk := source.read(CHUNK_BYTES):
        yield chunk
        if deadline is not None and time.monotonic() > deadline:
            raise _DeadlineExceeded


def download(locked: LockedFile, destination: Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
    """Download the locked file into `destination`; a FetchError says why not, on one line."""
    request = urllib.request.Request(locked.url, headers={"User-Agent": USER_AGENT})
    deadline = time.monotonic() + timeout * TRANSFER_FACTOR
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            announced = int(length) if length and length.strip().isdigit() else None
            install(locked, destination, _read_chunks(response, deadline), announced=announced)
    except urllib.error.HTTPError as error:
        error.close()
        raise FetchError(f"{locked.path}: HTTP {error.code} {error.reason} from {locked.url}") from None
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, TimeoutError):
            raise FetchError(f"{locked.path}: timed out after {timeout:g} s connecting to {locked.url}") from None
        raise FetchError(f"{locked.path}: connection error for {locked.url}: {reason}") from None
    except TimeoutError:
        raise FetchError(f"{locked.path}: timed out ({timeout:g} s without data) fetching {locked.url}") from None
    except _DeadlineExceeded:
        limit = timeout * TRANSFER_FACTOR
        raise FetchError(f"{locked.path}: timed out: the transfer took over {limit:g} s from {locked.url}") from None
    except http.client.IncompleteRead as error:
        raise FetchError(f"{locked.path}: truncated transfer: {len(error.partial)} bytes then EOF: refused") from None
    except (http.client.HTTPException, OSError) as error:
        raise FetchError(
            f"{locked.path}: connection error for {locked.url}: {str(error) or type(error).__name__}"
        ) from None


def copy_from(locked: LockedFile, mirror: Path, destination: Path) -> None:
    """Copy the locked file from a local mirror laid out like the cache, verifying it the same way."""
    source = mirror / locked.path
    try:
        with source.open("rb") as stream:
            install(locked, destination, _read_chunks(stream), announced=None)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise FetchError(f"{locked.path}: not in {mirror}") from None
    except OSError as error:
        raise FetchError(f"{locked.path}: cannot copy from {source}: {error.strerror or error}") from None


@dataclass
class Outcome:
    fetched: list[str]
    present: list[str]
    failures: list[str]


def ensure(
    files: Sequence[LockedFile],
    cache: Path,
    *,
    mirror: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    tool: str = "schemas",
) -> Outcome:
    """Put every locked file in `cache`, from the network or from `mirror`; report each fetch and failure, as
    ``tool``."""
    outcome = Outcome(fetched=[], present=[], failures=[])
    for locked in files:
        target = cache / locked.path
        current = file_sha256(target)
        if current == locked.sha256:
            outcome.present.append(locked.path)
            continue
        try:
            if mirror is not None:
                copy_from(locked, mirror, target)
            else:
                download(locked, target, timeout=timeout)
        except FetchError as error:
            outcome.failures.append(str(error))
            print(f"{tool}: {error}", file=sys.stderr)
            continue
        outcome.fetched.append(locked.path)
        how = f"copied {locked.path} from {mirror}" if mirror is not None else f"downloaded {locked.path}"
        replaced = " (replacing a copy with another digest)" if current is not None else ""
        print(f"{tool}: {how}{replaced}")
    return outcome


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def run(
    argv: Sequence[str] | None,
    *,
    tool: str,
    doc: str,
    default_lock: Path,
    load: Callable[[Path], list[LockedFile]],
    cache_env: str,
    layout: str,
    what: str = "files",
) -> int:
    """The command line of a fetcher of locked files: ``tool`` (schemas, charts) names it in every line and its cache,
    ``layout`` says how a ``--from`` mirror is laid out, ``what`` names the files in its summary."""
    parser = argparse.ArgumentParser(prog=f"python -m harness.{tool}", description=doc.split("\n\n")[0])
    add = parser.add_argument
    add("--lock", type=Path, default=default_lock, help="the lock file (default: %(default)s)")
    cache_help = f"where the {what} go (default: ${cache_env}, else ${{XDG_CACHE_HOME:-~/.cache}}/tpu-gke/{tool})"
    add("--cache", type=Path, default=None, help=cache_help)
    from_help = f"copy from a local mirror laid out {layout}"
    add("--from", dest="mirror", type=Path, default=None, metavar="DIR", help=from_help)
    timeout_help = f"seconds per connect or read; a whole file gets {TRANSFER_FACTOR}x (default: %(default)g)"
    add("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_S, help=timeout_help)
    args = parser.parse_args(argv)
    try:
        files = load(args.lock)
    except LockError as error:
        print(f"{tool}: {error}", file=sys.stderr)
        return 2
    if args.mirror is not None and not args.mirror.is_dir():
        print(f"{tool}: --from {args.mirror}: not a directory", file=sys.stderr)
        return 2
    directory: Path = args.cache if args.cache is not None else cache_dir(env_var=cache_env, name=tool)
    outcome = ensure(files, directory, mirror=args.mirror, timeout=args.timeout, tool=tool)
    in_place = len(outcome.fetched) + len(outcome.present)
    summary = f"{in_place} of {len(files)} locked {what} in place in {directory}"
    detail = f"{len(outcome.fetched)} fetched, {len(outcome.present)} already present"
    if outcome.failures:
        print(f"{tool}: {summary} ({detail}); {len(outcome.failures)} failed, see above", file=sys.stderr)
        return 1
    print(f"{tool}: {summary} ({detail})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    layout = "as <DIR>/<path> (e.g. ../shared/schemas) instead of downloading"
    doc = __doc__ or ""
    return run(
        argv, tool="schemas", doc=doc, default_lock=DEFAULT_LOCK, load=load_lock, cache_env=CACHE_ENV, layout=layout
    )


if __name__ == "__main__":
    sys.exit(main())
