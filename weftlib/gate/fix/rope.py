"""RoPE as the exporter writes a rotation of interleaved pairs (view_as_complex's real form): the last axis
viewed as [D/2, 2], each pair picked by a constant Gather, rotated by constant cos/sin tables, stacked and
viewed back. Rewritten as `x * cos2 + (x @ P) * sin2` with a constant signed pair swap: no rank-5 tensor,
no Gather (`dit.rewrites.rope_tables` in torch; here on any ONNX graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, ints, reshaped, static_shape


def _axis(value: ir.Value, rank: int) -> int | None:
    node = value.producer()
    attr = node.attributes.get("axis") if node is not None else None
    return None if attr is None else int(attr.as_int()) % rank


def _tables(x: ir.Value, c: ir.Value, s: ir.Value) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(cos2, sin2, P) on the unsplit last axis, or None when a table is not a constant."""
    shape, cos, sin = static_shape(x), const(c), const(s)
    if shape is None or cos is None or sin is None:
        return None
    half = shape[-1] // 2
    cos_b = np.broadcast_to(cos, np.broadcast_shapes(cos.shape, (half,)))
    sin_b = np.broadcast_to(sin, np.broadcast_shapes(sin.shape, (half,)))
    cos2 = np.repeat(cos_b, 2, axis=-1)
    sin2 = np.stack([-sin_b, sin_b], axis=-1).reshape((*sin_b.shape[:-1], 2 * half))
    swap = np.zeros((2 * half, 2 * half), dtype=cos.dtype)
    swap[np.arange(1, 2 * half, 2), np.arange(0, 2 * half, 2)] = 1
    swap[np.arange(0, 2 * half, 2), np.arange(1, 2 * half, 2)] = 1
    return cos2.astype(cos.dtype), sin2.astype(sin.dtype), swap


