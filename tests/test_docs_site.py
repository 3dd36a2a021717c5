"""The documentation site (mkdocs.yml, docs/) builds with --strict, and a broken link or anchor fails the build.

MkDocs and the Material theme live in a venv of their own (.venv-docs, requirements-docs.txt): the one build of the
site is marked ``external``, and `make check-tools` builds the venv, runs it and sets TPU_GKE_MKDOCS, as `make docs`
does for the site itself. What makes a broken link fail the build is our mkdocs.yml's, held without running mkdocs.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import external
from tests.conftest import PROJECT_ROOT

MKDOCS_ENV = "TPU_GKE_MKDOCS"
DEFAULT_MKDOCS = PROJECT_ROOT / ".venv-docs" / "bin" / "mkdocs"
README = (PROJECT_ROOT / "README.md").read_text()
README_MAX_WORDS = 1500


def mkdocs() -> Path:
    external.require("mkdocs (.venv-docs)")
    path = Path(os.environ.get(MKDOCS_ENV, DEFAULT_MKDOCS))
    if not path.exists():
        pytest.skip(f"mkdocs is not installed in .venv-docs: `make check-tools` installs it (or set {MKDOCS_ENV})")
    return path


def readme_section(name: str) -> str:
    """The README's snippet section ``name`` (pymdownx.snippets' markers), which the site includes."""
    return README.split(f"<!-- --8<-- [start:{name}] -->", 1)[1].split(f"<!-- --8<-- [end:{name}] -->", 1)[0]


@pytest.mark.external
def test_the_site_builds_with_strict(tmp_path):
    """The one build of the site: strict, every page there, the README's architecture diagram and the dev stack's
    waves drawn on the architecture page."""
    site = tmp_path / "site"
    done = subprocess.run(
        [
            str(mkdocs()),
            "build",
            "--strict",
            "--config-file",
            str(PROJECT_ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in (PROJECT_ROOT / "docs").rglob("*.md"):
        relative = page.relative_to(PROJECT_ROOT / "docs").with_suffix("")
        built = site / ("index.html" if relative.name == "index" else relative / "index.html")
        assert built.exists(), f"{page.relative_to(PROJECT_ROOT)} is not in the site"
    architecture = (site / "architecture" / "index.html").read_text()
    assert '<pre class="mermaid">' in architecture and "&lt;b&gt;destroy 1&lt;/b&gt;" in architecture, "the dev waves"
    diagram = next(line.strip() for line in readme_section("architecture").splitlines() if "-->" in line)
    assert html.escape(diagram, quote=False) in architecture, "the README's architecture diagram"


def test_the_site_fails_on_what_it_cannot_find():
    """What makes the build fail on a broken link, anchor or include, so a page cannot point at nothing: strict mode
    with every link and navigation problem a warning, and includes that must exist."""
    config = yaml.load((PROJECT_ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    assert config["strict"] == "true"
    assert set(config["validation"]["links"].values()) == {"warn"}
    assert set(config["validation"]["nav"].values()) == {"warn"}
    (snippets,) = [e["pymdownx.snippets"] for e in config["markdown_extensions"] if "pymdownx.snippets" in e]
    assert snippets["check_paths"] == "true"


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
