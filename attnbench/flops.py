"""Multiply-add counts: measured with ``torch.utils.flop_counter``, completed for the ops it misses,
and a model's attention modules measured and counted analytically (:func:`count_model`).

``FlopCounterMode`` counts matmuls and convolutions but reports 0 for the CPU flash kernel of
``scaled_dot_product_attention`` and for torchvision's ``deform_conv2d``; the formulas below fill
those gaps. Counts are returned as multiply-adds (MACs = FlopCounterMode's FLOPs / 2), the unit of
mmdet's and the paper's tables.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch
import torchvision  # noqa: F401  (registers the torch.ops.torchvision operators)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from attnbench.attention.user_module import UserModule, UserSlot
from attnbench.variants import ALL_MECHANISMS

_aten = torch.ops.aten


def _cpu_flash_forward(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _deform_conv2d_forward(input_shape, weight_shape, *args, out_shape, **kwargs) -> int:
    """FLOPs of the convolution over the sampled columns, as for a plain conv of the same shapes:
    2 x ``N * C_out * H_out * W_out * (C_in / groups) * kh * kw``. The bilinear sampling (4
    multiply-adds per sampled value) and the mask are elementwise work, left out like every other
    elementwise op that FlopCounterMode sees."""
    n, c_out, h_out, w_out = out_shape
    _, c_in_per_group, kh, kw = weight_shape
    return 2 * n * c_out * h_out * w_out * c_in_per_group * kh * kw


# Keyed by operator packet (``torch.ops.ns.op``, not ``.default``): FlopCounterMode looks formulas up
# by ``func._overloadpacket``.
EXTRA_FLOP_FORMULAS: dict = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
    torch.ops.torchvision.deform_conv2d: _deform_conv2d_forward,
}


#: Operator names (without their namespace) that say matrix work: convolutions, matrix products, attention
#: kernels, not interpolation (``upsample_bilinear2d``). Such an operator that runs without a FLOP formula is
#: work a count leaves out.
MATRIX_WORK = re.compile(r"^(?!_?upsample|grid_sampler)"
                         r".*(conv(?!ert)|mm(_|$)|matmul|attention|linear|einsum|tensordot)")


@dataclass(frozen=True)
class ForwardCount:
    """One forward pass counted by :func:`count_forward`.

    ``torch_misses``: the operators that ran, say matrix work (:data:`MATRIX_WORK`) and have no formula in
    torch's own FlopCounterMode; ``macs`` counts those of them that :data:`EXTRA_FLOP_FORMULAS` has a
    formula for, and ``uncounted`` names the rest, whose work ``macs`` leaves out.
    """

    macs: int
    torch_misses: tuple[str, ...] = ()
    uncounted: tuple[str, ...] = ()


class _OperatorRecorder(TorchDispatchMode):
    """Records the overload packet of every operator that runs below it (after FlopCounterMode's decompositions)."""

    def __init__(self):
        super().__init__()
        self.packets: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.packets.setdefault(func._overloadpacket, None)
        return func(*args, **(kwargs or {}))


def count_forward(fn: Callable, *args, **kwargs) -> ForwardCount:
    """:func:`counted_macs` with the operators it could not count: see :class:`ForwardCount`."""
    recorder = _OperatorRecorder()
    counter = FlopCounterMode(display=False, custom_mapping=dict(EXTRA_FLOP_FORMULAS))
    # detached: under no_grad, a view of an input that requires grad has neither a grad_fn nor a leaf's
    # accumulator, and FlopCounterMode's module tracker fails on it
    args, kwargs = tree_map_only(torch.Tensor, torch.Tensor.detach, (args, kwargs))
    with recorder, counter, torch.no_grad():  # the counter on top: the recorder sees the operators that ran
        fn(*args, **kwargs)
    missed = [packet for packet in recorder.packets
              if MATRIX_WORK.search(str(packet).split(".", 1)[-1])
              and (packet in EXTRA_FLOP_FORMULAS or packet not in counter.flop_registry)]
    return ForwardCount(counter.get_total_flops() // 2, tuple(sorted(map(str, missed))),
                        tuple(sorted(str(p) for p in missed if p not in counter.flop_registry)))


def counted_macs(module: Callable, *inputs, **kwargs) -> int:
    """Multiply-adds of one forward pass ``module(*inputs, **kwargs)`` (a module or any callable), measured,
    for a module with no analytic ``macs()`` or to check one.

    Runs the call once under ``torch.no_grad()`` inside ``torch.utils.flop_counter.FlopCounterMode`` and
    returns its FLOPs / 2. Counted: matrix products (``mm``, ``bmm``, ``addmm``, ``baddbmm``, and what
    ``matmul``, ``linear`` and ``einsum`` decompose into), convolutions (any dims, grouped, transposed),
    scaled-dot-product attention (torch's formulas for its CUDA kernels, :data:`EXTRA_FLOP_FORMULAS`' for
    the CPU flash kernel) and torchvision's ``deform_conv2d`` (the conv over the sampled columns). Not
    counted: elementwise work (activations, normalisation, softmax, pooling, interpolation, bilinear
    sampling, additions and products of tensors), as the analytic ``macs()`` leave it out too; and an
    operator with no formula (:func:`count_forward` names those whose names say matrix work). The count
    reads shapes only: inputs on the meta device or fake tensors do, where the module runs on them.
    """
    return count_forward(module, *inputs, **kwargs).macs


#: The same count under the name the mechanism tests use.
count_macs = counted_macs


#: Module classes counted as "attention modules" of a model (the mechanisms under study, 2D and 1D, and a user's).
ATTENTION_MODULES = (*dict.fromkeys(
    module for m in ALL_MECHANISMS for module in (m.module, m.sequence_module) if module is not None), UserModule,
    UserSlot)


def _outermost_attention_modules(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    found: dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if isinstance(module, ATTENTION_MODULES) and not any(name.startswith(p + ".") for p in found):
            found[name] = module
    return found


def count_model(model: torch.nn.Module, forward: Callable[[], object]) -> dict:
    """Count one ``forward()`` call of ``model``: the whole model measured, and its outermost
    mechanisms both measured and analytically, each by its ``macs()`` called with the arguments of
    its call (every mechanism's ``macs`` takes its ``forward``'s arguments and reads their shapes). A module
    whose ``macs`` gives None (a user's module without one) is counted instead, as ``macs_source`` says."""
    modules = _outermost_attention_modules(model)
    analytic = {}

    def record(name: str):
        return lambda m, args, kwargs: analytic.setdefault(name, []).append(m.macs(*args, **kwargs))

    hooks = [m.register_forward_pre_hook(record(name), with_kwargs=True) for name, m in modules.items()]
    counter = FlopCounterMode(display=False, custom_mapping=dict(EXTRA_FLOP_FORMULAS))
    was_training = model.training
    model.eval()
    try:
        with counter, torch.no_grad():
            forward()
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    per_module = {name.split(".", 1)[1] if "." in name else "": sum(ops.values())
                  for name, ops in counter.get_flop_counts().items()}
    counted = {name for name, calls in analytic.items() if None in calls}
    return dict(
        macs_model=counter.get_total_flops() // 2,
        macs_modules=sum(per_module.get(name, 0) for name in modules) // 2,
        macs_modules_analytic=sum(sum(calls) for name, calls in analytic.items() if name not in counted)
        + sum(per_module.get(name, 0) for name in counted) // 2,
        macs_source="flop_counter" if counted else "analytic",
        params_model=sum(p.numel() for p in model.parameters()),
        params_modules=sum(p.numel() for m in modules.values() for p in m.parameters()),
    )
