"""STAND-IN for a Pixal3D flow model's conditioning input: a projection `proj_channels` wide.

The published flow models were trained with NAF on, so their conditioning projection expects
2 * embed_dim channels; building one with the flag off changes that shape and the checkpoint no longer fits.
"""

from __future__ import annotations

import torch
from torch import nn


class FlowStandIn(nn.Module):
    """Tiny denoiser: latent tokens attend to projected conditioning tokens."""

    def __init__(self, cond_channels: int, model_channels: int = 32, latent_channels: int = 8) -> None:
        super().__init__()
        self.cond_proj = nn.Linear(cond_channels, model_channels)
        self.latent_in = nn.Linear(latent_channels, model_channels)
        self.cross = nn.MultiheadAttention(model_channels, num_heads=4, batch_first=True)
        self.latent_out = nn.Linear(model_channels, latent_channels)

    def forward(self, latent: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        x = self.latent_in(latent)
        c = self.cond_proj(cond)
        return self.latent_out(x + self.cross(x, c, c, need_weights=False)[0])


def build_flow_model(use_naf_upsample: bool, embed_dim: int = 1024, model_channels: int = 32,
                     seed: int = 0) -> FlowStandIn:
    """The flow model the conditioning config implies (same width rule as the feature extractor)."""
    proj_channels = embed_dim * 2 if use_naf_upsample else embed_dim
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return FlowStandIn(proj_channels, model_channels)
