"""STAND-IN for Pixal3D's dense multi-head attention: self (fused qkv, RoPE) or cross (q from x, kv from a
context), with an optional per-head RMS norm of q and k through `F.normalize` (an L2 norm: ReduceL2 in ONNX)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .full_attn import scaled_dot_product_attention
from .rope import RotaryPositionEmbedder


class MultiHeadRMSNorm(nn.Module):
    """x / ||x|| * gamma * sqrt(dim), per head."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(heads, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (F.normalize(x.float(), dim=-1) * self.gamma * self.scale).to(x.dtype)


class MultiHeadAttention(nn.Module):
    """Full attention; `type` "self" rotates q and k by the phases it is given, "cross" attends to context."""

    def __init__(self, channels: int, num_heads: int, ctx_channels: int | None = None, type: str = "self",
                 use_rope: bool = False, qk_rms_norm: bool = False) -> None:
        super().__init__()
        if channels % num_heads:
            raise ValueError(f"channels: {channels} must split evenly over {num_heads} heads")
        self.num_heads, self.head_dim, self._type = num_heads, channels // num_heads, type
        self.use_rope, self.qk_rms_norm = use_rope, qk_rms_norm
        if type == "self":
            self.to_qkv = nn.Linear(channels, 3 * channels)
        else:
            self.to_q = nn.Linear(channels, channels)
            self.to_kv = nn.Linear(ctx_channels or channels, 2 * channels)
        if qk_rms_norm:
            self.q_rms_norm = MultiHeadRMSNorm(self.head_dim, num_heads)
            self.k_rms_norm = MultiHeadRMSNorm(self.head_dim, num_heads)
        self.to_out = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                phases: torch.Tensor | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        if self._type == "self":
            q, k, v = self.to_qkv(x).reshape(batch, length, 3, self.num_heads, -1).unbind(dim=2)
        else:
            q = self.to_q(x).reshape(batch, length, self.num_heads, -1)
            k, v = self.to_kv(context).reshape(batch, context.shape[1], 2, self.num_heads, -1).unbind(dim=2)
        if self.qk_rms_norm:
            q, k = self.q_rms_norm(q), self.k_rms_norm(k)
        if self.use_rope:
            if phases is None:
                raise ValueError("phases: RoPE attention needs the phase table")
            q = RotaryPositionEmbedder.apply_rotary_embedding(q, phases)
            k = RotaryPositionEmbedder.apply_rotary_embedding(k, phases)
        return self.to_out(scaled_dot_product_attention(q, k, v).reshape(batch, length, -1))
