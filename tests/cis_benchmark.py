"""The test side of the CIS registry (policy/cis.yaml): which of the tests' own stacks its rows "held in production"
are held on (checkov's scan renders those, not the user's Pulumi.<stack>.yaml). tests/test_cis_benchmark.py holds
the registry's policy rules and preview keys and the table generated from it; tests/test_security_checkov.py runs its
checkov checks."""

from __future__ import annotations

from tests.conftest import FIXTURE_STACK_NAMES, stack_config


def production_stacks() -> list[str]:
    """The tests' stacks the program takes as production (``production: true``, validated as the preview reads it):
    where a row "held in production" must hold."""
    return [stack for stack in FIXTURE_STACK_NAMES if stack_config(stack).production]
