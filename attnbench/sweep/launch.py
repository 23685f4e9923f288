"""Running a plan: one worker process per run, locally (``--jobs`` at a time, forked from a server that
imported once) or through submitit.

A run trains once, whatever sweeps touch its store: a local sweep holds the run's claim (a file lock,
``runs/<run id>/claim.lock``, freed by the system when its holder dies) while the run trains; another sweep
that reaches the run meanwhile waits for the claim and then takes the row recorded since it began instead of
training the run again (or trains it, resuming, where the first did not finish it). Under Slurm each submitted run's job id is
kept in ``runs/<run id>/slurm_job``: a later sweep (``--no-wait`` or not) submits no run whose job is still in
the queue, and waits for that job instead. Rows recorded before a
sweep began do not stop it: a run given to ``run_all`` is one its caller wants trained (``--force``, or a
resume after a kill)."""
from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import torch
from filelock import FileLock, Timeout

import attnbench
from attnbench.config_files import CONFIG_ROOT, missing_data, repository_path

from .plan import Run
from .store import ResultsStore
from .worker import utc_now

LAUNCHERS = ("local", "slurm", "submitit-local")
#: A run folder's file that holds the id of the Slurm job that trains it.
SLURM_JOB = "slurm_job"


def _git_commit() -> str:
    """The checkout's commit, ``+dirty`` when the code or configs the runs use differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(attnbench.__file__).parent,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        root = git("rev-parse", "--show-toplevel")
        changed = git("-C", root, "status", "--porcelain", "--untracked-files=no", "--",
                      "attnbench", "configs", "tools")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if changed else "")


def snapshot_code(root: Path) -> Path:
    """Copy the package and the configs as they are now to ``root/code/<content hash>/`` (once per
    content) and return that folder, from which the sweep's workers import and read their configs:
    code edited while a sweep runs does not change the runs still to come."""
    sources = {"attnbench": Path(attnbench.__file__).resolve().parent, "configs": CONFIG_ROOT}
    digest = hashlib.sha1()
    for name, source in sources.items():
        for path in sorted(source.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{name}/{path.relative_to(source)}".encode() + b"\0" + path.read_bytes())
    target = root / "code" / digest.hexdigest()[:12]
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".staging-"))
        for name, source in sources.items():
            shutil.copytree(source, staging / name, ignore=shutil.ignore_patterns("__pycache__"))
        try:
            staging.rename(target)
        except OSError:  # another sweep made the same snapshot first
            shutil.rmtree(staging)
    return target


def wandb_mode() -> str:
    """``WANDB_MODE`` if set; online when W&B credentials are configured; offline otherwise."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    netrc = Path.home() / ".netrc"
    configured = os.environ.get("WANDB_API_KEY") or (netrc.exists() and "api.wandb.ai" in netrc.read_text())
    return "online" if configured else "offline"


def _device_groups(jobs: int, procs: int) -> queue.SimpleQueue | None:
    """On a GPU machine, ``jobs`` groups of ``procs`` devices each (``CUDA_VISIBLE_DEVICES`` values) that the
    local launcher hands to its parallel runs, so that no two runs share a GPU; None without CUDA."""
    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    if jobs * procs > count:
        raise ValueError(f"--jobs {jobs} x {procs} processes a run need {jobs * procs} GPUs; this machine has {count}")
    groups = queue.SimpleQueue()
    for job in range(jobs):
        groups.put(",".join(str(job * procs + k) for k in range(procs)))
    return groups


