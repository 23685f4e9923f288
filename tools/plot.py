"""Accuracy-versus-FLOPs trade-off plots from a results store (PNG and SVG).

The command is attnbench.commands.plot (its docstring and `--help` say more): `python tools/plot.py --help`."""
import sys

from attnbench.commands.plot import main

if __name__ == "__main__":
    sys.exit(main())
