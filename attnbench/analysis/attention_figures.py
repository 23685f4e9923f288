"""Figures of a trained run's attention: heat maps of generalized attention's weights over the image
(detection, segmentation), query-against-key grids per slot (translation), and the table of the attention
mass on each object's deciding context per block (tools/attention_maps.py draws them for a store's run).

Every figure is drawn for the model as it is: a forward pass records each attention module's inputs, and
the module recomputes its weights from them (``object_attention``, ``attention_maps``), the mean over the
heads first, then each head; one colour scale per row, from 0 to the row's largest weight.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure  # no pyplot: no backend or window, figures saved as they are drawn

from attnbench.analysis.plots import save_figure

#: (encoder or decoder, self or cross) of a translation layer's attention -> its slot.
NMT_SLOTS = {("encoder", "self"): "enc-self", ("decoder", "self"): "dec-self", ("decoder", "cross"): "enc-dec"}


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


def vision_figures(model, dataset, index: int, out: Path, title: str, queries: list | None = None,
                   every_block: bool = False, heads: bool = False) -> list[Path]:
    """One figure per stage (``every_block``: per block) for the objects of validation image ``index``, or
    for ``queries`` (y, x in image pixels); ``heads``: each head beside the head mean."""
    from mmengine.dataset import pseudo_collate
    from PIL import Image

    from attnbench.attention import GeneralizedAttention
    from attnbench.data.deciding_context import ObjectContext, split_contexts
    from attnbench.mm.attention_mass import object_attention
    from attnbench.mm.feature_grids import InputFrame, key_tile

    data = model.data_preprocessor(pseudo_collate([dataset[index]]), False)
    with torch.no_grad(), recorded_inputs(model, GeneralizedAttention) as inputs:
        model(**data, mode="predict")
    if not inputs:
        raise ValueError("the run's model has no generalized attention block: no attention maps to draw")
    sample = data["data_samples"][0]
    frame = InputFrame.of(sample.metainfo, tuple(data["inputs"].shape[-2:]))
    path = Path(sample.img_path)
    image = np.asarray(Image.open(path).convert("RGB"))
    objects = split_contexts(dataset.data_root, path.parent.name)[path.name]
    context = np.any([o.mask for o in objects], axis=0) if objects else None  # outlined around chosen queries
    if queries:
        objects = [ObjectContext(point, np.zeros(image.shape[:2], dtype=bool)) for point in queries]
    if not objects:
        raise ValueError(f"image {index} holds no object to put a query on: give --query Y,X")
    modules = dict(model.named_modules())
    paths = []
    for figure_name, name in chosen(list(inputs), stage, every_block, "block").items():
        x = inputs[name][0][0]
        with torch.no_grad():
            found = object_attention(modules[name], x, [frame], [objects])
        tile = key_tile(frame, tuple(x.shape[-2:]), modules[name].kv_stride)
        figure = draw_vision(image, objects, found, tile, heads, context,
                             f"{title}\n{name} ({figure_name}), image {index}")
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


def nmt_figures(model, dataset, index: int, out: Path, title: str, every_block: bool = False) -> list[Path]:
    """One figure per slot (``every_block``: per layer) for validation sentence ``index``, teacher-forced."""
    import sentencepiece as spm

    from attnbench.attention import GeneralizedAttention1d
    from attnbench.data.translation import collate_translation

    data = model.data_preprocessor(collate_translation([dataset[index]]), False)
    with torch.no_grad(), recorded_inputs(model, GeneralizedAttention1d) as inputs:
        model(**data, mode="tensor")
    if not inputs:
        raise ValueError("the run's model has no attention slot with weights (convolutions only)")
    pieces = spm.SentencePieceProcessor(model_file=dataset.metainfo["tokenizer"]).id_to_piece
    source = [pieces(int(t)) for t in data["src_tokens"][0]]
    target = [pieces(int(t)) for t in data["tgt_tokens"][0]]
    axes = {"enc-self": (source, source), "dec-self": (target[1:], target[:-1]), "enc-dec": (target[1:], source)}
    modules = dict(model.named_modules())
    paths = []
    for figure_name, name in chosen(list(inputs), nmt_slot, every_block, "layer").items():
        args_, kwargs = inputs[name]
        with torch.no_grad():
            maps = modules[name].attention_maps(*args_, **kwargs)
        rows, columns = axes[nmt_slot(name)[0]]
        figure = draw_alignment(maps.weights, rows, columns,
                                f"{title}\n{name} ({figure_name}), sentence {index}")
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
        raise ValueError("the run's model has no generalized attention block: no attention mass to measure")
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
