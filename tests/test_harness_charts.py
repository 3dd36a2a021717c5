"""harness.charts: the committed charts.lock, its refusals, the offline fill of the cache and the chart read out of a zip.

Downloads go through harness.schemas.download, whose transport tests/test_harness_schemas.py holds against a scripted
server; here the cache is filled from a local mirror laid out as the Go module proxy (and a module cache) lays it.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from components.platform.config import CHART_RELEASE_NAMES
from harness import charts
from harness.schemas import LockError

DEMO_URL = "https://proxy.golang.org/sigs.k8s.io/demo/@v/v1.2.3.zip"
DEMO_FILES = {
    "sigs.k8s.io/demo@v1.2.3/go.mod": "module sigs.k8s.io/demo\n",
    "sigs.k8s.io/demo@v1.2.3/charts/demo/Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.2.3\n",
    "sigs.k8s.io/demo@v1.2.3/charts/demo/values.yaml": "port: 9443\n",
    "sigs.k8s.io/demo@v1.2.3/charts/demo/templates/service.yaml": (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: demo\nspec:\n  ports:\n    - port: 443\n"
        "      targetPort: {{ .Values.port }}\n"
    ),
    "sigs.k8s.io/demo@v1.2.3/cmd/main.go": "package main\n",
}


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _lock(tmp_path: Path, data: bytes, **changes: object) -> Path:
    entry = {
        "release": "demo",
        "url": DEMO_URL,
        "chart": "charts/demo",
        "commit": "0" * 40,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        **changes,
    }
    lines = ["[[chart]]"] + [
        f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}" for k, v in entry.items()
    ]
    lock = tmp_path / "charts.lock"
    lock.write_text("\n".join(line for line in lines if not line.endswith("= None")) + "\n")
    return lock


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, bytes]:
    data = _zip(DEMO_FILES)
    target = tmp_path / "mirror" / "sigs.k8s.io/demo/@v/v1.2.3.zip"
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    return tmp_path / "mirror", data


def test_the_committed_lock_locks_a_proxy_zip_for_releases_the_program_installs():
    locked = charts.load_lock()
    assert {c.release for c in locked} <= set(CHART_RELEASE_NAMES.values())
    for chart in locked:
        assert chart.url == f"https://proxy.golang.org/{chart.module}/@v/{chart.version}.zip"
        assert chart.chart == f"charts/{chart.chart.rsplit('/', 1)[-1]}"


def test_the_cache_is_filled_offline_and_the_chart_read_out_of_the_zip(tmp_path, mirror):
    source, data = mirror
    lock = _lock(tmp_path, data)
    cache = tmp_path / "cache"
    assert charts.main(["--lock", str(lock), "--cache", str(cache), "--from", str(source)]) == 0
    (chart,) = charts.load_lock(lock)
    assert (cache / "sigs.k8s.io/demo/@v/v1.2.3.zip").read_bytes() == data
    with tarfile.open(fileobj=io.BytesIO(charts.chart_archive(chart, cache))) as archive:
        assert sorted(archive.getnames()) == ["demo/Chart.yaml", "demo/templates/service.yaml", "demo/values.yaml"]
    import helm_python

    with helm_python.Chart.load_archive(charts.chart_archive(chart, cache)) as loaded:
        (service,) = loaded.render({"port": 8082}, name="demo", namespace="ns").values()
    assert "targetPort: 8082" in service


def test_a_zip_of_another_digest_is_refused_and_never_cached(tmp_path, mirror):
    source, data = mirror
    lock = _lock(tmp_path, data, sha256="f" * 64)
    cache = tmp_path / "cache"
    assert charts.main(["--lock", str(lock), "--cache", str(cache), "--from", str(source)]) == 1
    assert not (cache / "sigs.k8s.io/demo/@v/v1.2.3.zip").exists()


def test_a_cached_zip_changed_since_is_not_read(tmp_path, mirror):
    source, data = mirror
    lock = _lock(tmp_path, data)
    cache = tmp_path / "cache"
    assert charts.main(["--lock", str(lock), "--cache", str(cache), "--from", str(source)]) == 0
    (cache / "sigs.k8s.io/demo/@v/v1.2.3.zip").write_bytes(data + b"tampered")
    (chart,) = charts.load_lock(lock)
    with pytest.raises(charts.FetchError, match="make charts"):
        charts.chart_archive(chart, cache)


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"url": "https://example.com/demo.zip"}, "not a module zip URL"),
        ({"chart": "../charts/demo"}, "relative folder"),
        ({"commit": "abc"}, "40 lowercase hex"),
        ({"sha256": "x"}, "64 lowercase hex"),
        ({"size": 0}, "positive number"),
        ({"release": "Demo"}, "Helm release name"),
        ({"extra": "1"}, "unknown key"),
    ],
)
def test_a_malformed_lock_is_refused(tmp_path, changes, fragment):
    lock = _lock(tmp_path, b"x", **changes)
    with pytest.raises(LockError, match=fragment):
        charts.load_lock(lock)
    assert charts.main(["--lock", str(lock), "--cache", str(tmp_path / "cache")]) == 2


def test_a_release_locked_twice_is_refused(tmp_path):
    lock = _lock(tmp_path, b"x")
    lock.write_text(lock.read_text() * 2)
    with pytest.raises(LockError, match="more than once"):
        charts.load_lock(lock)


def test_the_cache_is_outside_the_clone_unless_told(tmp_path):
    assert charts.cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/tpu-gke/charts")
    assert charts.cache_dir({"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}) == Path("/xdg/tpu-gke/charts")
    assert charts.cache_dir({charts.CACHE_ENV: str(tmp_path)}) == tmp_path
