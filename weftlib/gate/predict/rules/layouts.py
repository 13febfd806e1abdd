"""The rules on layouts: an image's channels split or put last, an image flattened to tokens and back, data
moved into or out of the batch axis, and a Transpose no head reshape accounts for."""

from __future__ import annotations

from abc import abstractmethod
from enum import StrEnum
from typing import ClassVar

import numpy as np
import onnx

from ...graphs import Builder
from .. import shuffles
from ..formats import NONE, Context
from .base import Check, Fires, Misses, NodeRule
from .examples import image_graph
from .heads import HeadMergeGlued, HeadSplitGlued
from .reading import int_attr, perm, reshape_shapes, sole_consumer

CHANNELS_LAST, CHANNELS_FIRST = [0, 2, 3, 1], [0, 3, 1, 2]
_GLUED = (HeadSplitGlued(), HeadMergeGlued())


def _glued(ctx: Context, node: onnx.NodeProto) -> bool:
    """A Transpose that is part of a glued head split or head merge."""
    return any(rule.fires(ctx, node) for rule in _GLUED)


class ImageChannelSplit(NodeRule):
    """Fires on a Reshape of a rank-4 (NCHW) tensor that splits its channel axis, axis 1 (tokens held as the
    width: [1, C, 1, S] -> [1, H, d, S])."""

    name = "image_channel_split"
    judges = ("Reshape",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        before, after = ctx.io_shapes(node)
        if node.op_type != "Reshape" or before is None or after is None or len(before) != 4:
            return Misses("not a Reshape of a rank-4 tensor (or shapes unknown)")
        if not shuffles.splits_axis(before, after, 1):
            return Misses("it does not split axis 1")
        return Fires(f"{list(before)} -> {list(after)}")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name)
        split = g.node("Reshape", [x, g.ints("heads", [1, 2, 4, 16])], "probe/Reshape")
        g.output(g.conv1x1(split, 2, 2, "probe/post"))
        return g.model()


def is_image_flatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, C, H, W] -> [B, C, H*W]."""
    shapes = reshape_shapes(ctx, node, (4,), (3,))
    return shapes is not None and shapes[0][:2] == shapes[1][:2] and shuffles.merge_last(*shapes)


def is_tokens_unflatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, N, C] -> [B, h, w, C] (the token axis split into the grid)."""
    if (shapes := reshape_shapes(ctx, node, (3,), (4,))) is None:
        return False
    before, after = shapes
    return before[0] == after[0] and before[2] == after[3] and shuffles.splits_axis(before, after, 1)


class _ReshapeThenTranspose(NodeRule):
    """Fires on a Reshape of the family's shape (`reshapes`) whose one consumer is a Transpose with perm `transpose`, and on
    that Transpose."""

    judges = ("Reshape", "Transpose")
    transpose: ClassVar[list[int]]

    @abstractmethod
    def reshapes(self, ctx: Context, node: onnx.NodeProto) -> bool:
        """Whether `node` is the family's Reshape."""

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type == "Transpose":
            source = ctx.producer(node.input[0])
            if perm(node, len(self.transpose)) != self.transpose or source is None or not self.reshapes(ctx, source):
                return Misses(f"not a Transpose {self.transpose} of the Reshape")
            if not sole_consumer(ctx, source, "Transpose"):
                return Misses(f"the Reshape {source.name!r} has other consumers")
            return Fires(f"the Transpose after {source.name!r}")
        after = sole_consumer(ctx, node, "Transpose") if node.output else None
        if not self.reshapes(ctx, node):
            return Misses("not the Reshape")
        if after is None or perm(after, len(self.transpose)) != self.transpose:
            return Misses(f"its one consumer is not a Transpose {self.transpose}")
        before, out = ctx.io_shapes(node)
        return Fires(f"{list(before or ())} -> {list(out or ())}, then Transpose {self.transpose}")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        flat = g.node("Reshape", [x, g.ints("flat", [1, 8, 16])], "probe/Reshape")
        tokens = g.node("Transpose", [flat], "probe/Transpose", perm=[0, 2, 1])
        tokens = g.linear(tokens, 8, 8, "probe/mid")
        grid = g.node("Reshape", [tokens, g.ints("grid", [1, 4, 4, 8])], "probe/Reshape_grid")
        image = g.node("Transpose", [grid], "probe/Transpose_grid", perm=CHANNELS_FIRST)
        g.output(g.conv1x1(image, 8, 8, "probe/post"))
        return g.model()


class ImageToTokens(_ReshapeThenTranspose):
    """Fires on an image flattened to tokens: a Reshape [B, C, H, W] -> [B, C, H*W] whose one consumer is a
    Transpose [0, 2, 1], and on that Transpose."""

    name, transpose = "image_to_tokens", [0, 2, 1]

    def reshapes(self, ctx: Context, node: onnx.NodeProto) -> bool:
        return is_image_flatten(ctx, node)


