"""Every shell command the README and docs/ show, run the way a new user types it, on a fresh copy.

The commands are collected from the fenced ``bash`` blocks of README.md and docs/*.md, in document
order, and run in one temporary copy of the repository's tracked files (no ``data/``, no
``work_dirs/``, no results beyond the committed ones), with the environment's ``.venv`` linked in
and this copy's ``attnbench`` first on the path. Each command matches exactly one rule of
:data:`RULES`, which says how it is run:

* ``as_typed``: unchanged (``python`` is the environment's interpreter, as with ``.venv`` active);
* ``smoke``: a training sweep with ``--preset smoke`` added (the same code path, a few iterations);
* ``dry_run``: a sweep too large for CI with ``--dry-run`` added (and ``--factors all`` cut to one
  factor set at full scale, where every model is built at 800x1333);
* ``short_training``: ``tools/train.py`` / ``tools/test.py`` for 2 iterations instead of 500;
* ``skip``: cannot run here, with the reason.

A documented command that matches no rule fails the test: a new command gets a rule when it is
documented. Later commands see what earlier ones wrote (``compare.py`` reads the sweep's store).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # sweeps, training and the tools' own runs: minutes
ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Rule:
    pattern: str  # regular expression searched in the command
    how: str      # as_typed, smoke, dry_run, short_training or skip
    why: str = ""


RULES = [
    Rule(r"-m pytest", "skip", "the test suite itself (CI runs it)"),
    Rule(r"--launcher slurm", "dry_run", "submitting needs a Slurm cluster: the plan is checked"),
    Rule(r"sweep\.py .*--gpus", "dry_run", "needs GPUs: the plan is checked"),
    Rule(r"--config configs/segmentation/.*ade20k", "dry_run", "ADE20K is not here: the dry run names the missing folder"),
    Rule(r"--config path/to/", "skip", "path/to/ stands for a config of your own; tests/test_data_roots.py runs one"),
    Rule(r"--data-root det=/datasets/", "dry_run", "COCO is not here: the dry run names the missing folder"),
    Rule(r"slurm_local\.sh", "skip", "starts Slurm's daemons: tests/test_slurm.py runs it and a sweep on it"),
    Rule(r"^export ", "as_typed"),
    Rule(r"--modules my_attention\.", "skip", "a user's module: tests/test_user_modules.py sweeps examples/my_attention.py "
         "against 0010 on det and seg at the smoke preset and reads the rows"),
    Rule(r"make_l10n_corpus\.py --debs DIR", "skip", "DIR stands for a folder of your own .deb files"),
    Rule(r"make_l10n_corpus\.py", "skip", "rebuilds the committed corpus from 89 packages of Debian's archive (about "
         "450 MB), which CI must not depend on; tests/test_l10n_corpus.py builds, packs, unpacks and compares corpora of "
         "packages it writes, with fake apt-gets for stale lists and for versions gone from the archive"),
    Rule(r"--preset full.*--dry-run|--dry-run.*--preset full", "dry_run"),
    Rule(r"sweep\.py --study list", "as_typed"),
    Rule(r"sweep\.py --study", "skip", "the study: CPU-hours of sweeps; tests/test_studies.py dry-runs a part and plans every one"),
    Rule(r"sweep\.py .*(--factors all|--seeds [35](\s|$))", "dry_run"),
    Rule(r"sweep\.py ", "smoke"),
    Rule(r"torch\.distributed\.run", "skip", "8 GPUs and the WMT14 data"),
    Rule(r"tools/(train|test)\.py configs/translation/transformer-mini", "short_training"),
    Rule(r"tools/train\.py .*--curve", "skip", "about 20 CPU-minutes: results/l10n-curves holds such runs' output; "
         "tests/test_nmt.py records a curve of a tiny model"),
    Rule(r"tools/learning_curves\.py", "as_typed"),  # reads the committed curves (the corpus: unpacked by a sweep above)
    Rule(r"tools/study\.sh", "skip", "the study: CPU-hours of the sweeps run above"),
    Rule(r"flops_table\.py", "skip", "26 CPU-minutes at full scale; its counting path is the sweep's dry run above"),
    Rule(r"cost_card\.py .*--device cuda", "skip", "needs a CUDA GPU: tools/gpu_check.sh runs it where one is lent"),
    Rule(r"cost_card\.py .*--mechanisms", "as_typed"),  # three rows on the mini shapes: seconds
    Rule(r"cost_card\.py", "skip", "the whole card: minutes (mini) to CPU-hours (full) of timing; the mini card is "
         "committed in results/cost-card/mini-cpu/, and tests/test_cost_card.py runs the tool on tiny maps"),
    Rule(r"wandb sync", "skip", "uploads to W&B's servers (no network here)"),
    Rule(r"tools/gates\.py", "skip", "reads the runs' checkpoints, which are not committed; tests/test_gates_tool.py covers it"),
    Rule(r"benchmark_translation_data\.py", "skip", "CPU-minutes at 1 M pairs; tests/test_token_store.py covers the store"),
    Rule(r"tools/attention_maps\.py", "as_typed"),  # draws the maps of the smoke runs trained just before
    Rule(r"tools/(compare|plot|list_modules|readme_tables|generate_configs|make_mini_data)\.py|sacrebleu ", "as_typed"),
]


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) of every command in a ``bash`` fence: continuation lines joined, comments dropped."""
    found = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for block in FENCE.finditer(text):
            line_no = text[:block.start()].count("\n") + 2
            for command in block[1].replace("\\\n", " ").splitlines():
                command = " ".join(shlex.split(command, comments=True))
                if command:
                    found.append((f"{document}:{line_no}", command))
    return found


