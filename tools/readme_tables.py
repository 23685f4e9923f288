"""Refresh the results tables of the README and docs/ from the results stores they were made from.

A table is kept between two markers, the first of which holds the `tools/compare.py` arguments
that print it (paths in them are relative to the repository root, wherever the file is):

    <!-- compare.py --results results/mini-sweep --tasks det --format markdown -->
    | task | ... |
    <!-- end compare.py -->

    python tools/readme_tables.py            # rewrite the tables of README.md and docs/*.md
    python tools/readme_tables.py --check    # exit 1, naming the stale tables, if any differs
    python tools/readme_tables.py FILE.md    # only that file (an error if it has no table)

With no FILE, README.md and every docs/*.md file that holds such a table are refreshed (or
checked); files without a table are skipped.
"""
import argparse
import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

from attnbench.commands import compare as compare_py

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


def documents() -> list[Path]:
    """README.md and the docs/*.md files, the files refreshed when none is named."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="path",
                   help="markdown files to refresh (default: README.md and docs/*.md, those with tables)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = p.parse_args()
    paths = [Path(path) for path in args.paths]
    for path in paths:
        if not path.is_file():
            p.error(f"{path}: no such file")
        if not BLOCK.search(path.read_text()):
            p.error(f"{path} has no '<!-- compare.py ARGS -->' ... '<!-- end compare.py -->' block")
    if not paths:
        paths = [path for path in documents() if path.is_file() and BLOCK.search(path.read_text())]
        if not paths:
            p.error("neither README.md nor docs/*.md has a '<!-- compare.py ARGS -->' block")
    any_stale = False
    for path in paths:
        text = path.read_text()
        new, stale = refresh(text)
        shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        for block in stale:
            print(f"{'stale' if args.check else 'updated'}: compare.py {block}  ({shown})")
        any_stale |= bool(stale)
        if not args.check and new != text:
            path.write_text(new)
    if args.check:
        sys.exit(1 if any_stale else 0)


if __name__ == "__main__":
    main()
