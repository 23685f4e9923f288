"""Multiply-add counts: measured with ``torch.utils.flop_counter``, completed for the ops it misses,
and a model's attention modules measured and counted analytically (:func:`count_model`).

``FlopCounterMode`` counts matmuls and convolutions but reports 0 for the CPU flash kernel of
``scaled_dot_product_attention`` and for torchvision's ``deform_conv2d``; the formulas below fill
those gaps. Counts are returned as multiply-adds (MACs = FlopCounterMode's FLOPs / 2), the unit of
mmdet's and the paper's tables.
"""
from __future__ import annotations

from typing import Callable

import torch
import torchvision  # noqa: F401  (registers the torch.ops.torchvision operators)
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

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


def count_macs(fn: Callable, *args, **kwargs) -> int:
    """Multiply-adds executed by ``fn(*args, **kwargs)`` (a module or any callable), forward only."""
    counter = FlopCounterMode(display=False, custom_mapping=dict(EXTRA_FLOP_FORMULAS))
    with counter, torch.no_grad():
        fn(*args, **kwargs)
    return counter.get_total_flops() // 2


#: Module classes counted as "attention modules" of a model (the mechanisms under study, 2D and 1D).
ATTENTION_MODULES = tuple(dict.fromkeys(
    module for m in ALL_MECHANISMS for module in (m.module, m.sequence_module) if module is not None))


def _outermost_attention_modules(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    found: dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if isinstance(module, ATTENTION_MODULES) and not any(name.startswith(p + ".") for p in found):
            found[name] = module
    return found


def count_model(model: torch.nn.Module, forward: Callable[[], object]) -> dict:
    """Count one ``forward()`` call of ``model``: the whole model measured, and its outermost
    mechanisms both measured and analytically, each by its ``macs()`` called with the arguments of
    its call (every mechanism's ``macs`` takes its ``forward``'s arguments and reads their shapes)."""
    modules = _outermost_attention_modules(model)
    analytic = []
    hooks = [m.register_forward_pre_hook(
        lambda m, args, kwargs: analytic.append(m.macs(*args, **kwargs)), with_kwargs=True)
        for m in modules.values()]
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
    return dict(
        macs_model=counter.get_total_flops() // 2,
        macs_modules=sum(per_module.get(name, 0) for name in modules) // 2,
        macs_modules_analytic=sum(analytic),
        params_model=sum(p.numel() for p in model.parameters()),
        params_modules=sum(p.numel() for m in modules.values() for p in m.parameters()),
    )
