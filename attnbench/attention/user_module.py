"""A user's own mechanism: the class named by its import path (attnbench.user_modules), checked against the file
the sweep planned with as it is built and against its contract before any run.

Images (:class:`UserModule`, :func:`check_contract`): a ResNet plugin after a Bottleneck's conv2, built as
``cls(in_channels, **params)``, ``(N, C, H, W) -> (N, C, H, W)``.

Translation (:class:`UserSlot`, :func:`check_slot_contract`): a slot of the Transformer (attnbench.models.
transformer_nmt), built as ``cls(embed_dim, num_heads, causal=..., dropout=..., **params)``, with the slot's own
calls: ``mix(x (B, T, C), key_padding_mask (B, T) or None, last) -> (B, last, C)`` (the outputs of the last
``last`` steps: all of them in training, the new ones as decoding extends ``x`` step by step) for the two
self-attention slots, ``attend(query (B, n, C), memory (B, S, C), memory_padding_mask, query_offset) ->
(B, n, C)`` for the encoder-decoder slot; a class fills the slots whose call it has."""
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


def module_sources(model: nn.Module) -> str | None:
    """The users' modules in ``model``, each as ``import.path@<the first 16 hex digits of its file's SHA-256>``,
    ``;``-joined; None without any (the store's ``module_source``)."""
    found = [f"{m.import_path}@{(m.source_sha256 or '')[:16]}" for m in model.modules()
             if isinstance(m, (UserModule, UserSlot))]
    return ";".join(dict.fromkeys(found)) or None


#: The call each translation slot makes of its mechanism.
SLOT_CALLS = {"enc-self": "mix", "dec-self": "mix", "enc-dec": "attend"}


def slots_of(cls: type) -> tuple[str, ...]:
    """The translation slots a user's class fills: those whose call (:data:`SLOT_CALLS`) it defines."""
    return tuple(slot for slot, call in SLOT_CALLS.items() if callable(getattr(cls, call, None)))


class UserSlot(nn.Module):
    """A user's module in a translation slot: its ``mix`` and ``attend`` run through this module's forward, so
    that the FLOP counter attributes their work to it; its multiply-adds are counted (``macs`` gives None)."""

    def __init__(self, slot: str, embed_dim: int, num_heads: int, causal: bool, dropout: float, import_path: str,
                 source_sha256: str | None = None, **params):
        super().__init__()
        cls = load_class(import_path, source_sha256)
        if slot not in slots_of(cls):
            raise ValueError(f"{import_path}: the {slot} slot calls {SLOT_CALLS[slot]}(...), which it does not "
                             f"define; it fills {list(slots_of(cls)) or 'no translation slot'}")
        self.import_path, self.source_sha256 = import_path, source_sha256
        self.module = cls(embed_dim, num_heads, causal=causal, dropout=dropout, **params)

    def forward(self, call: str, *args) -> torch.Tensor:
        return getattr(self.module, call)(*args)

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        return self("mix", x, key_padding_mask, last)

    def attend(self, query, memory, memory_padding_mask, query_offset: int) -> torch.Tensor:
        return self("attend", query, memory, memory_padding_mask, query_offset)

    def macs(self, call: str, *args) -> None:
        return None


def _refuse_output(import_path: str, call: str, x: torch.Tensor, y, shape: tuple) -> None:
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"{import_path}: {call} returned {type(y).__name__}, not a tensor")
    if tuple(y.shape) != shape:
        raise ValueError(f"{import_path}: {call} gives {tuple(y.shape)}, not {shape}")
    if y.dtype != x.dtype or y.device != x.device:
        raise ValueError(f"{import_path}: {call} turns a {x.dtype} input on {x.device} into {y.dtype} on {y.device}; "
                         "a slot keeps the input's dtype and device")


def _built(import_path: str, build, call: str) -> nn.Module:
    """``build()``, its failure (other than a refusal of ours) as one line that names ``call``, and a module with
    no parameters to train refused."""
    try:
        module = build()
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(f"{import_path}: {call} failed ({type(error).__name__}: {error})") from None
    if not any(p.requires_grad for p in module.parameters()):
        raise ValueError(f"{import_path}: has no parameters to train (a mechanism the benchmark trains learns)")
    return module


def check_slot_contract(import_path: str, params: dict, embed_dim: int = 16, num_heads: int = 4) -> tuple[str, ...]:
    """Build the class in each slot it fills and make each call once, forward and backward, on float32 inputs
    with padding; the slots it fills, or ValueError in one line naming ``import_path`` and the rule it breaks."""
    slots = slots_of(load_class(import_path))
    if not slots:
        raise ValueError(f"{import_path}: defines neither mix(x, key_padding_mask, last) nor attend(query, memory, "
                         "memory_padding_mask, query_offset), so it fills no translation slot")
    mask = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    for slot in dict.fromkeys(slots, None):
        module = _built(import_path, lambda: UserSlot(slot, embed_dim, num_heads, slot == "dec-self", 0.0,
                                                      import_path, **params),
                        f"cls({embed_dim}, {num_heads}, causal=..., dropout=..., **{params})")
        x = torch.randn(2, 6, embed_dim, requires_grad=True)
        try:
            if SLOT_CALLS[slot] == "mix":
                y, shape = module.mix(x, mask, 6), (2, 6, embed_dim)
                _refuse_output(import_path, "mix", x, y, shape)
                _refuse_output(import_path, "mix with last=2", x, module.mix(x, mask, 2), (2, 2, embed_dim))
            else:
                y, shape = module.attend(x[:, :3], x, mask, 0), (2, 3, embed_dim)
                _refuse_output(import_path, "attend", x, y, shape)
        except ValueError:
            raise
        except Exception as error:
            raise ValueError(f"{import_path}: {SLOT_CALLS[slot]} on a (2, 6, {embed_dim}) input failed "
                             f"({type(error).__name__}: {error})") from None
        y.square().mean().backward()
    return slots


def check_contract(import_path: str, params: dict, channels: int = 16, size: tuple[int, int] = (12, 10)) -> None:
    """Build the class as a plugin on ``channels`` channels and run it once forward and backward on a float32
    ``(2, channels, *size)`` input; ValueError in one line, naming ``import_path`` and the rule it breaks."""
    module = _built(import_path, lambda: UserModule(channels, import_path, **params),
                    f"cls(in_channels={channels}, **{params})")
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
