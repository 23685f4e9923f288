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


@HOOKS.register_module()
class RunSummaryHook(Hook):
    """Keep the last validation metrics; write them and ``extra`` values (FLOPs, parameters) to the
    W&B run summary before the visualizer closes at the end of training.

    A run killed between its final checkpoint and that checkpoint's validation resumes with nothing
    left to train, and its loop validates nothing: the hook then validates the final weights itself.
    """

    priority = "HIGH"  # after_run before LoggerHook's, which closes the W&B run

    def __init__(self, extra: dict | None = None):
        self.extra = dict(extra or {})
        self.metrics: dict = {}

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.metrics = dict(metrics or {})

    def after_train(self, runner) -> None:
        if not self.metrics and runner.val_loop is not None:
            runner.val_loop.run()

    def after_run(self, runner) -> None:
        backend = runner.visualizer.get_backend("WandbVisBackend")
        run = getattr(backend.experiment, "run", None) if backend is not None else None
        if run is not None:
            run.summary.update(self.extra | self.metrics)
