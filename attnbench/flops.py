"""Measured multiply-add counts with ``torch.utils.flop_counter``, completed for the ops it misses.

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


def register_flop_formula(op, formula: Callable) -> None:
    """Add a formula ``(*arg_shapes, out_shape=...) -> FLOPs`` for an op FlopCounterMode misses."""
    EXTRA_FLOP_FORMULAS[op] = formula


def count_macs(fn: Callable, *args, **kwargs) -> int:
    """Multiply-adds executed by ``fn(*args, **kwargs)`` (a module or any callable), forward only."""
    counter = FlopCounterMode(display=False, custom_mapping=dict(EXTRA_FLOP_FORMULAS))
    with counter, torch.no_grad():
        fn(*args, **kwargs)
    return counter.get_total_flops() // 2
