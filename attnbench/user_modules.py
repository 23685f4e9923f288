"""A user's own attention module in a benchmark row, named by its import path (``my_attention.MyAttention``,
a module on the path and a class in it): where its file is, and the SHA-256 of that file, which the run's
config carries, so that an edited file is a new run that never pairs with the old one.

The class follows the plugin contract (docs/openmmlab.md, "Benchmark your own mechanism"): built as
``cls(in_channels, **params)``, it maps ``(N, C, H, W)`` to the same shape, dtype and device, and has
parameters to train; it goes after a Bottleneck's conv2, as the paper's attention does. A ``macs(x)`` method
gives its analytic multiply-adds; without one they are counted (``torch.utils.flop_counter``)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: The family of a user's mechanism (the catalogue's families are the paper's and the survey's).
USER_FAMILY = "user"


def is_user_token(token: str) -> bool:
    """A token that names a class by its import path: dotted, each part an identifier."""
    parts = token.split(".")
    return len(parts) > 1 and all(part.isidentifier() for part in parts)


@dataclass(frozen=True)
class UserSource:
    """Where the class of ``import_path`` is defined: its file, the folder to put on ``sys.path``, the hash."""

    import_path: str
    file: Path
    root: Path
    sha256: str


def locate(import_path: str) -> UserSource:
    """The file of ``import_path``'s module, searched on ``sys.path`` with the current folder first (as
    ``python -c 'import my_attention'`` would); ValueError in one line where it is not there."""
    module, _, _ = import_path.rpartition(".")
    if not is_user_token(import_path):
        raise ValueError(f"{import_path!r}: a user's mechanism is named MODULE.CLASS, e.g. my_attention.MyAttention")
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        spec = importlib.util.find_spec(module)
    except ImportError as error:
        raise ValueError(f"{import_path}: its module does not import ({error})") from None
    finally:
        if added:
            sys.path.remove(here)
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ValueError(f"{import_path}: no module {module!r} on the path (the current folder, then PYTHONPATH)")
    file = Path(spec.origin).resolve()
    depth = module.count(".") + (file.name == "__init__.py")
    return UserSource(import_path, file, file.parents[depth], hashlib.sha256(file.read_bytes()).hexdigest())


def parse_value(text: str) -> int | float | bool | str:
    """A ``:name=value`` of a user's mechanism: an int, a float, true/false, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def make_importable(source: UserSource) -> None:
    """Put ``source``'s folder on this process's path and on PYTHONPATH, which the sweep's workers inherit."""
    root = str(source.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, root])
