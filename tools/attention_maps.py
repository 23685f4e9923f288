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

Figures are written as PNG and SVG under --out (default RESULTS/maps/<run id>/). A run whose checkpoint
is not kept (the committed stores keep none) is named with the command that trains it again: runs
reproduce by seed.
"""
import argparse
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure  # no pyplot: no backend or window, figures saved as they are drawn

import attnbench.mm  # noqa: F401  registers attnbench's types (and quiets mmengine's import warnings)
from attnbench.sweep.plots import save_figure
from attnbench.sweep.runs import dumped_config, find_run, last_checkpoint, retrain_command
from attnbench.sweep.store import read_store_or_exit
from attnbench.sweep.tasks import TASKS
from attnbench.variants import TRANSLATION_TASKS

PROG = "attention_maps.py"
#: (encoder or decoder, self or cross) of a translation layer's attention -> its slot.
NMT_SLOTS = {("encoder", "self"): "enc-self", ("decoder", "self"): "dec-self", ("decoder", "cross"): "enc-dec"}


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


@contextmanager
def recorded_inputs(model: torch.nn.Module, kind: type) -> Iterator[dict]:
    """Within the block, name -> ``(args, kwargs)`` of the last call of each ``kind`` module of ``model``."""
    inputs, handles = {}, []
    for name, module in model.named_modules():
        if isinstance(module, kind):
            def record(module, args, kwargs, name=name):
                inputs[name] = (args, kwargs)
            handles.append(module.register_forward_pre_hook(record, with_kwargs=True))
    try:
        yield inputs
    finally:
        for handle in handles:
            handle.remove()


def chosen(names: list[str], group, every_block: bool, unit: str) -> dict[str, str]:
    """Output name -> module name: each module (``GROUP_<unit><i>``, e.g. ``conv4_block2``), or the last of
    each group (``GROUP``); ``group`` gives a module name's group and index in it."""
    picked = {}
    for name in names:
        group_name, index = group(name)
        picked[f"{group_name}_{unit}{index}" if every_block else group_name] = name
    return picked


def stage(name: str) -> tuple[str, int]:
    """``backbone.layer2.3.gen_attention_block`` -> ``('conv3', 3)`` (mmdet/mmseg ResNets); else the name."""
    found = re.search(r"layer(\d+)\.(\d+)\.", name)
    return (f"conv{int(found[1]) + 1}", int(found[2])) if found else (name, 0)


def nmt_slot(name: str) -> tuple[str, int]:
    """``decoder_layers.1.cross_attn.attention`` -> ``('enc-dec', 1)``."""
    side, layer, kind = re.search(r"(encoder|decoder)_layers\.(\d+)\.(self|cross)_attn", name).groups()
    return NMT_SLOTS[side, kind], int(layer)


def vision_figures(model, dataset, args, out: Path, title: str) -> list[Path]:
    """One figure per stage (or block) of the image ``args.index``'s object or chosen queries."""
    from mmengine.dataset import pseudo_collate
    from PIL import Image

    from attnbench.attention import GeneralizedAttention
    from attnbench.data.deciding_context import ObjectContext, split_contexts
    from attnbench.mm.attention_mass import object_attention
    from attnbench.mm.feature_grids import InputFrame, key_tile

    data = model.data_preprocessor(pseudo_collate([dataset[args.index]]), False)
    with torch.no_grad(), recorded_inputs(model, GeneralizedAttention) as inputs:
        model(**data, mode="predict")
    if not inputs:
        sys.exit(f"{PROG}: error: the run's model has no generalized attention block: no attention maps to draw")
    sample = data["data_samples"][0]
    frame = InputFrame.of(sample.metainfo, tuple(data["inputs"].shape[-2:]))
    path = Path(sample.img_path)
    image = np.asarray(Image.open(path).convert("RGB"))
    objects = split_contexts(dataset.data_root, path.parent.name)[path.name]
    context = np.any([o.mask for o in objects], axis=0) if objects else None  # outlined around chosen queries
    if args.query:
        objects = [ObjectContext(point, np.zeros(image.shape[:2], dtype=bool)) for point in args.query]
    if not objects:
        sys.exit(f"{PROG}: error: image {args.index} holds no object to put a query on: give --query Y,X")
    modules = dict(model.named_modules())
    paths = []
    for figure_name, name in chosen(list(inputs), stage, args.every_block, "block").items():
        x = inputs[name][0][0]
        with torch.no_grad():
            found = object_attention(modules[name], x, [frame], [objects])
        tile = key_tile(frame, tuple(x.shape[-2:]), modules[name].kv_stride)
        figure = draw_vision(image, objects, found, tile, args.heads, context,
                             f"{title}\n{name} ({figure_name}), image {args.index}")
        paths += save_figure(figure, out / figure_name, bbox_inches="tight")
    return paths


