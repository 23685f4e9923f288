"""Training hooks used by the sweep and the mini configs."""
import copy
import json
import math
import time
from collections.abc import Mapping

import torch
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
    """Keep the last validation metrics, the run's wall time and the part of it spent validating; write
    them and ``extra`` values (FLOPs, parameters) to the W&B run summary before the visualizer closes
    at the end of training. ``extra["loss_first"]`` is the training loss of the first iteration (of the
    initial weights, before any step); NaN for a run resumed from a checkpoint written before it was kept.

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
        self.val_seconds = 0.0  # this attempt's validations, within train_seconds
        self._val_started = None
        self.earlier_seconds = 0.0  # the earlier attempts' training time, restored on resume
        self._started = None

    def _elapsed(self) -> float:
        return self.earlier_seconds + time.perf_counter() - self._started

    def before_run(self, runner) -> None:
        self._started = time.perf_counter()

    def before_train(self, runner) -> None:
        self.earlier_seconds = runner.message_hub.get_info("train_seconds", 0.0)  # restored on resume
        self.extra["loss_first"] = runner.message_hub.get_info("loss_first", math.nan)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        hub = runner.message_hub
        hub.update_info("train_seconds", self._elapsed())  # saved with the next checkpoint, as is loss_first
        if runner.iter == 0 and "loss" in (outputs or {}):
            self.extra["loss_first"] = float(outputs["loss"])
            hub.update_info("loss_first", self.extra["loss_first"])

    def before_val_epoch(self, runner) -> None:
        self._val_started = time.perf_counter()

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.metrics = dict(metrics or {})
        self.val_seconds += time.perf_counter() - self._val_started

    def after_train(self, runner) -> None:
        if not self.metrics and runner.val_loop is not None:
            runner.val_loop.run()

    def after_run(self, runner) -> None:
        self.train_seconds = round(self._elapsed(), 1)
        backend = runner.visualizer.get_backend("WandbVisBackend")
        run = getattr(backend.experiment, "run", None) if backend is not None else None
        if run is not None:
            run.summary.update(self.extra | self.metrics | {"train_seconds": self.train_seconds})


@HOOKS.register_module()
class LearningCurveHook(Hook):
    """Append one line a validation to ``<work_dir>/curve.jsonl``: the iteration, the training minutes so
    far (wall time since training started, validations left out) and the validation metrics. One process,
    one thread (the config's ``cpu_threads``) makes those minutes CPU-minutes: a learning curve per
    CPU-minute (``tools/learning_curves.py`` tabulates and plots them). A resumed run starts a new clock."""

    priority = "LOW"

    def __init__(self, filename: str = "curve.jsonl"):
        self.filename = filename
        self._started = None
        self._val_seconds = 0.0
        self._val_started = None

    def before_train(self, runner) -> None:
        self._started = time.perf_counter()

    def before_val_epoch(self, runner) -> None:
        self._val_started = time.perf_counter()

    def after_val_epoch(self, runner, metrics=None) -> None:
        if self._started is None:  # a validation outside training (runner.val())
            return
        val_seconds = time.perf_counter() - self._val_started
        train_minutes = (self._val_started - self._started - self._val_seconds) / 60
        self._val_seconds += val_seconds
        line = dict(iter=runner.iter, train_minutes=round(train_minutes, 3), val_minutes=round(val_seconds / 60, 3),
                    **{key: float(value) for key, value in (metrics or {}).items()})
        with open(f"{runner.work_dir}/{self.filename}", "a") as file:
            file.write(json.dumps(line) + "\n")


def is_gate(name: str) -> bool:
    """Whether a parameter or state-dict key names a residual gate (``gamma`` or ``gamma_*``)."""
    return name.rsplit(".", 1)[-1].split("_")[0] == "gamma"


def gate_magnitudes(state: Mapping[str, torch.Tensor]) -> list[float]:
    """|gamma| of every residual gate of a state dict."""
    return [float(v.abs().max()) for k, v in state.items() if is_gate(k)]


class DecayOnlyGate:
    """Where a gate would be had the loss never reached it: a copy of the gate stepped, after each step
    of the run's optimizer, by a copy of that optimizer with the gate's group's current hyperparameters
    (the learning rate as scheduled, momentum, weight decay) and a zero gradient.

    For SGD, whose step is linear in the parameter and its gradient jointly, ``gate - decay-only gate``
    is exactly the part of the gate's path that the loss's gradients made; for other optimizers it is
    the distance from where weight decay alone would have taken the gate.
    """

    def __init__(self, gate: torch.nn.Parameter, optimizer: torch.optim.Optimizer):
        self.gate = gate
        self.group = next(g for g in optimizer.param_groups if any(p is gate for p in g["params"]))
        self.copy = gate.detach().clone().requires_grad_()
        self.copy.grad = torch.zeros_like(self.copy)
        self.optimizer = type(optimizer)([{**self._hyperparameters(), "params": [self.copy]}])

    def _hyperparameters(self) -> dict:
        return {k: v for k, v in self.group.items() if k != "params"}

    def step(self) -> None:
        """Step the copy as the run's optimizer stepped the gate (not at all where the gate had no gradient)."""
        if self.gate.grad is not None:
            self.optimizer.param_groups[0].update(self._hyperparameters())
            self.optimizer.step()

    def moved_by_loss(self) -> float:
        """max |gate - decay-only gate|."""
        return float((self.gate.detach() - self.copy.detach()).abs().max())

    def opened_by_loss(self) -> float:
        """|gate| - |decay-only gate| at the element the loss moved most: > 0 where the loss held the gate
        further open than weight decay alone would have, < 0 where it closed it further."""
        gate, copy = self.gate.detach().flatten(), self.copy.detach().flatten()
        i = int((gate - copy).abs().argmax())
        return float(gate[i].abs() - copy[i].abs())

    def state_dict(self) -> dict:
        return {"value": self.copy.detach().clone(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.copy.copy_(state["value"])
        self.optimizer.load_state_dict(state["optimizer"])


@HOOKS.register_module()
class OpeningHook(Hook):
    """How far a run's attention left its start, written into ``summary`` (the sweep passes the dict
    its result row and W&B summary are made of):

    - ``gate_max``: the largest final |gamma| of the residual gates ``y = x + gamma * branch(x)``
      (0 at mmcv's initialisation: a gate still near 0 means the block barely took part); NaN without any;
    - ``gate_loss_max``: the largest final |gamma - gamma_decay| over the gates, ``gamma_decay`` the gate
      stepped by weight decay alone (:class:`DecayOnlyGate`): how far the loss moved a gate (weight
      decay alone takes a gate started at 1 towards 0); NaN without gates or for a run resumed from a
      checkpoint without the decay-only copies;
    - ``gate_loss_opened``: at that gate, ``|gamma| - |gamma_decay|``: whether the loss held the gate open
      (> 0) or closed it (< 0) against weight decay alone; NaN where ``gate_loss_max`` is;
    - ``offset_mean_px``: the mean length ``sqrt(dy^2 + dx^2)`` of the deformable convolutions' offsets
      (0 at init) over the last validation, in pixels of each convolution's input; NaN without any.

    The decay-only copies travel in the run's checkpoints (``checkpoint_key``), so a resumed run goes on
    from where its copies were.
    """

    priority = "VERY_HIGH"  # before RunSummaryHook, which writes the W&B summary at the end of the run
    checkpoint_key = "attnbench_decay_only_gates"

    def __init__(self, summary: dict):
        self.summary = summary
        self._offset_hooks: list = []
        self._lengths: list[torch.Tensor] = []
        self._decay_only: dict[str, DecayOnlyGate] | None = None  # None: not followed (no gates, or lost on resume)
        self._loaded: dict | None = None
        self._step_hook = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._loaded = checkpoint.get(self.checkpoint_key)

    def before_train(self, runner) -> None:
        optimizer = getattr(runner.optim_wrapper, "optimizer", None)  # one optimizer (not an OptimWrapperDict)
        gates = {name: p for name, p in unwrapped_model(runner).named_parameters() if is_gate(name) and p.requires_grad}
        if optimizer is None or not gates or (runner.iter > 0 and self._loaded is None):
            return
        self._decay_only = {name: DecayOnlyGate(gate, optimizer) for name, gate in gates.items()}
        for name, state in (self._loaded or {}).items():
            self._decay_only[name].load_state_dict(state)
        self._step_hook = optimizer.register_step_post_hook(self._step_decay_only)

    def _step_decay_only(self, optimizer, args, kwargs) -> None:
        for gate in self._decay_only.values():
            gate.step()

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._decay_only is not None:
            checkpoint[self.checkpoint_key] = {name: gate.state_dict() for name, gate in self._decay_only.items()}

    def before_val_epoch(self, runner) -> None:
        from attnbench.attention.deformable_conv import _DeformConv2dBase

        self._lengths = []
        for module in unwrapped_model(runner).modules():
            if isinstance(module, _DeformConv2dBase):
                self._offset_hooks.append(module.conv_offset.register_forward_hook(self._offset_hook(module)))

    def _offset_hook(self, module):
        num_offsets = 2 * module.deform_groups * module.kernel_size[0] * module.kernel_size[1]

        def record(conv, inputs, branch):
            n, _, h, w = branch.shape
            offsets = branch[:, :num_offsets].detach().float().reshape(n, -1, 2, h, w)  # (dy, dx) pairs
            self._lengths.append(offsets.norm(dim=2).flatten())
        return record

    def after_val_epoch(self, runner, metrics=None) -> None:
        for handle in self._offset_hooks:
            handle.remove()
        self._offset_hooks = []
        self.summary["offset_mean_px"] = float(torch.cat(self._lengths).mean()) if self._lengths else math.nan

    def after_train(self, runner) -> None:
        gates = gate_magnitudes(unwrapped_model(runner).state_dict())
        self.summary["gate_max"] = max(gates) if gates else math.nan
        most_moved = max((self._decay_only or {}).values(), key=DecayOnlyGate.moved_by_loss, default=None)
        self.summary["gate_loss_max"] = most_moved.moved_by_loss() if most_moved else math.nan
        self.summary["gate_loss_opened"] = most_moved.opened_by_loss() if most_moved else math.nan
        if self._step_hook is not None:
            self._step_hook.remove()
            self._step_hook = None


def unwrapped_model(runner) -> torch.nn.Module:
    """The runner's model without its distributed wrapper, if any."""
    return runner.model.module if hasattr(runner.model, "module") else runner.model


@HOOKS.register_module()
class PairedInitHook(Hook):
    """Start every run from its baseline's initial weights at the same seed, so runs pair by seed.

    A variant's attention modules draw their initial weights from the random stream, so without this
    every layer built or initialised after the first of them (the rest of the backbone, neck, heads)
    starts from other values than in the baseline's run at the same seed, and the pair shares only its
    data order. Before the first iteration, this hook builds the baseline model (the run's model config
    without the backbone keys a variant sets, :attr:`attnbench.variants.Variant.BACKBONE_KEYS`),
    initialises it at the run's seed on a forked random stream (the run's own stream is untouched) and
    copies into the run's model every tensor of the same name and shape: all but the variant's own.
    The baseline's run copies its whole model, so the two start equal wherever they can. A resumed run
    or one loading a checkpoint (``load_from``) is left as it is.
    """

    priority = "VERY_HIGH"

    def before_train(self, runner) -> None:
        from mmengine.registry import MODELS  # the root: resolves mmdet/mmseg types in the runner's scope

        from attnbench.variants import Variant

        if runner.iter > 0 or runner.cfg.get("load_from"):
            return
        reference_cfg = copy.deepcopy(runner.cfg.model)
        for key in Variant.BACKBONE_KEYS:
            reference_cfg.get("backbone", {}).pop(key, None)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(runner.seed)
            reference = MODELS.build(reference_cfg)
            reference.init_weights()
        model = unwrapped_model(runner)
        own = model.state_dict()
        shared = {k: v for k, v in reference.state_dict().items() if k in own and own[k].shape == v.shape}
        model.load_state_dict(shared, strict=False)
        runner.logger.info(f"paired initialisation: {len(shared)} of {len(own)} tensors from the baseline "
                           f"model initialised at seed {runner.seed}")
