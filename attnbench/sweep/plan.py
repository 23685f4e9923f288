"""A sweep's plan: the runs of (task, variant, seed), each with its config and identity."""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache, cached_property

from attnbench.attention.factors import ALL_FACTORS
from attnbench.variants import SLOTS, TRANSLATION_TASKS, Variant

from .tasks import PRESETS, TASKS, user_task


@cache
def _config_file(path: str):
    """The config file at ``path``, resolved once per process (read only: runs copy it to change it)."""
    from mmengine.config import Config

    return Config.fromfile(path)


@cache
def _config_text(path: str) -> str:
    """Its ``pretty_text``, formatted once: yapf takes 0.1-0.5 s a call, and a plan hashes every run's config."""
    return _config_file(path).pretty_text


@dataclass(frozen=True)
class Run:
    task: str
    preset: str
    variant: str
    seed: int
    slot: str | None = None
    config: str = ""
    cfg_options: dict = field(default_factory=dict)
    procs: int = 1  # processes (ranks) the run trains on: one per GPU, or gloo ranks on CPUs

    @property
    def config_key(self) -> tuple[str, str]:
        """The config file and its overrides: runs that share it build one model and read one data set."""
        return self.config, json.dumps(self.cfg_options, sort_keys=True)

    @property
    def _resolved_config(self):
        return _config_file(self.config)

    def config_with_options(self):
        """A copy of the run's config with its ``cfg_options`` applied."""
        cfg = copy.deepcopy(self._resolved_config)
        cfg.merge_from_dict(self.cfg_options)
        return cfg

    @cached_property
    def config_hash(self) -> str:
        """Hash of the resolved config, overrides, seed and (above one) process count: a changed config, or
        the same config on another number of ranks, is a new run."""
        text = _config_text(self.config) + json.dumps(self.cfg_options, sort_keys=True)
        ranks = f"|procs={self.procs}" if self.procs > 1 else ""
        return hashlib.sha1(f"{text}|seed={self.seed}{ranks}".encode()).hexdigest()[:10]

    @property
    def cpu_threads(self) -> int | None:
        """The CPU threads the run's config fixes (``cpu_threads``; part of its protocol), if any."""
        return self.cfg_options.get("cpu_threads", self._resolved_config.get("cpu_threads"))

    @cached_property
    def parsed(self) -> Variant:
        return Variant.parse(self.variant)

    @cached_property
    def run_id(self) -> str:
        variant = self.variant.replace("+", "-").replace(":", "-").replace("=", "")
        parts = [self.task, self.preset, self.slot, variant, f"seed{self.seed}"]
        return "_".join(p for p in parts if p) + f"_{self.config_hash}"

    @property
    def factors(self) -> str | None:
        return self.parsed.factors

    @property
    def modules(self) -> str:
        """The mechanisms other than the generalized attention, ``+``-joined, without parameters."""
        return "+".join(t for t in self.parsed.tokens if t != self.parsed.factors)

    @property
    def params(self) -> str:
        return self.parsed.parameter_text

    def to_dict(self) -> dict:
        return asdict(self) | {"run_id": self.run_id, "params": self.params}


def _data_root_options(config: str, options: dict, data_root: str) -> dict:
    from mmengine.config import Config

    from attnbench.config_files import data_root_options

    cfg = Config.fromfile(config)
    cfg.merge_from_dict(options)
    return data_root_options(cfg, data_root)


def check_data(runs: list[Run]) -> None:
    """Raise ``ValueError`` (one line: the task, the dataloader, the folder and the flag that sets it) for the
    first run whose data is not there and is not data its dataset writes on first use."""
    from attnbench.config_files import missing_data
    from attnbench.mm.run_setup import generating_dataset

    checked = set()
    for run in runs:
        if run.config_key in checked:
            continue
        checked.add(run.config_key)
        for split, dataset in missing_data(run.config_with_options()):
            if not generating_dataset(dataset.get("type")):
                raise ValueError(
                    f"task {run.task}: {split}'s data_root {dataset['data_root']!r} does not exist: put the "
                    f"{dataset.get('type', 'dataset')} data there (docs/openmmlab.md, 'Data sets') or point the "
                    f"sweep at it with --data-root {run.task}=PATH")


def parse_factors(spec: str) -> list[str]:
    """``'0110,0010:range=7'`` or ``'all'`` -> factor strings, with their parameters (validated)."""
    if spec.strip() == "all":
        return list(ALL_FACTORS)
    variants = [Variant.parse(s.strip()) for s in spec.split(",") if s.strip()]
    others = [v.name for v in variants if v.factors is None or len(v.tokens) > 1]
    if others:
        raise ValueError(f"--factors takes factor strings E1E2E3E4 (parameters allowed, e.g. 0100:range=7); "
                         f"{others} go in --modules")
    return [v.name for v in variants]


