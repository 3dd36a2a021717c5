"""The test side of the CIS registry (policy/cis.yaml): which of the tests' own stacks its rows "held in production"
are held on (checkov's scan renders those, not the user's Pulumi.<stack>.yaml). tests/test_cis_benchmark.py holds
the registry's policy rules and preview keys and the table generated from it; tests/test_security_checkov.py runs its
checkov checks."""

from __future__ import annotations

import yaml

from tests.conftest import FIXTURE_STACKS

STACK_FILES = sorted(FIXTURE_STACKS.glob("Pulumi.*.yaml"))


def production_stacks() -> list[str]:
    """The tests' stacks whose file says ``production: true``: where a row "held in production" must hold."""
    found = []
    for path in STACK_FILES:
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        if any(key.endswith(":production") and value is True for key, value in config.items()):
            found.append(path.name.split(".")[1])
    return found
