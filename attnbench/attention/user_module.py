"""A user's own mechanism as a ResNet plugin: the class named by its import path (attnbench.user_modules),
built as ``cls(in_channels, **params)`` after a Bottleneck's conv2, checked against the plugin contract
before any run (:func:`check_contract`) and against the file the sweep planned with as it is built."""
from __future__ import annotations

import hashlib
import importlib
import inspect
from pathlib import Path

import torch
from torch import nn


def load_class(import_path: str, source_sha256: str | None = None) -> type:
    """The class at ``import_path``; where ``source_sha256`` is given, its file must still hash to it."""
    module_name, _, class_name = import_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # a user's file can raise anything as it imports
        raise ValueError(f"{import_path}: its module does not import ({type(error).__name__}: {error})") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"{import_path}: {module_name} has no torch.nn.Module subclass {class_name!r}")
    if source_sha256 is not None:
        file = Path(inspect.getsourcefile(module))
        if hashlib.sha256(file.read_bytes()).hexdigest() != source_sha256:
            raise ValueError(f"{import_path}: {file} changed since the sweep planned this run (another source "
                             "is another row: plan the sweep again)")
    return cls


class UserModule(nn.Module):
    """A user's module ``cls(in_channels, **params)``: ``(N, C, H, W) -> (N, C, H, W)``. Its multiply-adds are
    its own ``macs(x)`` where it has one, else None (attnbench.flops counts them)."""

    _abbr_ = "user_module"

    def __init__(self, in_channels: int, import_path: str, source_sha256: str | None = None, **params):
        super().__init__()
        self.import_path, self.source_sha256 = import_path, source_sha256
        self.module = load_class(import_path, source_sha256)(in_channels, **params)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)

    def macs(self, x: torch.Tensor) -> int | None:
        own = getattr(self.module, "macs", None)
        return int(own(x)) if callable(own) else None


def check_contract(import_path: str, params: dict, channels: int = 16, size: tuple[int, int] = (12, 10)) -> None:
    """Build the class as a plugin on ``channels`` channels and run it once forward and backward on a float32
    ``(2, channels, *size)`` input; ValueError in one line, naming ``import_path`` and the rule it breaks."""
    try:
        module = UserModule(channels, import_path, **params)
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(f"{import_path}: cls(in_channels={channels}, **{params}) failed "
                         f"({type(error).__name__}: {error})") from None
    if not any(p.requires_grad for p in module.parameters()):
        raise ValueError(f"{import_path}: has no parameters to train (a mechanism the benchmark trains learns)")
    x = torch.randn(2, channels, *size, requires_grad=True)
    try:
        y = module(x)
    except Exception as error:
        raise ValueError(f"{import_path}: forward on a (2, {channels}, {size[0]}, {size[1]}) input failed "
                         f"({type(error).__name__}: {error})") from None
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"{import_path}: forward returned {type(y).__name__}, not a tensor")
    if y.shape != x.shape:
        raise ValueError(f"{import_path}: forward maps {tuple(x.shape)} to {tuple(y.shape)}; a plugin keeps the "
                         "shape (N, C, H, W)")
    if y.dtype != x.dtype or y.device != x.device:
        raise ValueError(f"{import_path}: forward turns a {x.dtype} input on {x.device} into {y.dtype} on "
                         f"{y.device}; a plugin keeps the input's dtype and device")
    y.square().mean().backward()
    if x.grad is None:
        raise ValueError(f"{import_path}: its output does not depend on its input (no gradient reaches it)")
