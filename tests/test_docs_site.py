"""The documentation site (mkdocs.yml, docs/) builds with --strict, and a broken link or anchor fails the build.

MkDocs and the Material theme live in a venv of their own (.venv-docs, requirements-docs.txt); `make test` builds
it and sets TPU_GKE_MKDOCS, as `make docs` does for the site itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROJECT_ROOT

MKDOCS_ENV = "TPU_GKE_MKDOCS"
DEFAULT_MKDOCS = PROJECT_ROOT / ".venv-docs" / "bin" / "mkdocs"
README = (PROJECT_ROOT / "README.md").read_text()
README_MAX_WORDS = 1500


def mkdocs() -> Path:
    path = Path(os.environ.get(MKDOCS_ENV, DEFAULT_MKDOCS))
    if not path.exists():
        pytest.skip(f"mkdocs is not installed in .venv-docs: `make test` installs it (or set {MKDOCS_ENV})")
    return path


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(mkdocs()), "build", "--strict", "--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )


def copy_of_the_site_sources(tmp_path: Path) -> Path:
    root = tmp_path / "repository"
    root.mkdir()
    shutil.copy(PROJECT_ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copy(PROJECT_ROOT / "README.md", root / "README.md")  # its architecture diagram is included (snippets)
    shutil.copytree(PROJECT_ROOT / "docs", root / "docs")
    waves = Path("tests") / "golden" / "dev" / "waves.md"  # the architecture page includes it (pymdownx.snippets)
    (root / waves).parent.mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / waves, root / waves)
    return root


def test_the_site_builds_with_strict(tmp_path):
    done = build(PROJECT_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "operations" / "index.html").exists()
    architecture = (tmp_path / "site" / "architecture" / "index.html").read_text()
    assert '<pre class="mermaid">' in architecture and "&lt;b&gt;destroy 1&lt;/b&gt;" in architecture, (
        "the dev waves, drawn"
    )


def test_the_copy_of_the_sources_builds(tmp_path):
    """What the failure tests below break is all the build reads: the copy itself builds."""
    root = copy_of_the_site_sources(tmp_path)
    done = build(root, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_missing_waves_picture_fails_the_build(tmp_path):
    root = copy_of_the_site_sources(tmp_path)
    (root / "tests" / "golden" / "dev" / "waves.md").unlink()
    done = build(root, tmp_path / "site")
    assert done.returncode != 0 and "tests/golden/dev/waves.md" in done.stdout + done.stderr


def test_the_site_draws_the_readme_s_architecture_diagram(tmp_path):
    root = copy_of_the_site_sources(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("<!-- --8<-- [start:architecture] -->", ""))
    done = build(root, tmp_path / "site")
    assert done.returncode != 0 and "Snippet section 'architecture' could not be located" in done.stderr


@pytest.mark.parametrize(
    "broken",
    ["[a section that is gone](operations.md#no-such-section)", "[a page that is gone](no-such-page.md)"],
    ids=["anchor", "page"],
)
def test_a_broken_link_fails_the_build(tmp_path, broken):
    root = copy_of_the_site_sources(tmp_path)
    page = root / "docs" / "lab.md"
    page.write_text(page.read_text() + f"\n{broken}\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert re.search(r"no-such-(section|page)", done.stdout + done.stderr), done.stdout + done.stderr


def test_every_page_is_in_the_navigation():
    config = yaml.load((PROJECT_ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav) -> list[str]:
        found = []
        for item in nav:
            if isinstance(item, dict):
                for value in item.values():
                    found += pages(value) if isinstance(value, list) else [value]
            else:
                found.append(item)
        return found

    on_disk = {str(p.relative_to(PROJECT_ROOT / "docs")) for p in (PROJECT_ROOT / "docs").rglob("*.md")}
    assert sorted(pages(config["nav"])) == sorted(on_disk)


def test_the_readme_is_short():
    words = len(README.split())
    assert words <= README_MAX_WORDS, (
        f"README.md has {words} words: move detail into docs/ (at most {README_MAX_WORDS})"
    )


def test_the_readme_links_only_to_pages_and_sections_that_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", README)
    assert links, "the README links into docs/"
    for path, anchor in links:
        page = PROJECT_ROOT / path
        assert page.exists(), path
        if anchor:
            headings = [line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")]
            slugs = {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.replace("`", "").lower()).strip()) for h in headings}
            assert anchor in slugs, f"{path}#{anchor}"