def rule_of(command: str) -> Rule:
    matches = [r for r in RULES if re.search(r.pattern, command)]
    if not matches:
        pytest.fail(f"no rule in tests/test_documented_commands.py says how to test the documented command "
                    f"{command!r}: add one (run as typed, shortened, dry run, or skipped with the reason)")
    return matches[0]


def adapted(command: str, rule: Rule) -> str:
    """The command as the test runs it (see the module docstring)."""
    if rule.how == "smoke":
        return f"{command} --preset smoke"
    if rule.how == "dry_run":
        if "--preset full" in command:
            command = command.replace("--factors all", "--factors 0010")
        return f"{command} --dry-run" if "--dry-run" not in command else command
    if rule.how == "short_training":
        command = command.replace("/iter_500.pth", "/iter_2.pth")
        if "tools/train.py" in command:  # validates on 16 samples at the end
            return command + " --cfg-options train_cfg.max_iters=2 train_cfg.val_interval=2 " \
                             "val_dataloader.dataset.indices=16"
        return command + " --cfg-options test_dataloader.dataset.indices=16"  # tools/test.py
    return command


def setup_stamp(root: Path) -> str:
    """What tools/setup.sh writes into .venv/.attnbench-setup after a plain set-up of ``root``."""
    import hashlib

    text = b"".join((root / name).read_bytes() for name in ("pyproject.toml", "tools/setup.sh", "tools/constraints.txt"))
    return hashlib.sha256(text).hexdigest()[:16] + "-auto"


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory):
    """The tracked files of the repository (a user's fresh clone), with the environment linked in.

    The README's set-up command runs in the copy on the linked environment: were the environment set up
    from other files than these, it would reinstall attnbench from the copy (a temporary folder), so the
    test stops first and says to set up again."""
    stamp = Path(sys.prefix) / ".attnbench-setup"
    if stamp.is_file() and stamp.read_text().strip() != setup_stamp(ROOT):
        pytest.fail("the environment was set up from other versions of pyproject.toml, tools/setup.sh or "
                    "tools/constraints.txt: run `bash tools/setup.sh` first")
    copy = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    (copy / ".venv").symlink_to(Path(sys.prefix))
    return copy


COMMANDS = documented_commands()


def test_the_documents_show_commands():
    assert len(COMMANDS) >= 10, COMMANDS
    assert any("sweep.py --factors 0010 --tasks det,seg,nmt" in c for _, c in COMMANDS), "the main command"


@pytest.mark.parametrize("where, command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command(fresh_copy, where, command):
    rule = rule_of(command)
    if rule.how == "skip":
        pytest.skip(f"{command}: {rule.why}")
    run = adapted(command, rule)
    bin_dir = str(Path(sys.executable).parent)
    env = os.environ | {
        "PATH": bin_dir + os.pathsep + os.environ["PATH"],  # `python` is the environment's, as when activated
        "PYTHONPATH": str(fresh_copy),  # this copy's attnbench, not the checkout the venv was installed from
        "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["bash", "-c", run], cwd=fresh_copy, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, (f"{where}: `{command}` (run as `{run}`) exited with {proc.returncode}\n"
                                  f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}")
