"""The rules on reductions (ReduceSum, ReduceMean, ReduceMax, ...): the parser decides by the axes reduced,
whether they are kept, and the input's rank and format."""

from __future__ import annotations

import numpy as np
import onnx

from ..formats import REDUCTIONS, SUMMING, TRACKED, Context
from .base import Check, Fires, Misses, NodeRule
from .examples import image_graph, tokens_graph
from .reading import int_attr, ints_attr


def _axes(ctx: Context, node: onnx.NodeProto) -> list[int] | None:
    """A reduction's axes (attribute, or input from opset 13/18 on), normalised; None: all axes."""
    rank = len(ctx.shape(node.input[0]) or ())
    axes = ints_attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        value = ctx.const(node.input[1])
        axes = None if value is None else [int(a) for a in np.ravel(value)]
    if axes is None:
        return None
    return sorted(int(a) % rank for a in axes) if rank else list(axes)


def _reduction(ctx: Context, node: onnx.NodeProto) -> tuple[int, list[int] | None, int] | None:
    """A reduction's input rank, its axes and its keepdims; None when the input's shape is unknown."""
    shape = ctx.shape(node.input[0])
    if shape is None:
        return None
    return len(shape), _axes(ctx, node), int_attr(node, "keepdims", 1)


_UNKNOWN = Misses("its input's shape is unknown")


def _channel_axis(rank: int) -> int:
    """The axis the parser holds features on: 1 in an NCHW image, the last in tokens [B, S, C] or [S, C]."""
    return 1 if rank == 4 else rank - 1


def _sum_example(graph: str, axis: int, keep: int) -> onnx.ModelProto:
    """A ReduceSum of tokens over `axis` (given as an input), then a Mul."""
    g, x = tokens_graph(graph)
    r = g.node("ReduceSum", [x, g.ints("axes", [axis])], "probe/ReduceSum", keepdims=keep)
    g.output(g.node("Mul", [r, g.const("k", 2.0)], "probe/post_Mul"))
    return g.model()


class _FeaturesAxis(NodeRule):
    """Fires on a reduction over the features axis alone (1 of an image, the last of tokens) with keepdims, of
    an input whose format the parser tracks."""

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (read := _reduction(ctx, node)) is None:
            return _UNKNOWN
        rank, axes, keep = read
        if not axes or axes != [_channel_axis(rank)] or keep != 1:
            return Misses(f"axes {axes}, keepdims {keep}: not the features axis {_channel_axis(rank)} kept")
        if ctx.format(node.input[0]) != TRACKED:
            return Misses(f"its input's format is {ctx.format(node.input[0])}")
        return Fires(f"axis {axes[0]} (features) of a rank-{rank} input, keepdims")


class ReduceChannelAxis(_FeaturesAxis):
    """Fires on a summing reduction (ReduceSum, ReduceMean, ReduceL2, ReduceSumSquare) over the features axis
    alone (1 of an image, the last of tokens) with keepdims, of an input with a tracked format."""

    name = "reduce_channel_axis"
    judges = SUMMING

    def example(self) -> onnx.ModelProto:
        return _sum_example("reduce_channel", axis=-1, keep=1)


class ReduceMaxChannelAxis(_FeaturesAxis):
    """Fires on a ReduceMax or ReduceMin over the features axis alone (1 of an image, the last of tokens) with
    keepdims, of an input with a tracked format."""

    name = "reduce_max_channel_axis"
    judges = ("ReduceMax", "ReduceMin")

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph("reduce_max_channel")
        r = g.node("ReduceMax", [x], "probe/ReduceMax", axes=[-1], keepdims=1)
        g.output(g.node("Sub", [x, r], "probe/post_Sub"))
        return g.model()


class ReduceMinus2Dropped(NodeRule):
    """Fires on a reduction over axis -2 alone of an input of rank 3 or more, without keepdims."""

    name = "reduce_minus2_dropped"
    judges = REDUCTIONS

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (read := _reduction(ctx, node)) is None:
            return _UNKNOWN
        rank, axes, keep = read
        if rank >= 3 and axes == [rank - 2] and keep == 0:
            return Fires("axis -2, keepdims 0")
        return Misses(f"axes {axes} of rank {rank}, keepdims {keep}")

    def example(self) -> onnx.ModelProto:
        return _sum_example("reduce_minus2_dropped", axis=-2, keep=0)


class ReduceLastAxisRank4(NodeRule):
    """Fires on a reduction over axis 3 alone (the last) of a rank-4 input, kept or not: the head dim of
    [B, H, S, d] after a head split's Transpose (QK-norm), or an image's width."""

    name = "reduce_last_axis_rank4"
    judges = REDUCTIONS

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (read := _reduction(ctx, node)) is None:
            return _UNKNOWN
        rank, axes, _ = read
        if rank == 4 and axes == [3]:
            return Fires("axis 3 (the last) of a rank-4 input")
        return Misses(f"axes {axes} of rank {rank}")

    def example(self) -> onnx.ModelProto:
        """QK-norm after the head Transpose: RMS over the head dim of [B, H, S, d]."""
        g, x = tokens_graph("reduce_last_rank4")
        heads = g.node("Reshape", [x, g.ints("heads", [1, 8, 4, 4])], "probe/Reshape")
        heads = g.node("Transpose", [heads], "probe/Transpose", perm=[0, 2, 1, 3])
        sq = g.node("Mul", [heads, heads], "probe/Mul_sq")
        ms = g.node("ReduceMean", [sq], "probe/ReduceMean", axes=[-1], keepdims=1)
        normed = g.node("Div", [heads, g.node("Sqrt", [ms], "probe/Sqrt")], "probe/Div")
        back = g.node("Transpose", [normed], "probe/Transpose_back", perm=[0, 2, 1, 3])
        tokens = g.node("Reshape", [back, g.ints("tokens", [1, 8, 16])], "probe/Reshape_back")
        g.output(g.linear(tokens, 16, 16, "probe/post"))
        return g.model()


class ReduceSpatialAxes(NodeRule):
    """Fires on a reduction over axes 2 and 3 (height and width) of a rank-4 image, with keepdims."""

    name = "reduce_spatial_axes"
    judges = REDUCTIONS

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (read := _reduction(ctx, node)) is None:
            return _UNKNOWN
        rank, axes, keep = read
        if rank == 4 and axes == [2, 3] and keep == 1:
            return Fires("axes [2, 3] of an image, keepdims")
        return Misses(f"axes {axes} of rank {rank}, keepdims {keep}")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        r = g.node("ReduceMax", [x], "probe/ReduceMax", axes=[2, 3], keepdims=1)
        g.output(g.conv1x1(r, 8, 8, "probe/post"))
        return g.model()
