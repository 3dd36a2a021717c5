"""The config table of the configuration reference (docs/configuration.md), generated from the stack config schema.

python -m tools.config_table          # print the table
python -m tools.config_table --write  # replace the table in docs/configuration.md
"""

from __future__ import annotations

import argparse
import re
import sys

from components.config_base import NAMESPACE, documented_settings
from components.stack import StackConfig
from tools.stack_file import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "configuration.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def table() -> str:
    rows = ["| key | default | description |", "| --- | --- | --- |"]
    for key, default, doc in documented_settings(StackConfig):
        rows.append(f"| `{key}` | `{default}` | {doc} |")
    return "\n".join([f"Keys live in the `{NAMESPACE}` namespace.", "", *rows])


def page_with_table(text: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{PAGE.relative_to(PROJECT_ROOT)} has no {START} ... {END} section")
    return pattern.sub(lambda _: f"{START}\n{table()}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    if parser.parse_args(argv).write:
        PAGE.write_text(page_with_table(PAGE.read_text()))
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
