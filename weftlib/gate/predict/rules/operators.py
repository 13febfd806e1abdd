"""The rules on single operators the parser decides by one property: a Gather's index, whether an Erf is
inside the exact GELU, whether a OneHot is in the chain the parser knows, a Conv's rank, a Tile's axis."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx

from ...graphs import Builder
from ..formats import Context
from .base import Check, Fires, Misses, NodeRule
from .examples import image_graph, tokens_graph
from .layouts import BatchAxis
from .reading import int_attr, ints_attr, perm, sole_consumer

_BATCH_AXIS = BatchAxis()


class _Gather(NodeRule):
    """Fires on a Gather whose index is a constant, or is computed (`constant`)."""

    judges = ("Gather",)
    constant: ClassVar[bool]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if len(node.input) < 2:
            return Misses("no index input")
        if (node.input[1] in ctx.graph.constants) != self.constant:
            return Misses("its index is computed" if self.constant else "its index is a constant")
        if self.constant:
            return Fires("a constant index")
        source = ctx.producer(node.input[1])
        return Fires(f"an index computed by {source.op_type if source is not None else 'a graph input'}")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        if self.constant:
            index = g.ints("index", [0, 2, 4, 6])
            out = 4
        else:
            mean = g.node("ReduceMean", [x], "probe/index_ReduceMean", axes=[0, 2, 3], keepdims=0)
            index = g.node("ArgMax", [mean], "probe/ArgMax", axis=0, keepdims=1)
            out = 1
        picked = g.node("Gather", [x, index], "probe/Gather", axis=1)
        g.output(g.conv1x1(picked, out, 4, "probe/post"))
        return g.model()


class GatherConstantIndex(_Gather):
    """Fires on a Gather whose index is a constant (an initializer or a Constant node)."""

    name, constant = "gather_constant_index", True


class GatherComputedIndex(_Gather):
    """Fires on a Gather whose index is computed in the graph, or is a graph input."""

    name, constant = "gather_computed_index", False


def _in_gelu(ctx: Context, node: onnx.NodeProto) -> bool:
    """An Erf fed by a Div or Mul, read only by an Add that a Mul reads: x * 0.5 * (1 + erf(x / sqrt 2))."""
    source = ctx.producer(node.input[0]) if node.input else None
    users = ctx.consumers(node.output[0])
    return (
        source is not None
        and source.op_type in ("Div", "Mul")
        and len(users) == 1
        and users[0].op_type == "Add"
        and any(u.op_type == "Mul" for u in ctx.consumers(users[0].output[0]))
    )


class _Erf(NodeRule):
    """Fires on an Erf inside the exact GELU, or outside it (`in_gelu`)."""

    judges = ("Erf",)
    in_gelu: ClassVar[bool]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        inside = _in_gelu(ctx, node)
        if inside != self.in_gelu:
            return Misses("inside an exact GELU" if inside else "not inside an exact GELU")
        return Fires("x * 0.5 * (1 + erf(x / sqrt 2))" if inside else "not inside an exact GELU")

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph(self.name)
        y = g.gelu(x, "probe/gelu") if self.in_gelu else g.node("Erf", [x], "probe/Erf")
        g.output(g.linear(y, 16, 16, "probe/post"))
        return g.model()


class ErfInGelu(_Erf):
    """Fires on an Erf inside the exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)): fed by a Div or Mul, read only
    by an Add that a Mul reads."""

    name, in_gelu = "erf_in_gelu", True


class ErfStandalone(_Erf):
    """Fires on an Erf that is not inside the exact GELU (see `erf_in_gelu`)."""

    name, in_gelu = "erf_standalone", False


def _onehot_chain(ctx: Context, node: onnx.NodeProto) -> bool:
    """OneHot(axis -1) -> Transpose(perm [0, 4, 2, 3, 1]) -> Squeeze(axis 4 or -1), nothing between
    (the DFC's `is_supported_one_hot`, as weftspun/rf-detr-cpp scripts/gate_onnx_device.py records it)."""
    if int_attr(node, "axis", -1) != -1:
        return False
    transpose = sole_consumer(ctx, node, "Transpose")
    if transpose is None or perm(transpose, 5) != [0, 4, 2, 3, 1]:
        return False
    squeeze = sole_consumer(ctx, transpose, "Squeeze")
    if squeeze is None:
        return False
    axes = ctx.const(squeeze.input[1]) if len(squeeze.input) > 1 else ints_attr(squeeze, "axes")
    return axes is not None and [int(a) for a in np.ravel(axes)] in ([4], [-1])


class OneHotPattern(NodeRule):
    """Fires on the chain OneHot(axis -1) -> Transpose [0, 4, 2, 3, 1] -> Squeeze(axis 4 or -1) with nothing
    between (the DFC's `is_supported_one_hot`), on each of its three nodes."""

    name = "onehot_pattern"
    judges = ("OneHot", "Transpose", "Squeeze")

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type == "OneHot":
            chain = _onehot_chain(ctx, node)
            return Fires("OneHot(-1) -> Transpose -> Squeeze") if chain else Misses("not the chain it heads")
        head = ctx.producer(node.input[0])  # the chain's Transpose and Squeeze, judged with it
        if node.op_type == "Squeeze" and head is not None and head.op_type == "Transpose":
            head = ctx.producer(head.input[0])
        if head is None or head.op_type != "OneHot" or not _onehot_chain(ctx, head):
            return Misses("not after a OneHot that heads the chain")
        return Fires(f"the end of the OneHot chain from {head.name!r}")

    def example(self) -> onnx.ModelProto:
        return _onehot_example(self.name, cast=False)


class OneHotBroken(NodeRule):
    """Fires on a OneHot that does not head the chain OneHot(axis -1) -> Transpose [0, 4, 2, 3, 1] ->
    Squeeze(axis 4 or -1)."""

    name = "onehot_broken"
    judges = ("OneHot",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type != "OneHot":
            return Misses("not a OneHot")
        if _onehot_chain(ctx, node):
            return Misses("it heads the chain")
        return Fires("not the chain OneHot(-1) -> Transpose -> Squeeze")

    def example(self) -> onnx.ModelProto:
        return _onehot_example(self.name, cast=True)


def _onehot_example(graph: str, cast: bool) -> onnx.ModelProto:
    """The OneHot chain, broken by a Cast between the OneHot and its Transpose when `cast`."""
    g = Builder(graph)
    index = g.input("index", [1, 1, 4, 4], onnx.TensorProto.INT64)
    hot = g.node("OneHot", [index, g.ints("depth", [8]), g.const("values", [0.0, 1.0])], "probe/OneHot", axis=-1)
    if cast:
        hot = g.node("Cast", [hot], "probe/Cast", to=onnx.TensorProto.FLOAT)
    t = g.node("Transpose", [hot], "probe/Transpose", perm=[0, 4, 2, 3, 1])
    sq = g.node("Squeeze", [t, g.ints("axes", [4])], "probe/Squeeze")
    g.output(g.conv1x1(sq, 8, 4, "probe/post"))
    return g.model()


class _ConvRank(NodeRule):
    """Fires on a Conv whose input has rank `rank`."""

    judges = ("Conv",)
    rank: ClassVar[int]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        shape = ctx.shape(node.input[0])
        if shape is None or len(shape) != self.rank:
            return Misses(f"its input is not of rank {self.rank} (or its shape is unknown)")
        return Fires(f"a rank-{self.rank} input {list(shape)}")

    def example(self) -> onnx.ModelProto:
        rank = self.rank
        g = Builder(self.name)
        x = g.input("x", [1, 4] + [4] * (rank - 2))
        w = g.const("w", np.full([4, 4] + [3] * (rank - 2), 0.1))
        y = g.node("Conv", [x, w], "probe/Conv", kernel_shape=[3] * (rank - 2), pads=[1] * (2 * (rank - 2)))
        g.output(g.node("Mul", [y, g.const("k", 2.0)], "probe/post_Mul"))
        return g.model()


class ConvRank3(_ConvRank):
    """Fires on a 1-D Conv: its input has rank 3."""

    name, rank = "conv_rank_3", 3


class ConvRank5(_ConvRank):
    """Fires on a 3-D Conv: its input has rank 5."""

    name, rank = "conv_rank_5", 5


class TileNonBatch(NodeRule):
    """Fires on a Tile that `batch_axis` does not cover: its repeats are not constant, or keep axis 0."""

    name = "tile_non_batch"
    judges = ("Tile",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if _BATCH_AXIS.fires(ctx, node):
            return Misses("it repeats axis 0 (batch_axis)")
        return Fires("repeats a non-batch axis")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=4, h=4, w=4)
        tiled = g.node("Tile", [x, g.ints("repeats", [1, 2, 1, 1])], "probe/Tile")
        g.output(g.conv1x1(tiled, 8, 4, "probe/post"))
        return g.model()
