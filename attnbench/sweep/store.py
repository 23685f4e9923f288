"""The results store: one CSV row per run, written atomically under a file lock.

Every write re-reads the file under the lock, replaces or appends the row and writes a temporary
file that is renamed over the old one, so a reader never sees a half-written file and two sweeps
writing to the same directory lose nothing.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
from filelock import FileLock

#: Columns of a result row, in order.
COLUMNS = (
    "run_id", "task", "preset", "slot", "variant", "factors", "modules", "seed",
    "metric", "value", "macs_modules", "macs_modules_analytic", "macs_model", "params_modules",
    "params_model", "input_size", "train_seconds", "peak_memory_mb", "status", "error",
    "config", "config_hash", "attnbench_version", "git_commit", "started_at", "finished_at",
)


class ResultsStore:
    """``<root>/results.csv`` with a lock file beside it."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.path = self.root / "results.csv"
        self._lock = FileLock(str(self.path) + ".lock")

    def check_writable(self) -> None:
        """Create the directory and prove it writable, or raise ``ValueError``."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root):
                pass
        except OSError as e:
            raise ValueError(f"results directory {self.root} is not writable: {e.strerror or e}") from e

    def read(self) -> pd.DataFrame:
        if not self.path.exists():
            return pd.DataFrame(columns=list(COLUMNS))
        return pd.read_csv(self.path, dtype={"factors": str, "slot": str, "modules": str})

    def completed(self) -> set[str]:
        """Run ids recorded with status ``ok``."""
        df = self.read()
        return set(df.loc[df["status"] == "ok", "run_id"])

    def record(self, row: dict) -> None:
        """Insert or replace the row with ``row['run_id']``."""
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown result columns: {sorted(unknown)}")
        with self._lock:
            df = self.read()
            df = df[df["run_id"] != row["run_id"]]
            new = pd.DataFrame([{c: row.get(c) for c in COLUMNS}])
            df = new if df.empty else pd.concat([df, new], ignore_index=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".results-", suffix=".csv")
            try:
                with os.fdopen(fd, "w") as f:
                    df.to_csv(f, index=False)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
