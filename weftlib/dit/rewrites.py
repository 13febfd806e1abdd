"""Exact rewrites of the DiT block's attention, each chosen by a pattern the Dataflow Compiler refused in the
public record, offered beside the faithful graph and proven equal to the model as written.

- `glued_heads`: the model's own attention forward with q, k, v kept as tokens [B, L, C] until the head split,
  so the head Reshape [B, L, H, d] is directly followed by its Transpose [0, 2, 1, 3] (the pair DFC 5.3.0 fuses
  into a format conversion). Upstream reshapes the fused projection to rank 5, unbinds it and runs the per-head
  RMS norm and RoPE on [B, L, H, d] before the transpose inside attention: an op between the two is refused
  (`UnsupportedShuffleLayerError` on the Reshape, Qwen3's QK-norm, "Compiling an LLM on a Hailo 10H").
  Here q, k, v are channel Slices of the projection, the norm sums squares per head through constant
  head-indicator MatMuls (`token_rms_norm`: no ReduceL2, no Expand), RoPE rotates [B, L, C] with the phases
  tiled over the heads, and only then the heads are split.
- `rope_tables`: RoPE without Neg + Concat and without view_as_complex: `x * cos + (x @ P) * sin` with a
  constant signed pair swap P (DFC 5.4.0's fuser crashed on rotate_half's Neg + Concat; a swap-then-constant-
  sign form compiled, Clef record). The phase table is the model's constant buffer (the 8^3 grid is fixed):
  no Cos/Sin of a run-time input.
- `repeat_kv_heads`: K/V heads repeated by a constant one-hot MatMul or by Concat of Slices instead of
  `expand` (GQA's repeat_kv lowers to Expand: `UnexpectedNodeError: Expand`). Neither Pixal3D (upstream
  cdbb2bb) nor its stand-in repeats heads: every attention's K/V projection is as wide as its Q
  (`kv_heads` says so per module), so no patch applies it to the model; it is tested on a GQA toy.

Why each is exact in fp32: the Slices and Reshapes move values; a MatMul against a one-hot or signed one-hot
matrix gives each output one product by +-1 plus zeros, which rounds to the value itself; the rotation
`a cos - b sin`, `b cos + a sin` rounds the same products and sums the complex product does. Only the
per-head sum of squares is reordered (a MatMul's accumulation instead of ReduceL2's), so the norm may move
in the last bits: the stated tolerance (`exact_tol`) covers that, nothing else.

Every patch takes `control=True`: one deliberate mistake (the norm over all channels instead of per head,
the swap without its sign, the heads repeated in tiled order) whose output must differ, so an equality test
that cannot fail is caught.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from .model import Host, source_of
from .patches import patched, phase_cos_sin, rotate_pairs

NORMALIZE_EPS = 1e-12  # F.normalize's default: the norm is clamped to at least this before the division
ROPE_FORMS = ("pairs", "tables")  # the model's RoPE in real pair arithmetic, or by constant tables


# ----------------------------------------------------------------------------------------- constant matrices
# Built with numpy and cached as numpy: a tensor cached while torch.export traces would be a FakeTensor.


@lru_cache(maxsize=32)
def pair_swap(n: int, signed: bool = True) -> np.ndarray:
    """P [n, n] with (x @ P)[2i] = -x[2i+1] and (x @ P)[2i+1] = x[2i] (the sign left out when not `signed`):
    the rotation's swap as a constant. On [B, L, C] it is the block diagonal of the per-head swaps, since
    a pair never crosses a head boundary (d even)."""
    if n < 2 or n % 2:
        raise ValueError(f"n: the pair swap needs an even width, got {n}")
    swap = np.zeros((n, n), dtype=np.float32)
    even = np.arange(0, n, 2)
    swap[even + 1, even] = -1.0 if signed else 1.0
    swap[even, even + 1] = 1.0
    return swap


@lru_cache(maxsize=32)
def head_indicator(channels: int, heads: int) -> np.ndarray:
    """E [C, H], E[c, h] = 1 where channel c belongs to head h: `(x * x) @ E` is the per-head sum of squares
    and `s @ E.T` gives each channel its head's value back. E @ E.T is the block-diagonal ones matrix; applied
    in two steps it costs 2 C H multiply-adds per token instead of C^2."""
    if heads < 1 or channels % heads:
        raise ValueError(f"channels: {channels} must split evenly over {heads} heads")
    return np.kron(np.eye(heads, dtype=np.float32), np.ones((channels // heads, 1), dtype=np.float32))


@lru_cache(maxsize=32)
def repeat_matrix(kv_heads: int, groups: int, head_dim: int, tiled: bool = False) -> np.ndarray:
    """R [Hkv d, Hkv g d]: output head j reads K/V head j // g (repeat_kv's order: each K/V head `groups`
    times in a row); `tiled` reads head j % Hkv instead (the control)."""
    if min(kv_heads, groups, head_dim) < 1:
        raise ValueError(f"kv_heads, groups, head_dim must be positive, got {kv_heads}, {groups}, {head_dim}")
    heads = kv_heads * groups
    source = np.arange(heads) % kv_heads if tiled else np.arange(heads) // groups
    pick = np.zeros((kv_heads, heads), dtype=np.float32)
    pick[source, np.arange(heads)] = 1.0
    return np.kron(pick, np.eye(head_dim, dtype=np.float32))


def _constant(array: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(array).to(device=like.device, dtype=like.dtype)


# ------------------------------------------------------------------------------------------------- RoPE


def rotate_by_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, swap: torch.Tensor) -> torch.Tensor:
    """x * cos + (x @ swap) * sin on x's last axis: cos and sin [..., n] (each pair's value on both its
    channels), `swap` the constant `pair_swap(n)`; no Neg, no Concat."""
    xf = x.float()
    return (xf * cos + (xf @ swap) * sin).to(x.dtype)


def channel_tables(phases: torch.Tensor, heads: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The phase table [L, d/2] as cos and sin per channel, [L, heads * d]: each pair's value on its two
    channels, tiled over `heads` (computed from the model's constant buffer, so the export folds them)."""
    cos, sin = phase_cos_sin(phases)
    return cos.repeat_interleave(2, dim=-1).repeat(1, heads), sin.repeat_interleave(2, dim=-1).repeat(1, heads)


