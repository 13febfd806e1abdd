"""The shapes the DiT block's graph inputs and output take on the device: the tokens layout, the old rank-4 image
layout kept as the comparison, and the timestep moved to the host. Each only moves values or moves a step to the
host, so the arithmetic left in the graph is the model's own.

The layout is chosen from the public record: **tokens**. The attention block that DFC 5.3.0 translated,
compiled and ran took tokens [1, S, C] (rank 3, MatMul linears, the head Reshape glued to its Transpose);
the same attention with tokens laid along an image axis ([1, C, 1, S], the form an all-rank-4 layout gives
the conditioning) was refused on its head reshape and its softmax, and RFD 1154's "every input rank 4"
attempt at this very model crashed further into the parse. So x enters as tokens [B, R^3, C] (the forward's
own flatten to tokens done on the host, exactly), the conditioning stays [B, L, C] as the model takes it, t
goes through the host timestep, and the output leaves as tokens [B, R^3, C_out]. The old rank-4 image layout
(`ImageLayout`) stays only as the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .model import Host

LAYOUTS = ("model", "image", "tokens")  # the forward's own inputs; the old rank-4 comparison; the device layout

# ------------------------------------------------------------------------------------------------ tokens


def to_tokens(x: torch.Tensor) -> torch.Tensor:
    """x [B, C, R, R, R] -> tokens [B, R^3, C]: the forward's own first step (`view`, `permute`), on the host."""
    return x.reshape(*x.shape[:2], -1).permute(0, 2, 1).contiguous()


def from_tokens(h: torch.Tensor, resolution: int) -> torch.Tensor:
    """tokens [B, R^3, C] -> [B, C, R, R, R]: the forward's own last step, on the host."""
    return h.permute(0, 2, 1).reshape(h.shape[0], h.shape[2], *[resolution] * 3).contiguous()


class TokensLayout(nn.Module):
    """The flow model from its input layer to its output layer, on tokens: x [B, R^3, C_in] in, velocity
    [B, R^3, C_out] out. The forward's flatten to tokens and its reshape back to the grid, pure data movement,
    are the only steps moved to the host (`to_tokens`, `from_tokens`); every layer between is the model's own
    module, called in the forward's order (input layer, timestep embedder, shared adaLN modulation, the blocks
    with the RoPE phase buffer, the final layer norm, the output layer)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        for name, expected in (("pe_mode", "rope"), ("image_attn_mode", "proj")):
            if getattr(model, name, expected) != expected:
                raise ValueError(f"TokensLayout: {name} {getattr(model, name)!r}; only {expected!r} is modelled")
        self.model = model

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        m: Host = self.model
        h = m.input_layer(x)
        t_emb = m.t_embedder(t)
        if hasattr(m, "adaLN_modulation"):  # share_mod: one modulation for every block
            t_emb = m.adaLN_modulation(t_emb)
        for block in m.blocks:
            h = block(h, t_emb, (cond_global, cond_proj), m.rope_phases)
        return m.out_layer(F.layer_norm(h, h.shape[-1:]))


# ------------------------------------------------------------------------------- the old rank-4 comparison


class ImageLayout(nn.Module):
    """The flow model with every graph input image-shaped (rank 4, NCHW), the layout the gate used to ask
    for, kept as the comparison: x [B, C, R, R*R], t [B, 1, 1, 1], global [B, Cg, 1, L] (tokens along an
    image axis, the form the record shows refused), proj [B, Cp, R, R*R]; the output [B, C, R, R*R].
    Only reshapes and transposes are added, so the arithmetic is the model's own."""

    def __init__(self, model: Host) -> None:
        super().__init__()
        self.model = model
        self.resolution, self.out_channels = int(model.resolution), int(model.out_channels)

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        r, batch = self.resolution, x.shape[0]
        volume = x.reshape(batch, x.shape[1], r, r, r)
        tokens = tuple(c.flatten(2).transpose(1, 2) for c in (cond_global, cond_proj))
        return self.model(volume, t.reshape(batch), tokens).reshape(batch, self.out_channels, r, r * r)


def to_image_layout(inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """The model's inputs rearranged for `ImageLayout` (no values change)."""
    x, t, (c_global, c_proj) = inputs
    batch, r = x.shape[0], x.shape[-1]
    return (
        x.reshape(batch, x.shape[1], r, r * r),
        t.reshape(batch, 1, 1, 1),
        c_global.transpose(1, 2).unsqueeze(2),
        c_proj.transpose(1, 2).reshape(batch, -1, r, r * r),
    )


def image_layout(model: nn.Module, inputs: Sequence[Any]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A module and its inputs, all rank 4, computing the same as `model(*inputs)` (output [B, C, R, R*R])."""
    return ImageLayout(model).eval(), to_image_layout(inputs)


# ---------------------------------------------------------------------------------------- host timestep

TIMESTEP_RANKS = (2, 3)  # [B, F] or [B, 1, F]: never rank 1, which the parser has no format for


class HostTimestep(nn.Module):
    """The timestep embedder with its sinusoid moved to the host: it receives cos/sin(t f) already computed
    (the same function of t upstream calls) and applies only the MLP, so no Cos/Sin of a run-time input runs
    on the device. The graph input is rank 2 [B, F] (the MLP's own Gemm) or rank 3 [B, 1, F] (a token row,
    flattened to [B, F] before the MLP); never the rank-1 t."""

    def __init__(self, embedder: Host, rank: int = 2) -> None:
        super().__init__()
        if rank not in TIMESTEP_RANKS:
            raise ValueError(f"rank: the host timestep's input is rank {TIMESTEP_RANKS}, got {rank!r}")
        self.mlp: nn.Module = embedder.mlp
        self.rank = rank

    def forward(self, t_freq: torch.Tensor) -> torch.Tensor:
        return self.mlp(t_freq.reshape(t_freq.shape[0], -1) if self.rank == 3 else t_freq)


def host_timestep_features(model: nn.Module, t: torch.Tensor, rank: int = 2) -> torch.Tensor:
    """What `HostTimestep` expects in place of t: the model's own sinusoidal embedding of t, [B, F] or
    [B, 1, F]."""
    if rank not in TIMESTEP_RANKS:
        raise ValueError(f"rank: the host timestep's input is rank {TIMESTEP_RANKS}, got {rank!r}")
    embedder: Host = model.t_embedder
    features = embedder.timestep_embedding(t, embedder.frequency_embedding_size)
    return features.unsqueeze(1) if rank == 3 else features