class TokensToImage(_ReshapeThenTranspose):
    """Fires on tokens put back into an image: a Reshape [B, N, C] -> [B, h, w, C] whose one consumer is a
    Transpose [0, 3, 1, 2], and on that Transpose."""

    name, transpose = "tokens_to_image", CHANNELS_FIRST

    def reshapes(self, ctx: Context, node: onnx.NodeProto) -> bool:
        return is_tokens_unflatten(ctx, node)


class Reshape5dTo4d(NodeRule):
    """Fires on a Reshape from rank 5 to rank 4."""

    name = "reshape_5d_to_4d"
    judges = ("Reshape",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if (shapes := reshape_shapes(ctx, node, (5,), (4,))) is not None:
            return Fires(f"{list(shapes[0])} -> {list(shapes[1])}")
        return Misses("not a Reshape from rank 5 to rank 4 (or shapes unknown)")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        five = g.node("Reshape", [x, g.ints("five", [1, 4, 2, 4, 4])], "probe/Reshape_5d")
        four = g.node("Reshape", [five, g.ints("four", [1, 8, 4, 4])], "probe/Reshape")
        g.output(g.conv1x1(four, 8, 8, "probe/post"))
        return g.model()


class BatchAxis(NodeRule):
    """Fires on a node that moves data into or out of the batch axis: a Concat of data over axis 0, or whose
    output (rank 3 or more) is a batch of more than one; a Tile whose constant repeats change axis 0; a Reshape
    that changes the batch axis of a tensor that has one (rank 3 or more, or a leading 1)."""

    name = "batch_axis"
    judges = ("Reshape", "Concat", "Tile")

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        before, after = ctx.io_shapes(node)
        if node.op_type == "Concat":
            return self._concat(ctx, node, after)
        if node.op_type == "Tile":
            repeats = ctx.const(node.input[1]) if len(node.input) > 1 else None
            if repeats is not None and int(np.ravel(repeats)[0]) != 1:
                return Fires("repeats axis 0 (batch)")
            return Misses("its repeats are not constant, or keep axis 0")
        if node.op_type == "Reshape" and before is not None and after is not None:
            # a rank-2 [S, C] has no batch axis unless its first axis is a batch of one ([1, N], the view reshape)
            has_batch = len(before) >= 3 or before[0] == 1
            if has_batch and shuffles.batch_changed(before, after):
                return Fires(f"{list(before)} -> {list(after)}")
            return Misses("it keeps the batch axis")
        return Misses("not a Concat, a Tile, or a Reshape of known shapes")

    @staticmethod
    def _concat(ctx: Context, node: onnx.NodeProto, after: tuple[int, ...] | None) -> Check:
        if all(ctx.format(n) == NONE for n in node.input if n):
            return Misses("shape arithmetic, not data")
        rank = len(after) if after else 0
        axis = int_attr(node, "axis", 0) % rank if rank else None
        if axis == 0:
            return Fires("concatenates over axis 0 (batch)")
        if after and rank >= 3 and after[0] > 1:
            return Fires(f"a batch of {after[0]} (windows stacked as a batch)")
        return Misses("not over axis 0, and its output is not a batch of more than one")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        tiled = g.node("Tile", [x, g.ints("repeats", [2, 1, 1, 1])], "probe/Tile")
        g.output(g.conv1x1(tiled, 8, 8, "probe/post"))
        return g.model()


def _is_nhwc_flatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, H, W, C] -> [B, H*W, C]: a channels-last map flattened to tokens, channels kept last."""
    if (shapes := reshape_shapes(ctx, node, (4,), (3,))) is None:
        return False
    before, after = shapes
    return before[0] == after[0] and before[3] == after[2] and before[1] * before[2] == after[1]


def _image_transpose(ctx: Context, node: onnx.NodeProto) -> list[int] | None:
    """The perm of a rank-4 Transpose between NCHW and NHWC that no head split, head merge or
    tokens-to-image pair accounts for; None for any other node."""
    before, _ = ctx.io_shapes(node)
    order = perm(node, len(before or ())) if node.op_type == "Transpose" else None
    if before is None or len(before) != 4 or order not in (CHANNELS_LAST, CHANNELS_FIRST):
        return None
    if _glued(ctx, node):
        return None
    source = ctx.producer(node.input[0])
    if order == CHANNELS_FIRST and source is not None and is_tokens_unflatten(ctx, source):
        return None  # tokens_to_image
    return order


class Where(StrEnum):
    """Where an NCHW <-> NHWC Transpose sits."""

    INPUT = "input"  # on a graph input
    TOKENS = "tokens"  # to NHWC, then flattened to tokens by the Reshape after it
    BODY = "body"  # anywhere else


class _ChannelsLast(NodeRule):
    """Fires on a rank-4 Transpose between NCHW and NHWC ([0, 2, 3, 1] or [0, 3, 1, 2]) that is not part of a
    glued head split or merge nor tokens back to an image, where it sits `where`."""

    where: ClassVar[Where]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type == "Reshape":
            return self._flatten(ctx, node)
        order = _image_transpose(ctx, node)
        if order is None:
            return Misses("not a rank-4 Transpose between NCHW and NHWC that no head reshape accounts for")
        at_input = ctx.producer(node.input[0]) is None and node.input[0] not in ctx.graph.constants
        flatten = sole_consumer(ctx, node, "Reshape")
        to_tokens = order == CHANNELS_LAST and flatten is not None and _is_nhwc_flatten(ctx, flatten)
        where = Where.INPUT if at_input else Where.TOKENS if to_tokens else Where.BODY
        if where != self.where:
            return Misses(f"it sits at {where}, not {self.where}")
        return Fires(f"perm {order}" + (", then flattened to tokens" if to_tokens else ""))

    def _flatten(self, ctx: Context, node: onnx.NodeProto) -> Check:
        source = ctx.producer(node.input[0])
        if self.where != Where.TOKENS or source is None or not _is_nhwc_flatten(ctx, node):
            return Misses("not the token flatten of a channels-last image")
        if _image_transpose(ctx, source) != CHANNELS_LAST:
            return Misses("its input is not put channels-last by a Transpose")
        return Fires(f"the token flatten of {source.name!r}")

    def example(self) -> onnx.ModelProto:
        g = Builder(f"channels_last_{self.where}")
        if self.where == Where.INPUT:
            x = g.node("Transpose", [g.input("x", [1, 4, 4, 8])], "probe/Transpose", perm=CHANNELS_FIRST)
            g.output(g.conv1x1(x, 8, 8, "probe/post"))
            return g.model()
        x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "probe/pre")
        nhwc = g.node("Transpose", [x], "probe/Transpose", perm=CHANNELS_LAST)
        if self.where == Where.TOKENS:
            tokens = g.node("Reshape", [nhwc, g.ints("tokens", [1, 16, 8])], "probe/Reshape")
            g.output(g.linear(tokens, 8, 8, "probe/post"))
            return g.model()
        scaled = g.node("Mul", [nhwc, g.const("k", np.full([8], 2.0))], "probe/Mul")
        back = g.node("Transpose", [scaled], "probe/Transpose_back", perm=CHANNELS_FIRST)
        g.output(g.conv1x1(back, 8, 8, "probe/post"))
        return g.model()


class ChannelsLastTranspose(_ChannelsLast):
    """Fires on a Transpose between NCHW and NHWC inside the graph: not on a graph input, not followed by the
    flatten to tokens, not part of a glued head split or merge, not tokens back to an image."""

    name, where = "channels_last_transpose", Where.BODY
    judges = ("Transpose",)


class ImageNhwcToTokens(_ChannelsLast):
    """Fires on a Transpose [0, 2, 3, 1] that puts an image channels-last whose one consumer is the Reshape
    [B, H, W, C] -> [B, H*W, C] flattening it to tokens, and on that Reshape."""

    name, where = "image_nhwc_to_tokens", Where.TOKENS
    judges = ("Transpose", "Reshape")


class InputChannelsLast(_ChannelsLast):
    """Fires on a Transpose between NCHW and NHWC that reads a graph input (a channels-last image put
    channels-first at the start)."""

    name, where = "input_channels_last", Where.INPUT
    judges = ("Transpose",)


class LoneTranspose0213(NodeRule):
    """Fires on a Transpose with perm [0, 2, 1, 3] that is not part of a glued head split or head merge."""

    name = "lone_transpose_0213"
    judges = ("Transpose",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        before, _ = ctx.io_shapes(node)
        if node.op_type != "Transpose" or perm(node, len(before or ())) != [0, 2, 1, 3]:
            return Misses("not a Transpose [0, 2, 1, 3]")
        if _glued(ctx, node):
            return Misses("glued to a head split or merge")
        return Fires("perm [0, 2, 1, 3], not glued to a head split or merge")

    def example(self) -> onnx.ModelProto:
        g, x = image_graph(self.name, c=8, h=4, w=4)
        t = g.node("Transpose", [x], "probe/Transpose", perm=[0, 2, 1, 3])
        g.output(g.conv1x1(t, 4, 4, "probe/post"))
        return g.model()
