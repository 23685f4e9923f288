"""The results store: one CSV row per run, written atomically under a file lock.

Every write re-reads the file under the lock, replaces or appends the row and writes a temporary
file that is renamed over the old one, so a reader never sees a half-written file and two sweeps
writing to the same directory lose nothing.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pandas as pd
from filelock import FileLock

#: Columns of a result row, in order. ``threads``, ``device``, ``torch_version`` and ``mmcv_version``
#: are the run's protocol: runs at one seed are comparable (paired) only when they share it. ``cpu`` is the
#: CPU model the run computed on (attnbench.mm.run_setup.cpu_model; empty for rows before 2026-12-06):
#: recorded, not paired on, since a study's rows at one seed may run on two machines.
#: ``value_class_agnostic`` is detection's class-agnostic bbox AP, ``value_context`` the context accuracy
#: of the diagnostic tasks (the share of found objects given the right class); empty where not measured.
#: ``value_chrf`` is translation's validation chrF beside its BLEU (rows before 2026-12-07 have none);
#: ``heldout_bleu`` and ``heldout_chrf`` a translation run's BLEU and chrF on its corpus's held-out split
#: (the catalogues of packages outside the corpus: presets that test there, ``TranslationTask.heldout``), and
#: ``corpus`` the digest of the corpus it trained on (attnbench.data.l10n_corpus.corpus_digest; rows of the
#: same task and preset on different corpora never pair); empty elsewhere.
#: ``factors``, ``modules`` and ``params`` split the variant: its factor string, its other mechanisms,
#: its tokens' parameters (``range=7``; attnbench.variants), text; ``params_model`` and ``params_modules`` are
#: weight counts (the model's, the attention modules'), as ``macs_*`` are multiply-adds; ``macs_source`` says how
#: ``macs_modules_analytic`` was had: ``analytic`` (the modules' own ``macs()``) or ``flop_counter`` (a user's module
#: without one, counted by torch.utils.flop_counter; attnbench.flops.count_model), empty for rows before it.
#: ``module_source`` names a user's module of the row and the SHA-256 of its file (``import.Path@<16 hex>``). ``gate_start`` is
#: where the run's gates started, its preset's protocol included (attnbench.variants.Variant.gate_start: the
#: smallest; 0 the zero start; empty without a gated token, and for rows before 2026-12-06). ``gate_max`` and ``offset_mean_px`` say how far
#: the run's attention left its start, ``gate_loss_max`` how far the loss (not weight decay) moved its gates
#: and ``gate_loss_opened`` whether it opened (> 0) or closed (< 0) the gate it moved most
#: (attnbench.mm.hooks.OpeningHook); empty where it has no gate or offset, or for rows written before.
#: ``mass_context`` is the diagnostic tasks' attention mass on the deciding context (the share of an object
#: query's generalized-attention weight on the pixels that decide its class, mean over blocks, heads and
#: validation objects), ``mass_context_E1`` .. ``_E4`` each term's alone, ``mass_context_chance`` the
#: context's share of the image, uniform attention's mass (attnbench.mm.attention_mass); empty elsewhere.
#: ``loss_first`` is the training loss of the run's first iteration (its initial weights; empty for rows before it).
#: ``world_size`` is the number of processes (ranks) the run trained on and ``train_iters`` its optimizer steps
#: (each rank's batches: on N ranks an epoch has 1/N of them), empty for rows written before them.
#: ``run_seconds`` is the worker's wall time, ``val_seconds`` the validations' (within ``train_seconds``),
#: ``outside_seconds`` what was not training steps (attnbench.sweep.worker): of a resumed run, its last
#: attempt's (``train_seconds`` spans every attempt; rows before 2026-12-05 subtracted it whole, so a
#: resumed run's may be negative there); ``started_at`` and
#: ``finished_at`` the worker's own start and end (the sweep's submission time for rows before them);
#: ``wandb_id`` the run's W&B id (its page: ``https://wandb.ai/<entity>/<project>/runs/<wandb_id>`` once synced).
COLUMNS = (
    "run_id", "task", "preset", "slot", "variant", "factors", "modules", "params", "seed",
    "metric", "value", "value_class_agnostic", "value_context", "value_chrf", "heldout_bleu", "heldout_chrf", "corpus",
    "macs_modules", "macs_modules_analytic", "macs_source", "macs_model", "params_modules", "module_source",
    "params_model", "input_size", "train_iters", "train_seconds", "val_seconds", "run_seconds", "outside_seconds",
    "peak_memory_mb", "loss_first",
    "gate_start", "gate_max", "gate_loss_max", "gate_loss_opened", "offset_mean_px", "mass_context", "mass_context_chance",
    "mass_context_E1", "mass_context_E2", "mass_context_E3", "mass_context_E4",
    "threads", "world_size", "device", "cpu", "torch_version", "mmcv_version", "status", "error",
    "config", "config_hash", "attnbench_version", "git_commit", "started_at", "finished_at", "wandb_id",
)


#: Columns read as text whatever they look like: a store whose rows so far are all ``0010`` must not
#: read its variant as the number 10 (and write it back so), nor a hex config hash as a number.
TEXT_COLUMNS = (
    "run_id", "task", "preset", "slot", "variant", "factors", "modules", "params", "metric", "input_size", "corpus",
    "macs_source", "module_source",
    "device", "cpu", "torch_version", "mmcv_version", "status", "error", "config", "config_hash", "attnbench_version",
    "git_commit", "started_at", "finished_at", "wandb_id",
)

#: Columns every store has had since the first release; a CSV without them is not a results store.
#: The others were added later: rows written before them read as empty there.
REQUIRED_COLUMNS = ("run_id", "task", "preset", "variant", "seed", "metric", "value", "status")


def finished_runs(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of the runs that finished (status ``ok``), the one place that says what a finished run is."""
    return results[results["status"] == "ok"]


