"""What `make test` runs without: a program or a file that .venv does not hold.

A test that needs one (checkov, mkdocs, Renovate on Node.js, or files fetched from the network: the registry charts of
charts.lock, the CRD files of schemas.lock) is marked ``external`` (declared in pytest.ini). `make check-tools`
installs the programs and runs exactly those tests; `make test` runs the others. Every place that reaches for such a
program or file calls ``require``, which fails a test that is not marked, so none slips into `make test` unmarked.
"""

from __future__ import annotations

from typing import Any

import pytest

MARK = "external"
running: list[Any] = []  # the test being run (tests/conftest.py keeps it here)


def require(what: str) -> None:
    """Fail the running test unless it is marked ``external``: it is about to use ``what``."""
    if running and running[-1].get_closest_marker(MARK) is None:
        pytest.fail(
            f"{running[-1].nodeid} uses {what}, which .venv does not hold: mark it @pytest.mark.{MARK} "
            "(make check-tools runs it, make test does not)",
            pytrace=False,
        )
