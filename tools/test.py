"""Evaluate a checkpoint on a config's test set (detection, segmentation or translation).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--cfg-options k=v ...] [--launcher ...]
"""
import argparse

from mmengine.runner import Runner

from attnbench.mm.run_setup import add_config_args, closing_process_group, config_from_args, resumable_checkpoints


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p)
    p.add_argument("checkpoint")
    args = p.parse_args()
    cfg = config_from_args(args)
    cfg.load_from = args.checkpoint
    runner = Runner.from_cfg(cfg)
    with resumable_checkpoints(), closing_process_group():
        print(runner.test())


if __name__ == "__main__":
    main()
