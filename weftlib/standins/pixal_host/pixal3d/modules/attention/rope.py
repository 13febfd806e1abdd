"""STAND-IN for Pixal3D's rotary position embedding over a 3-D grid, in complex arithmetic as upstream:
the phase table is a complex tensor (`torch.polar`), and the rotation multiplies a `view_as_complex` of the
channel pairs by it. ONNX has no complex type, which is what stops both exporters."""

from __future__ import annotations

import torch
from torch import nn


class RotaryPositionEmbedder(nn.Module):
    """Phases for integer positions: each of `dim` axes gets head_dim // 2 // dim frequencies."""

    def __init__(self, head_dim: int, dim: int = 3, rope_freq: tuple[float, float] = (1.0, 10000.0)) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim: {head_dim} must be even (channels rotate in pairs)")
        self.head_dim, self.dim = head_dim, dim
        per_axis = head_dim // 2 // dim
        self.freqs = rope_freq[0] / rope_freq[1] ** (torch.arange(per_axis, dtype=torch.float32) / per_axis)

    @staticmethod
    def apply_rotary_embedding(x: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
        """Rotate channel pairs of x [..., L, H, C] by the complex phases [L, C/2] (shared over heads)."""
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        rotated = pairs * phases.unsqueeze(-2)
        return torch.view_as_real(rotated).reshape(*x.shape).to(x.dtype)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        """coords [..., dim] -> complex phases [..., head_dim // 2] (unit modulus, padded with angle 0)."""
        if coords.shape[-1] != self.dim:
            raise ValueError(f"coords: last dim must be {self.dim}, got {tuple(coords.shape)}")
        angles = torch.outer(coords.reshape(-1).float(), self.freqs).reshape(*coords.shape[:-1], -1)
        pad = self.head_dim // 2 - angles.shape[-1]
        angles = torch.cat([angles, angles.new_zeros(*angles.shape[:-1], pad)], dim=-1)
        return torch.polar(torch.ones_like(angles), angles)
