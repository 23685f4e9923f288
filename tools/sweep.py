"""Train, evaluate and FLOP-count attention variants; record them and plot accuracy vs FLOPs.

The command is attnbench.commands.sweep (its docstring and `--help` say more): `python tools/sweep.py --help`."""
import sys

from attnbench.commands.sweep import main

if __name__ == "__main__":
    sys.exit(main())
