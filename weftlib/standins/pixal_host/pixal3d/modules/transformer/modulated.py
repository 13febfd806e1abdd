"""STAND-IN for Pixal3D's adaLN-modulated cross block: self-attention (RoPE, qk RMS norm), then the
"proj" image conditioning (cross-attention to global tokens plus a linear projection of view-aligned
per-voxel features), then an MLP; shift/scale/gate come from the timestep (shared modulation + own bias)."""

from __future__ import annotations

import torch
from torch import nn

from ..attention import MultiHeadAttention


class FeedForwardNet(nn.Module):
    """Linear -> tanh GELU -> Linear, `mlp_ratio` wide."""

    def __init__(self, channels: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        hidden = int(channels * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(channels, hidden), nn.GELU(approximate="tanh"),
                                 nn.Linear(hidden, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)


class ProjectAttention(nn.Module):
    """Cross-attention to the global tokens plus a per-voxel projection of the view-aligned features."""

    def __init__(self, cross_attn_block: nn.Module, channels: int, proj_in_channels: int) -> None:
        super().__init__()
        self.cross_attn_block = cross_attn_block
        self.proj_linear = nn.Linear(proj_in_channels, channels)

    def forward(self, x: torch.Tensor, context: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        global_context, proj_context = context
        return self.proj_linear(proj_context) + self.cross_attn_block(x, global_context)


class ModulatedTransformerCrossBlock(nn.Module):
    """x + gate * attn(modulate(norm(x))), then the conditioning, then the same for the MLP."""

    def __init__(self, channels: int, ctx_channels: int, num_heads: int, mlp_ratio: float = 4.0,
                 use_rope: bool = False, qk_rms_norm: bool = False, qk_rms_norm_cross: bool = False,
                 share_mod: bool = False, proj_in_channels: int | None = None) -> None:
        super().__init__()
        self.share_mod = share_mod
        self.norm1 = nn.LayerNorm(channels, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(channels, elementwise_affine=True, eps=1e-6)
        self.norm3 = nn.LayerNorm(channels, elementwise_affine=False, eps=1e-6)
        self.self_attn = MultiHeadAttention(channels, num_heads, type="self", use_rope=use_rope,
                                            qk_rms_norm=qk_rms_norm)
        cross = MultiHeadAttention(channels, num_heads, ctx_channels=ctx_channels, type="cross",
                                   qk_rms_norm=qk_rms_norm_cross)
        self.cross_attn = ProjectAttention(cross, channels, proj_in_channels or ctx_channels)
        self.mlp = FeedForwardNet(channels, mlp_ratio)
        if share_mod:
            self.modulation = nn.Parameter(torch.randn(6 * channels) / channels ** 0.5)
        else:
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(channels, 6 * channels))

    def forward(self, x: torch.Tensor, mod: torch.Tensor, context: tuple[torch.Tensor, torch.Tensor],
                phases: torch.Tensor | None = None) -> torch.Tensor:
        mod = self.modulation + mod if self.share_mod else self.adaLN_modulation(mod)
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = mod.unsqueeze(1).chunk(6, dim=-1)
        x = x + gate_a * self.self_attn(self.norm1(x) * (1 + scale_a) + shift_a, phases=phases)
        x = x + self.cross_attn(self.norm2(x), context)
        return x + gate_m * self.mlp(self.norm3(x) * (1 + scale_m) + shift_m)