def draw_vision(image, objects, found, tile, heads: bool, context, title: str):
    """A row per query (and per head with ``heads``): the image, then each weight's heat map."""
    names = list(found.weights)
    mass, num_heads = found.mass(), found.weights["all"].shape[1]
    views = [None, *(range(num_heads) if heads else [])]  # None: the mean over the heads
    rows = [(o, view) for o in range(len(objects)) for view in views]
    figure = Figure(figsize=(2.3 * (1 + len(names)), 2.5 * len(rows) + 0.6), layout="constrained")
    axes = figure.subplots(len(rows), 1 + len(names), squeeze=False)
    height, width = image.shape[:2]
    extent = (0, found.key_grid[1] * tile[1], found.key_grid[0] * tile[0], 0)
    for (o, view), row in zip(rows, axes):
        has_context = bool(objects[o].mask.any())
        outline = objects[o].mask if has_context else context
        heats = {name: (w[o].float().mean(0) if view is None else w[o, view].float()).view(found.key_grid).cpu().numpy()
                 for name, w in found.weights.items()}
        top = max(heat.max() for heat in heats.values())  # one colour scale per row, from 0
        for ax, name in zip(row, [None, *names]):
            ax.imshow(image, extent=(0, width, height, 0))
            if name is None:
                ax.set_title(f"query {o}" + (f"\ncontext's share {mass['chance'][o]:.3f}" if has_context else ""),
                             fontsize=8)
            else:
                ax.imshow(heats[name], extent=extent, cmap="magma", vmin=0, vmax=top, alpha=0.75,
                          interpolation="nearest")
                head = "head mean" if view is None else f"head {view}"
                ax.set_title(f"{name} ({head})" + (f"\non context {mass[name][o]:.3f}" if has_context else ""),
                             fontsize=8)
            if outline is not None:
                ax.contour(np.arange(width) + 0.5, np.arange(height) + 0.5, outline, [0.5], colors="white",
                           linewidths=0.8)
            ax.plot(objects[o].centre[1], objects[o].centre[0], "+", color="lime", ms=9, mew=2)
            ax.set(xlim=(0, width), ylim=(height, 0), xticks=[], yticks=[])
    figure.suptitle(f"{title}\ncolour: 0 to the row's largest weight; white outline: the deciding context", fontsize=9)
    return figure


def nmt_figures(model, dataset, args, out: Path, title: str) -> list[Path]:
    """One figure per slot (or layer): sentence ``args.index``, teacher-forced."""
    import sentencepiece as spm

    from attnbench.attention import GeneralizedAttention1d
    from attnbench.data.translation import collate_translation

    data = model.data_preprocessor(collate_translation([dataset[args.index]]), False)
    with torch.no_grad(), recorded_inputs(model, GeneralizedAttention1d) as inputs:
        model(**data, mode="tensor")
    if not inputs:
        sys.exit(f"{PROG}: error: the run's model has no attention slot with weights (convolutions only)")
    pieces = spm.SentencePieceProcessor(model_file=dataset.metainfo["tokenizer"]).id_to_piece
    source = [pieces(int(t)) for t in data["src_tokens"][0]]
    target = [pieces(int(t)) for t in data["tgt_tokens"][0]]
    axes = {"enc-self": (source, source), "dec-self": (target[1:], target[:-1]), "enc-dec": (target[1:], source)}
    modules = dict(model.named_modules())
    paths = []
    for figure_name, name in chosen(list(inputs), nmt_slot, args.every_block, "layer").items():
        args_, kwargs = inputs[name]
        with torch.no_grad():
            maps = modules[name].attention_maps(*args_, **kwargs)
        rows, columns = axes[nmt_slot(name)[0]]
        figure = draw_alignment(maps.weights, rows, columns,
                                f"{title}\n{name} ({figure_name}), sentence {args.index}")
        paths += save_figure(figure, out / figure_name, bbox_inches="tight")
    return paths


