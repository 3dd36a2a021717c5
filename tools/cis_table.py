"""The CIS GKE Benchmark table of docs/cis-benchmark.md, generated from the registry of policy/cis.yaml.

python -m tools.cis_table          # print the table
python -m tools.cis_table --write  # replace the table in docs/cis-benchmark.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from policy.cis import CONTROLS, Control

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PAGE = PROJECT_ROOT / "docs" / "cis-benchmark.md"
START, END = "<!-- cis-table:start -->", "<!-- cis-table:end -->"
HEADER = ("control", "recommendation", "status", "held by", "not yet held by", "note")


def _row(cells: tuple[str, ...]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def _items(items: tuple[str, ...]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def row(control: Control) -> str:
    return _row(
        (
            control.number,
            control.recommendation,
            control.status,
            _items(control.held_by),
            _items(control.not_yet),
            control.note,
        )
    )


def table() -> str:
    return "\n".join([_row(HEADER), _row(tuple("---" for _ in HEADER)), *(row(c) for c in CONTROLS)])


def page_with_table(text: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{PAGE.relative_to(PROJECT_ROOT)} has no {START} ... {END} section")
    return pattern.sub(lambda _: f"{START}\n{table()}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true")
    if parser.parse_args(argv).write:
        PAGE.write_text(page_with_table(PAGE.read_text()))
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
