"""The CIS GKE Benchmark v1.9.0, control by control (cis.yaml, read here): its status and what holds it. The one
registry of these claims: each preview key, policy rule and checkov check declares there the controls it holds. The
pack names them in each rule's description, tools/cis_table.py writes the table of docs/cis-benchmark.md from it, and the
tests hold every claim (tests/test_cis_benchmark.py: the policy rules and preview keys; tests/test_security_checkov.py:
the checkov checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

BENCHMARK = "CIS Google Kubernetes Engine (GKE) Benchmark v1.9.0"

# The statuses (docs/cis-benchmark.md says what each means, above the table).
HELD, HELD_IN_PRODUCTION, PARTLY, PARTLY_IN_PRODUCTION = "held", "held in production", "partly", "partly in production"
STATUSES = (HELD, HELD_IN_PRODUCTION, PARTLY, PARTLY_IN_PRODUCTION, "pending", "gap", "unchecked", "n/a")
# What holds only on the production stacks: a preview key refuses a production stack without it.
IN_PRODUCTION = (HELD_IN_PRODUCTION, PARTLY_IN_PRODUCTION)
# A status whose "held by" names something; the others name nothing.
HOLDING = (HELD, HELD_IN_PRODUCTION, PARTLY, PARTLY_IN_PRODUCTION)

POLICY = "policy:"
CHECKOV_ID = re.compile(r"^CKV2?_(K8S|GCP)_\d+$")

# The recommendations of sections 4 and 5 of v1.9.0, as kube-bench numbers them (aquasecurity/kube-bench
# v0.15.6, commit 92e522b9, cfg/gke-1.9.0/policies.yaml and managedservices.yaml); sections 1 to 3 are
# one row, "1-3". Each section with the count of its recommendations:
RECOMMENDATIONS = {"4.1": 10, "4.2": 1, "4.3": 2, "4.4": 2, "4.5": 1, "4.6": 4, "5.1": 4, "5.2": 2, "5.3": 1, "5.4": 1}
RECOMMENDATIONS |= {"5.5": 7, "5.6": 7, "5.7": 2, "5.8": 3, "5.9": 2, "5.10": 4}
NUMBERS = ("1-3", *(f"{section}.{n}" for section, count in RECOMMENDATIONS.items() for n in range(1, count + 1)))


@dataclass(frozen=True)
class Control:
    number: str
    recommendation: str
    status: str
    held_by: tuple[str, ...] = ()
    not_yet: tuple[str, ...] = ()  # checkov checks that will hold it once another change lands (pending, gap)
    note: str = ""  # why, where the status is not plainly held (Markdown, as the page shows it)

    def checkov(self, items: tuple[str, ...], framework: str) -> list[str]:
        """The checkov checks of ``framework`` (K8S or GCP) among ``items``."""
        return [i for i in items if CHECKOV_ID.match(i) and f"_{framework}_" in i]


def controls_held_by(holder: str) -> list[str]:
    """The controls ``holder`` (``policy:<rule>``, ``preview:<key>`` or a checkov check) holds, in benchmark order."""
    return [control.number for control in CONTROLS if holder in control.held_by]


# Each entry of cis.yaml, its lists as tuples; an unknown key is a TypeError.
CONTROLS: tuple[Control, ...] = tuple(
    Control(**{**entry, "held_by": tuple(entry.get("held_by", ())), "not_yet": tuple(entry.get("not_yet", ()))})
    for entry in yaml.safe_load((Path(__file__).parent / "cis.yaml").read_text())
)
