"""Training hooks used by the sweep."""
import math
import time

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
    """Keep the last validation metrics and the run's wall time; write them and ``extra`` values
    (FLOPs, parameters) to the W&B run summary before the visualizer closes at the end of training.

    ``train_seconds`` spans every attempt of a run: the time so far travels in the message hub that
    each checkpoint saves, so a killed run resumed from its last checkpoint adds to it (the time
    between that checkpoint and the kill is lost). A run killed between its final checkpoint and
    that checkpoint's validation resumes with nothing left to train, and its loop validates nothing:
    the hook then validates the final weights itself.
    """

    priority = "HIGH"  # after_run before LoggerHook's, which closes the W&B run; iterations before CheckpointHook's

    def __init__(self, extra: dict | None = None):
        self.extra = dict(extra or {})
        self.metrics: dict = {}
        self.train_seconds = 0.0
        self._earlier_seconds = 0.0
        self._started = None

    def _elapsed(self) -> float:
        return self._earlier_seconds + time.perf_counter() - self._started

    def before_run(self, runner) -> None:
        self._started = time.perf_counter()

    def before_train(self, runner) -> None:
        self._earlier_seconds = runner.message_hub.get_info("train_seconds", 0.0)  # restored on resume

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        runner.message_hub.update_info("train_seconds", self._elapsed())  # saved with the next checkpoint

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.metrics = dict(metrics or {})

    def after_train(self, runner) -> None:
        if not self.metrics and runner.val_loop is not None:
            runner.val_loop.run()

    def after_run(self, runner) -> None:
        self.train_seconds = round(self._elapsed(), 1)
        backend = runner.visualizer.get_backend("WandbVisBackend")
        run = getattr(backend.experiment, "run", None) if backend is not None else None
        if run is not None:
            run.summary.update(self.extra | self.metrics | {"train_seconds": self.train_seconds})
