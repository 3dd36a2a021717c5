"""The CIS GKE Benchmark table of docs/cis-benchmark.md, generated from the registry of policy/cis.yaml.

python -m tools.cis_table          # print the table
python -m tools.cis_table --write  # replace the table in docs/cis-benchmark.md
"""

from __future__ import annotations

import argparse
import sys

from policy.cis import CONTROLS, Control
from tools.config_table import with_section
from tools.stack_file import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "cis-benchmark.md"
HEADER = ("control", "recommendation", "status", "held by", "not yet held by", "note")


def _row(cells: tuple[str, ...]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def _items(items: tuple[str, ...]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def row(control: Control) -> str:
    held_by, not_yet = _items(control.held_by), _items(control.not_yet)
    return _row((control.number, control.recommendation, control.status, held_by, not_yet, control.note))


def table() -> str:
    return "\n".join([_row(HEADER), _row(tuple("---" for _ in HEADER)), *(row(c) for c in CONTROLS)])


def page_with_table(text: str) -> str:
    return with_section(text, PAGE, "cis-table", table())


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
