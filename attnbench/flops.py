"""Measured multiply-add counts with ``torch.utils.flop_counter``, completed for the ops it misses.

``FlopCounterMode`` counts matmuls and convolutions but reports 0 for the CPU flash kernel of
``scaled_dot_product_attention``; the formulas below fill that gap. Counts are returned as
multiply-adds (MACs = FlopCounterMode's FLOPs / 2), the unit of mmdet's and the paper's tables.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

_aten = torch.ops.aten


def _cpu_flash_forward(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


EXTRA_FLOP_FORMULAS: dict = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
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