class TokenRotation:
    """The model's RoPE for tokens [B, L, H d] (head h on channels h d .. h d + d - 1), the phases [L, d/2]
    shared over the heads as the model shares them. Built once per attention call, so q and k use one set of
    constants: `form` "tables" (`rotate_by_tables`, tables [L, C] and the swap [C, C]: C^2 multiply-adds per
    token, the price of keeping the heads unsplit) or "pairs" (the real pair arithmetic of `real_rope`)."""

    def __init__(self, phases: torch.Tensor, heads: int, form: str = "tables", control: bool = False) -> None:
        if form not in ROPE_FORMS:
            raise ValueError(f"form: expected one of {ROPE_FORMS}, got {form!r}")
        self.form = form
        if form == "tables":
            self.cos, self.sin = channel_tables(phases, heads)
            self.swap = _constant(pair_swap(self.cos.shape[-1], signed=not control), self.cos)
        else:
            cos, sin = phase_cos_sin(phases)
            self.cos, self.sin, self.control = cos.repeat(1, heads), sin.repeat(1, heads), control

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "tables":
            return rotate_by_tables(x, self.cos, self.sin, self.swap)
        return rotate_pairs(x, self.cos, self.sin, flip_sign=self.control)


@contextlib.contextmanager
def rope_tables(model: nn.Module, *, control: bool = False) -> Iterator[None]:
    """Within the block, the model's own RoPE (`RotaryPositionEmbedder.apply_rotary_embedding` on
    [..., L, H, d]) rotates by constant tables: `x * cos + (x @ P) * sin`, P [d, d]. Restored on exit."""

    def rotate(x: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
        cos, sin = channel_tables(phases)
        swap = _constant(pair_swap(x.shape[-1], signed=not control), cos)
        return rotate_by_tables(x, cos.unsqueeze(-2), sin.unsqueeze(-2), swap)

    with patched([source_of(model).rope_class], "apply_rotary_embedding", staticmethod(rotate)):
        yield


# --------------------------------------------------------------------------------------- per-head RMS norm


class MatMulRMSNorm(nn.Module):
    """The per-head RMS norm x / max(||x||, eps) * gamma * sqrt(d) on split heads [..., H, d], with ||x||^2
    summed by a MatMul against ones [d, 1] instead of `F.normalize` (ReduceL2 + Expand in ONNX). Still
    between the head Reshape and its Transpose: `glued_heads` is the form that moves it before the split."""

    def __init__(self, norm: Host) -> None:
        super().__init__()
        self.gamma: torch.Tensor = norm.gamma
        self.scale: torch.Tensor | float = norm.scale
        self.ones: torch.Tensor
        self.register_buffer("ones", torch.ones(norm.gamma.shape[-1], 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        norm = torch.sqrt((xf * xf) @ self.ones).clamp_min(NORMALIZE_EPS)
        return (xf / norm * self.gamma * self.scale).to(x.dtype)


def token_rms_norm(x: torch.Tensor, norm: Host, heads: int, control: bool = False) -> torch.Tensor:
    """The model's per-head RMS norm (`norm`: its module, gamma [H, d] and scale sqrt(d)) applied to tokens
    [B, L, H d] without splitting the heads: `x / (sqrt((x * x) @ E).clamp_min(eps) @ E.T) * gamma * scale`,
    E the head indicator. `control`: one group over all channels (a norm over C, not per head)."""
    xf = x.float()
    groups = 1 if control else heads
    indicator = head_indicator(xf.shape[-1], groups)
    length = torch.sqrt((xf * xf) @ _constant(indicator, xf)).clamp_min(NORMALIZE_EPS)
    length = length @ _constant(np.ascontiguousarray(indicator.T), xf)
    return (xf / length * norm.gamma.reshape(-1) * norm.scale).to(x.dtype)


# ------------------------------------------------------------------------------------------- glued heads

ATTENTION_FUNCTION = "scaled_dot_product_attention"  # the dispatch the model's attention forward calls


def _glued_forward(dispatch: Callable[..., torch.Tensor], rope: str, control: bool) -> Callable[..., torch.Tensor]:
    def forward(
        self: Host, x: torch.Tensor, context: torch.Tensor | None = None, phases: torch.Tensor | None = None
    ) -> torch.Tensor:
        if getattr(self, "attn_mode", "full") != "full":
            raise NotImplementedError(f"glued_heads: attn_mode {self.attn_mode!r}; only full attention is modelled")
        batch, length, _ = x.shape
        heads = int(self.num_heads)
        channels = heads * int(self.head_dim)
        if self._type == "self":
            qkv = self.to_qkv(x)  # [B, L, 3C]: channel s C + h d + i is (q, k, v)[s], head h, channel i
            q, k, v = (qkv.narrow(-1, i * channels, channels) for i in range(3))
        else:
            if context is None:
                raise ValueError("glued_heads: cross-attention needs its context")
            q = self.to_q(x)
            kv = self.to_kv(context)
            k, v = kv.narrow(-1, 0, channels), kv.narrow(-1, channels, channels)
        if self.qk_rms_norm:
            q = token_rms_norm(q, self.q_rms_norm, heads, control)
            k = token_rms_norm(k, self.k_rms_norm, heads, control)
        if self._type == "self" and self.use_rope:
            if phases is None:
                raise ValueError("glued_heads: RoPE attention needs the phase table")
            rotate = TokenRotation(phases, heads, rope)
            q, k = rotate(q), rotate(k)
        # the head split, then the dispatch's own permute(0, 2, 1, 3): the Reshape glued to its Transpose
        q, k, v = (t.reshape(batch, t.shape[1], heads, -1) for t in (q, k, v))
        return self.to_out(dispatch(q, k, v).reshape(batch, length, -1))

    return forward


@contextlib.contextmanager
def glued_heads(model: nn.Module, *, rope: str = "tables", control: bool = False) -> Iterator[None]:
    """Within the block, the model's own attention class (`MultiHeadAttention`, stand-in or checkout) runs
    the forward above: q, k, v as channel Slices of its projections, the per-head RMS norm on tokens
    (`token_rms_norm`), RoPE on tokens (`rope`: "tables" or "pairs"), then the head Reshape directly followed
    by the Transpose inside the model's own attention dispatch (its backend switch still applies).
    Same layers, same weights, same arithmetic as upstream's forward; restored on exit. `control`: the norm
    over all C channels instead of per head."""
    if rope not in ROPE_FORMS:
        raise ValueError(f"rope: expected one of {ROPE_FORMS}, got {rope!r}")
    cls = source_of(model).attention_class
    dispatch = cls.__dict__["forward"].__globals__.get(ATTENTION_FUNCTION)
    if dispatch is None:
        raise RuntimeError(f"glued_heads: {cls.__module__}.{cls.__name__}.forward calls no {ATTENTION_FUNCTION}")
    with patched([cls], "forward", _glued_forward(dispatch, rope, control)):
        yield


# ---------------------------------------------------------------------------------------- K/V heads (GQA)

REPEAT_METHODS = ("matmul", "concat")


def repeat_kv_heads(
    x: torch.Tensor, kv_heads: int, groups: int, *, method: str = "matmul", control: bool = False
) -> torch.Tensor:
    """K or V tokens [B, L, Hkv d] -> [B, L, Hkv g d], each K/V head repeated `groups` times in a row
    (repeat_kv's order), without Expand: a MatMul against the constant one-hot `repeat_matrix`, or
    (`method="concat"`) a Concat of channel Slices. `control`: the heads in tiled order instead."""
    if x.shape[-1] % kv_heads:
        raise ValueError(f"x: last axis {x.shape[-1]} does not split over {kv_heads} K/V heads")
    head_dim = x.shape[-1] // kv_heads
    if method == "matmul":
        return (x.float() @ _constant(repeat_matrix(kv_heads, groups, head_dim, control), x.float())).to(x.dtype)
    if method == "concat":
        order = [j % kv_heads if control else j // groups for j in range(kv_heads * groups)]
        return torch.cat([x.narrow(-1, h * head_dim, head_dim) for h in order], dim=-1)
    raise ValueError(f"method: expected one of {REPEAT_METHODS}, got {method!r}")


def kv_heads(model: nn.Module) -> dict[str, tuple[int, int]]:
    """Per attention module of the flow model: (query heads, K/V heads), read from its projection widths
    (a K/V projection narrower than the query's would mean grouped heads that the attention repeats)."""
    cls = source_of(model).attention_class
    found: dict[str, tuple[int, int]] = {}
    for name, module in model.named_modules():
        if not isinstance(module, cls):
            continue
        mod: Host = module
        heads, head_dim = int(mod.num_heads), int(mod.head_dim)
        kv_width = mod.to_qkv.out_features // 3 if mod._type == "self" else mod.to_kv.out_features // 2
        found[name] = (heads, kv_width // head_dim)
    return found
