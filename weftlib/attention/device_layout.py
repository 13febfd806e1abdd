"""Images in and out of the 5-D layout, and the head-split layout built on them.

`to_image` / `from_image` move between natten's `[B, H, W, heads, D]` and images `[B, heads*D, H, W]`.
`NA2dImage` takes q `[B, heads*D, H, W]`, k/v `[B, heads_kv*D, h, w]` and returns `[B, heads*Dv, H, W]`, with
the head split and merge inside the graph and `weftlib.attention.na2d`'s own arithmetic between. Its inputs
are rank 4, yet the split back to 5-D and the merge from it are Reshapes the public record refuses
(`reshape_5d_to_4d` in `params/device_ops.yaml`), so notebook 02's device layout is `image_shift`, which
never splits the heads; `NA2dImage` stays as the layout the record refuses (the tests' negative control).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from weftlib.gate.run_graphs import GraphIdentity
from weftlib.onnx_core import export as onnx_export
from weftlib.onnx_core.layout import IMAGE_RANK, LayoutExport

from . import neighborhood as attention

__all__ = ["NA2dImage", "export_attention", "from_image", "to_image"]


def to_image(x: Tensor) -> Tensor:
    """`[B, H, W, heads, D]` -> `[B, heads*D, H, W]` (channel = head * D + d)."""
    if x.dim() != 5:
        raise ValueError(f"x: expected [B, H, W, heads, D], got shape {tuple(x.shape)}")
    b, h, w, heads, d = x.shape
    return x.reshape(b, h, w, heads * d).permute(0, 3, 1, 2).contiguous()


def from_image(x: Tensor, heads: int) -> Tensor:
    """`[B, heads*D, H, W]` -> `[B, H, W, heads, D]`, the inverse of `to_image`."""
    if x.dim() != IMAGE_RANK or x.shape[1] % heads:
        raise ValueError(
            f"x: expected [B, heads*D, H, W] with channels divisible by heads={heads}, got shape {tuple(x.shape)}"
        )
    b, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, h, w, heads, c // heads)


class NA2dImage(nn.Module):
    """`attention.na2d` on image-shaped q, k, v: the head split and merge happen inside the graph."""

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        dilation: int | Sequence[int] = 1,
        *,
        heads: int,
        kv_heads: int | None = None,
        method: str = "shift",
        scale: float | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads: expected a positive int, got {heads!r}")
        self.inner = attention.NA2d(kernel_size, dilation, method=method, scale=scale)
        self.heads, self.kv_heads = heads, kv_heads or heads

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        out = self.inner(from_image(q, self.heads), from_image(k, self.kv_heads), from_image(v, self.kv_heads))
        return to_image(out)


def export_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int,
    dilation: int,
    method: str,
    path: str | os.PathLike,
    *,
    atol: float = 1e-4,
    identity: GraphIdentity | None = None,
) -> LayoutExport:
    """Export `na2d(q, k, v, method)` with image inputs; compare the layout with `attention.na2d` first.
    `identity`: what the graph is, kept in its parity file (None: of unknown identity; no notebook exports it)."""
    heads, kv_heads = q.shape[3], k.shape[3]
    module = NA2dImage(kernel_size, dilation, heads=heads, kv_heads=kv_heads, method=method).eval()
    images = tuple(to_image(t) for t in (q, k, v))
    with torch.no_grad():
        faithful = attention.na2d(q, k, v, kernel_size, dilation, method=method)
        layout = from_image(module(*images), heads)
    report = onnx_export.export(
        module,
        images,
        path,
        input_names=["q", "k", "v"],
        output_names=["out"],
        atol=atol,
        identity=identity.as_json() if identity is not None else None,
    )
    return LayoutExport(
        Path(path).stem,
        report,
        {n: tuple(t.shape) for n, t in zip("qkv", images)},
        float((layout - faithful).abs().max()),
    )
