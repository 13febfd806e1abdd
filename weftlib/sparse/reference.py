"""The ground truth: fp64 `torch` conv3d on the dense grid, and each method's largest error against it.

Apart from `conv` because it checks the methods (the tests and notebook 03's equality claim) rather than
computing a layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .conv import METHODS, densify, submanifold_conv3d


def reference_conv3d(
    feats: torch.Tensor, coords: torch.Tensor, weight: torch.Tensor, res: int, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Ground truth: fp64 torch conv3d on the dense grid, read at the active sites (tests and parity only)."""
    grid = densify(feats.double(), coords, res)
    out = F.conv3d(grid, weight.double(), None if bias is None else bias.double(), padding=weight.shape[2] // 2)
    x, y, z = coords.to(torch.int64).unbind(1)
    return out[0, :, x, y, z].t()


def equality_errors(
    feats: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    coords: torch.Tensor,
    res: int,
    methods: tuple[str, ...] = METHODS,
    chunk_rows: int = 97,
) -> dict[str, float]:
    """Each method's largest |method - conv3d| at the active sites, against `reference_conv3d` (fp64); the odd
    default `chunk_rows` puts chunk boundaries inside the voxel set."""
    ref = reference_conv3d(feats, coords, weight, res, bias)
    errors = {}
    for m in methods:
        out = submanifold_conv3d(feats, nbr, weight, bias, method=m, coords=coords, res=res, chunk_rows=chunk_rows)
        errors[m] = float((out.double() - ref).abs().max())
    return errors