class ForkServer:
    """A worker started with ``--serve`` (attnbench.sweep.worker.serve): imports once, then forks a
    process for each run sent to it, one at a time. Its own output goes to ``log``."""

    def __init__(self, worker: list[str], threads: int, log: Path):
        self.threads, self.log = threads, log
        with open(log, "a") as output:
            self.process = subprocess.Popen([*worker, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=output, text=True,
                                            env=os.environ | {"OMP_NUM_THREADS": str(threads)})
        if self.process.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"the sweep's worker could not start; its output: {log}")

    def run(self, request: dict) -> int | None:
        """Run ``request`` (attnbench.sweep.worker._fork_run); its exit code, None if the server died."""
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        answer = self.process.stdout.readline().strip()
        return int(answer) if answer else None

    def close(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        self.process.wait()


class ForkServers:
    """The local launcher's fork servers, started as runs need them (one per job running at a time and
    per thread count, a thread count being fixed at a server's imports) and kept for the next runs."""

    def __init__(self, worker: list[str], folder: Path):
        self.worker, self.folder = worker, folder
        self.idle: dict[int, list[ForkServer]] = {}
        self.lock = threading.Lock()
        self.started = 0

    def take(self, threads: int) -> ForkServer:
        with self.lock:
            if self.idle.get(threads):
                return self.idle[threads].pop()
            self.started += 1
            number = self.started
        self.folder.mkdir(parents=True, exist_ok=True)
        return ForkServer(self.worker, threads, self.folder / f"fork-server-{number}.log")

    def give_back(self, server: ForkServer) -> None:
        with self.lock:
            self.idle.setdefault(server.threads, []).append(server)

    def close(self) -> None:
        with self.lock:
            servers = [server for idle in self.idle.values() for server in idle]
            self.idle.clear()
        for server in servers:
            server.close()


class SweepRunner:
    """Executes runs and records one result row each in the store."""

    def __init__(self, store: ResultsStore, launcher: str = "local", jobs: int = 1, wandb: dict | None = None,
                 slurm: dict | None = None, snapshot: bool = True, wait: bool = True):
        if launcher not in LAUNCHERS:
            raise ValueError(f"unknown launcher {launcher!r}; choose from {LAUNCHERS}")
        if jobs < 1:
            raise ValueError(f"--jobs must be a positive integer, got {jobs}")
        if not wait and launcher == "local":
            raise ValueError("--no-wait needs a scheduler (--launcher slurm): local runs end with the sweep")
        self.store, self.launcher, self.jobs, self.wait = store, launcher, jobs, wait
        self.wandb, self.slurm = wandb, slurm or {}
        self._devices: queue.SimpleQueue | None = None  # the local launcher's free GPU groups, on GPU machines
        self.commit = _git_commit()
        self.snapshot, self.code = snapshot, None  # the copy the workers run from, taken by run_all
        self._servers: ForkServers | None = None  # the local launcher's, while run_all runs
        self._rows_before: set[tuple[str, str]] = set()  # (run id, finished_at) of the ok rows when run_all began
        self.submitted: dict[str, str] = {}  # run id -> Slurm job id: what run_all submitted
        self.queued: dict[str, str] = {}  # run id -> Slurm job id: another sweep's jobs still in the queue

    def threads(self, run: Run) -> int:
        """CPU threads of a local run: those its config fixes (its protocol), or else the cores
        shared out between the parallel runs (more threads than cores makes every run slower)."""
        return run.cpu_threads or max(1, (os.cpu_count() or 1) // self.jobs)

    def run_dir(self, run: Run) -> Path:
        return self.store.root / "runs" / run.run_id

    def _worker(self) -> list[str]:
        """The command that starts a worker: from the code snapshot when there is one."""
        command = [sys.executable, "-m", "attnbench.sweep.worker"]
        if self.code is None:
            return command
        path = os.pathsep.join(p for p in (str(self.code), os.environ.get("PYTHONPATH")) if p)
        # a prefix that also travels to Slurm jobs; PYTHONSAFEPATH keeps the working directory
        # (a checkout, often) from coming first on sys.path under ``python -m``
        return ["env", f"PYTHONPATH={path}", "PYTHONSAFEPATH=1", *command]

    def _prepare(self, run: Run) -> tuple[Path, Path]:
        """Write the run's spec (``run.json``) for its worker; the paths of the spec and of its result. A
        scheduler's job records its own row (``record``: the store and the row's identity), so that rows land
        whether or not the sweep that submitted it is still there."""
        run_dir = self.run_dir(run)
        run_dir.mkdir(parents=True, exist_ok=True)
        spec = run.to_dict() | {"work_dir": str(run_dir), "wandb": self.wandb}
        if self.launcher == "slurm":
            spec["record"] = dict(store=str(self.store.root.resolve()), row=self._identity(run, utc_now()))
        config = Path(run.config).resolve()
        if self.code is not None and config.is_relative_to(CONFIG_ROOT):
            spec["config"] = str(self.code / "configs" / config.relative_to(CONFIG_ROOT))
        (run_dir / "run.json").write_text(json.dumps(spec, indent=2))
        result = run_dir / "result.json"
        result.unlink(missing_ok=True)
        return run_dir / "run.json", result

    def _command(self, run: Run, ranks: int = 1) -> tuple[list[str], Path]:
        """The worker's command line and result path; with ``ranks`` > 1 under torchrun (local runs on
        several processes; a Slurm job's tasks are its ranks instead)."""
        spec, result = self._prepare(run)
        worker = self._worker()
        if ranks > 1:
            start = worker.index(sys.executable)  # torchrun, itself ending with the sweep (as each rank does)
            worker = [*worker, "--exec", sys.executable, "-m", "torch.distributed.run", "--standalone",
                      f"--nproc_per_node={ranks}", *worker[start + 1:]]
        return [*worker, str(spec), str(result)], result

    def _execute_local(self, run: Run, on_start) -> dict:
        """Train ``run`` here and record its row, holding its claim throughout (a sweep that takes the claim next
        finds the row); the row, another sweep's where it trained the run since this sweep began."""
        started = utc_now()
        self.run_dir(run).mkdir(parents=True, exist_ok=True)
        claim = FileLock(self.run_dir(run) / "claim.lock")
        try:
            claim.acquire(timeout=0)
        except Timeout:
            print(f"{run.run_id}: another sweep is training it; waiting for that run", flush=True)
            claim.acquire()
        try:
            recorded = [row for row in self._ok_rows(run.run_id)
                        if (row["run_id"], row["finished_at"]) not in self._rows_before]
            if recorded:
                return recorded[-1]
            on_start(run)
            return self._record(run, self._train_local(run), started)
        finally:
            claim.release()

    def _ok_rows(self, run_id: str | None = None) -> list[dict]:
        rows = self.store.read()
        rows = rows[rows["status"] == "ok"]
        return (rows[rows["run_id"] == run_id] if run_id else rows).to_dict("records")

    def _train_local(self, run: Run) -> dict:
        threads, log = self.threads(run), self.run_dir(run) / "run.log"
        if self._servers is None or run.procs > 1:  # a fresh interpreter (or torchrun's ranks) for the run
            command, result = self._command(run, run.procs)
            devices = self._devices.get() if self._devices is not None else None
            env = os.environ | {"OMP_NUM_THREADS": str(threads)} | (
                {"CUDA_VISIBLE_DEVICES": devices} if devices is not None else {})
            try:
                with open(log, "w") as output:
                    code = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=env).returncode
            finally:
                if devices is not None:
                    self._devices.put(devices)
            return self._read_result(result, f"worker exited with code {code}")
        spec, result = self._prepare(run)
        server = self._servers.take(threads)
        code = server.run(dict(run=str(spec), result=str(result), log=str(log), threads=threads))
        if code is None:  # the server died: the next run starts another
            server.close()
        else:
            self._servers.give_back(server)
        return self._read_result(result, f"worker exited with code {code}" if code is not None else
                                 f"the worker's fork server died (see {server.log})")

    def _executor(self, procs: int):
        """submitit's executor for runs on ``procs`` processes: a Slurm job of ``procs`` tasks (one rank each,
        one GPU each with ``--gpus``), submitted as one job array; or the local executor (testing)."""
        import submitit

        folder = self.store.root / "submitit"
        if self.launcher != "slurm":
            executor = submitit.LocalExecutor(folder=folder)
            executor.update_parameters(timeout_min=self.slurm.get("timeout_min", 24 * 60))
            return executor
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
        gpus = self.slurm.get("gpus", 0)
        options = dict(slurm_partition=self.slurm.get("partition"), tasks_per_node=procs,
                       cpus_per_task=self.slurm.get("cpus_per_task") or 1,
                       timeout_min=self.slurm.get("timeout_min", 24 * 60), name="attnbench",
                       slurm_array_parallelism=self.slurm.get("array_parallelism") or 256)
        if gpus:
            options["gpus_per_node"] = procs  # one GPU per rank
        named = {key: self.slurm[key] for key in ("mem", "account", "qos") if self.slurm.get(key)}
        options.update({f"slurm_{key}": value for key, value in named.items()})
        if self.slurm.get("extra"):
            options["slurm_additional_parameters"] = dict(self.slurm["extra"])
        executor.update_parameters(**{k: v for k, v in options.items() if v is not None})
        return executor

    def submit(self, runs: list[Run]) -> dict:
        """Submit ``runs`` through submitit, one job array per process count; ``{job: run}``."""
        import submitit

        jobs = {}
        for procs in sorted({run.procs for run in runs}):
            group = [run for run in runs if run.procs == procs]
            executor = self._executor(procs)
            with executor.batch() if self.launcher == "slurm" else contextlib.nullcontext():  # one job array
                submitted = [executor.submit(submitit.helpers.CommandFunction(self._command(run)[0], verbose=False))
                             for run in group]
            jobs.update(zip(submitted, group))
        return jobs

    def _queued_jobs(self, runs: list[Run]) -> dict[str, str]:
        """The runs of ``runs`` whose Slurm job (recorded in their folder by an earlier sweep) is still in the
        queue, pending or running: ``{run id: job id}``."""
        recorded = {run.run_id: path.read_text().strip() for run in runs
                    if (path := self.run_dir(run) / SLURM_JOB).exists()}
        if not recorded:
            return {}
        listed = subprocess.run(["squeue", "--noheader", "--array", "--format=%i", f"--user={getpass.getuser()}"],
                                capture_output=True, text=True, check=True).stdout.split()
        return {run_id: job for run_id, job in recorded.items() if job in listed}

    def _submit_once(self, runs: list[Run]) -> dict:
        """Submit the runs of ``runs`` that no queued job trains yet, holding the store's submission lock so that
        two sweeps never both submit a run; ``{job: run}`` of the new jobs and of the queued ones (reattached)."""
        import submitit

        if self.launcher != "slurm":
            jobs = self.submit(runs)
        else:
            with FileLock(self.store.root / "submit.lock"):
                self.queued = self._queued_jobs(runs)
                jobs = self.submit([run for run in runs if run.run_id not in self.queued])
                for job, run in jobs.items():
                    (self.run_dir(run) / SLURM_JOB).write_text(job.job_id)
        self.submitted = {run.run_id: job.job_id for job, run in jobs.items()}
        by_id = {run.run_id: run for run in runs}
        folder = self.store.root / "submitit"
        return jobs | {submitit.SlurmJob(folder, job_id): by_id[run_id] for run_id, job_id in self.queued.items()}

    def _execute_submitit(self, jobs: dict):
        for job, run in jobs.items():
            log = self.run_dir(run) / "run.log"
            try:
                output = job.result()
                log.write_text("\n".join(map(str, output)) if isinstance(output, list) else str(output))
                error = "the job wrote no result"
            except Exception as e:  # the worker recorded its error; a crash is recorded below
                log.write_text(str(e))
                error = f"the job failed ({(str(e).strip().splitlines() or [type(e).__name__])[-1][:200]})"
            result = self._read_result(self.run_dir(run) / "result.json", error)
            if result.get("status") != "ok" and "Slurm job" not in result.get("error", ""):  # the worker's own note
                result["error"] = f"{result['error']} ({self.launcher} job {job.job_id}, log {job.paths.stdout})"
            yield run, result

    @staticmethod
    def _read_result(path: Path, fallback_error: str) -> dict:
        if path.exists():
            return json.loads(path.read_text())
        return {"status": "failed", "error": fallback_error}

    def _identity(self, run: Run, started: str) -> dict:
        """The part of a run's row that the sweep knows before it runs."""
        return dict(run_id=run.run_id, task=run.task, preset=run.preset, slot=run.slot, variant=run.variant,
                    factors=run.factors, modules=run.modules, params=run.params, seed=run.seed,
                    config=repository_path(run.config), config_hash=run.config_hash,
                    attnbench_version=attnbench.__version__, git_commit=self.commit, started_at=started)

    def _record(self, run: Run, result: dict, started: str) -> dict:
        row = self._identity(run, started) | {"finished_at": utc_now()} | result
        self.store.record(row)
        return row

    def run_all(self, runs: list[Run], on_start=lambda run: None, fresh: bool = False):
        """Execute ``runs``; yields each recorded row as it completes (``on_start(run)`` as it starts). A run
        whose folder holds a checkpoint resumes from it, unless ``fresh`` (``--force``): then its folder is
        removed first and it trains from scratch (resumed, a finished run would only be validated again)."""
        _ = [run.run_id for run in runs]  # resolves and caches every config: mmengine loading is not thread-safe
        if fresh:
            for run in runs:
                shutil.rmtree(self.run_dir(run), ignore_errors=True)
        configs = [run.config_with_options() for run in runs]
        if any(missing_data(cfg) for cfg in configs):  # data the runs' datasets would write on first use
            from attnbench.mm.run_setup import generate_missing_data  # OpenMMLab's imports: only then

            for cfg in configs:
                generate_missing_data(cfg)
        if self.snapshot and runs and self.code is None:
            self.code = snapshot_code(self.store.root)
        if self.launcher != "local":
            jobs = self._submit_once(runs)
            for job, run in jobs.items():
                how = "queued by an earlier sweep" if run.run_id in self.queued else "submitted"
                print(f"{how} {run.run_id}: job {job.job_id}, log {job.paths.stdout}", flush=True)
            if not self.wait:
                return
            started = utc_now()
            for run, result in self._execute_submitit(jobs):
                yield self._record(run, result, started)
            return
        # forked runs on CPUs only: the imports ask CUDA for its devices (mmcv does), and a process forked
        # after that cannot use CUDA; there, each run starts a fresh interpreter
        self._rows_before = {(row["run_id"], row["finished_at"]) for row in self._ok_rows()}
        self._servers = None if torch.cuda.is_available() else ForkServers(self._worker(), self.store.root / "runs")
        self._devices = _device_groups(self.jobs, max(run.procs for run in runs) if runs else 1)
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                futures = [pool.submit(self._execute_local, run, on_start) for run in runs]
                for future in as_completed(futures):
                    yield future.result()
        finally:
            if self._servers is not None:
                self._servers.close()
