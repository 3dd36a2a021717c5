"""Every container image pinned: a digest, or a tag that carries a full version or a date.

A tag is a pointer the registry owner may move. The rule accepts one that names a release
(``v1.1.0``, ``3.12.8-slim-bookworm``, ``jax0.9.0-rev1``) or a build date
(``nightly-20260430-18ed615``), and refuses ``latest``, ``nightly``, a bare minor such as ``3.12``,
and an image with no tag at all (which means latest).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from policy.resources import HELM_RELEASE_TYPES, UnknownValue, is_unknown, kubernetes_objects, walk

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
FULL_VERSION = re.compile(r"(?<![0-9])[0-9]+\.[0-9]+\.[0-9]+(?![0-9])")
DATE = re.compile(r"(?<![0-9])20[0-9]{2}(?:-?)(?:0[1-9]|1[0-2])(?:-?)(?:0[1-9]|[12][0-9]|3[01])(?![0-9])")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` may move under the same name, or None for a version or dated tag."""
    if FULL_VERSION.search(tag) or DATE.search(tag):
        return None
    return f"the tag {tag!r} names no release version (x.y.z) or build date, so it can move"


def image_problem(image: str) -> str | None:
    """Why the image reference ``image`` is not pinned, or None."""
    if not image:
        return "it names no image"
    reference, _, digest = image.partition("@")
    if digest:
        return None if DIGEST.match(digest) else f"its digest {digest!r} is not sha256:<64 hex>"
    last = reference.rsplit("/", 1)[-1]
    if ":" not in last:
        return "it has no tag, which pulls latest"
    return tag_problem(last.rpartition(":")[2])


def image_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    problems = []
    for where, image in _images(resource_type, name, props):
        if is_unknown(image):
            raise UnknownValue(name, where)
        if problem := image_problem(str(image)):
            problems.append(f"{where} uses {image!r}, which is not pinned: {problem}")
    return problems


def _images(resource_type: str, name: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    if resource_type in HELM_RELEASE_TYPES:
        yield from _helm_value_images(name, props.get("values"))
        return
    for obj in kubernetes_objects(resource_type, name, props):
        # Any pod template at any depth: Pod, Deployment, Job, JobSet, LeaderWorkerSet, CronJob...
        for path, value in walk(obj.body):
            if path and path[-1] in CONTAINER_LISTS and isinstance(value, Sequence) and not isinstance(value, str):
                for index, container in enumerate(value):
                    if isinstance(container, Mapping):
                        where = f"{obj.label} {'.'.join(path)}[{index}] ({container.get('name', '?')})"
                        yield where, container.get("image", "")


def _helm_value_images(name: str, values: Any) -> Iterator[tuple[str, Any]]:
    """Images set in a release's values: ``image: <ref>``, or ``image: {repository, tag, digest}``
    (a mapping with neither tag nor digest leaves the tag to the chart, pinned by its version)."""
    for path, value in walk(values):
        if not path or path[-1] != "image":
            continue
        where = f"Helm release {name} values.{'.'.join(path)}"
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, Mapping):
            digest, tag = value.get("digest") or "", value.get("tag") or ""
            if is_unknown(digest) or is_unknown(tag):
                raise UnknownValue(name, where)
            if digest:
                yield where, f"{value.get('repository', '')}@{digest}"
            elif tag:
                yield where, f"{value.get('repository', '')}:{tag}"
