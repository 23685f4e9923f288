"""Table of variants from a results store: mean ± std over seeds, delta vs baseline, FLOPs.

The command is attnbench.commands.compare (its docstring and `--help` say more): `python tools/compare.py --help`."""
import sys

from attnbench.commands.compare import main

if __name__ == "__main__":
    sys.exit(main())