def _structure(
    shape: tuple[int, ...],
    view: ir.Value,
    i0: ir.Value,
    i1: ir.Value,
    u0: ir.Value,
    u1: ir.Value,
    back: ir.Value,
    outputs: dict[str, ir.Value],
) -> str | None:
    """Why the matched nodes are not the pair view, the two picks, the stack and the view back (None: they are)."""
    rank = len(shape) + 1
    split = reshaped(shape, ints(view))
    if split != [*shape[:-1], shape[-1] // 2, 2] or reshaped(tuple(split), ints(back)) != list(shape):
        return "the Reshapes do not view the last axis as pairs and back"
    if ints(i0) != [0] or ints(i1) != [1] or {_axis(outputs["a"], rank), _axis(outputs["b"], rank)} != {rank - 1}:
        return "the Gathers do not pick the two halves of each pair"
    if ints(u0) not in ([-1], [rank - 1]) or ints(u1) not in ([-1], [rank - 1]):
        return "the halves are not stacked on a new last axis"
    return "the Concat is not on the pair axis" if _axis(outputs["stacked"], rank) != rank - 1 else None


class InterleavedRopeByTables(ExactRewrite):
    """Fires on Reshape(x [.., D] -> [.., D/2, 2]), a = Gather(0) and b = Gather(1) on the last axis,
    (a cos - b sin, a sin + b cos) with constant tables, each Unsqueezed on the last axis, Concat there,
    Reshape back to x's shape. Replaced by x * cos2 + (x @ P) * sin2: P swaps each pair (one product by
    1 plus zeros, exact for finite x), cos2 repeats cos over the pair, sin2 is (-sin, sin). Each output
    rounds the same two products and the same sum or difference the original does, so the result is equal
    bit for bit."""

    answers = ("reshape_5d_to_4d", "gather_constant_index")

    def pattern(
        self,
        op: Any,
        x: ir.Value,
        view: ir.Value,
        i0: ir.Value,
        i1: ir.Value,
        c: ir.Value,
        s: ir.Value,
        u0: ir.Value,
        u1: ir.Value,
        back: ir.Value,
    ) -> Any:
        pairs = op.Reshape(x, view, _outputs=["pairs"])
        a = op.Gather(pairs, i0, _outputs=["a"])
        b = op.Gather(pairs, i1, _outputs=["b"])
        real = op.Sub(op.Mul(a, c), op.Mul(b, s))
        imag = op.Add(op.Mul(a, s), op.Mul(b, c))
        stacked = op.Concat(op.Unsqueeze(real, u0), op.Unsqueeze(imag, u1), _outputs=["stacked"])
        return op.Reshape(stacked, back)

    def holds(
        self,
        x: ir.Value,
        view: ir.Value,
        i0: ir.Value,
        i1: ir.Value,
        c: ir.Value,
        s: ir.Value,
        u0: ir.Value,
        u1: ir.Value,
        back: ir.Value,
        **outputs: ir.Value,
    ) -> str | None:
        shape = static_shape(x)
        if shape is None or shape[-1] % 2:
            return "x's shape is not static, or its last axis is odd"
        why = _structure(shape, view, i0, i1, u0, u1, back, outputs)
        if why:
            return why
        half = (*shape[:-1], shape[-1] // 2)
        tables = [const(c), const(s)]
        if any(t is None or np.broadcast_shapes(t.shape, half) != half for t in tables):
            return "cos or sin is not a constant that broadcasts to the halves' shape"
        return None

    def rewrite(
        self,
        op: Any,
        x: ir.Value,
        view: ir.Value,
        i0: ir.Value,
        i1: ir.Value,
        c: ir.Value,
        s: ir.Value,
        u0: ir.Value,
        u1: ir.Value,
        back: ir.Value,
        **outputs: ir.Value,
    ) -> Any:
        tables = _tables(x, c, s)
        assert tables is not None
        cos2, sin2, swap = (self.constant(op, t) for t in tables)
        return op.Add(op.Mul(x, cos2), op.Mul(op.MatMul(x, swap), sin2))


def _half_slices(x: ir.Value, slices: Sequence[tuple[ir.Value, ir.Value, ir.Value]]) -> int | str:
    """The half h when the two Slices take [h, D) and [0, h) of x's last axis, else why not."""
    shape = static_shape(x)
    if shape is None or shape[-1] % 2:
        return "x's shape is not static, or its last axis is odd"
    width, half = shape[-1], shape[-1] // 2
    picked = [(ints(s), ints(e), ints(a)) for s, e, a in slices]
    last = ([-1], [len(shape) - 1])
    if any(a not in last for _, _, a in picked):
        return "a Slice is not on the last axis"
    (s2, e2, _), (s1, e1, _) = picked
    ok = s2 == [half] and e2 is not None and e2[0] >= width and s1 == [0] and e1 == [half]
    return half if ok else "the Slices are not the second half, then the first"


class RotateHalfBySignedPermutation(ExactRewrite):
    """Fires on rotate_half: Concat(Neg(Slice(x, [h, D))), Slice(x, [0, h)), last axis) (the Neg + Concat
    a DFC fuser crashed on). Replaced by x @ P, P the signed permutation that puts -x[h + j] at j and x[j]
    at h + j: each output is one product by -1 or 1 plus zeros, exact for finite x. The partial rotary's x
    (itself a Slice) matches the same way."""

    answers = ("rotate_half", "rotate_half_partial")

    def pattern(
        self, op: Any, x: ir.Value, s2: ir.Value, e2: ir.Value, a2: ir.Value, s1: ir.Value, e1: ir.Value, a1: ir.Value
    ) -> Any:
        second, first = op.Slice(x, s2, e2, a2), op.Slice(x, s1, e1, a1)
        return op.Concat(op.Neg(second), first, _outputs=["rotated"])

    def holds(
        self,
        x: ir.Value,
        s2: ir.Value,
        e2: ir.Value,
        a2: ir.Value,
        s1: ir.Value,
        e1: ir.Value,
        a1: ir.Value,
        rotated: ir.Value,
    ) -> str | None:
        found = _half_slices(x, [(s2, e2, a2), (s1, e1, a1)])
        if isinstance(found, str):
            return found
        rank = len(static_shape(x) or ())
        return None if _axis(rotated, rank) == rank - 1 else "the Concat is not on the last axis"

    def rewrite(
        self,
        op: Any,
        x: ir.Value,
        s2: ir.Value,
        e2: ir.Value,
        a2: ir.Value,
        s1: ir.Value,
        e1: ir.Value,
        a1: ir.Value,
        rotated: ir.Value,
    ) -> Any:
        half = _half_slices(x, [(s2, e2, a2), (s1, e1, a1)])
        assert isinstance(half, int)
        dtype = np.dtype(x.dtype.numpy()) if x.dtype is not None else np.dtype(np.float32)
        signed = np.zeros((2 * half, 2 * half), dtype=dtype)
        signed[np.arange(half) + half, np.arange(half)] = -1
        signed[np.arange(half), np.arange(half) + half] = 1
        return op.MatMul(x, self.constant(op, signed))
