"""Rewrites of reshape chains the gate refuses (a batch axis folded and unfolded around a Transpose, a
rank-5 step between two layouts) into one shuffle that moves every element to the same place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, ints, reshaped, static_shape


def _fold_shapes(x: ir.Value, folded: ir.Value, unfolded: ir.Value) -> tuple[list[int], list[int]] | None:
    """x [n0, n1, a, b] folded to [n0*n1, a, b] and unfolded to [n0, n1, b, a], else None."""
    shape = static_shape(x)
    s1 = reshaped(shape, ints(folded))
    s2 = reshaped(tuple(s1), ints(unfolded)) if s1 is not None else None
    if shape is None or s1 is None or s2 is None or len(shape) != 4:
        return None
    n0, n1, a, b = shape
    if s1 != [n0 * n1, a, b] or s2 != [n0, n1, b, a]:
        return None
    return s1, s2


class BatchFoldAroundTranspose(ExactRewrite):
    """Fires on Reshape [n0, n1, a, b] -> [n0*n1, a, b], Transpose [0, 2, 1], Reshape -> [n0, n1, b, a]
    (how the exporter writes the key's transpose inside attention): one Transpose [0, 1, 3, 2] of the
    rank-4 tensor. Exact: element (i, j, k, l) lands at (i, j, l, k) either way; no batch axis is touched."""

    answers = ("batch_axis", "batch_axis_windows")

    def pattern(self, op: Any, x: ir.Value, folded: ir.Value, unfolded: ir.Value) -> Any:
        return op.Reshape(op.Transpose(op.Reshape(x, folded), perm=[0, 2, 1]), unfolded)

    def holds(self, x: ir.Value, folded: ir.Value, unfolded: ir.Value) -> str | None:
        return None if _fold_shapes(x, folded, unfolded) else "not a fold of the first two axes and its unfold"

    def rewrite(self, op: Any, x: ir.Value, folded: ir.Value, unfolded: ir.Value) -> Any:
        return op.Transpose(x, perm=[0, 1, 3, 2])


class ReshapeChain(ExactRewrite):
    """Fires on Reshape(Reshape(x, a rank-5 shape), shape) whose first Reshape feeds only the second (a
    rank-5 step between two rank-4 or rank-3 layouts): Reshape(x, shape). Exact: a Reshape keeps the
    row-major order of the elements, so two in a row are the last one alone. The data order does not
    allow it when anything else reads the rank-5 tensor; the matcher then leaves the pair."""

    answers = ("reshape_5d_to_4d",)

    def pattern(self, op: Any, x: ir.Value, five: ir.Value, shape: ir.Value) -> Any:
        return op.Reshape(op.Reshape(x, five), shape)

    def holds(self, x: ir.Value, five: ir.Value, shape: ir.Value) -> str | None:
        before = static_shape(x)
        middle = reshaped(before, ints(five))
        after = reshaped(tuple(middle), ints(shape)) if middle is not None else None
        if before is None or middle is None or after is None or len(middle) != 5:
            return "not a rank-5 step with static shapes"
        return "the input is rank 5 itself" if len(before) == 5 else None

    def rewrite(self, op: Any, x: ir.Value, five: ir.Value, shape: ir.Value) -> Any:
        middle = reshaped(static_shape(x), ints(five))
        after = reshaped(tuple(middle or ()), ints(shape))
        assert after is not None
        return op.Reshape(x, self.constant(op, np.array(after, dtype=np.int64)))


class ReshapeChainThroughScalar(ExactRewrite):
    """Fires on Reshape(Add/Sub/Mul/Div(Reshape(x, middle), k), shape) with k a one-element constant, where
    the middle shape is rank 5 or moves the batch axis (a view for the op, then back): Add/Sub/Mul/Div of
    Reshape(x, shape), or of x itself when that is x's shape. Exact: an op with one scalar does the same to
    every element whatever the shape, so it commutes with the Reshapes, and two Reshapes are the last one."""

    answers = ("reshape_5d_to_4d", "batch_axis", "batch_axis_windows")

    def __init__(self, op_type: str) -> None:
        self.op_type = op_type
        super().__init__()
        self.name = f"ReshapeChainThrough{op_type}"

    def pattern(self, op: Any, x: ir.Value, middle: ir.Value, k: ir.Value, shape: ir.Value) -> Any:
        return op.Reshape(getattr(op, self.op_type)(op.Reshape(x, middle), k), shape)

    def holds(self, x: ir.Value, middle: ir.Value, k: ir.Value, shape: ir.Value) -> str | None:
        scalar, before = const(k), static_shape(x)
        if scalar is None or scalar.size != 1 or scalar.ndim > len(ints(shape) or ()):
            return "the op between the Reshapes is not with a one-element constant"
        view = reshaped(before, ints(middle))
        if before is None or view is None or reshaped(tuple(view), ints(shape)) is None:
            return "the Reshapes' shapes are not static"
        return None

    def rewrite(self, op: Any, x: ir.Value, middle: ir.Value, k: ir.Value, shape: ir.Value) -> Any:
        before = static_shape(x)
        after = reshaped(tuple(reshaped(before, ints(middle)) or ()), ints(shape))
        assert before is not None and after is not None
        if list(before) == after:
            return getattr(op, self.op_type)(x, k)
        return getattr(op, self.op_type)(op.Reshape(x, self.constant(op, np.array(after, dtype=np.int64))), k)


class WrongOrderBatchFold(BatchFoldAroundTranspose):
    """The negative control, never in the library: the same match as `BatchFoldAroundTranspose`, but one
    Reshape to [n0, n1, b, a] instead of the Transpose. The shape is right and the data order is not, so
    the proof must fail on it."""

    def rewrite(self, op: Any, x: ir.Value, folded: ir.Value, unfolded: ir.Value) -> Any:
        shapes = _fold_shapes(x, folded, unfolded)
        assert shapes is not None
        return op.Reshape(x, self.constant(op, np.array(shapes[1], dtype=np.int64)))
