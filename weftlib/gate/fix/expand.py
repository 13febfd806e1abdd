"""Rewrites of Expand by a constant shape (the gate refuses the op: `UnexpectedNodeError: Expand`): into the
broadcast the op after it does anyway, or into the constant it makes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, ints, static_shape

BROADCASTING = ("Add", "Sub", "Mul", "Div")


class ExpandOfConstant(ExactRewrite):
    """Fires on Expand(constant, constant shape): the expanded tensor is written as a constant (numpy's
    broadcast is the ONNX Expand: the same bidirectional broadcasting rule)."""

    answers = ("op:Expand",)

    def pattern(self, op: Any, x: ir.Value, shape: ir.Value) -> Any:
        return op.Expand(x, shape)

    def holds(self, x: ir.Value, shape: ir.Value) -> str | None:
        if const(x) is None or ints(shape) is None:
            return "Expand of a tensor that is not constant, or by a shape that is not"
        return None

    def rewrite(self, op: Any, x: ir.Value, shape: ir.Value) -> Any:
        array, target = const(x), ints(shape)
        assert array is not None and target is not None
        out = np.broadcast_shapes(array.shape, tuple(target))
        return self.constant(op, np.broadcast_to(array, out).copy())


class ExpandIntoBroadcast(ExactRewrite):
    """Fires on an elementwise Add/Sub/Mul/Div whose input `side` (0 or 1) is an Expand by a constant shape
    (an RMS norm's divisor [.., 1] expanded to [.., d]), when broadcasting the unexpanded tensor against the
    other input gives the same output shape: the op broadcasts it itself, each output element reading the
    same input element the Expand copied there."""

    answers = ("op:Expand",)

    def __init__(self, op_type: str, side: int) -> None:
        self.op_type, self.side = op_type, side
        super().__init__()
        self.name = f"ExpandIntoBroadcast_{op_type}_{side}"

    def pattern(self, op: Any, x: ir.Value, shape: ir.Value, other: ir.Value) -> Any:
        expanded = op.Expand(x, shape)
        pair = (expanded, other) if self.side == 0 else (other, expanded)
        return getattr(op, self.op_type)(*pair)

    def holds(self, x: ir.Value, shape: ir.Value, other: ir.Value) -> str | None:
        target, small, wide = ints(shape), static_shape(x), static_shape(other)
        if target is None or small is None or wide is None:
            return "the Expand's shape is not constant, or an input's shape is not static"
        with_expand = np.broadcast_shapes(np.broadcast_shapes(small, tuple(target)), wide)
        return None if np.broadcast_shapes(small, wide) == with_expand else "the broadcast alone gives another shape"

    def rewrite(self, op: Any, x: ir.Value, shape: ir.Value, other: ir.Value) -> Any:
        pair = (x, other) if self.side == 0 else (other, x)
        return getattr(op, self.op_type)(*pair)


class ExpandChannelsByConv(ExactRewrite):
    """Fires on Expand of an image with one channel [B, 1, H, W] to [B, C, H, W] (a mean over the channels
    spread back over them), where no broadcasting op follows to absorb it: a 1x1 Conv whose C filters are
    each the weight 1.0. Exact: every output is its input times one, plus nothing."""

    answers = ("op:Expand",)

    def pattern(self, op: Any, x: ir.Value, shape: ir.Value) -> Any:
        return op.Expand(x, shape)

    def holds(self, x: ir.Value, shape: ir.Value) -> str | None:
        before, target = static_shape(x), ints(shape)
        if before is None or target is None or len(before) != 4 or len(target) != 4:
            return "not an image expanded by a constant rank-4 shape"
        if before[1] != 1 or target[1] <= 1 or [target[0], *target[2:]] not in ([before[0], *before[2:]], [1, 1, 1]):
            return "the Expand spreads another axis than the channels of a one-channel image"
        return None

    def rewrite(self, op: Any, x: ir.Value, shape: ir.Value) -> Any:
        channels = (ints(shape) or [0, 0])[1]
        dtype = np.dtype(x.dtype.numpy()) if x.dtype is not None else np.dtype(np.float32)
        return op.Conv(x, self.constant(op, np.ones((channels, 1, 1, 1), dtype=dtype)))


class RepeatHeadsByConv(ExactRewrite):
    """Fires on GQA's repeat_kv: Unsqueeze(x [B, kv, L, d], axis 2), Expand to [B, kv, n, L, d], Reshape to
    [B, kv*n, L, d]. Replaced by a 1x1 Conv of x (heads as channels) whose weight [kv*n, kv, 1, 1] is one-hot:
    output head j reads head j // n. Each output is one product by 1 plus zeros: the value itself, for finite
    values (`dit.rewrites.repeat_kv_heads` in torch)."""

    answers = ("op:Expand", "reshape_5d_to_4d")

    def pattern(self, op: Any, x: ir.Value, axes: ir.Value, shape: ir.Value, merged: ir.Value) -> Any:
        return op.Reshape(op.Expand(op.Unsqueeze(x, axes), shape), merged)

    def holds(self, x: ir.Value, axes: ir.Value, shape: ir.Value, merged: ir.Value) -> str | None:
        before, target, out = static_shape(x), ints(shape), ints(merged)
        if before is None or len(before) != 4 or ints(axes) != [2] or target is None or out is None:
            return "not a rank-4 [B, kv, L, d] widened on a new axis 2 by constant shapes"
        b, kv, length, d = before
        n = target[2]
        if [target[i] for i in (0, 1, 3, 4)] not in ([b, kv, length, d], [1, 1, 1, 1]) or n < 1:
            return "the Expand repeats another axis than the new one"
        return (
            None if out in ([b, kv * n, length, d], [0, kv * n, length, d]) else "the Reshape does not merge kv and n"
        )

    def rewrite(self, op: Any, x: ir.Value, axes: ir.Value, shape: ir.Value, merged: ir.Value) -> Any:
        before, target = static_shape(x), ints(shape)
        assert before is not None and target is not None
        kv, n = before[1], target[2]
        dtype = np.dtype(x.dtype.numpy()) if x.dtype is not None else np.dtype(np.float32)
        weight = (np.arange(kv * n)[:, None] // n == np.arange(kv)[None, :]).astype(dtype).reshape(kv * n, kv, 1, 1)
        return op.Conv(x, self.constant(op, weight))


def expand_rewrites() -> list[ExactRewrite]:
    """Constant first, then repeated heads, the broadcast a following op does anyway, the 1x1 Conv last."""
    broadcasts: list[ExactRewrite] = [ExpandIntoBroadcast(o, s) for o in BROADCASTING for s in (0, 1)]
    return [ExpandOfConstant(), RepeatHeadsByConv(), *broadcasts, ExpandChannelsByConv()]
