"""Evaluate a checkpoint on a config's test set (detection, segmentation or translation).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--cfg-options k=v ...] [--launcher ...]
"""
import argparse
import os

from mmengine.config import DictAction
from mmengine.runner import Runner

from attnbench.mm.runner import load_config, resumable_checkpoints, setup_cpu_distributed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("checkpoint")
    p.add_argument("--work-dir")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value")
    p.add_argument("--launcher", choices=["none", "pytorch", "slurm", "mpi"], default="none")
    p.add_argument("--local_rank", "--local-rank", type=int, default=0)
    args = p.parse_args()
    os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    cfg = load_config(args.config, args.work_dir, args.cfg_options, args.launcher)
    setup_cpu_distributed(cfg)
    cfg.load_from = args.checkpoint
    runner = Runner.from_cfg(cfg)
    with resumable_checkpoints():
        print(runner.test())


if __name__ == "__main__":
    main()
