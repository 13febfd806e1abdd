"""STAND-IN for Pixal3D's sparse-structure flow model (a DiT over the 8^3 latent grid), random weights.

Same constructor arguments as the config file `configs/gen/ss_flow_img_dit_1_3B_32_bf16_proj_finetune.json`
uses, same forward `forward(x [B, C, R, R, R], t [B], cond=(global [B, L, Cc], proj [B, R^3, Cp]))`, and the
same operator-relevant choices: a sinusoidal timestep embedding (cos/sin of t), one shared adaLN modulation,
RoPE as a complex phase buffer, qk RMS norm through `F.normalize`, "proj" image conditioning.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..modules.attention import RotaryPositionEmbedder
from ..modules.transformer import ModulatedTransformerCrossBlock


class TimestepEmbedder(nn.Module):
    """t [B] -> [cos(t f), sin(t f)] over geometric frequencies f -> MLP."""

    def __init__(self, hidden_size: int, frequency_embedding_size: int = 256) -> None:
        super().__init__()
        self.frequency_embedding_size = frequency_embedding_size
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size))

    @staticmethod
    def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))


class SparseStructureFlowModel(nn.Module):
    """Velocity of the dense 8^3 latent, conditioned on the timestep and the image ("proj" mode only)."""

    def __init__(self, resolution: int, in_channels: int, model_channels: int, cond_channels: int,
                 out_channels: int, num_blocks: int, num_heads: int | None = None, num_head_channels: int = 64,
                 mlp_ratio: float = 4.0, pe_mode: str = "ape", rope_freq: tuple[float, float] = (1.0, 10000.0),
                 share_mod: bool = False, qk_rms_norm: bool = False, qk_rms_norm_cross: bool = False,
                 image_attn_mode: str = "cross", proj_in_channels: int | None = None, **kwargs: object) -> None:
        super().__init__()
        if pe_mode != "rope" or image_attn_mode != "proj" or not share_mod:
            raise ValueError("stand-in: only pe_mode='rope', image_attn_mode='proj', share_mod=True are modelled")
        self.resolution, self.in_channels, self.out_channels = resolution, in_channels, out_channels
        self.model_channels, self.num_heads = model_channels, num_heads or model_channels // num_head_channels
        self.t_embedder = TimestepEmbedder(model_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(model_channels, 6 * model_channels))
        grid = torch.stack(torch.meshgrid(*[torch.arange(resolution)] * 3, indexing="ij"), dim=-1).reshape(-1, 3)
        embedder = RotaryPositionEmbedder(model_channels // self.num_heads, 3, rope_freq)
        self.register_buffer("rope_phases", embedder(grid))
        self.input_layer = nn.Linear(in_channels, model_channels)
        self.blocks = nn.ModuleList([
            ModulatedTransformerCrossBlock(model_channels, cond_channels, self.num_heads, mlp_ratio, use_rope=True,
                                           qk_rms_norm=qk_rms_norm, qk_rms_norm_cross=qk_rms_norm_cross,
                                           share_mod=True, proj_in_channels=proj_in_channels)
            for _ in range(num_blocks)])
        self.out_layer = nn.Linear(model_channels, out_channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        expected = [x.shape[0], self.in_channels, *[self.resolution] * 3]
        if list(x.shape) != expected:
            raise ValueError(f"x: expected {expected}, got {list(x.shape)}")
        h = self.input_layer(x.flatten(2).transpose(1, 2))
        mod = self.adaLN_modulation(self.t_embedder(t))
        for block in self.blocks:
            h = block(h, mod, tuple(cond), self.rope_phases)
        h = self.out_layer(F.layer_norm(h, h.shape[-1:]))
        return h.transpose(1, 2).reshape(x.shape[0], self.out_channels, *[self.resolution] * 3)
