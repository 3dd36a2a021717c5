"""The table "Measured against the CIS GKE Benchmark" of docs/cis-benchmark.md, read as data for the tests that hold it.

Each row names a control, its status and what holds it: checkov check IDs, ``policy:<rule>`` of the
policy pack, ``preview:<config key>`` refused at preview on a production stack. tests/test_cis_benchmark.py
holds the table's shape and the policy and preview items; tests/test_security_checkov.py runs the checkov
checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from tests.conftest import PROJECT_ROOT

BENCHMARK = "CIS Google Kubernetes Engine (GKE) Benchmark v1.9.0"
PAGE = PROJECT_ROOT / "docs" / "cis-benchmark.md"
SECTION = "## Measured against the CIS GKE Benchmark"
# The recommendations of sections 4 and 5 of v1.9.0, as kube-bench numbers them (aquasecurity/kube-bench
# v0.15.6, commit 92e522b9, cfg/gke-1.9.0/policies.yaml and managedservices.yaml); sections 1 to 3 are
# one row, "1-3".
CONTROLS = (
    "1-3",
    *(f"4.1.{n}" for n in range(1, 11)),
    "4.2.1",
    "4.3.1",
    "4.3.2",
    "4.4.1",
    "4.4.2",
    "4.5.1",
    *(f"4.6.{n}" for n in range(1, 5)),
    *(f"5.1.{n}" for n in range(1, 5)),
    "5.2.1",
    "5.2.2",
    "5.3.1",
    "5.4.1",
    *(f"5.5.{n}" for n in range(1, 8)),
    *(f"5.6.{n}" for n in range(1, 8)),
    "5.7.1",
    "5.7.2",
    *(f"5.8.{n}" for n in range(1, 4)),
    "5.9.1",
    "5.9.2",
    *(f"5.10.{n}" for n in range(1, 5)),
)
HELD_IN_PRODUCTION = "held in production"
PARTLY_IN_PRODUCTION = "partly in production"
# The statuses that hold only on the production stacks: a preview key refuses a production stack without them.
IN_PRODUCTION = (HELD_IN_PRODUCTION, PARTLY_IN_PRODUCTION)
STATUSES = ("held", HELD_IN_PRODUCTION, "partly", PARTLY_IN_PRODUCTION, "pending", "gap", "unchecked", "n/a")
# What holds a control: a status whose "held by" must name something, and one whose must be empty.
HOLDING = ("held", HELD_IN_PRODUCTION, "partly", PARTLY_IN_PRODUCTION)
CHECKOV_ID = re.compile(r"^CKV2?_(K8S|GCP)_\d+$")
POLICY, PREVIEW = "policy:", "preview:"


STACK_FILES = sorted(PROJECT_ROOT.glob("Pulumi.*.yaml"))


def production_stacks() -> list[str]:
    """The committed stacks whose file says ``production: true``: where a row "held in production" must hold."""
    found = []
    for path in STACK_FILES:
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        if any(key.endswith(":production") and value is True for key, value in config.items()):
            found.append(path.name.split(".")[1])
    return found


@dataclass(frozen=True)
class Row:
    control: str
    recommendation: str
    status: str
    held_by: tuple[str, ...]
    not_yet: tuple[str, ...]
    note: str

    def checkov(self, items: tuple[str, ...], framework: str) -> list[str]:
        return [i for i in items if CHECKOV_ID.match(i) and f"_{framework}_" in i]

    @property
    def policies(self) -> list[str]:
        return [i.removeprefix(POLICY) for i in self.held_by if i.startswith(POLICY)]

    @property
    def preview_keys(self) -> list[str]:
        return [i.removeprefix(PREVIEW) for i in self.held_by if i.startswith(PREVIEW)]


def _items(cell: str) -> tuple[str, ...]:
    return tuple(re.findall(r"`([^`]+)`", cell))


def table_lines(page: str) -> list[str]:
    """The lines of the section's table (header and separator included)."""
    _, found, after = page.partition(f"\n{SECTION}\n")
    assert found, f"docs/cis-benchmark.md has no section {SECTION!r}"
    section = after.split("\n### ", 1)[0].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def rows(page: str | None = None) -> list[Row]:
    text = page if page is not None else PAGE.read_text()
    header, _separator, *body = table_lines(text)
    assert header == "| control | recommendation | status | held by | not yet held by | note |", header
    parsed = []
    for line in body:
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]
        assert len(cells) == 6, f"a row of the CIS table needs 6 cells: {line}"
        control, recommendation, status, held_by, not_yet, note = cells
        parsed.append(Row(control, recommendation, status, _items(held_by), _items(not_yet), note))
    return parsed
