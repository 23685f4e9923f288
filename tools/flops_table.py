"""Full-scale FLOPs table: every variant's multiply-adds at the paper's input sizes, no training.

The command is attnbench.commands.flops_table (its docstring and `--help` say more): `python tools/flops_table.py --help`."""
import sys

from attnbench.commands.flops_table import main

if __name__ == "__main__":
    sys.exit(main())
