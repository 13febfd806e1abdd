"""A GatherND with constant indices that picks image pixels row by row and column by column (how the
exporter writes `F.interpolate(mode="nearest-exact")` and other fixed index maps: the image moved to
[H, W, B, C], GatherND, moved back): into one nearest Resize where the map is nearest upsampling at an
integer ratio, else into two constant one-hot MatMuls (rows, then columns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, static_shape

TO_PIXELS = [2, 3, 0, 1]  # [B, C, H, W] <-> [H, W, B, C]: the same permutation both ways


def _separable(x: ir.Value, index: ir.Value, picked: ir.Value) -> tuple[np.ndarray, np.ndarray] | str:
    """(source row per output row, source column per output column), or why the map is not that."""
    shape, idx = static_shape(x), const(index)
    node = picked.producer()
    batch = node.attributes.get("batch_dims") if node is not None else None
    if shape is None or len(shape) != 4 or idx is None or idx.ndim != 3 or idx.shape[-1] != 2:
        return "not a constant [Ho, Wo, 2] pixel map over a static image"
    if batch is not None and batch.as_int() != 0:
        return "GatherND with batch dimensions"
    rows, cols = idx[:, 0, 0], idx[0, :, 1]
    if not (np.all(idx[..., 0] == rows[:, None]) and np.all(idx[..., 1] == cols[None, :])):
        return "the map does not pick whole rows and columns"
    h, w = shape[2], shape[3]
    rows, cols = np.where(rows < 0, rows + h, rows), np.where(cols < 0, cols + w, cols)
    if rows.min() < 0 or rows.max() >= h or cols.min() < 0 or cols.max() >= w:
        return "an index outside the image"
    return rows, cols


def _integer_nearest(source: np.ndarray, size: int) -> int | None:
    """The ratio r when output i reads source i // r (nearest upsampling by an integer), else None."""
    out = len(source)
    if out % size:
        return None
    ratio = out // size
    return ratio if np.array_equal(source, np.arange(out) // ratio) else None


class _PixelMap(ExactRewrite):
    answers = ("op:GatherND",)

    def pattern(self, op: Any, x: ir.Value, index: ir.Value) -> Any:
        picked = op.GatherND(op.Transpose(x, perm=TO_PIXELS), index, _outputs=["picked"])
        return op.Transpose(picked, perm=TO_PIXELS)

    def ratios(self, x: ir.Value, index: ir.Value, picked: ir.Value) -> tuple[int | None, int | None] | str:
        found = _separable(x, index, picked)
        if isinstance(found, str):
            return found
        shape = static_shape(x)
        assert shape is not None
        return _integer_nearest(found[0], shape[2]), _integer_nearest(found[1], shape[3])


class NearestGatherByResize(_PixelMap):
    """Fires where the map reads output pixel (i, j) from (i // r, j // s), r and s integers: one Resize,
    mode nearest, asymmetric coordinates, floor, scales [1, 1, r, s], which reads source floor(i / r): the
    same pixel, copied."""

    def holds(self, x: ir.Value, index: ir.Value, picked: ir.Value) -> str | None:
        found = self.ratios(x, index, picked)
        if isinstance(found, str):
            return found
        return None if None not in found else "not nearest upsampling by an integer ratio"

    def rewrite(self, op: Any, x: ir.Value, index: ir.Value, picked: ir.Value) -> Any:
        found = self.ratios(x, index, picked)
        assert not isinstance(found, str)
        scales = self.constant(op, np.array([1, 1, *found], dtype=np.float32))
        return op.Resize(
            x, None, scales, mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        )


class PixelMapByOneHot(_PixelMap):
    """Fires on any whole-row, whole-column map (a crop, a flip, a non-integer nearest): out = R @ x @ C
    with R [Ho, H] and C [W, Wo] one-hot. Each output is one product by 1 plus zeros: the pixel itself,
    for finite values."""

    def holds(self, x: ir.Value, index: ir.Value, picked: ir.Value) -> str | None:
        found = _separable(x, index, picked)
        return found if isinstance(found, str) else None

    def rewrite(self, op: Any, x: ir.Value, index: ir.Value, picked: ir.Value) -> Any:
        found, shape = _separable(x, index, picked), static_shape(x)
        assert not isinstance(found, str) and shape is not None
        dtype = np.dtype(x.dtype.numpy()) if x.dtype is not None else np.dtype(np.float32)
        rows = (found[0][:, None] == np.arange(shape[2])[None, :]).astype(dtype)
        cols = (np.arange(shape[3])[:, None] == found[1][None, :]).astype(dtype)
        return op.MatMul(op.MatMul(self.constant(op, rows), x), self.constant(op, cols))
