"""The rules on Softmax and LayerNormalization, which normalise over one axis: the parser needs it to be the
last, and needs the input's format (a refused shuffle upstream leaves none: UnsupportedSoftmaxLayerError)."""

from __future__ import annotations

import numpy as np
import onnx

from ....onnx_core.walk import attribute
from ..formats import LOST, TRACKED, Context
from .base import Check, Fires, Misses, NodeRule
from .examples import image_graph, tokens_graph
from .reading import int_attr


def _softmax_over_last(ctx: Context, node: onnx.NodeProto) -> bool:
    """Whether a Softmax normalises its input's last axis (its default axis is 1 before opset 13)."""
    rank = len(ctx.shape(node.input[0]) or ())
    axis = int_attr(node, "axis", -1 if (ctx.graph.opset or 13) >= 13 else 1)
    return bool(rank) and axis % rank == rank - 1


def _softmax_example(graph: str, axis: int) -> onnx.ModelProto:
    """Attention over tokens, its Softmax over `axis`."""
    g, x = tokens_graph(graph)
    s = g.node("MatMul", [x, g.node("Transpose", [x], "probe/Transpose", perm=[0, 2, 1])], "probe/MatMul")
    p = g.node("Softmax", [s], "probe/Softmax", axis=axis)
    g.output(g.linear(g.node("MatMul", [p, x], "probe/MatMul_1"), 16, 16, "probe/post"))
    return g.model()


class SoftmaxTrackedLastAxis(NodeRule):
    """Fires on a Softmax over the last axis of an input whose format the parser tracks."""

    name = "softmax_tracked_last_axis"
    judges = ("Softmax",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if not _softmax_over_last(ctx, node):
            return Misses("not over the last axis (or the rank is unknown)")
        if ctx.format(node.input[0]) != TRACKED:
            return Misses(f"its input's format is {ctx.format(node.input[0])}")
        return Fires("last axis, input format tracked")

    def example(self) -> onnx.ModelProto:
        return _softmax_example("softmax_tracked", axis=-1)


class SoftmaxUntracked(NodeRule):
    """Fires on a Softmax over the last axis whose input lost its format upstream (after a refused shuffle)."""

    name = "softmax_untracked"
    judges = ("Softmax",)
    downstream = True

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if not _softmax_over_last(ctx, node):
            return Misses("not over the last axis (or the rank is unknown)")
        if ctx.format(node.input[0]) != LOST:
            return Misses(f"its input's format is {ctx.format(node.input[0])}, not lost")
        return Fires("last axis, but its input lost its format upstream (a refused shuffle)")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=1, w=16)
        heads = g.node("Reshape", [x, g.ints("heads", [1, 2, 4, 16])], "probe/Reshape")
        qt = g.node("Transpose", [heads], "probe/Transpose", perm=[0, 1, 3, 2])
        s = g.node("MatMul", [qt, heads], "probe/MatMul")
        p = g.node("Softmax", [s], "probe/Softmax", axis=-1)
        g.output(g.node("MatMul", [p, qt], "probe/MatMul_1"))
        return g.model()


