"""Train a model from an OpenMMLab config (detection, segmentation or translation).

    python tools/train.py configs/detection/faster-rcnn_r50w8-attn0010_fpn_mini-shapes.py
    python tools/train.py CONFIG --work-dir work_dirs/x --cfg-options train_cfg.max_epochs=2
    python tools/train.py CONFIG --curve 500    # validate every 500 iterations into WORK_DIR/curve.jsonl
    python -m torch.distributed.run --nproc_per_node 8 tools/train.py CONFIG --launcher pytorch
    srun -p PARTITION -n 8 --ntasks-per-node 8 python tools/train.py CONFIG --launcher slurm

The config's own ``custom_imports`` registers attnbench (``attnbench.mm``); mmdet's and mmseg's
``tools/train.py`` work on the same configs.
"""
import argparse

from mmengine.runner import Runner

from attnbench.mm.run_setup import add_config_args, closing_process_group, config_from_args, resumable_checkpoints


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p)
    p.add_argument("--resume", nargs="?", const="auto", help="resume from CHECKPOINT, or the latest one")
    p.add_argument("--amp", action="store_true", help="automatic mixed precision (CUDA)")
    p.add_argument("--curve", type=int, metavar="ITERS",
                   help="learning curve: validate every ITERS iterations (iteration-based loops) and append the "
                        "metrics with the training minutes so far to WORK_DIR/curve.jsonl (tools/learning_curves.py)")
    args = p.parse_args()
    cfg = config_from_args(args)
    if args.amp:
        cfg.optim_wrapper.type = "AmpOptimWrapper"
        cfg.optim_wrapper.loss_scale = "dynamic"
    if args.curve is not None:
        if cfg.train_cfg.get("type") != "IterBasedTrainLoop" or args.curve < 1:
            p.error("--curve takes a positive number of iterations, for a config with an IterBasedTrainLoop")
        cfg.train_cfg.val_interval = args.curve
        cfg.custom_hooks = [*cfg.get("custom_hooks", []), dict(type="attnbench.LearningCurveHook")]
    if args.resume:
        cfg.resume = True
        cfg.load_from = None if args.resume == "auto" else args.resume
    runner = Runner.from_cfg(cfg)
    with resumable_checkpoints(), closing_process_group():
        runner.train()


if __name__ == "__main__":
    main()
