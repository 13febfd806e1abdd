"""STAND-IN for the dense attention dispatch: q, k, v are [N, L, H, C]; the backend is read at call time."""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F

from . import config


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention over the token axis, heads kept apart; returns [N, L, H, C]."""
    if config.BACKEND == "sdpa":
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2)
    if config.BACKEND == "naive":
        q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return (weights @ v).permute(0, 2, 1, 3)
    # flash_attn / xformers: GPU libraries, imported only when chosen (absent on a CPU machine)
    importlib.import_module(config.BACKEND)
    raise RuntimeError(f"stand-in: the {config.BACKEND} backend is not implemented here; use sdpa or naive")
