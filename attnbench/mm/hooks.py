"""Training hooks used by the sweep."""
import math

from mmengine.hooks import Hook

from .registry import HOOKS


@HOOKS.register_module()
class StopOnInvalidLossHook(Hook):
    """Stop a run whose loss became NaN or infinite, so the sweep records it as diverged."""

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        loss = (outputs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise FloatingPointError(f"loss is {float(loss)} at iteration {runner.iter + 1}: the run diverged")
