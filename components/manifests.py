"""Loads the YAML bases under manifests/ as plain dicts for the Python overlays."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"


@lru_cache(maxsize=None)
def _load(relative_path: str) -> tuple[dict[str, Any], ...]:
    with open(MANIFESTS / relative_path) as stream:
        return tuple(doc for doc in yaml.safe_load_all(stream) if doc)


def load_documents(relative_path: str) -> list[dict[str, Any]]:
    """Fresh copies of every document in a manifest file, safe to overlay."""
    return copy.deepcopy(list(_load(relative_path)))


def by_kind(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (document,) = [d for d in documents if d["kind"] == kind]
    return document
