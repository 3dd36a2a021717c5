"""Every container image pinned: a digest, or a tag that carries a full version or a date.

A tag is a pointer the registry owner may move. What counts as pinned is the program's own rule
(``components.config_base.image_unpinned_reason``, which the config blocks apply to the images
they set); this module finds every image a resource deploys, in pod templates at any depth and in
Helm values, including those no config block sets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.config_base import image_unpinned_reason
from policy.resources import HELM_RELEASE_TYPES, UnknownValue, is_unknown, kubernetes_objects, walk

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def image_problems(resource_type: str, name: str, props: Mapping[str, Any]) -> list[str]:
    problems = []
    for where, image in _images(resource_type, name, props):
        if is_unknown(image):
            raise UnknownValue(name, where)
        if problem := image_unpinned_reason(str(image)):
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