class SoftmaxNotLastAxis(NodeRule):
    """Fires on a Softmax over another axis than the last (or over an input of unknown rank)."""

    name = "softmax_not_last_axis"
    judges = ("Softmax",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if _softmax_over_last(ctx, node):
            return Misses("over the last axis")
        return Fires(f"axis {attribute(node, 'axis', -1)} of a rank-{len(ctx.shape(node.input[0]) or ())} input")

    def example(self) -> onnx.ModelProto:
        return _softmax_example("softmax_not_last", axis=1)


def _layernorm_rank(ctx: Context, node: onnx.NodeProto) -> tuple[int, bool]:
    """A LayerNormalization's input rank (0: unknown) and whether it normalises from the last axis."""
    rank = len(ctx.shape(node.input[0]) or ())
    return rank, bool(rank) and int_attr(node, "axis", -1) % rank == rank - 1


def _concat_feeding(ctx: Context, node: onnx.NodeProto) -> onnx.NodeProto | None:
    source = ctx.producer(node.input[0])
    return source if source is not None and source.op_type == "Concat" else None


def _layernorm_example(graph: str, *, concat: bool = False, view: bool = False, axis: int = -1) -> onnx.ModelProto:
    """A LayerNormalization of tokens over `axis`, fed by a Concat with a CLS token, or by a view Reshape."""
    g, x = tokens_graph(graph)
    if concat:
        x = g.node("Concat", [x, g.const("cls", np.zeros((1, 1, 16)))], "probe/Concat", axis=1)
    if view:  # a row viewed as a batch of two (batch_axis, as reshape-as-view): the format is lost
        x = g.node("Reshape", [x, g.ints("row", [1, 128])], "probe/Reshape_row")
        x = g.node("Reshape", [x, g.ints("view", [2, 4, 16])], "probe/Reshape_view")
    shape = (16,) if axis == -1 else (8, 16)
    n = g.node(
        "LayerNormalization",
        [x, g.const("ln.weight", np.ones(shape)), g.const("ln.bias", np.zeros(shape))],
        "probe/LayerNormalization",
        axis=axis,
    )
    g.output(g.node("Mul", [n, g.const("k", 2.0)], "probe/post_Mul"))
    return g.model()


class _LayerNormOverLast(NodeRule):
    """A LayerNormalization over the last axis, not fed by a Concat: the family of the two format rules."""

    judges = ("LayerNormalization",)

    def over_last(self, ctx: Context, node: onnx.NodeProto) -> Misses | None:
        """Why the node is not in the family, or None when it is."""
        _, last = _layernorm_rank(ctx, node)
        if not last:
            return Misses("not over the last axis (or the rank is unknown)")
        if _concat_feeding(ctx, node) is not None:
            return Misses("fed by a Concat")
        return None


class LayerNormTracked(_LayerNormOverLast):
    """Fires on a LayerNormalization over the last axis of an input whose format the parser tracks, not fed by
    a Concat."""

    name = "layernorm_tracked"

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (missed := self.over_last(ctx, node)) is not None:
            return missed
        if ctx.format(node.input[0]) != TRACKED:
            return Misses(f"its input's format is {ctx.format(node.input[0])}")
        return Fires(f"last axis of a rank-{_layernorm_rank(ctx, node)[0]} input whose format is tracked")

    def example(self) -> onnx.ModelProto:
        return _layernorm_example("layernorm_tracked")


class LayerNormUntracked(_LayerNormOverLast):
    """Fires on a LayerNormalization over the last axis, not fed by a Concat, whose input lost its format
    upstream (after a refused shuffle)."""

    name = "layernorm_untracked"
    downstream = True

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (missed := self.over_last(ctx, node)) is not None:
            return missed
        if ctx.format(node.input[0]) != LOST:
            return Misses(f"its input's format is {ctx.format(node.input[0])}, not lost")
        return Fires("its input lost its format upstream")

    def example(self) -> onnx.ModelProto:
        return _layernorm_example("layernorm_lost", view=True)


class LayerNormFedByConcat(NodeRule):
    """Fires on a LayerNormalization whose input is the output of a Concat."""

    name = "layernorm_fed_by_concat"
    judges = ("LayerNormalization",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        source = _concat_feeding(ctx, node)
        return Fires(f"its input is Concat {source.name!r}") if source is not None else Misses("not fed by a Concat")

    def example(self) -> onnx.ModelProto:
        return _layernorm_example("layernorm_concat", concat=True)


class LayerNormNotLastAxis(NodeRule):
    """Fires on a LayerNormalization over another axis than the last (or over an input of unknown rank)."""

    name = "layernorm_not_last_axis"
    judges = ("LayerNormalization",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        rank, last = _layernorm_rank(ctx, node)
        return (
            Misses("over the last axis")
            if last
            else Fires(f"axis {attribute(node, 'axis', -1)} of a rank-{rank} input")
        )

    def example(self) -> onnx.ModelProto:
        return _layernorm_example("layernorm_not_last", axis=1)
