"""Import paths that moved, kept working with a DeprecationWarning until attnbench 0.2: the old name imports
the module at its new place (one module object under both names)."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Old module path -> where it lives now (the analysis floor left ``sweep`` and ``mm`` in 0.1.1).
MOVED = {
    **{f"attnbench.sweep.{name}": f"attnbench.analysis.{name}"
       for name in ("stats", "summary", "effects", "claims", "plots", "published", "report", "curves", "studies")},
    "attnbench.mm.gates": "attnbench.analysis.gates",
    "attnbench.mm.attention_figures": "attnbench.analysis.attention_figures",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each old path of :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {MOVED[spec.name]}; the old path goes in attnbench 0.2",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module) -> None:
        """Nothing to run: the module at the new path is loaded already."""


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