def seed_list(text: str) -> list[int]:
    """Seeds written ``A-B``, ``A,B,C`` or a mix (``0,2-4``) -> the seeds, each once, in order; ValueError
    otherwise. The one reader of a seed list (:func:`parse_seeds` adds the count)."""
    seeds = []
    for item in text.split(","):
        first, _, last = item.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"{text!r}: give seeds as A-B, A,B,C or a mix (e.g. 12-19 or 0,2-4)")
        if last and int(last) < int(first):
            raise ValueError(f"{text!r}: a range runs up, A-B with A <= B ({last}-{first}?)")
        seeds += range(int(first), int(last or first) + 1)
    return list(dict.fromkeys(seeds))


def parse_seeds(text: str) -> list[int]:
    """``--seeds`` of tools/sweep.py and tools/compare.py: a count ``N`` (seeds 0 .. N-1), or the seeds themselves
    (:func:`seed_list`), so that a study adds fresh seeds (``12-19``) without re-listing the old ones;
    one seed alone is ``A-A``."""
    text = text.strip()
    if text.isdigit():
        if int(text) < 1:
            raise ValueError(f"--seeds must be a positive count or a list of seeds (e.g. 12-19), got {text!r}")
        return list(range(int(text)))
    try:
        return seed_list(text)
    except ValueError as error:
        raise ValueError(f"--seeds {error}; or a count N (seeds 0 .. N-1)") from None


def build_plan(tasks: list[str], factors: list[str], modules: list[str], seeds: int | list[int], preset: str,
               slot: str | None = None, baseline: bool = True, threads: int | None = None,
               cfg_options: dict | None = None, procs: int = 1, data_roots: dict | None = None,
               user_configs: list[str] = ()) -> list[Run]:
    """Every (task, variant, seed) run, seed by seed; raises ``ValueError`` on any bad input before training.

    ``seeds`` is a count (seeds 0 .. N-1) or the seeds themselves (:func:`parse_seeds`).

    ``threads`` overrides the CPU threads the configs fix (``cpu_threads``): a run with another
    thread count computes other numbers, so it is another run (its own config hash and run id).
    ``cfg_options`` are applied to every run's config after the task's own (``--cfg-options``), and
    ``procs`` is the number of processes each run trains on (``--procs-per-run``): another run too.
    ``data_roots`` maps a task to the folder its datasets read (``--data-root TASK=PATH``), and each of
    ``user_configs`` (``--config``) is a task of its own, named after its file (:func:`~.tasks.user_task`).
    """
    if threads is not None and threads < 1:
        raise ValueError(f"--threads must be a positive integer, got {threads}")
    if not isinstance(procs, int) or procs < 1:
        raise ValueError(f"--procs-per-run must be a positive integer, got {procs}")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {PRESETS}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"--seeds must be a positive integer, got {seeds}")
        seeds = range(seeds)
    if not seeds or any(s < 0 for s in seeds):
        raise ValueError(f"--seeds must name at least one seed, none negative; got {list(seeds)}")
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; choose from {sorted(TASKS)}")
    users = [user_task(config) for config in dict.fromkeys(user_configs)]
    if len({task.name for task in users}) < len(users):
        raise ValueError(f"--config {' '.join(user_configs)}: two files of one name would be one task (a task is "
                         "named after its file); rename one")
    chosen = {name: TASKS[name] for name in tasks} | {task.name: task for task in users}
    tasks = list(chosen)
    if slot is not None and slot not in SLOTS:
        raise ValueError(f"unknown slot {slot!r}; choose from {tuple(SLOTS)}")
    if slot is not None and not set(tasks) & set(TRANSLATION_TASKS):
        raise ValueError(f"--slot {slot} applies to the translation tasks {TRANSLATION_TASKS} only; tasks given: {tasks}")
    unknown = [t for t in (data_roots or {}) if t not in tasks]
    if unknown:
        raise ValueError(f"--data-root names task(s) {unknown} that the sweep does not run (tasks: {tasks})")
    variants = (["baseline"] if baseline else []) + factors + modules
    if not variants:
        raise ValueError("nothing to run: give --factors and/or --modules")
    rows = []
    for task_name, task in chosen.items():
        for variant in dict.fromkeys(task.validate_variant(v) for v in variants):
            for task_slot in task.slots(slot, variant):
                config, options = task.config(preset, variant, task_slot)
                if task_name in (data_roots or {}):
                    options = options | _data_root_options(config, options, data_roots[task_name])
                options = options | (cfg_options or {})
                if threads is not None:
                    options = options | {"cpu_threads": threads}
                rows.append((task_name, variant, task_slot, config, options))
    # seed by seed: a sweep stopped midway leaves every row at its first seeds, i.e. whole paired contrasts
    return [Run(task_name, preset, variant, seed, task_slot, config, options, procs)
            for seed in seeds for task_name, variant, task_slot, config, options in rows]
