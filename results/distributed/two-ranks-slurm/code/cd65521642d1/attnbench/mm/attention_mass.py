"""Attention mass on the deciding context: how much of an object query's attention falls on
the pixels that decide the object's class, per term of the generalized attention and combined.

For a :class:`~attnbench.attention.GeneralizedAttention` block, object ``o`` of a mini-shapes image
(its centre and deciding context ``C_o``: :mod:`attnbench.data.deciding_context`), the block's query
at the centre and its weights ``A^t_{m,j}`` over the keys ``j`` (``t``: ``'all'``, the weights forward
uses, or one enabled term alone; head ``m`` of ``M``; ``attention_maps``), and ``c_{o,j}`` the share
of key ``j``'s input pixels inside ``C_o`` (:mod:`attnbench.mm.feature_grids`):

    mass^t_o = (1 / M) sum_m sum_j A^t_{m,j} c_{o,j}        (in [0, 1])
    chance_o = (1 / K) sum_j c_{o,j}                          (C_o's share of the image: uniform attention's mass)

:class:`ContextMass` sums both per block over the objects a model sees and averages them over a set
of blocks ``B``, every (block, object) pair alike: ``sum_{b in B} sum_o mass^t_{b,o} / sum_{b in B} O_b``.
:class:`AttentionMassHook` takes that mean over every block and the validation objects and writes
``mass_context`` (``'all'``), ``mass_context_E1`` .. ``mass_context_E4`` (NaN for a term the blocks do
not enable) and ``mass_context_chance``; ``tools/attention_maps.py --mass`` prints it per block too. A row that
learnt ``flag`` should put far more than chance on the flag.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from mmengine.hooks import Hook

from attnbench.attention import GeneralizedAttention
from attnbench.attention.attention_maps import TERMS
from attnbench.data.deciding_context import ObjectContext, split_contexts

from .feature_grids import InputFrame, input_mask, key_coverage, query_indices
from .hooks import unwrapped_model
from .registry import HOOKS

#: The summary's keys: the combined weights', each term's and uniform attention's mass.
MASS_KEYS = {"all": "mass_context", **{term: f"mass_context_{term}" for term in TERMS}, "chance": "mass_context_chance"}


@dataclass(frozen=True)
class ObjectAttention:
    """A block's attention from the queries at a batch's objects' centres, the objects in batch order.

    Attributes:
        weights: ``'all'`` and each enabled term (``'E1'`` .. ``'E4'``), ``(O, heads, Hk * Wk)``: the
            weights of each object's query over the keys (``attention_maps``).
        coverage: ``(O, Hk * Wk)``: ``c_{o,j}``, the share of key ``j``'s input pixels in object ``o``'s context.
        key_grid: ``(Hk, Wk)``.
    """

    weights: dict[str, torch.Tensor]
    coverage: torch.Tensor
    key_grid: tuple[int, int]

    def mass(self) -> dict[str, torch.Tensor]:
        """``mass^t_o`` for ``'all'`` and each enabled term, and ``chance_o`` (``'chance'``), each ``(O,)``."""
        masses = {name: (weights.float() * self.coverage[:, None]).sum(-1).mean(-1)
                  for name, weights in self.weights.items()}
        return masses | {"chance": self.coverage.mean(-1)}


def object_attention(block: GeneralizedAttention, x: torch.Tensor, frames: list[InputFrame],
                     objects: list[list[ObjectContext]]) -> ObjectAttention:
    """``block``'s attention from its input ``x`` ``(N, C, h, w)`` at the queries on the centres of
    ``objects[n]``, the objects of image ``n`` (which sits in the input as ``frames[n]`` says): one
    ``attention_maps`` call for the batch, on the union of its queries."""
    feature_shape = tuple(x.shape[-2:])
    queries = [query_indices([o.centre for o in image], frame, feature_shape, block.q_stride)
               for frame, image in zip(frames, objects)]
    union, column = torch.unique(torch.cat(queries), return_inverse=True)
    image = torch.cat([torch.full((len(q),), n) for n, q in enumerate(queries)])
    maps = block.attention_maps(x, union.to(x.device))
    weights = {name: w[image.to(x.device), :, column.to(x.device)] for name, w in maps.weights.items()}
    masks = [input_mask(o.mask, frame) for frame, image_objects in zip(frames, objects) for o in image_objects]
    coverage = key_coverage(torch.stack(masks), feature_shape, block.kv_stride).to(x.device)
    return ObjectAttention(weights, coverage, maps.key_grid)


class ContextMass:
    """The sums of ``mass^t_o`` and ``chance_o`` per generalized-attention block of a model, over the
    objects of the mini-shapes images (under ``data_root``) of each batch the model sees while attached;
    :meth:`means` averages them over the blocks asked for, every (block, object) pair alike.

    Example::

        mass = ContextMass(dataset.data_root)
        mass.attach(model)   # model(inputs=..., data_samples=..., mode=...) calls are measured
        ...
        mass.detach()
        mass.means()         # {'all': .., 'E1': .., .., 'chance': ..}
    """

    def __init__(self, data_root: str):
        self.data_root = data_root
        self.sums: dict[str, dict[str, float]] = {}  # block name -> 'all', term or 'chance' -> sum over objects
        self.counts: dict[str, int] = {}  # block name -> objects measured
        self._splits: dict[str, dict[str, list[ObjectContext]]] = {}
        self._batch: list[tuple[InputFrame, list[ObjectContext]]] = []
        self._handles: list = []

    def attach(self, model: torch.nn.Module) -> None:
        """Measure every forward of ``model`` (called with ``inputs`` and ``data_samples``) at each of its blocks."""
        blocks = {name: m for name, m in model.named_modules() if isinstance(m, GeneralizedAttention)}
        if blocks:
            self._handles = [model.register_forward_pre_hook(self._read_batch, with_kwargs=True),
                             *(block.register_forward_pre_hook(partial(self._measure, name))
                               for name, block in blocks.items())]

    def detach(self) -> None:
        """Stop measuring."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def means(self, blocks: list[str] | None = None) -> dict[str, float]:
        """``'all'``, each term and ``'chance'`` -> the mean over the objects of ``blocks`` (default: every
        block measured) that have it; NaN for a term none of them enables, or without objects."""
        blocks = list(self.counts) if blocks is None else blocks
        means = {}
        for name in MASS_KEYS:
            having = [b for b in blocks if name in self.sums.get(b, {})]
            count = sum(self.counts[b] for b in having)
            means[name] = sum(self.sums[b][name] for b in having) / count if count else math.nan
        return means

    def _contexts(self, image_path: str) -> list[ObjectContext]:
        """The objects of the image at ``image_path`` (``.../<split>/<file name>``)."""
        path = Path(image_path)
        if path.parent.name not in self._splits:
            self._splits[path.parent.name] = split_contexts(self.data_root, path.parent.name)
        return self._splits[path.parent.name][path.name]

    def _read_batch(self, model, args, kwargs) -> None:
        inputs, samples = kwargs["inputs"], kwargs["data_samples"]
        self._batch = [(InputFrame.of(s.metainfo, tuple(inputs.shape[-2:])), self._contexts(s.img_path))
                       for s in samples]

    def _measure(self, name: str, block: GeneralizedAttention, args) -> None:
        frames, objects = zip(*self._batch)
        if not any(objects):
            return
        sums = self.sums.setdefault(name, defaultdict(float))
        with torch.no_grad():
            for term, mass in object_attention(block, args[0].detach(), list(frames), list(objects)).mass().items():
                sums[term] += float(mass.sum())
        self.counts[name] = self.counts.get(name, 0) + sum(map(len, objects))


@HOOKS.register_module()
class AttentionMassHook(Hook):
    """During the final validation (the train loop at its last iteration), the attention mass on the
    deciding context of every generalized-attention block for every validation object
    (:class:`ContextMass`), written into ``summary`` (the dict the sweep's row and W&B summary are made
    of) under :data:`MASS_KEYS`; NaN throughout for a model without such a block. Costs one
    ``attention_maps`` call per block and batch, for the batch's few object queries. The validation set
    must be generated mini shapes."""

    priority = "VERY_HIGH"  # before RunSummaryHook, which writes the W&B summary at the end of the run

    def __init__(self, summary: dict):
        self.summary = summary
        self._mass: ContextMass | None = None

    def before_val_epoch(self, runner) -> None:
        if runner.iter < runner.max_iters:
            return
        self._mass = ContextMass(runner.val_dataloader.dataset.data_root)
        self._mass.attach(unwrapped_model(runner))

    def after_val_epoch(self, runner, metrics=None) -> None:
        if runner.iter < runner.max_iters:
            return
        self._mass.detach()
        self.summary.update({MASS_KEYS[name]: mean for name, mean in self._mass.means().items()})