def draw_alignment(weights: dict, rows: list[str], columns: list[str], title: str):
    """A row per weight ('all', each term), a column per head after the head mean: queries down, keys across."""
    num_heads = weights["all"].shape[1]
    size = 0.18 * max(len(rows), len(columns)) + 1.2
    figure = Figure(figsize=(size * (1 + num_heads), size * len(weights)), layout="constrained")
    axes = figure.subplots(len(weights), 1 + num_heads, squeeze=False)
    for name, row in zip(weights, axes):
        maps = weights[name][0].float().cpu()
        heats = [maps.mean(0), *maps]
        top = max(float(heat.max()) for heat in heats)  # one colour scale per row, from 0
        for ax, view, heat in zip(row, [None, *range(num_heads)], heats):
            ax.imshow(heat.numpy(), cmap="magma", vmin=0, vmax=top, interpolation="nearest", aspect="auto")
            ax.set_title(f"{name} ({'head mean' if view is None else f'head {view}'})", fontsize=8)
            ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=6)
            ax.set_yticks(range(len(rows)), rows, fontsize=6)
    figure.suptitle(f"{title}\nqueries down, keys across; colour: 0 to the row's largest weight", fontsize=9)
    return figure


def mass_table(model, cfg, images: int | None) -> tuple[pd.DataFrame, int, int]:
    """A row per generalized-attention block (``conv4_block2``, ...) and ``'mean'`` (every (block, object)
    pair alike: what AttentionMassHook writes), a column per weight (``'all'``, each enabled term) and
    ``'chance'``: the mass on the deciding context over the first ``images`` validation images (default:
    all) put through ``model.val_step`` as the run's final validation does; and the images' and objects' count."""
    from mmengine.runner import Runner

    from attnbench.attention import GeneralizedAttention
    from attnbench.mm.attention_mass import ContextMass

    names = [name for name, m in model.named_modules() if isinstance(m, GeneralizedAttention)]
    if not names:
        sys.exit(f"{PROG}: error: the run's model has no generalized attention block: no attention mass to measure")
    if images is not None:
        cfg.val_dataloader.dataset.indices = images  # mmengine's BaseDataset: its first N samples
    loader = Runner.build_dataloader(cfg.val_dataloader)
    mass = ContextMass(loader.dataset.data_root)
    mass.attach(model)
    try:
        with torch.no_grad():
            for batch in loader:
                model.val_step(batch)
    finally:
        mass.detach()
    rows = {label: mass.means([name]) for label, name in chosen(names, stage, True, "block").items()}
    table = pd.DataFrame.from_dict(rows | {"mean": mass.means()}, orient="index").dropna(axis=1, how="all")
    return table.rename_axis("block"), len(loader.dataset), max(mass.counts.values(), default=0)


def main() -> None:
    args = parse_args()
    row, config, checkpoint = load_run(args)
    if args.mass and not TASKS[row["task"]].rule:
        sys.exit(f"{PROG}: error: --mass needs a diagnostic task (its objects' deciding context), not {row['task']}")
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
        sys.exit(f"{PROG}: error: --image {args.index} is outside the validation set (0 to {len(dataset) - 1})")
    out = Path(args.out) if args.out else Path(args.results) / "maps" / row["run_id"]
    draw = nmt_figures if row["task"] in TRANSLATION_TASKS else vision_figures
    for path in draw(model, dataset, args, out, title):
        print(path)


if __name__ == "__main__":
    main()
