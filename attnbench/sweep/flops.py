"""Multiply-adds and parameters of a built model and of its attention modules.

The model is run once at the task's input size under ``torch.utils.flop_counter`` (completed by
:mod:`attnbench.flops`); the attention modules' share is read from its per-module counts and
checked against the sum of the modules' analytic ``macs()`` at the shapes they actually saw.
"""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from attnbench.flops import EXTRA_FLOP_FORMULAS
from attnbench.variants import ALL_MECHANISMS

#: Module classes counted as "attention modules" of a model (the mechanisms under study, 2D and 1D).
ATTENTION_MODULES = tuple(dict.fromkeys(
    module for m in ALL_MECHANISMS for module in (m.module, m.sequence_module) if module is not None))


def _outermost_attention_modules(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    found: dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if isinstance(module, ATTENTION_MODULES) and not any(name.startswith(p + ".") for p in found):
            found[name] = module
    return found


def count_model(model: torch.nn.Module, forward, analytic_macs) -> dict:
    """Count one ``forward()`` call of ``model``.

    ``analytic_macs(module, args, kwargs)`` returns a module's analytic count for the arguments
    it was called with (the tasks differ in how their modules are called).
    """
    modules = _outermost_attention_modules(model)
    analytic = []
    hooks = [m.register_forward_pre_hook(
        lambda m, args, kwargs: analytic.append(analytic_macs(m, args, kwargs)), with_kwargs=True)
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
