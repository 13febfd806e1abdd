"""Patching the flow model's own code for the length of a block: its RoPE in real arithmetic and its attention
backend switch. ONNX has no complex type, so the model's complex RoPE product cannot be exported as written;
`real_rope` swaps it for the same rotation in reals, and `patched` is how every patch of the model's own classes
(here and in `rewrites`) is applied and put back, also when the block raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import torch
from torch import nn

from .model import loaded_rope_classes, source_of


def phase_cos_sin(phases: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The phase table [L, P] (complex, as the model holds it, or its real (cos, sin) pairs [L, P, 2]) read as
    cos and sin [L, P]: the same numbers the complex product multiplies by, so no Cos/Sin is computed."""
    table = torch.view_as_real(phases) if phases.is_complex() else phases
    return table[..., 0], table[..., 1]


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, flip_sign: bool = False) -> torch.Tensor:
    """(a + ib)(cos t + i sin t) = (a cos t - b sin t) + i(a sin t + b cos t) on the channel pairs (2p, 2p+1)
    of x's last axis, in reals; cos and sin [..., n/2] broadcast against the pairs."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    imag = a * sin - b * cos if flip_sign else a * sin + b * cos
    return torch.stack([a * cos - b * sin, imag], dim=-1).reshape(x.shape).to(x.dtype)


def _rotate_real(x: torch.Tensor, phases: torch.Tensor, flip_sign: bool = False) -> torch.Tensor:
    """The model's RoPE on x [..., L, H, d] with phases [L, d/2] shared over the heads, in reals."""
    cos, sin = phase_cos_sin(phases)
    return rotate_pairs(x, cos.unsqueeze(-2), sin.unsqueeze(-2), flip_sign)


@contextlib.contextmanager
def real_rope(model: nn.Module | None = None, *, flip_sign: bool = False) -> Iterator[None]:
    """Within the block, the model's own RoPE (`RotaryPositionEmbedder.apply_rotary_embedding`, stand-in or
    checkout) rotates in real arithmetic; restored on exit. `model` None: every RoPE class loaded so far.
    `flip_sign` is the negative control: one sign wrong, so the output must change.

    Bit-identical to torch's complex product where its CPU kernel runs vectorised (it rounds ac, bd, ad, bc
    and then adds, as here): head dims of 16 or more (8+ channel pairs fill a vector). Below that its scalar
    path may fuse a multiply-add (FMA) and the last bit can move (measured: 2.4e-7 at head dim 8)."""
    classes = [source_of(model).rope_class] if model is not None else loaded_rope_classes()
    if not classes:
        raise RuntimeError("real_rope: no flow model has been loaded, so there is no RoPE to patch")

    def rotate(x: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
        return _rotate_real(x, phases, flip_sign)

    with patched(classes, "apply_rotary_embedding", staticmethod(rotate)):
        yield


@contextlib.contextmanager
def patched(classes: Sequence[type], name: str, value: Any) -> Iterator[None]:
    """Set attribute `name` of each class to `value` for the block; the classes' own attributes put back
    on exit, also when the block raises (how every patch of the model's own code here is applied)."""
    with contextlib.ExitStack() as stack:  # mock restores a class's own attribute as it was (a staticmethod too)
        for cls in classes:
            stack.enter_context(mock.patch.object(cls, name, value))
        yield


@contextlib.contextmanager
def attention_backend(model: nn.Module, backend: str) -> Iterator[None]:
    """The model's own attention backend switch, set for the block and put back."""
    src = source_of(model)
    before = src.backend
    src.set_backend(backend)
    try:
        yield
    finally:
        src.set_backend(before)
