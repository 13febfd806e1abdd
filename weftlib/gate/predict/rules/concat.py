"""The rules on Concat: by the formats of what it joins and the axis it joins over, and RoPE's rotate_half,
Concat(-x2, x1), which the parser reads as a pattern of its own."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx

from ....onnx_core.walk import attribute
from ..formats import NONE, TRACKED, Context
from .base import Check, Fires, Misses, NodeRule
from .examples import image_graph, tokens_graph
from .layouts import BatchAxis
from .reading import int_attr

_BATCH_AXIS = BatchAxis()


def rotate_half(ctx: Context, node: onnx.NodeProto) -> tuple[bool, bool]:
    """(is RoPE's rotate_half: Concat(Neg(x2), x1) of the two halves of one tensor's last axis,
    is it partial: that tensor is itself a slice of a wider one)."""
    concat = node
    if node.op_type == "Neg":
        users = ctx.consumers(node.output[0])
        if len(users) != 1 or users[0].op_type != "Concat":
            return False, False
        concat = users[0]
    if concat.op_type != "Concat" or len(concat.input) != 2:
        return False, False
    neg = ctx.producer(concat.input[0])
    other = ctx.producer(concat.input[1])
    if neg is None or neg.op_type != "Neg" or other is None or other.op_type != "Slice":
        return False, False
    second = ctx.producer(neg.input[0])
    if second is None or second.op_type != "Slice" or second.input[0] != other.input[0]:
        return False, False
    source = ctx.producer(other.input[0])
    partial = source is not None and source.op_type == "Slice"
    return True, partial


def _other_pattern(ctx: Context, node: onnx.NodeProto) -> Misses | None:
    """Why a Concat is judged by another rule (the batch axis, rotate_half), or None."""
    if _BATCH_AXIS.fires(ctx, node):
        return Misses("it moves the batch axis (batch_axis)")
    if rotate_half(ctx, node)[0]:
        return Misses("it is RoPE's rotate_half")
    return None


class _ConcatTracked(NodeRule):
    """Fires on a Concat (not over the batch axis, not rotate_half) of inputs with a tracked format, and
    constants, over the height axis of a rank-4 output or not (`height`)."""

    judges = ("Concat",)
    height: ClassVar[bool]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (missed := _other_pattern(ctx, node)) is not None:
            return missed
        formats = [ctx.format(n) for n in node.input if n]
        shape = ctx.shape(node.output[0])
        height = shape is not None and len(shape) == 4 and int_attr(node, "axis", 0) % 4 == 2
        if height != self.height:
            return Misses("over the height axis of an image" if height else "not over the height axis of an image")
        if not (TRACKED in formats and set(formats) <= {TRACKED, NONE}):
            return Misses(f"its inputs' formats are {sorted(set(formats))}")
        where = "the height axis of an image" if height else f"axis {attribute(node, 'axis', 0)}"
        return Fires(f"over {where}, inputs with a tracked format" + (" and constants" if NONE in formats else ""))


class ConcatTracked(_ConcatTracked):
    """Fires on a Concat of inputs with a tracked format (and constants, e.g. a CLS token), over an axis that is
    not the batch axis nor the height of an image, and that is not RoPE's rotate_half."""

    name, height = "concat_tracked", False

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph(self.name)
        joined = g.node("Concat", [g.const("cls", np.zeros((1, 1, 16))), x], "probe/Concat", axis=1)
        g.output(g.linear(joined, 16, 16, "probe/post"))
        return g.model()


class ConcatImageHeight(_ConcatTracked):
    """Fires on a Concat over axis 2 (the height) of rank-4 images with a tracked format (and constants), not
    over the batch axis."""

    name, height = "concat_image_height", True

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        top = g.node("Slice", [x, g.ints("t0", [0]), g.ints("t1", [1]), g.ints("ta", [2])], "probe/Slice")
        g.output(g.conv1x1(g.node("Concat", [top, x], "probe/Concat", axis=2), 8, 8, "probe/post"))
        return g.model()


class ConcatNoFormat(NodeRule):
    """Fires on a Concat none of whose inputs has a format: shape arithmetic or constants only."""

    name = "concat_no_format"
    judges = ("Concat",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (missed := _other_pattern(ctx, node)) is not None:
            return missed
        if {ctx.format(n) for n in node.input if n} != {NONE}:
            return Misses("an input is data")
        return Fires("no input has a format (shape arithmetic or constants only)")

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph("concat_none")
        shape = g.node("Shape", [x], "probe/Shape")
        first = g.node("Gather", [shape, g.ints("zero", [0])], "probe/Gather", axis=0)
        target = g.node("Concat", [first, g.ints("rest", [8, 16])], "probe/Concat", axis=0)
        g.output(g.linear(g.node("Reshape", [x, target], "probe/Reshape"), 16, 16, "probe/post"))
        return g.model()


class _RotateHalf(NodeRule):
    """Fires on RoPE's rotate_half, Concat(Neg(x2), x1) of the two halves of one tensor, on its Neg and its
    Concat, where that tensor is a slice of a wider one or not (`partial`)."""

    judges = ("Neg", "Concat")
    partial: ClassVar[bool]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        found, partial = rotate_half(ctx, node)
        if not found:
            return Misses("not rotate_half, Concat(Neg(x2), x1) of the halves of one tensor")
        if partial != self.partial:
            return Misses("over a slice of the head dim" if partial else "over the whole head dim")
        return Fires(
            "rotate_half (Neg + Concat) over a slice of the head dim" if partial else "rotate_half (Neg + Concat)"
        )

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph(self.name)
        width = 8 if self.partial else 16
        if self.partial:
            x = g.node("Slice", [x, g.ints("p0", [0]), g.ints("p1", [width]), g.ints("pa", [2])], "probe/Slice_rot")
        half = width // 2
        x1 = g.node("Slice", [x, g.ints("a0", [0]), g.ints("a1", [half]), g.ints("ax", [2])], "probe/Slice_1")
        x2 = g.node("Slice", [x, g.ints("b0", [half]), g.ints("b1", [width]), g.ints("bx", [2])], "probe/Slice_2")
        rot = g.node("Concat", [g.node("Neg", [x2], "probe/Neg"), x1], "probe/Concat", axis=-1)
        y = g.node(
            "Add",
            [
                g.node("Mul", [x, g.const("cos", np.ones(width))], "probe/Mul_cos"),
                g.node("Mul", [rot, g.const("sin", np.ones(width))], "probe/Mul_sin"),
            ],
            "probe/Add",
        )
        g.output(g.linear(y, width, width, "probe/post"))
        return g.model()


class RotateHalf(_RotateHalf):
    """Fires on RoPE's rotate_half over the whole head dim: Concat(Neg(x2), x1) of the two halves of a tensor
    that is not itself a slice, on the Neg and the Concat."""

    name, partial = "rotate_half", False


class RotateHalfPartial(_RotateHalf):
    """Fires on RoPE's rotate_half over a slice of the head dim (partial rotary): Concat(Neg(x2), x1) of the
    halves of a tensor that is itself a Slice, on the Neg and the Concat."""

    name, partial = "rotate_half_partial", True
