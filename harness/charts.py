"""Fetch the published charts the harness renders, as Go module zips pinned by sha256 in charts.lock.

The platform's registry charts (JobSet, Kueue, LeaderWorkerSet) are published as OCI artifacts, which no package
registry the harness may reach serves; the Go module proxy serves the upstream repositories, and a module zip holds
the chart's sources (``charts/<name>/``) as tagged. Every ``[[chart]]`` of the lock is one module zip, fetched and
checked (same exit codes) as harness/schemas.py does, into ``<cache>/<module>/@v/<version>.zip`` (the proxy's own path,
so a Go module cache's ``cache/download`` folder serves as an offline ``--from`` mirror), by default under
``${XDG_CACHE_HOME:-~/.cache}/tpu-gke/charts`` or ``$TPU_GKE_CHARTS_CACHE``. The tests call ``ensure`` themselves,
so a fresh clone fetches on first use. Nothing fetched here is committed: the harness reads the charts out of the
cached zips (``chart_archive``).
"""

from __future__ import annotations

import io
import re
import sys
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness import schemas
from harness.schemas import (
    DEFAULT_TIMEOUT_S,
    FetchError,
    LockedFile,
    LockError,
    checked_digest,
    checked_keys,
    file_sha256,
    lock_entries,
    once_each,
)
from tools.stack_file import PROJECT_ROOT

DEFAULT_LOCK = PROJECT_ROOT / "charts.lock"
CACHE_ENV = "TPU_GKE_CHARTS_CACHE"
LOCK_KEYS = {"release", "url", "chart", "commit", "size", "sha256"}
# A module zip's URL on the Go module proxy (https://go.dev/ref/mod#goproxy-protocol, `$base/$module/@v/$version.zip`).
PROXY_URL = re.compile(
    r"https://proxy\.golang\.org/(?P<module>[a-z0-9.-]+(?:/[A-Za-z0-9._-]+)+)/@v/(?P<version>v[^/]+)\.zip"
)
COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class LockedChart:
    """One chart: the Helm release it renders for, the module zip it is read from, where it lies in the zip."""

    release: str  # the Helm release name the program gives it (CHART_RELEASE_NAMES, components/platform/config.py)
    url: str
    chart: str  # the chart's folder inside the module, e.g. charts/kueue
    commit: str  # the commit the proxy's .info names for that version (its Origin.Hash)
    size: int
    sha256: str

    @property
    def module(self) -> str:
        return _parsed(self.url)["module"]

    @property
    def version(self) -> str:
        """The module version, the upstream tag (``v0.12.0``)."""
        return _parsed(self.url)["version"]

    @property
    def path(self) -> str:
        """Where the zip lies in the cache: the proxy's path of it."""
        return f"{self.module}/@v/{self.version}.zip"

    def locked_file(self) -> LockedFile:
        return LockedFile(path=self.path, url=self.url, sha256=self.sha256, size=self.size, commit=self.commit)


def _parsed(url: str) -> dict[str, str]:
    match = PROXY_URL.fullmatch(url)
    if not match:
        raise LockError(f"{url!r} is not a module zip URL of the Go module proxy")
    return match.groupdict()


def load_lock(lock: Path = DEFAULT_LOCK) -> list[LockedChart]:
    charts = [_locked_chart(entry, where) for entry, where in lock_entries(lock, "chart")]
    once_each(lock, "release", [c.release for c in charts])
    return charts


def _locked_chart(entry: object, where: str) -> LockedChart:
    fields = checked_keys(entry, where, LOCK_KEYS, LOCK_KEYS)
    release, url, chart, commit, size, sha256 = (
        fields[k] for k in ("release", "url", "chart", "commit", "size", "sha256")
    )
    if not isinstance(release, str) or not re.fullmatch(r"[a-z][a-z0-9-]*", release):
        raise LockError(f"{where}: release {release!r} must be a Helm release name")
    where = f"{where} ({release})"
    if not isinstance(url, str):
        raise LockError(f"{where}: url must be a string")
    _parsed(url)
    pure = PurePosixPath(chart) if isinstance(chart, str) else None
    if pure is None or pure.is_absolute() or ".." in pure.parts or not chart or str(pure) != chart:
        raise LockError(f"{where}: chart {chart!r} must be a relative folder without '..'")
    if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
        raise LockError(f"{where}: commit {commit!r} must be 40 lowercase hex digits")
    sha256, size = checked_digest(where, sha256, size)
    return LockedChart(release=release, url=url, chart=str(chart), commit=commit, size=size, sha256=sha256)


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """$TPU_GKE_CHARTS_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/charts (outside every clone)."""
    return schemas.cache_dir(environ, env_var=CACHE_ENV, name="charts")


def ensure(
    charts: Sequence[LockedChart], cache: Path, *, mirror: Path | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Put every locked zip in ``cache``, from the proxy or from ``mirror``; the failures, one line each."""
    locked = [chart.locked_file() for chart in charts]
    return schemas.ensure(locked, cache, mirror=mirror, timeout=timeout, tool="charts").failures


def chart_archive(chart: LockedChart, cache: Path) -> bytes:
    """The chart's folder of the cached zip as a Helm chart archive (a .tgz of ``<name>/...``), verified again.

    Helm loads a chart from a folder or a .tgz (helm_python.Chart.load_archive), not from a zip: the folder's
    files are copied into an archive held in memory, under the folder's own name."""
    zipped = cache / chart.path
    if file_sha256(zipped) != chart.sha256:
        raise FetchError(f"{chart.path}: not in {cache} with the locked sha256: run `make charts`")
    prefix = f"{chart.module}@{chart.version}/{chart.chart}/"
    name = PurePosixPath(chart.chart).name
    buffer = io.BytesIO()
    with zipfile.ZipFile(zipped) as source, tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        members = [m for m in source.infolist() if m.filename.startswith(prefix) and not m.is_dir()]
        if not members:
            raise FetchError(f"{chart.path}: holds no {chart.chart}/")
        for member in members:
            relative = PurePosixPath(member.filename[len(prefix) :])
            if relative.is_absolute() or ".." in relative.parts:
                raise FetchError(f"{chart.path}: refuses the member {member.filename!r}")
            data = source.read(member)
            info = tarfile.TarInfo(f"{name}/{relative}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    return schemas.run(
        argv,
        tool="charts",
        doc=__doc__ or "",
        default_lock=DEFAULT_LOCK,
        load=lambda lock: [chart.locked_file() for chart in load_lock(lock)],
        cache_env=CACHE_ENV,
        layout="as <DIR>/<module>/@v/<version>.zip (a Go module cache's cache/download)",
        what="charts",
    )


if __name__ == "__main__":
    sys.exit(main())
