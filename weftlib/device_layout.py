"""Every exported graph again, in a layout the Hailo DFC's parser can read: all inputs rank 4 (NCHW).

The parser stops in `_add_input_layers` before reading any operator when an input is not image-shaped
(weftspun/request-for-discussion RFD 1154 details: a rank-5 latent, a rank-1 timestep and a rank-3
conditioning). The faithful exports take natten's `[B, H, W, heads, D]` (rank 5) or the sparse convolution's
`[N, C]` rows, so each is offered here as a wrapper whose inputs are images and whose head/channel split
happens inside the graph. The arithmetic is the same code (`weftlib.attention.na2d`,
`weftlib.sparse.submanifold_conv3d`'s weight layout), so exactness is checked the same way as before.

- attention: `NA2dImage` takes q `[B, heads*D, H, W]`, k/v `[B, heads_kv*D, h, w]`, returns
  `[B, heads*Dv, H, W]`;
- sparse conv, host-gather / device-matmul split: the host gathers each voxel's 27 neighbour rows
  (`gather_rows`), the device half is one 1x1 `Conv` over them as an image `[1, 27*Cin, N, 1]`
  (`GatheredConv`);
- densify route: the 3-D `Conv` on `[1, C, D, H, W]` as a 2-D `Conv` on `[1, C*D, H, W]` whose weight is
  banded along the folded depth axis (`DenseConvAs2d`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from weftlib import attention, onnx_export

IMAGE_RANK = 4


# ------------------------------------------------------------------------------------------ attention


def to_image(x: Tensor) -> Tensor:
    """`[B, H, W, heads, D]` -> `[B, heads*D, H, W]` (channel = head * D + d)."""
    if x.dim() != 5:
        raise ValueError(f"x: expected [B, H, W, heads, D], got shape {tuple(x.shape)}")
    b, h, w, heads, d = x.shape
    return x.reshape(b, h, w, heads * d).permute(0, 3, 1, 2).contiguous()


def from_image(x: Tensor, heads: int) -> Tensor:
    """`[B, heads*D, H, W]` -> `[B, H, W, heads, D]`, the inverse of `to_image`."""
    if x.dim() != IMAGE_RANK or x.shape[1] % heads:
        raise ValueError(f"x: expected [B, heads*D, H, W] with channels divisible by heads={heads}, "
                         f"got shape {tuple(x.shape)}")
    b, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, h, w, heads, c // heads)


class NA2dImage(nn.Module):
    """`attention.na2d` on image-shaped q, k, v: the head split and merge happen inside the graph."""

    def __init__(self, kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1, *,
                 heads: int, kv_heads: int | None = None, method: str = "shift", scale: float | None = None) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads: expected a positive int, got {heads!r}")
        self.inner = attention.NA2d(kernel_size, dilation, method=method, scale=scale)
        self.heads, self.kv_heads = heads, kv_heads or heads

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        out = self.inner(from_image(q, self.heads), from_image(k, self.kv_heads), from_image(v, self.kv_heads))
        return to_image(out)


# ------------------------------------------------------------------------------------- sparse conv


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
        raise ValueError(f"feats [N, C] and nbr [N, k^3] must agree on N, got {tuple(feats.shape)} and "
                         f"{tuple(nbr.shape)}")
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
            if bias is not None:
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
            if bias is not None:
                self.conv.bias.copy_(bias.repeat_interleave(depth))
        self.conv.requires_grad_(False)

    def forward(self, grid: Tensor) -> Tensor:
        return self.conv(grid)


def fold_depth(grid: Tensor) -> Tensor:
    """`[1, C, D, H, W]` -> `[1, C*D, H, W]`."""
    b, c, d, h, w = grid.shape
    return grid.reshape(b, c * d, h, w)


# ------------------------------------------------------------------------------------------- exports


@dataclass(frozen=True)
class LayoutExport:
    """One device-layout export: its report, and the layout's output against the faithful formulation's."""

    name: str
    report: Any  # onnx_export.ExportReport
    inputs: dict[str, tuple[int, ...]]
    vs_faithful: float  # max |device layout (torch) - faithful formulation (torch)|

    @property
    def path(self) -> Path:
        return Path(self.report.path)


def export_attention(q: Tensor, k: Tensor, v: Tensor, kernel_size: int, dilation: int, method: str,
                     path: str | os.PathLike, *, atol: float = 1e-4) -> LayoutExport:
    """Export `na2d(q, k, v, method)` with image inputs; compare the layout with `attention.na2d` first."""
    heads, kv_heads = q.shape[3], k.shape[3]
    module = NA2dImage(kernel_size, dilation, heads=heads, kv_heads=kv_heads, method=method).eval()
    images = tuple(to_image(t) for t in (q, k, v))
    with torch.no_grad():
        faithful = attention.na2d(q, k, v, kernel_size, dilation, method=method)
        layout = from_image(module(*images), heads)
    report = onnx_export.export(module, images, path, input_names=["q", "k", "v"], output_names=["out"], atol=atol)
    return LayoutExport(Path(path).stem, report, {n: tuple(t.shape) for n, t in zip("qkv", images)},
                        float((layout - faithful).abs().max()))


def export_attention_all(exported: Sequence[tuple[str, str]], geometries: Sequence[Any], folder: str | os.PathLike,
                         *, atol: float = 1e-4) -> dict[tuple[str, str], LayoutExport]:
    """A device layout for every (geometry name, method) that was exported faithfully (`weftlib.bench`
    geometries and their inputs), written to `folder/layout_<geometry>_<method>.onnx`."""
    from weftlib import bench

    by_name = {g.name: g for g in geometries}
    unknown = sorted({g for g, _ in exported} - set(by_name))
    if unknown:
        raise ValueError(f"exported: geometries {unknown} are not among {sorted(by_name)}")
    out = {}
    for name, method in exported:
        geom = by_name[name]
        args = bench.method_args(geom, method, bench.make_inputs(geom))
        out[(name, method)] = export_attention(*args, geom.kernel, geom.dilation, method,
                                               Path(folder) / f"layout_{name.replace('^', 'p')}_{method}.onnx",
                                               atol=atol)
    return out


def methods_passing(layouts: dict[tuple[str, str], LayoutExport], gate_results: dict[Any, Any]) -> list[str]:
    """The methods whose device layout passes the device gate at every geometry it was exported at."""
    methods = sorted({m for _, m in layouts})
    return [m for m in methods if all(gate_results[e.path].passed for (_, mm), e in layouts.items() if mm == m)]


def export_gathered_conv(feats: Tensor, nbr: Tensor, weight: Tensor, bias: Tensor | None,
                         path: str | os.PathLike, *, method: str = "accumulate",
                         atol: float = 1e-4) -> LayoutExport:
    """Export the device half on the rows the host gathered from (feats, nbr); compare it with
    `weftlib.sparse.submanifold_conv3d(method)` on the same voxels first."""
    from weftlib import sparse

    rows = rows_as_image(gather_rows(feats, nbr))
    module = GatheredConv(weight, bias).eval()
    with torch.no_grad():
        layout = image_as_rows(module(rows))
        faithful = sparse.submanifold_conv3d(feats, nbr, weight, bias, method=method)
    report = onnx_export.export(module, (rows,), path, input_names=["rows"], output_names=["out"], atol=atol)
    return LayoutExport(Path(path).stem, report, {"rows": tuple(rows.shape)}, float((layout - faithful).abs().max()))


def export_dense_as_2d(grid: Tensor, weight: Tensor, bias: Tensor | None, path: str | os.PathLike, *,
                       atol: float = 1e-4) -> LayoutExport:
    """Export the densify route's Conv with the depth folded into channels; compare with conv3d first."""
    depth = grid.shape[2]
    module = DenseConvAs2d(weight, bias, depth).eval()
    folded = fold_depth(grid)
    with torch.no_grad():
        layout = module(folded)
        faithful = fold_depth(torch.nn.functional.conv3d(grid, weight, bias, padding=weight.shape[2] // 2))
    report = onnx_export.export(module, (folded,), path, input_names=["grid"], output_names=["out"], atol=atol)
    return LayoutExport(Path(path).stem, report, {"grid": tuple(folded.shape)}, float((layout - faithful).abs().max()))


def layout_table(exports: dict[Any, LayoutExport], gate_results: dict[Any, Any]) -> "pd.DataFrame":
    """Per device-layout graph: inputs, parity, equality with the faithful form, and the device gate's word
    (`gate_results` keyed like `exports`, or by the layout's path)."""
    import pandas as pd

    rows = []
    for key, e in exports.items():
        g = gate_results[key] if key in gate_results else gate_results[e.path]
        rows.append({"graph": e.path.name, "inputs": ", ".join(f"{n} {list(s)}" for n, s in e.inputs.items()),
                     "readable": "yes" if g.readable else "no", "device gate": "PASS" if g.passed else "FAIL",
                     "ops outside DEVICE_OPS": ", ".join(g.failing_ops),
                     "onnxruntime vs torch": e.report.max_abs_diff, "layout vs faithful": e.vs_faithful})
    return pd.DataFrame(rows)
