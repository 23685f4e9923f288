"""Build a folder once, whoever asks first: the generated data sets and the token stores."""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def build_once(folder: str | Path, done: Callable[[Path], bool], write: Callable[[Path], None],
               clear_unfinished: bool = False) -> Path:
    """``folder``, written by ``write(tmp)`` unless ``done(folder)`` says it is there.

    Safe from many processes at once (distributed ranks, parallel sweeps): one builds under the file lock
    ``<folder>.lock`` into a temporary sibling folder that it then renames to ``folder``, so ``folder`` is
    complete whenever it exists; should the lock not hold (some network file systems), the rename still
    lets only one copy through. ``clear_unfinished``: under the lock no other builder runs, so a ``folder``
    that is not ``done`` and the temporary folders beside it were left by a killed builder: delete them.
    """
    folder = Path(folder)
    if done(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        if done(folder):
            return folder
        if clear_unfinished:
            for unfinished in [folder, *folder.parent.glob(f".{folder.name}.tmp-*")]:
                shutil.rmtree(unfinished, ignore_errors=True)
        tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex}")  # mkdtemp's 0o700 would stick to folder
        try:
            write(tmp)
            try:
                tmp.rename(folder)
            except OSError:  # another node won the race without seeing our lock
                if not done(folder):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
