"""Refresh the tables of a markdown file from the results stores they were made from.

A table is kept between two markers, the first of which holds the `tools/compare.py` arguments
that print it:

    <!-- compare.py --results results/mini-sweep --tasks det --format markdown -->
    | task | ... |
    <!-- end compare.py -->

    python tools/readme_tables.py            # rewrite README.md's tables from the results stores
    python tools/readme_tables.py --check    # exit 1, naming the stale tables, if any differs
"""
import argparse
import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

import compare as compare_py  # tools/compare.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- compare\.py (?P<args>[^\n]*?) -->\n)(?P<table>.*?)(<!-- end compare\.py -->)", re.S)


def compare(args: str) -> str:
    """What `tools/compare.py ARGS` prints, run from the repository root (relative paths start there)."""
    printed = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(printed):
        compare_py.main(shlex.split(args))
    return printed.getvalue().rstrip("\n") + "\n"


def refresh(text: str) -> tuple[str, list[str]]:
    """TEXT with every marked table regenerated, and the arguments of the tables that changed."""
    stale = []

    def fill(block: re.Match) -> str:
        table = compare(block["args"])
        if table != block["table"]:
            stale.append(block["args"])
        return block.group(1) + table + block.group(4)

    return BLOCK.sub(fill, text), stale


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", default=str(ROOT / "README.md"))
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = p.parse_args()
    path = Path(args.path)
    text = path.read_text()
    if not BLOCK.search(text):
        p.error(f"{path} has no '<!-- compare.py ARGS -->' ... '<!-- end compare.py -->' block")
    new, stale = refresh(text)
    for block in stale:
        print(f"{'stale' if args.check else 'updated'}: compare.py {block}")
    if args.check:
        sys.exit(1 if stale else 0)
    path.write_text(new)


if __name__ == "__main__":
    main()
