"""Every container image pinned: a digest, or a tag that carries a full version or a date; by digest where the policy
config requires digests.

A tag is a pointer the registry owner may move. What counts as pinned is the program's own rule
(``components.config_base.image_unpinned_reason``): held twice, written once, the config blocks refuse at preview
an image they set, under its key, and this module refuses every image a resource deploys, in pod templates at any
depth and in Helm values, including those no config block sets. Which of the program's stacks must pull by digest is
the stack's intent, held at preview (``images.requireDigests``, unset meaning the stack's ``production``); the pack
requires digests where its own policy config ``requireDigests`` says so, on any stack.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.config_base import ImageReference, image_unpinned_reason, walk
from policy.resources import HELM_RELEASE_TYPES, UnknownValue, is_unknown, kubernetes_objects

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
REQUIRE_DIGESTS = "requireDigests"  # the policy config's: every image by digest


def image_problems(resource_type: str, name: str, props: Mapping[str, Any], require_digests: bool = False) -> list[str]:
    problems = []
    for where, image, tag_from_chart in deployed_images(resource_type, name, props):
        if is_unknown(image):
            raise UnknownValue(name, where)
        if not tag_from_chart and (problem := image_unpinned_reason(str(image))):
            problems.append(f"{where} uses {image!r}, which is not pinned: {problem}")
        elif require_digests and not ImageReference.parse(str(image)).digest:
            shown = f"{image!r} with the chart's own tag" if tag_from_chart else repr(image)
            problems.append(
                f"{where} uses {shown}, which has no digest where the policy config requires digests ({REQUIRE_DIGESTS}): "
                "its tag can be moved under it; pin the digest (docs/supply-chain.md)"
            )
    return problems


def deployed_images(resource_type: str, name: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(where, image, whether the chart picks its tag) of every image the resource deploys."""
    if resource_type in HELM_RELEASE_TYPES:
        yield from _helm_value_images(name, props.get("values"))
        return
    for obj in kubernetes_objects(resource_type, name, props):
        # Any pod template at any depth: Pod, Deployment, Job, JobSet, LeaderWorkerSet, CronJob...
        for path, value in walk(obj.body):
            if not path or path[-1] not in CONTAINER_LISTS:
                continue
            if is_unknown(value):  # its images are not known: never pass it
                raise UnknownValue(name, f"{obj.label} {'.'.join(path)}")
            if isinstance(value, Sequence) and not isinstance(value, str):
                for index, container in enumerate(value):
                    if isinstance(container, Mapping):
                        where = f"{obj.label} {'.'.join(path)}[{index}] ({container.get('name', '?')})"
                        yield where, container.get("image", ""), False


def _helm_value_images(name: str, values: Any) -> Iterator[tuple[str, Any, bool]]:
    """Images set in a release's values: ``image: <ref>``, ``image: {[registry,] repository, tag, digest}``
    (a tag may carry a digest, `v1.2.3@sha256:...`, for charts that read `<repository>:<tag>`), or such a
    mapping one level down (``image: {manager: {repository, tag}}``). A mapping with a repository but neither
    tag nor digest leaves the tag to the chart, pinned by the chart's version but not by a digest."""
    for path, value in walk(values):
        if not path or path[-1] != "image":
            continue
        where = f"Helm release {name} values.{'.'.join(path)}"
        if isinstance(value, str):
            yield where, value, False
        elif isinstance(value, Mapping):
            nested = {k: v for k, v in value.items() if isinstance(v, Mapping) and "repository" in v}
            if nested and "repository" not in value:
                for key, inner in nested.items():
                    yield from _image_mapping(name, f"{where}.{key}", inner)
            else:
                yield from _image_mapping(name, where, value)


def _image_mapping(name: str, where: str, value: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    parts = [value.get(key) or "" for key in ("registry", "repository", "tag", "digest")]
    if any(is_unknown(part) for part in parts):
        raise UnknownValue(name, where)
    registry, repository, tag, digest = (str(part) for part in parts)
    reference = f"{registry}/{repository}" if registry else repository
    if tag or digest:
        yield where, str(ImageReference(reference, tag, digest)), False
    elif repository:
        yield where, reference, True
