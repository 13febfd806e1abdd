"""Submanifold convolution in the device layout, two routes (see `weftlib.onnx_core.layout` for why rank 4):

- host gather / device matmul: the host gathers each voxel's 27 neighbour rows (`gather_rows`); the device
  half is one 1x1 `Conv` over them as an image `[1, 27*Cin, N, 1]` (`GatheredConv`);
- densify: the 3-D `Conv` on `[1, C, D, H, W]` as a 2-D `Conv` on `[1, C*D, H, W]` whose weight is banded
  along the folded depth axis (`DenseConvAs2d`).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import Tensor, nn

from weftlib.gate.run_graphs import GraphIdentity
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import export as onnx_export
from weftlib.onnx_core.layout import LayoutExport, layout_table

__all__ = ["DenseConvAs2d", "GatheredConv", "export_dense_as_2d", "export_gathered_conv", "gather_rows", "layout_table"]


def flat_weight(weight: Tensor) -> Tensor:
    """Conv3d weight `[Cout, Cin, k, k, k]` -> `[Cout, k^3 * Cin]`, offset-major (offset o = a*k^2 + b*k + c,
    `weftlib.sparse.kernel_map`'s column order), matching the rows `gather_rows` builds."""
    if weight.dim() != 5:
        raise ValueError(f"weight: expected [Cout, Cin, k, k, k], got shape {tuple(weight.shape)}")
    cout, cin = weight.shape[:2]
    return weight.reshape(cout, cin, -1).permute(0, 2, 1).reshape(cout, -1)


def gather_rows(feats: Tensor, nbr: Tensor) -> Tensor:
    """The host half: `[N, k^3 * Cin]`, row n = the features of voxel n's k^3 neighbours (zeros where absent)."""
    if feats.dim() != 2 or nbr.dim() != 2 or nbr.shape[0] != feats.shape[0]:
        raise ValueError(
            f"feats [N, C] and nbr [N, k^3] must agree on N, got {tuple(feats.shape)} and {tuple(nbr.shape)}"
        )
    n = feats.shape[0]
    padded = torch.cat([feats, feats.new_zeros(1, feats.shape[1])])
    index = torch.where(nbr < 0, torch.full_like(nbr, n), nbr)
    return padded[index].reshape(n, -1)


def rows_as_image(rows: Tensor) -> Tensor:
    """`[N, k^3 * Cin]` -> `[1, k^3 * Cin, N, 1]`: the voxels as the image's height."""
    return rows.t().unsqueeze(0).unsqueeze(-1).contiguous()


def image_as_rows(image: Tensor) -> Tensor:
    """`[1, Cout, N, 1]` -> `[N, Cout]`."""
    return image[0, :, :, 0].t()


class GatheredConv(nn.Module):
    """The device half of the host-gather / device-matmul split: one 1x1 `Conv` over the gathered rows."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None) -> None:
        super().__init__()
        flat = flat_weight(weight)
        self.conv = nn.Conv2d(flat.shape[1], flat.shape[0], 1, bias=bias is not None)
        with torch.no_grad():
            self.conv.weight.copy_(flat[:, :, None, None])
            if bias is not None and self.conv.bias is not None:
                self.conv.bias.copy_(bias)
        self.conv.requires_grad_(False)

    def forward(self, rows: Tensor) -> Tensor:
        return self.conv(rows)


def banded_weight(weight: Tensor, depth: int) -> Tensor:
    """Conv3d weight `[Cout, Cin, k, k, k]` -> Conv2d weight `[Cout*D, Cin*D, k, k]` over the depth-folded
    grid (channel = c * D + d): output depth d reads input depth d' = d + a - k//2 through tap a."""
    cout, cin, k = weight.shape[0], weight.shape[1], weight.shape[2]
    out = weight.new_zeros(cout, depth, cin, depth, k, k)
    for d in range(depth):
        for a in range(k):
            src = d + a - k // 2
            if 0 <= src < depth:
                out[:, d, :, src] = weight[:, :, a]
    return out.reshape(cout * depth, cin * depth, k, k)


class DenseConvAs2d(nn.Module):
    """The densify route's device half as a 2-D `Conv` on `[1, Cin*D, H, W]` (depth folded into channels)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, depth: int) -> None:
        super().__init__()
        k = weight.shape[2]
        band = banded_weight(weight, depth)
        self.conv = nn.Conv2d(band.shape[1], band.shape[0], k, padding=k // 2, bias=bias is not None)
        with torch.no_grad():
            self.conv.weight.copy_(band)
            if bias is not None and self.conv.bias is not None:
                self.conv.bias.copy_(bias.repeat_interleave(depth))
        self.conv.requires_grad_(False)

    def forward(self, grid: Tensor) -> Tensor:
        return self.conv(grid)


def fold_depth(grid: Tensor) -> Tensor:
    """`[1, C, D, H, W]` -> `[1, C*D, H, W]`."""
    b, c, d, h, w = grid.shape
    return grid.reshape(b, c * d, h, w)


def export_gathered_conv(
    feats: Tensor,
    nbr: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    path: str | os.PathLike,
    *,
    method: str = "accumulate",
    atol: float = 1e-4,
) -> LayoutExport:
    """Export the device half on the rows the host gathered from (feats, nbr); compare it with
    `weftlib.sparse.submanifold_conv3d(method)` on the same voxels first. The graph is a variant of the faithful
    layer whose method gathers the same rows (`exports.ROWS_METHOD`)."""
    from . import conv as sparse
    from .exports import ROWS_METHOD, conv_stem

    rows = rows_as_image(gather_rows(feats, nbr))
    module = GatheredConv(weight, bias).eval()
    with torch.no_grad():
        layout = image_as_rows(module(rows))
        faithful = sparse.submanifold_conv3d(feats, nbr, weight, bias, method=method)
    of = conv_stem(ROWS_METHOD)
    identity = GraphIdentity(
        GraphNotebook.SPARSE, GraphKind.VARIANT, geometry=f"{feats.shape[0]} voxels", variant_of=of
    )
    report = onnx_export.export(
        module, (rows,), path, input_names=["rows"], output_names=["out"], atol=atol, identity=identity.as_json()
    )
    return LayoutExport(Path(path).stem, report, {"rows": tuple(rows.shape)}, float((layout - faithful).abs().max()))


def export_dense_as_2d(
    grid: Tensor, weight: Tensor, bias: Tensor | None, path: str | os.PathLike, *, atol: float = 1e-4
) -> LayoutExport:
    """Export the densify route's Conv with the depth folded into channels; compare with conv3d first. The graph
    is a variant of the densify route's own (`exports.export_dense`)."""
    from .exports import conv_stem

    depth = grid.shape[2]
    module = DenseConvAs2d(weight, bias, depth).eval()
    folded = fold_depth(grid)
    with torch.no_grad():
        layout = module(folded)
        faithful = fold_depth(torch.nn.functional.conv3d(grid, weight, bias, padding=weight.shape[2] // 2))
    geometry, of = "x".join(map(str, grid.shape[2:])), conv_stem("dense")
    identity = GraphIdentity(GraphNotebook.SPARSE, GraphKind.VARIANT, "dense", geometry, variant_of=of)
    report = onnx_export.export(
        module, (folded,), path, input_names=["grid"], output_names=["out"], atol=atol, identity=identity.as_json()
    )
    return LayoutExport(Path(path).stem, report, {"grid": tuple(folded.shape)}, float((layout - faithful).abs().max()))
