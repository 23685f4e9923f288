"""How far the attention of a store's vision runs left its start: the final |gamma| of every gated block

The command is attnbench.commands.gates (its docstring and `--help` say more): `python tools/gates.py --help`."""
import sys

from attnbench.commands.gates import main

if __name__ == "__main__":
    sys.exit(main())
