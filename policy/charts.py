"""Helm charts pinned to an exact version, so a preview shows every chart change as a diff.

A chart from a repository or registry needs an exact ``version`` (``0.17.4`` or ``v0.10.0``; a
range such as ``^0.17``, ``~0.17.0`` or ``>=0.17`` and no version at all both float). A chart in
this repository (a path such as ``./manifests/charts/...``) is pinned by the commit itself. Held twice, written
once (``EXACT_VERSION``): the config blocks refuse at preview a version they set, under its key; this holds every
release a stack registers, those no config block sets included. Matched whole (fullmatch), as pydantic matches the
config blocks' ExactVersion: re.match's ``$`` also matches before a final newline, so ``0.17.4\n`` passed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.config_base import EXACT_VERSION, IMAGE_DIGEST
from policy.resources import HELM_RELEASE_TYPES, get


def chart_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type not in HELM_RELEASE_TYPES:
        return []
    chart = str(get(props, "chart", "", owner=name))
    _, at, digest = chart.rpartition("@")
    if chart.startswith(("./", "../", "/")) or chart in (".", "..") or (at and IMAGE_DIGEST.fullmatch(digest)):
        return []  # the commit, or the registry's content address, fixes what is installed
    problems = []
    reference = chart.removeprefix("oci://").rsplit("/", 1)[-1]
    if ":" in reference:
        tag = reference.rpartition(":")[2]
        if not EXACT_VERSION.fullmatch(tag):
            problems.append(f"Helm release {name} names the chart {chart!r} by the moving tag {tag!r}")
    version = get(props, "version", "", owner=name)
    if not version:
        problems.append(f"Helm release {name} sets no chart version for {chart!r}, so Helm installs the newest one")
    elif not EXACT_VERSION.fullmatch(str(version)):
        problems.append(
            f"Helm release {name} asks for chart version {version!r} of {chart!r}, a range rather than one exact "
            "version (x.y.z)"
        )
    return problems
