"""The rules on attention's head reshapes: tokens split into heads, and merged back, with or without the
Transpose the parser converts them with (one format conversion when the two are glued)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

import numpy as np
import onnx

from .. import shuffles
from ..formats import SLICING, Context
from .base import Check, Fires, Misses, NodeRule
from .examples import tokens_graph
from .reading import reshape_shapes, sole_consumer


class SplitPath(StrEnum):
    """How a head split's output reaches its Transpose."""

    GLUED = "glued"  # the Transpose is its one consumer
    SLICED = "sliced"  # through Split/Slice/Gather/Squeeze only
    INTERRUPTED = "interrupted"  # through arithmetic: a per-head norm, RoPE
    NONE = "none"  # no Transpose within reach


def _unit_batch(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    """`after` without the unit batch axis a Reshape adds to a rank-2 `before` ([S, C] -> [1, S, H, d], as onnxsim
    writes a Gemm's output back into tokens); else `after` as it is."""
    return after[1:] if len(before) == 2 and len(after) >= 4 and after[0] == 1 else after


def is_head_split(ctx: Context, node: onnx.NodeProto) -> bool:
    """A Reshape of a token tensor ([B, S, C] or [S, C]) that factors its last axis in two: [B, S, H, d] (from
    [S, C], the unit batch may come back with it: [1, S, H, d])."""
    shapes = reshape_shapes(ctx, node, (2, 3), (3, 4))
    if shapes is None:
        return False
    before, after = shapes[0], _unit_batch(*shapes)
    return (
        len(after) == len(before) + 1
        and shuffles.split_last(before, after)
        and (source := ctx.producer(node.input[0])) is not None
        and source.op_type != "Transpose"
    )


def is_head_merge(ctx: Context, node: onnx.NodeProto) -> bool:
    """A Reshape that merges the last two axes back into one: [B, S, H, d] -> [B, S, C] (or, the unit batch
    dropped with it, [1, S, H, d] -> [S, C])."""
    shapes = reshape_shapes(ctx, node, (3, 4), (2, 3))
    if shapes is None:
        return False
    after, before = shapes[1], _unit_batch(shapes[1], shapes[0])
    return len(after) == len(before) - 1 and shuffles.merge_last(before, after)


def split_path(ctx: Context, node: onnx.NodeProto, limit: int = 40) -> SplitPath:
    """How the head split `node` reaches its Transpose, looking `limit` nodes ahead."""
    if sole_consumer(ctx, node, "Transpose") is not None:
        return SplitPath.GLUED
    found: set[SplitPath] = set()
    seen: set[tuple[str, bool]] = set()
    frontier = [(n, False) for n in ctx.consumers(node.output[0])]
    while frontier and len(seen) < limit:
        user, crossed = frontier.pop()
        if (user.name, crossed) in seen:
            continue
        seen.add((user.name, crossed))
        if user.op_type == "Transpose":
            found.add(SplitPath.INTERRUPTED if crossed else SplitPath.SLICED)
            continue
        if user.op_type == "MatMul":  # the attention product: no head Transpose came before it
            continue
        crossed_now = crossed or user.op_type not in SLICING
        frontier += [(n, crossed_now) for out in user.output for n in ctx.consumers(out)]
    return SplitPath.INTERRUPTED if SplitPath.INTERRUPTED in found else SplitPath.SLICED if found else SplitPath.NONE


def _head_split_example(path: SplitPath) -> onnx.ModelProto:
    """Tokens split into heads, reaching a Transpose (and back) by `path`, then merged."""
    g, x = tokens_graph(f"head_split_{path}")
    split = g.node("Reshape", [x, g.ints("heads", [1, 8, 4, 4])], "probe/Reshape")
    if path == SplitPath.INTERRUPTED:
        split = g.node("Mul", [split, g.const("gamma", np.full([4], 2.0))], "probe/per_head_Mul")
    if path == SplitPath.SLICED:
        split = g.node("Slice", [split, g.ints("st", [0]), g.ints("en", [4]), g.ints("ax", [2])], "probe/Slice")
    if path != SplitPath.NONE:
        split = g.node("Transpose", [split], "probe/Transpose", perm=[0, 2, 1, 3])
        split = g.node("Transpose", [split], "probe/Transpose_back", perm=[0, 2, 1, 3])
    merged = g.node("Reshape", [split, g.ints("tokens", [1, 8, 16])], "probe/Reshape_back")
    g.output(g.linear(merged, 16, 16, "probe/post"))
    return g.model()


class HeadSplitGlued(NodeRule):
    """Fires on a head split (a Reshape of tokens [B, S, C] or [S, C] that splits the last axis in two, not fed
    by a Transpose; from [S, C] the unit batch may come back, [1, S, H, d]) whose one consumer is a Transpose,
    and on that Transpose. The rank-2 form parsed on DFC 5.3.0 (qvl-block-unbatched); the unit batch added back
    is onnxsim's form in the zoo's ViTs and text encoders (rebuilt by `weftlib.rebuild`), between the two."""

    name = "head_split_glued"
    judges = ("Reshape", "Transpose")

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type == "Transpose":
            source = ctx.producer(node.input[0])
            if source is not None and is_head_split(ctx, source) and sole_consumer(ctx, source, "Transpose"):
                return Fires(f"the Transpose of head split {source.name!r}")
            return Misses("its input is not a head split read by this Transpose alone")
        if not is_head_split(ctx, node):
            return Misses("not a head split")
        if split_path(ctx, node) != SplitPath.GLUED:
            return Misses("its one consumer is not a Transpose")
        before, after = ctx.io_shapes(node)
        return Fires(f"{list(before or ())} -> {list(after or ())}, then its Transpose")

    def example(self) -> onnx.ModelProto:
        return _head_split_example(SplitPath.GLUED)


class _HeadSplitPath(NodeRule):
    """Fires on a head split whose output reaches a Transpose by `path` (or reaches none)."""

    judges = ("Reshape",)
    path: ClassVar[SplitPath]
    words: ClassVar[str]

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if not is_head_split(ctx, node):
            return Misses("not a head split")
        path = split_path(ctx, node)
        if path != self.path:
            return Misses(f"its path to a Transpose is {path}")
        before, after = ctx.io_shapes(node)
        return Fires(f"{list(before or ())} -> {list(after or ())}, {self.words}")

    def example(self) -> onnx.ModelProto:
        return _head_split_example(self.path)


class HeadSplitInterrupted(_HeadSplitPath):
    """Fires on a head split that reaches a Transpose through an op that computes (a per-head norm, RoPE), not
    only through slicing ops."""

    name, path, words = "head_split_interrupted", SplitPath.INTERRUPTED, "an op between it and its Transpose"


class HeadSplitSliced(_HeadSplitPath):
    """Fires on a head split that reaches its Transpose through slicing ops only (Split, Slice, Gather, Squeeze,
    Unsqueeze, Identity), not directly."""

    name, path, words = "head_split_sliced", SplitPath.SLICED, "only slicing ops between it and its Transpose"


class HeadSplitUnglued(_HeadSplitPath):
    """Fires on a head split with no Transpose after it (looking 40 nodes ahead, not past a MatMul)."""

    name, path, words = "head_split_unglued", SplitPath.NONE, "no Transpose after it"


class SplitLastThree(NodeRule):
    """Fires on a Reshape of tokens ([B, S, C] or [S, C], the unit batch possibly added back) that splits the
    last axis into three or more axes ([B, S, 3C] -> [B, S, 3, H, d]): timm's qkv split, as the zoo's vit_base
    exports it (rbn-vit-base-zoo)."""

    name = "split_last_three"
    judges = ("Reshape",)

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type != "Reshape":
            return Misses("not a Reshape")
        before, after = ctx.io_shapes(node)
        after = _unit_batch(before, after) if before is not None and after is not None else after
        if before is None or after is None or len(before) not in (2, 3) or len(after) < len(before) + 2:
            return Misses("not tokens into two or more extra axes (or shapes unknown)")
        if not shuffles.split_last(before, after):
            return Misses("it does not split the last axis")
        return Fires(f"{list(before)} -> {list(after)}")

    def example(self) -> onnx.ModelProto:
        g, x = tokens_graph(self.name, c=24)
        split = g.node("Reshape", [x, g.ints("qkv", [1, 8, 3, 2, 4])], "probe/Reshape")
        scaled = g.node("Mul", [split, g.const("k", 2.0)], "probe/Mul")
        back = g.node("Reshape", [scaled, g.ints("tokens", [1, 8, 24])], "probe/Reshape_back")
        g.output(g.linear(back, 24, 24, "probe/post"))
        return g.model()


class HeadMergeGlued(NodeRule):
    """Fires on a head merge (a Reshape merging the last two axes, [B, S, H, d] -> [B, S, C], or dropping the unit
    batch with them, [1, S, H, d] -> [S, C]) fed by a Transpose it alone reads, and on that Transpose."""

    name = "head_merge_glued"
    judges = ("Transpose", "Reshape")

    def check(self, ctx: Context, node: onnx.NodeProto) -> Check:
        if node.op_type == "Transpose":
            after = sole_consumer(ctx, node, "Reshape")
            if after is not None and is_head_merge(ctx, after):
                return Fires(f"before head merge {after.name!r}")
            return Misses("its one consumer is not a head merge")
        source = ctx.producer(node.input[0])
        if not is_head_merge(ctx, node):
            return Misses("not a head merge")
        if source is None or source.op_type != "Transpose" or len(ctx.consumers(source.output[0])) != 1:
            return Misses("not fed by a Transpose that only it reads")
        shape_in, shape_out = ctx.io_shapes(node)
        return Fires(f"its Transpose, then {list(shape_in or ())} -> {list(shape_out or ())}")

    def example(self) -> onnx.ModelProto:
        return _head_split_example(SplitPath.GLUED)
