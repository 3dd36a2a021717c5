"""GKE version strings (``1.36.0-gke.3712000``), parsed so floors compare numerically."""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")


@dataclass(frozen=True, order=True)
class GkeVersion:
    major: int
    minor: int
    patch: int
    gke: int

    @classmethod
    def parse(cls, text: str) -> GkeVersion:
        match = _VERSION.match(text) if isinstance(text, str) else None
        if not match:
            raise ValueError(f"{text!r} is not a full GKE version (MAJOR.MINOR.PATCH-gke.N)")
        return cls(*(int(g) for g in match.groups()))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}-gke.{self.gke}"
