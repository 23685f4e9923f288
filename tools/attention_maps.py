"""Where each term of a run's generalized attention looks: heat maps of its attention weights.

    python tools/attention_maps.py --results results/flags --run RUN_ID
    python tools/attention_maps.py --results results/flags --task det-flag --variant 1111 --seed 3 [--image 5]
    python tools/attention_maps.py --results R --task fcn-flag --variant 1111 --seed 0 --query 40,64 --heads
    python tools/attention_maps.py --results R --task nmt --variant 1111 --slot enc-dec --seed 0 [--sentence 2]
    python tools/attention_maps.py --results R --run RUN_ID --mass [--images 48] [--mass-csv mass.csv]

Loads the run's config (the one mmengine dumped into RESULTS/runs/<run id>/) and its last checkpoint,
takes image --image of the task's validation set (default 0) and, for every GeneralizedAttention block
of the last one of each stage (--every-block: each block), draws one figure: per query (by default one
at each object's centre, --query y,x in image pixels to choose), the image with the query marked and
the object's deciding context outlined, then the heat map of the weights the block uses ('all') and of
each enabled term alone (E1..E4, the softmax of its logits), averaged over the heads (--heads: each
head too), each key drawn over the tile of image pixels it stands for (attnbench.mm.feature_grids).
A panel's title gives the weight on the context (attnbench.mm.attention_mass) and the first panel
the context's share of the image, the mass uniform attention would give it.

Translation runs: for sentence --sentence (= --image) of the validation set, teacher-forced, one
figure per attention slot (enc-self, dec-self, enc-dec) of the last layer (--every-block: each
layer), a row per weight ('all', each term) and a column per head after the head mean: source
against target alignment for enc-dec. Rows are the target tokens each decoder query predicts.

--mass, instead of figures: the attention mass on the deciding context (attnbench.mm.attention_mass)
over the validation set (--images N: its first N images), validated as the run's final validation is
(the config's val dataloader, the model's val_step), as a markdown table: a row per block, columns
'all', each enabled term and 'chance', and a row 'mean' over every (block, object) pair, the run's
mass_context .. mass_context_chance (AttentionMassHook's ContextMass, the same code). --mass-csv PATH
writes the table as CSV too.

attnbench.analysis.attention_figures draws the figures and measures the table. Figures are written as PNG
and SVG under --out (default RESULTS/maps/<run id>/). A run whose checkpoint is not kept (the committed
stores keep none) is named with the command that trains it again: runs reproduce by seed.
"""
import argparse
import sys
from pathlib import Path

import attnbench.mm  # noqa: F401  registers attnbench's types (and quiets mmengine's import warnings)
from attnbench.analysis.attention_figures import mass_table, nmt_figures, vision_figures
from attnbench.sweep.runs import dumped_config, find_run, last_checkpoint, retrain_command
from attnbench.sweep.store import read_store_or_exit
from attnbench.sweep.tasks import TASKS
from attnbench.variants import TRANSLATION_TASKS

PROG = "attention_maps.py"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep", help="results folder (default: results/sweep)")
    p.add_argument("--run", help="the run id (else --task, --variant, --seed)")
    p.add_argument("--task")
    p.add_argument("--variant")
    p.add_argument("--seed", type=int)
    p.add_argument("--preset", help="where the store holds the run at several presets")
    p.add_argument("--slot", help="translation: the slot the run varies")
    p.add_argument("--image", "--sentence", dest="index", type=int, default=0,
                   help="index into the validation set (default 0)")
    p.add_argument("--query", action="append", type=query_point, metavar="Y,X",
                   help="a query at image pixel (y, x), repeatable (default: each object's centre)")
    p.add_argument("--heads", action="store_true", help="vision: each head's map too (translation always shows them)")
    p.add_argument("--every-block", action="store_true", help="a figure per block (layer), not per stage (slot)")
    p.add_argument("--out", help="output folder (default: RESULTS/maps/<run id>/)")
    p.add_argument("--mass", action="store_true",
                   help="instead of figures, a table of each block's attention mass on the deciding context")
    p.add_argument("--images", type=positive, metavar="N", help="--mass: the first N validation images (default: all)")
    p.add_argument("--mass-csv", metavar="PATH", help="--mass, and the table written as CSV")
    args = p.parse_args()
    args.mass = args.mass or args.mass_csv is not None
    if args.run is None and None in (args.task, args.variant, args.seed):
        p.error("name the run: --run RUN_ID, or --task, --variant and --seed")
    return args


