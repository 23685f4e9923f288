"""OpeningHook's ``gate_loss_max`` in an mmengine Runner: how far the loss, not weight decay, moved the gates,
against a float64 replay of SGD with momentum and weight decay; the same after a resume."""
import math

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner

from attnbench.mm.hooks import OpeningHook
from attnbench.mm.run_setup import resumable_checkpoints
from reference import sgd_without_gradient

LR, MOMENTUM, DECAY, ITERS = 0.1, 0.9, 0.05, 12


class TwoGates(BaseModel):
    """``y = x + gamma * w x`` then ``+ gamma_b * x``: two gates the loss reaches, and ``gamma_unused`` it never does."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5, -0.3]))
        self.gamma = torch.nn.Parameter(torch.tensor(1.0))
        self.gamma_b = torch.nn.Parameter(torch.tensor(0.5))
        self.gamma_unused = torch.nn.Parameter(torch.tensor(1.0))

    def forward(self, inputs, data_samples=None, mode="tensor"):
        x = torch.stack(inputs)
        y = x + self.gamma * self.w * x + self.gamma_b * x
        return {"loss": ((y - 2.0 * x) ** 2).mean()} if mode == "loss" else y


class LearningRates(Hook):
    """Each step's learning rate, as the run's scheduler set it."""

    def __init__(self):
        self.values = []

    def before_train(self, runner) -> None:
        runner.optim_wrapper.optimizer.register_step_pre_hook(
            lambda optimizer, args, kwargs: self.values.append(optimizer.param_groups[0]["lr"]))


def runner(work_dir, max_iters, resume=False, name="run"):
    data = [torch.tensor([1.0, 2.0]) * (i + 1) / 4 for i in range(4)]
    loader = torch.utils.data.DataLoader(data, batch_size=2, shuffle=False, collate_fn=lambda batch: dict(inputs=batch))
    return Runner(
        model=TwoGates(), work_dir=str(work_dir), experiment_name=name, train_dataloader=loader,
        train_cfg=dict(by_epoch=False, max_iters=max_iters),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=LR, momentum=MOMENTUM, weight_decay=DECAY)),
        param_scheduler=dict(type="PolyLR", power=1.0, eta_min=0.0, begin=0, end=ITERS, by_epoch=False),
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=6, by_epoch=False),
                           logger=dict(type="LoggerHook", interval=100)),
        resume=resume, default_scope="mmengine")


def train(work_dir, max_iters, resume=False, name="run"):
    """The run's summary and model after training, and the learning rate of each of its steps."""
    run, summary, lrs = runner(work_dir, max_iters, resume, name), {}, LearningRates()
    run.register_hook(OpeningHook(summary), priority="VERY_HIGH")
    run.register_hook(lrs)
    with resumable_checkpoints():
        run.train()
    return summary, run.model, lrs.values


@pytest.mark.slow
def test_gate_loss_max_is_the_gates_distance_from_weight_decay_alone(tmp_path):
    summary, model, lrs = train(tmp_path, ITERS)
    assert len(lrs) == ITERS and lrs[0] == pytest.approx(LR) and lrs[-1] < LR / 5  # scheduled
    decay_only = {name: sgd_without_gradient(start, lrs, MOMENTUM, DECAY)
                  for name, start in (("gamma", 1.0), ("gamma_b", 0.5))}
    moved = {name: abs(getattr(model, name).item() - value) for name, value in decay_only.items()}
    assert summary["gate_loss_max"] == pytest.approx(max(moved.values()), abs=1e-6)
    most = max(moved, key=moved.get)
    opened = abs(getattr(model, most).item()) - abs(decay_only[most])
    assert summary["gate_loss_opened"] == pytest.approx(opened, abs=1e-6) and abs(opened) > 1e-3
    assert model.gamma_unused.item() == 1.0  # no gradient: the optimizer skips it, and so does its copy
    assert summary["gate_max"] == pytest.approx(max(abs(model.gamma.item()), abs(model.gamma_b.item()), 1.0))
    assert min(moved.values()) > 1e-3


@pytest.mark.slow
def test_a_resumed_run_goes_on_from_its_decay_only_copies(tmp_path):
    straight, _, _ = train(tmp_path / "straight", ITERS)
    train(tmp_path / "resumed", 6, name="first")
    resumed, _, steps = train(tmp_path / "resumed", ITERS, resume=True, name="second")
    assert len(steps) == ITERS - 6  # it went on from the checkpoint, not from scratch
    assert resumed["gate_loss_max"] == pytest.approx(straight["gate_loss_max"], rel=1e-5)


@pytest.mark.slow
def test_a_run_resumed_without_the_copies_records_no_value(tmp_path):
    train(tmp_path, 6, name="first")
    checkpoint_path = (tmp_path / "last_checkpoint").read_text().strip()
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    del checkpoint[OpeningHook.checkpoint_key]  # a checkpoint written before the hook kept them
    torch.save(checkpoint, checkpoint_path)
    resumed, _, _ = train(tmp_path, ITERS, resume=True, name="second")
    assert math.isnan(resumed["gate_loss_max"]) and math.isnan(resumed["gate_loss_opened"]) and resumed["gate_max"] > 0
