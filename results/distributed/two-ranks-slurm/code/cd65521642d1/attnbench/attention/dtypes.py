"""Mixed floating dtypes, as autocast leaves them, brought to one."""
from __future__ import annotations

import functools

import torch


def to_common_dtype(*tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """``tensors`` cast to the widest of their dtypes (None passes through).

    Under autocast a convolution's output is fp16/bf16 while a table computed in float32 or a
    parameter stays float32; kernels that take several operands (custom autograd functions,
    torchvision's ``deform_conv2d`` without its autocast wrapper) need them in one dtype.
    """
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors if t is not None))
    return tuple(None if t is None else t.to(dtype) for t in tensors)
