"""A head split interrupted by its per-head norm (QK norm: Reshape [B, L, C] -> [B, L, H, d], a norm over d (L2,
RMS, or LayerNorm as the op or written out), the gain, then the Transpose): the norm moved across the Reshape onto
the tokens, so the split is glued to its Transpose again (`dit.rewrites.glued_heads` in torch; here on any ONNX graph).

On the tokens a statistic of each head is a product by the [C, H] head indicator E (a sum of the head's d
channels, a product by 1 plus zeros each), and spreading it back over the head's channels a product by E^T.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, ints, reshaped, static_shape


def _reduces_last(norm: ir.Value, rank: int) -> bool:
    """The reduction reduces the last axis alone, keeping it: its axes an attribute (before opset 18) or a
    constant second input (from opset 18)."""
    node = norm.producer()
    if node is None:
        return False
    keep = node.attributes.get("keepdims")
    if len(node.inputs) == 1:
        attr = node.attributes.get("axes")
        axes = None if attr is None else [int(a) for a in attr.as_ints()]
    else:
        axes = ints(node.inputs[1]) if len(node.inputs) == 2 and node.attributes.get("axes") is None else None
    return axes is not None and [a % rank for a in axes] == [rank - 1] and (keep is None or keep.as_int() == 1)


def _indicator(h: int, d: int, dtype: np.dtype) -> np.ndarray:
    """E: [C, H], 1 where channel c belongs to head h (c // d == h)."""
    return np.kron(np.eye(h), np.ones((d, 1))).astype(dtype)


def _split(x: ir.Value, shape: ir.Value) -> tuple[int, int] | None:
    """(heads, head dim) when the Reshape splits x's last axis C into [H, d], else None."""
    before = static_shape(x)
    after = reshaped(before, ints(shape))
    if before is None or after is None or len(after) != len(before) + 1 or after[:-2] != list(before[:-1]):
        return None
    return after[-2], after[-1]


_NOT_HEAD_NORM = "not a norm over each head's channels followed by the head Transpose"


def _head_norm(x: ir.Value, shape: ir.Value, perm: Any, *reductions: ir.Value) -> tuple[int, int] | str:
    """(heads, head dim) of a Reshape splitting the tokens' channels into heads, followed by the head Transpose,
    each of `reductions` reducing one head's channels; else why not (the words every head-norm rule shares)."""
    heads = _split(x, shape)
    if heads is None or len(static_shape(x) or ()) != 3:
        return "the Reshape does not split the tokens' channels into heads"
    if list(perm.as_ints()) != [0, 2, 1, 3] or not all(_reduces_last(r, 4) for r in reductions):
        return _NOT_HEAD_NORM
    return heads


class HeadNormAcrossSplit(ExactRewrite):
    """Fires on Reshape(x [.., C] -> [.., H, d]), y = split / Clip(ReduceL2(split, last axis), eps) * gain
    * k (gain a constant [H, d] or [d], k a one-element constant), then Transpose [0, 2, 1, 3]. On the
    tokens: each head's sum of squares is (x * x) @ E (E: the [C, H] head indicator), Sqrt and Clip as
    before, spread back over the head's channels by @ E^T (one product by 1 plus zeros), then the same Div
    and Muls with the gain laid out as [C]; the Reshape and its Transpose follow, glued. Only the sum of
    squares is added in another order than ReduceL2's: the proof's float32 tolerance covers that."""

    answers = ("head_split_interrupted",)

    def pattern(
        self, op: Any, x: ir.Value, shape: ir.Value, eps: ir.Value, gain: ir.Value, k: ir.Value, perm: Any
    ) -> Any:
        split = op.Reshape(x, shape)
        norm = op.Clip(op.ReduceL2(split, _allow_other_inputs=True, _outputs=["norm"]), eps)  # axes: opset 18
        return op.Transpose(op.Mul(op.Mul(op.Div(split, norm), gain), k), perm=perm)

    def holds(
        self, x: ir.Value, shape: ir.Value, eps: ir.Value, gain: ir.Value, k: ir.Value, perm: Any, norm: ir.Value
    ) -> str | None:
        heads = _head_norm(x, shape, perm, norm)
        if isinstance(heads, str):
            return heads
        g, scale, floor = const(gain), const(k), const(eps)
        if g is None or scale is None or floor is None or scale.size != 1 or floor.size != 1:
            return "the gain, scale or floor is not a constant"
        if np.broadcast_shapes(g.shape, heads) != heads or g.ndim > 2:
            return "the gain is not per head channel ([H, d] or [d])"
        return None

    def rewrite(
        self,
        op: Any,
        x: ir.Value,
        shape: ir.Value,
        eps: ir.Value,
        gain: ir.Value,
        k: ir.Value,
        perm: Any,
        norm: ir.Value,
    ) -> Any:
        heads = _split(x, shape)
        g = const(gain)
        assert heads is not None and g is not None
        h, d = heads
        indicator = _indicator(h, d, g.dtype)
        sums = op.MatMul(op.Mul(x, x), self.constant(op, indicator))
        spread = op.MatMul(op.Clip(op.Sqrt(sums), eps), self.constant(op, indicator.T.copy()))
        flat_gain = self.constant(op, np.broadcast_to(g, heads).reshape(h * d).copy())
        tokens = op.Mul(op.Mul(op.Div(x, spread), flat_gain), k)
        return op.Transpose(op.Reshape(tokens, shape), perm=[0, 2, 1, 3])


class RmsHeadNormAcrossSplit(ExactRewrite):
    """Fires on Reshape(x [.., C] -> [.., H, d]), y = split / Sqrt(ReduceMean(Pow(split, 2), last axis) + eps)
    * gain, then Transpose [0, 2, 1, 3] (Qwen3's QK norm as exported). On the tokens: each head's mean square
    is (x^2) @ (E / d), E the [C, H] head indicator, then Add, Sqrt as before, spread back by @ E^T (one
    product by 1 plus zeros), the same Div and the gain laid out as [C]; the head split and its Transpose
    follow, glued. The mean is summed in another order than ReduceMean's (and by 1/d products where d is
    not a power of two): the proof's float32 tolerance covers that rounding, nothing else."""

    answers = ("head_split_interrupted",)

    def pattern(
        self, op: Any, x: ir.Value, shape: ir.Value, two: ir.Value, eps: ir.Value, gain: ir.Value, perm: Any
    ) -> Any:
        split = op.Reshape(x, shape)
        mean = op.ReduceMean(op.Pow(split, two), _allow_other_inputs=True, _outputs=["norm"])  # axes: opset 18
        return op.Transpose(op.Mul(op.Div(split, op.Sqrt(op.Add(mean, eps))), gain), perm=perm)

    def holds(
        self, x: ir.Value, shape: ir.Value, two: ir.Value, eps: ir.Value, gain: ir.Value, perm: Any, norm: ir.Value
    ) -> str | None:
        heads = _head_norm(x, shape, perm, norm)
        if isinstance(heads, str):
            return heads
        g, power, floor = const(gain), const(two), const(eps)
        if (
            g is None
            or power is None
            or floor is None
            or power.size != 1
            or float(power.item()) != 2
            or floor.size != 1
        ):
            return "the gain or eps is not a constant, or the power is not 2"
        if np.broadcast_shapes(g.shape, heads) != heads or g.ndim > 2:
            return "the gain is not per head channel ([H, d] or [d])"
        return None

    def rewrite(
        self,
        op: Any,
        x: ir.Value,
        shape: ir.Value,
        two: ir.Value,
        eps: ir.Value,
        gain: ir.Value,
        perm: Any,
        norm: ir.Value,
    ) -> Any:
        heads, g = _split(x, shape), const(gain)
        assert heads is not None and g is not None
        h, d = heads
        indicator = _indicator(h, d, g.dtype)
        mean = op.MatMul(op.Mul(x, x), self.constant(op, indicator / d))
        spread = op.MatMul(op.Sqrt(op.Add(mean, eps)), self.constant(op, indicator.T.copy()))
        flat_gain = self.constant(op, np.broadcast_to(g, heads).reshape(h * d).copy())
        return op.Transpose(op.Reshape(op.Mul(op.Div(x, spread), flat_gain), shape), perm=[0, 2, 1, 3])


def _per_channel(array: np.ndarray | None, d: int) -> bool:
    """A LayerNormalization's scale or bias over one head's d channels ([d], [1] or a scalar, as it broadcasts)."""
    return array is not None and array.ndim <= 1 and np.broadcast_shapes(array.shape, (d,)) == (d,)


def _bias(norm: ir.Value) -> ir.Value | None:
    """The LayerNormalization's bias input, None when it has none."""
    node = norm.producer()
    return node.inputs[2] if node is not None and len(node.inputs) > 2 else None


class LayerHeadNormAcrossSplit(ExactRewrite):
    """Fires on Reshape(x [B, S, C] -> [B, S, H, d]), LayerNormalization over the last axis (scale and bias, if
    any, constants over d; its mean and inverse deviation outputs unread), then Transpose [0, 2, 1, 3] (a QK
    LayerNorm as exported). On the tokens: each head's mean is x @ (E / d), E the [C, H] head indicator, spread
    back by @ E^T and taken from x; the variance the same of the centred square; then the centred x over
    Sqrt(variance + epsilon) spread back, times the scale and plus the bias laid out as [C]; the head split and
    its Transpose follow, glued. The same biased statistics of the same d elements of each head, summed in
    another order (and by 1/d products where d is not a power of two): the proof's float32 tolerance covers
    that rounding, nothing else."""

    answers = ("head_split_interrupted",)

    def pattern(self, op: Any, x: ir.Value, shape: ir.Value, scale: ir.Value, perm: Any) -> Any:
        split = op.Reshape(x, shape)
        norm = op.LayerNormalization(split, scale, _allow_other_inputs=True, _outputs=["norm"])  # bias or none
        return op.Transpose(norm, perm=perm)

    def holds(self, x: ir.Value, shape: ir.Value, scale: ir.Value, perm: Any, norm: ir.Value) -> str | None:
        heads = _head_norm(x, shape, perm)
        if isinstance(heads, str):
            return heads
        node = norm.producer()
        axis = node.attributes.get("axis") if node is not None else None
        if node is None or (axis is not None and axis.as_int() % 4 != 3):
            return _NOT_HEAD_NORM
        if any(v.uses() or v.is_graph_output() for v in node.outputs[1:]):
            return "the LayerNormalization's mean or inverse deviation is read"
        d, bias = heads[1], _bias(norm)
        if not _per_channel(const(scale), d) or (bias is not None and not _per_channel(const(bias), d)):
            return "the scale or bias is not a constant over each head's channels ([d])"
        return None

    def rewrite(self, op: Any, x: ir.Value, shape: ir.Value, scale: ir.Value, perm: Any, norm: ir.Value) -> Any:
        heads, gamma, node = _split(x, shape), const(scale), norm.producer()
        assert heads is not None and gamma is not None and node is not None
        eps = node.attributes.get("epsilon")
        epsilon = np.array(eps.as_float() if eps is not None else 1e-5, dtype=gamma.dtype)
        y = _standardized(self, op, x, heads, epsilon, gamma, const(_bias(norm)))
        return op.Transpose(op.Reshape(y, shape), perm=[0, 2, 1, 3])


def _standardized(
    rule: ExactRewrite,
    op: Any,
    x: ir.Value,
    heads: tuple[int, int],
    epsilon: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray | None,
) -> Any:
    """Each head of the tokens x standardized over its d channels, times gamma and plus beta (each broadcast to
    [H, d], laid out as [C]): the mean x @ (E / d) spread back by @ E^T, the variance the same of the centred
    square, the centred x over Sqrt(variance + epsilon) spread back."""
    h, d = heads
    indicator = _indicator(h, d, gamma.dtype)
    average, spread = rule.constant(op, indicator / d), rule.constant(op, indicator.T.copy())
    centred = op.Sub(x, op.MatMul(op.MatMul(x, average), spread))
    variance = op.MatMul(op.Mul(centred, centred), average)
    deviation = op.MatMul(op.Sqrt(op.Add(variance, rule.constant(op, epsilon))), spread)
    y = op.Mul(op.Div(centred, deviation), rule.constant(op, np.broadcast_to(gamma, heads).reshape(h * d).copy()))
    if beta is None:
        return y
    return op.Add(y, rule.constant(op, np.broadcast_to(beta, heads).reshape(h * d).astype(gamma.dtype)))


def _per_head(array: np.ndarray | None, heads: tuple[int, int]) -> bool:
    """A gain or bias over each head's channels: it broadcasts to [H, d] and has at most two axes."""
    return array is not None and array.ndim <= 2 and np.broadcast_shapes(array.shape, heads) == heads


class DecomposedLayerHeadNormAcrossSplit(ExactRewrite):
    """Fires on Reshape(x [B, S, C] -> [B, S, H, d]), a LayerNorm written out over the last axis as exporters
    write it below opset 17 (m = ReduceMean(split), c = split - m, c / Sqrt(ReduceMean(Pow(c, 2)) + eps)
    * gain + bias, gain and bias constants per head channel, [d] or [H, d]), then Transpose [0, 2, 1, 3].
    Replaced as `LayerHeadNormAcrossSplit` replaces the LayerNormalization op: the same statistics of the same
    d elements of each head, summed in another order, and c * c for Pow(c, 2): the proof's float32 tolerance
    covers that rounding, nothing else."""

    answers = ("head_split_interrupted",)

    def pattern(
        self,
        op: Any,
        x: ir.Value,
        shape: ir.Value,
        two: ir.Value,
        eps: ir.Value,
        gain: ir.Value,
        bias: ir.Value,
        perm: Any,
    ) -> Any:
        split = op.Reshape(x, shape)
        centred = op.Sub(split, op.ReduceMean(split, _allow_other_inputs=True, _outputs=["mean"]))
        variance = op.ReduceMean(op.Pow(centred, two), _allow_other_inputs=True, _outputs=["variance"])
        normed = op.Div(centred, op.Sqrt(op.Add(variance, eps)))
        return op.Transpose(op.Add(op.Mul(normed, gain), bias), perm=perm)

    def holds(
        self,
        x: ir.Value,
        shape: ir.Value,
        two: ir.Value,
        eps: ir.Value,
        gain: ir.Value,
        bias: ir.Value,
        perm: Any,
        mean: ir.Value,
        variance: ir.Value,
    ) -> str | None:
        heads = _head_norm(x, shape, perm, mean, variance)
        if isinstance(heads, str):
            return heads
        power, floor = const(two), const(eps)
        if power is None or floor is None or power.size != 1 or float(power.item()) != 2 or floor.size != 1:
            return "eps is not a constant, or the power is not 2"
        if not (_per_head(const(gain), heads) and _per_head(const(bias), heads)):
            return "the gain or bias is not a constant per head channel ([H, d] or [d])"
        return None

    def rewrite(
        self,
        op: Any,
        x: ir.Value,
        shape: ir.Value,
        two: ir.Value,
        eps: ir.Value,
        gain: ir.Value,
        bias: ir.Value,
        perm: Any,
        mean: ir.Value,
        variance: ir.Value,
    ) -> Any:
        heads, gamma, floor = _split(x, shape), const(gain), const(eps)
        assert heads is not None and gamma is not None and floor is not None
        epsilon = floor.reshape(()).astype(gamma.dtype)
        y = _standardized(self, op, x, heads, epsilon, gamma, const(bias))
        return op.Transpose(op.Reshape(y, shape), perm=[0, 2, 1, 3])