class ResultsStoreError(ValueError):
    """A results.csv that is missing, empty, not a results store or damaged (one line, for the user)."""


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
        """Every row, with all of :data:`COLUMNS` (none when there is no store yet).

        Raises :class:`ResultsStoreError` for a file this store did not write or that was damaged:
        empty, unparseable, without the required columns, or cut short (the store always ends in a
        newline and every row has a run id, task and status).
        """
        if not self.path.exists():
            return pd.DataFrame(columns=list(COLUMNS))
        text = self.path.read_bytes()
        if not text.strip():
            raise ResultsStoreError(f"{self.path} is empty: not a results store (delete it, or choose another --results)")
        try:
            df = pd.read_csv(self.path, dtype=dict.fromkeys(TEXT_COLUMNS, str))
        except (pd.errors.ParserError, UnicodeDecodeError) as e:
            raise ResultsStoreError(f"{self.path} is not a readable CSV ({str(e).splitlines()[0]}): "
                                    "not a results store, or a damaged one") from None
        missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
        if missing:
            raise ResultsStoreError(f"{self.path} is not an attnbench results store (no column {', '.join(missing)}); "
                                    "point --results at a directory the sweep wrote")
        incomplete = df.index[df[["run_id", "task", "status"]].isna().any(axis=1)]
        if not text.endswith(b"\n") or len(incomplete):
            line = int(incomplete[0]) + 2 if len(incomplete) else len(df) + 1  # 1-based, after the header
            raise ResultsStoreError(f"{self.path} is damaged: line {line} is cut short or incomplete "
                                    "(restore it from a copy, or delete that line and rerun the sweep to redo the run)")
        return df.reindex(columns=[*COLUMNS, *(c for c in df.columns if c not in COLUMNS)])

    def read_existing(self) -> pd.DataFrame:
        """:meth:`read`, and a :class:`ResultsStoreError` when there is no store at all (tools that only read)."""
        if not self.path.exists():
            where = "no such directory" if not self.root.is_dir() else "no results.csv there"
            raise ResultsStoreError(f"no results store at {self.root} ({where}); run tools/sweep.py --results "
                                    f"{self.root} first, or point --results at a directory it wrote")
        return self.read()

    def completed(self) -> set[str]:
        """Run ids recorded with status ``ok``."""
        return set(finished_runs(self.read())["run_id"])

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


def tasks_in(results: pd.DataFrame, tasks: str, where: str) -> list[str]:
    """The tasks of ``--tasks`` (comma-separated); ValueError naming those without a run in ``results`` (the
    store ``where``) and the tasks it has."""
    wanted = [task.strip() for task in tasks.split(",") if task.strip()]
    found = set(results["task"])
    if unknown := sorted(set(wanted) - found):
        raise ValueError(f"--tasks {','.join(unknown)}: no runs in {where} (tasks there: {','.join(sorted(found))})")
    return wanted


def read_store_or_exit(root: str | os.PathLike, prog: str) -> pd.DataFrame:
    """The rows of an existing store, for the command-line tools: a store problem ends the
    program with one line (``PROG: error: ...``) and exit status 1, not a traceback."""
    try:
        return ResultsStore(root).read_existing()
    except ResultsStoreError as e:
        sys.exit(f"{prog}: error: {e}")