def query_point(text: str) -> tuple[float, float]:
    """``--query``: ``Y,X`` in image pixels."""
    try:
        y, x = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give the query as Y,X in image pixels, e.g. 40,64") from None
    return y, x


def positive(text: str) -> int:
    """``--images``: a count of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of images, at least 1")
    return int(text)


def load_run(args) -> tuple[dict, Path, Path]:
    """The run's row, dumped config and last checkpoint; exits with one line when one is missing."""
    results = read_store_or_exit(args.results, PROG)
    try:
        row = find_run(results, args.run, args.task, args.variant, args.seed, args.preset, args.slot)
    except ValueError as error:
        sys.exit(f"{PROG}: error: {error} in {args.results}")
    run_dir = Path(args.results) / "runs" / row["run_id"]
    checkpoint, config = last_checkpoint(run_dir), dumped_config(run_dir)
    if checkpoint is None or config is None:
        missing = "checkpoint" if checkpoint is None else "dumped config"
        sys.exit(f"{PROG}: error: run {row['run_id']} has no {missing} under {run_dir} "
                 f"(not kept); runs reproduce by seed: {retrain_command(row, args.results)}")
    return row, config, checkpoint


def build(config: Path, checkpoint: Path):
    """The run's model with its final weights (CPU, eval mode) and its config."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    from mmengine.runner import load_checkpoint

    from attnbench.mm.run_setup import resumable_checkpoints

    cfg = Config.fromfile(str(config))
    init_default_scope(cfg.get("default_scope") or "attnbench")
    model = MODELS.build(cfg.model)
    with resumable_checkpoints():
        load_checkpoint(model, str(checkpoint), map_location="cpu", logger="silent")
    return model.eval(), cfg


def main() -> None:
    args = parse_args()
    try:
        draw(args)
    except ValueError as error:
        sys.exit(f"{PROG}: error: {error}")


def draw(args) -> None:
    row, config, checkpoint = load_run(args)
    if args.mass and not getattr(TASKS.get(row["task"]), "rule", None):  # a --config task has no rule either
        raise ValueError(f"--mass needs a diagnostic task (its objects' deciding context), not {row['task']}")
    model, cfg = build(config, checkpoint)
    title = f"{row['task']} {row['variant']} seed {int(row['seed'])} ({row['preset']})"
    if args.mass:
        table, images, objects = mass_table(model, cfg, args.images)
        print(f"{title}: attention mass on the deciding context, {images} validation images, {objects} objects\n")
        print(table.to_markdown(floatfmt=".4f"))
        if args.mass_csv:
            table.to_csv(args.mass_csv)
        return
    from mmengine.registry import DATASETS

    dataset = DATASETS.build(cfg.val_dataloader.dataset)
    if not 0 <= args.index < len(dataset):
        raise ValueError(f"--image {args.index} is outside the validation set (0 to {len(dataset) - 1})")
    out = Path(args.out) if args.out else Path(args.results) / "maps" / row["run_id"]
    if row["task"] in TRANSLATION_TASKS:
        paths = nmt_figures(model, dataset, args.index, out, title, every_block=args.every_block)
    else:
        paths = vision_figures(model, dataset, args.index, out, title, queries=args.query,
                               every_block=args.every_block, heads=args.heads)
    for path in paths:
        print(path)

if __name__ == "__main__":
    main()
