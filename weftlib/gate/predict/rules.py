"""The graph rules: patterns and layouts the public record shows the DFC deciding by, each a detector.

A rule judges the nodes of some op types (or the graph's inputs) in their context: a Reshape is a glued head
split or a view, a Softmax runs in a layout whose format the parser tracks or not. `match` returns a short
detail when the rule covers the node, else None. The evidence for each rule is in `params/device_ops.yaml`
(`graph_rules`), weighed by `weftlib.gate.record.standing`; `example` builds the smallest graph the rule matches,
which is also the probe the DFC pack carries for it.

A rule reads its node's context (`formats.Context`): shapes, constants, neighbours and the formats the
prediction has worked out so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import SupportsInt

import numpy as np
import onnx

from ...onnx_core.walk import attribute, graph_inputs
from ..graphs import Builder
from . import shuffles
from .formats import LOST, NONE, REDUCTIONS, SLICING, SUMMING, TRACKED, Context

INPUT, GRAPH = "(input)", "(graph)"  # what an input rule / the graph-level rule judges instead of an op


@dataclass(frozen=True)
class Rule:
    """A detector: which nodes it judges, what it matches, and the smallest graph it matches."""

    name: str
    judges: tuple[str, ...]  # what it covers, in words, is the rule's `what` in params/device_ops.yaml
    match: Callable[[Context, object], str | None]
    example: Callable[[], onnx.ModelProto]
    downstream: bool = False  # it matches only where an earlier refusal left no format: a consequence, not a cause


# ------------------------------------------------------------------------------------------ helpers


def _int_attr(node: onnx.NodeProto, name: str, default: int) -> int:
    """An INT attribute (axis, keepdims) as the int the rules compare, or `default` when it is absent."""
    value = attribute(node, name, default)
    if not isinstance(value, SupportsInt):
        raise TypeError(f"attribute {name!r} of {node.name!r} is not an integer: {value!r}")
    return int(value)


def _ints_attr(node: onnx.NodeProto, name: str) -> list[int] | None:
    """An INTS attribute (perm, axes) as a list of ints, or None when it is absent."""
    value = attribute(node, name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError(f"attribute {name!r} of {node.name!r} is not a list of integers: {value!r}")
    return [int(v) for v in value]


def _perm(node: onnx.NodeProto, rank: int | None) -> list[int]:
    perm = _ints_attr(node, "perm")
    return list(perm) if perm is not None else (list(range(rank))[::-1] if rank else [])


def _sole_consumer(ctx: Context, node: onnx.NodeProto, op: str) -> onnx.NodeProto | None:
    users = ctx.consumers(node.output[0])
    return users[0] if len(users) == 1 and users[0].op_type == op else None


def _is_head_split(ctx: Context, node: onnx.NodeProto) -> bool:
    """A Reshape of a token tensor ([B, S, C] or [S, C]) that factors its last axis in two: [B, S, H, d]."""
    if node.op_type != "Reshape":
        return False
    before, after = ctx.io_shapes(node)
    return (
        before is not None
        and after is not None
        and len(before) in (2, 3)
        and len(after) == len(before) + 1
        and shuffles.split_last(before, after)
        and (source := ctx.producer(node.input[0])) is not None
        and source.op_type != "Transpose"
    )


def _is_head_merge(ctx: Context, node: onnx.NodeProto) -> bool:
    if node.op_type != "Reshape":
        return False
    before, after = ctx.io_shapes(node)
    return (
        before is not None
        and after is not None
        and len(before) in (3, 4)
        and len(after) == len(before) - 1
        and shuffles.merge_last(before, after)
    )


def _split_path(ctx: Context, node: onnx.NodeProto, limit: int = 40) -> str:
    """How a head split's output reaches its Transpose: "glued" (the Transpose is its one consumer),
    "sliced" (through Split/Slice/Gather/Squeeze only), "interrupted" (through arithmetic: a per-head norm,
    RoPE), or "none" (no Transpose within `limit` nodes)."""
    if _sole_consumer(ctx, node, "Transpose") is not None:
        return "glued"
    found: set[str] = set()
    seen: set[tuple[str, bool]] = set()
    frontier = [(n, False) for n in ctx.consumers(node.output[0])]
    while frontier and len(seen) < limit:
        user, crossed = frontier.pop()
        if (user.name, crossed) in seen:
            continue
        seen.add((user.name, crossed))
        if user.op_type == "Transpose":
            found.add("interrupted" if crossed else "sliced")
            continue
        if user.op_type == "MatMul":  # the attention product: no head Transpose came before it
            continue
        crossed_now = crossed or user.op_type not in SLICING
        frontier += [(n, crossed_now) for out in user.output for n in ctx.consumers(out)]
    return "interrupted" if "interrupted" in found else "sliced" if found else "none"


def _axes(ctx: Context, node: onnx.NodeProto) -> list[int] | None:
    """A reduction's axes (attribute, or input from opset 13/18 on), normalised; None: all axes."""
    rank = len(ctx.shape(node.input[0]) or ())
    axes = _ints_attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        value = ctx.const(node.input[1])
        axes = None if value is None else [int(a) for a in np.ravel(value)]
    if axes is None:
        return None
    return sorted(int(a) % rank for a in axes) if rank else list(axes)


def _channel_axis(rank: int) -> int:
    """The axis the parser holds features on: 1 in an NCHW image, the last in tokens [B, S, C] or [S, C]."""
    return 1 if rank == 4 else rank - 1


# --------------------------------------------------------------------------------------- input rules


def _input_rank(rank: int) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, name: object) -> str | None:
        dims = ctx.graph.shapes.get(str(name))
        n = len(dims) if dims is not None else None
        if rank >= 6:
            return f"rank {n}" if n is not None and (n == 0 or n >= 6) else None
        return f"rank {n} {list(dims or ())}" if n == rank else None

    return match


def _static(ctx: Context, name: object) -> str | None:
    dims = ctx.graph.shapes.get(str(name))
    if dims is None:
        return "no shape"
    return None if all(isinstance(d, int) for d in dims) else f"dimensions {list(dims)}"


def _graph_without_input(ctx: Context, _: object) -> str | None:
    return None if graph_inputs(ctx.graph) else "no graph input"


def _ex_input(name: str, shape: list[int | str]) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = Builder(name)
        x = g.input("x", shape)
        last = shape[-1] if shape and isinstance(shape[-1], int) else 1
        g.output(g.node("Mul", [x, g.const("k", np.full([last], 2.0))], "probe/Mul"))
        return g.model()

    return build


def _ex_graph_without_input() -> onnx.ModelProto:
    g = Builder("graph_without_input")
    g.node("ConstantOfShape", [g.ints("shape", [1, 8, 4, 4])], "probe/ConstantOfShape")
    g.output("probe/ConstantOfShape")
    model = g.model()
    return model


# ----------------------------------------------------------------------------------------- shuffles


def _head_split_glued(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    if node.op_type == "Transpose":
        source = ctx.producer(node.input[0])
        if source is not None and _is_head_split(ctx, source) and _sole_consumer(ctx, source, "Transpose"):
            return f"the Transpose of head split {source.name!r}"
        return None
    if _is_head_split(ctx, node) and _split_path(ctx, node) == "glued":
        before, after = ctx.io_shapes(node)
        return f"{list(before or ())} -> {list(after or ())}, then its Transpose"
    return None


def _head_split_path(kind: str) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        if not _is_head_split(ctx, node):
            return None
        path = _split_path(ctx, node)
        if path != kind:
            return None
        before, after = ctx.io_shapes(node)
        words = {
            "interrupted": "an op between it and its Transpose",
            "sliced": "only slicing ops between it and its Transpose",
            "none": "no Transpose after it",
        }[kind]
        return f"{list(before or ())} -> {list(after or ())}, {words}"

    return match


def _split_three(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    if node.op_type != "Reshape":
        return None
    before, after = ctx.io_shapes(node)
    if before is None or after is None or len(before) not in (2, 3) or len(after) < len(before) + 2:
        return None
    return f"{list(before)} -> {list(after)}" if shuffles.split_last(before, after) else None


def _head_merge_glued(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    if node.op_type == "Transpose":
        after = _sole_consumer(ctx, node, "Reshape")
        return f"before head merge {after.name!r}" if after is not None and _is_head_merge(ctx, after) else None
    source = ctx.producer(node.input[0])
    if (
        _is_head_merge(ctx, node)
        and source is not None
        and source.op_type == "Transpose"
        and len(ctx.consumers(source.output[0])) == 1
    ):
        shape_in, shape_out = ctx.io_shapes(node)
        return f"its Transpose, then {list(shape_in or ())} -> {list(shape_out or ())}"
    return None


def _image_channel_split(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    before, after = ctx.io_shapes(node)
    if node.op_type != "Reshape" or before is None or after is None or len(before) != 4:
        return None
    return f"{list(before)} -> {list(after)}" if shuffles.splits_axis(before, after, 1) else None


def _reshape_5d_to_4d(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    before, after = ctx.io_shapes(node)
    if node.op_type == "Reshape" and before is not None and after is not None and len(before) == 5 and len(after) == 4:
        return f"{list(before)} -> {list(after)}"
    return None


def _batch_axis(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    before, after = ctx.io_shapes(node)
    if node.op_type == "Concat":
        if all(ctx.format(n) == NONE for n in node.input if n):
            return None  # shape arithmetic, not data
        rank = len(after) if after else 0
        axis = _int_attr(node, "axis", 0) % rank if rank else None
        if axis == 0:
            return "concatenates over axis 0 (batch)"
        return f"a batch of {after[0]} (windows stacked as a batch)" if after and rank >= 3 and after[0] > 1 else None
    if node.op_type == "Tile":
        repeats = ctx.const(node.input[1]) if len(node.input) > 1 else None
        return "repeats axis 0 (batch)" if repeats is not None and int(np.ravel(repeats)[0]) != 1 else None
    if node.op_type == "Reshape" and before is not None and after is not None:
        # a rank-2 [S, C] has no batch axis unless its first axis is a batch of one ([1, N], the view reshape)
        has_batch = len(before) >= 3 or before[0] == 1
        return f"{list(before)} -> {list(after)}" if has_batch and shuffles.batch_changed(before, after) else None
    return None


def _is_image_flatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, C, H, W] -> [B, C, H*W]."""
    before, after = ctx.io_shapes(node)
    return (
        node.op_type == "Reshape"
        and before is not None
        and after is not None
        and len(before) == 4
        and len(after) == 3
        and before[:2] == after[:2]
        and shuffles.merge_last(before, after)
    )


def _is_tokens_unflatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, N, C] -> [B, h, w, C] (the token axis split into the grid)."""
    before, after = ctx.io_shapes(node)
    return (
        node.op_type == "Reshape"
        and before is not None
        and after is not None
        and len(before) == 3
        and len(after) == 4
        and before[0] == after[0]
        and before[2] == after[3]
        and shuffles.splits_axis(before, after, 1)
    )


def _pair(test: Callable[[Context, onnx.NodeProto], bool], perm: list[int]) -> Callable[[Context, object], str | None]:
    """A Reshape passing `test` whose one consumer is a Transpose with `perm`; matches both nodes."""

    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        if node.op_type == "Transpose":
            source = ctx.producer(node.input[0])
            if _perm(node, len(perm)) == perm and source is not None and test(ctx, source):
                return f"the Transpose after {source.name!r}" if _sole_consumer(ctx, source, "Transpose") else None
            return None
        after = _sole_consumer(ctx, node, "Transpose") if node.output else None
        if test(ctx, node) and after is not None and _perm(after, len(perm)) == perm:
            before, out = ctx.io_shapes(node)
            return f"{list(before or ())} -> {list(out or ())}, then Transpose {perm}"
        return None

    return match


def _ex_pair(kind: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_image(kind, c=8, h=4, w=4)
        flat = g.node("Reshape", [x, g.ints("flat", [1, 8, 16])], "probe/Reshape")
        tokens = g.node("Transpose", [flat], "probe/Transpose", perm=[0, 2, 1])
        tokens = g.linear(tokens, 8, 8, "probe/mid")
        grid = g.node("Reshape", [tokens, g.ints("grid", [1, 4, 4, 8])], "probe/Reshape_grid")
        image = g.node("Transpose", [grid], "probe/Transpose_grid", perm=[0, 3, 1, 2])
        g.output(g.conv1x1(image, 8, 8, "probe/post"))
        return g.model()

    return build


def _lone_transpose(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    before, _ = ctx.io_shapes(node)
    if node.op_type != "Transpose" or _perm(node, len(before or ())) != [0, 2, 1, 3]:
        return None
    if _head_split_glued(ctx, node) or _head_merge_glued(ctx, node):
        return None
    return "perm [0, 2, 1, 3], not glued to a head split or merge"


_CHANNELS_LAST, _CHANNELS_FIRST = [0, 2, 3, 1], [0, 3, 1, 2]


def _is_nhwc_flatten(ctx: Context, node: onnx.NodeProto) -> bool:
    """[B, H, W, C] -> [B, H*W, C]: a channels-last map flattened to tokens, channels kept last."""
    before, after = ctx.io_shapes(node)
    return (
        node.op_type == "Reshape"
        and before is not None
        and after is not None
        and len(before) == 4
        and len(after) == 3
        and before[0] == after[0]
        and before[3] == after[2]
        and before[1] * before[2] == after[1]
    )


def _image_transpose(ctx: Context, node: onnx.NodeProto) -> list[int] | None:
    """The perm of a rank-4 Transpose between NCHW and NHWC that no head split, head merge or
    tokens-to-image pair accounts for; None for any other node."""
    before, _ = ctx.io_shapes(node)
    perm = _perm(node, len(before or ())) if node.op_type == "Transpose" else None
    if before is None or len(before) != 4 or perm not in (_CHANNELS_LAST, _CHANNELS_FIRST):
        return None
    if _head_split_glued(ctx, node) or _head_merge_glued(ctx, node):
        return None
    source = ctx.producer(node.input[0])
    if perm == _CHANNELS_FIRST and source is not None and _is_tokens_unflatten(ctx, source):
        return None  # tokens_to_image
    return perm


def _channels_last(where: str) -> Callable[[Context, object], str | None]:
    """`where`: "input" (the Transpose of a graph input), "tokens" (to NHWC, then flattened to tokens by
    the Reshape after it; matches both nodes), "body" (any other NCHW <-> NHWC Transpose)."""

    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        if node.op_type == "Reshape":
            source = ctx.producer(node.input[0])
            if where != "tokens" or source is None or not _is_nhwc_flatten(ctx, node):
                return None
            return f"the token flatten of {source.name!r}" if _image_transpose(ctx, source) == _CHANNELS_LAST else None
        perm = _image_transpose(ctx, node)
        if perm is None:
            return None
        at_input = ctx.producer(node.input[0]) is None and node.input[0] not in ctx.graph.constants
        flatten = _sole_consumer(ctx, node, "Reshape")
        to_tokens = perm == _CHANNELS_LAST and flatten is not None and _is_nhwc_flatten(ctx, flatten)
        kind = "input" if at_input else "tokens" if to_tokens else "body"
        return f"perm {perm}" + (", then flattened to tokens" if to_tokens else "") if kind == where else None

    return match


def _ex_channels_last(where: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = Builder(f"channels_last_{where}")
        if where == "input":
            x = g.node("Transpose", [g.input("x", [1, 4, 4, 8])], "probe/Transpose", perm=_CHANNELS_FIRST)
            g.output(g.conv1x1(x, 8, 8, "probe/post"))
            return g.model()
        x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "probe/pre")
        nhwc = g.node("Transpose", [x], "probe/Transpose", perm=_CHANNELS_LAST)
        if where == "tokens":
            tokens = g.node("Reshape", [nhwc, g.ints("tokens", [1, 16, 8])], "probe/Reshape")
            g.output(g.linear(tokens, 8, 8, "probe/post"))
            return g.model()
        scaled = g.node("Mul", [nhwc, g.const("k", np.full([8], 2.0))], "probe/Mul")
        back = g.node("Transpose", [scaled], "probe/Transpose_back", perm=_CHANNELS_FIRST)
        g.output(g.conv1x1(back, 8, 8, "probe/post"))
        return g.model()

    return build


def _ex_tokens(name: str, s: int = 8, c: int = 16) -> tuple[Builder, str]:
    g = Builder(name)
    x = g.input("x", [1, s, c])
    return g, g.linear(x, c, c, "probe/pre")


def _ex_head_split(kind: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_tokens(f"head_split_{kind}")
        split = g.node("Reshape", [x, g.ints("heads", [1, 8, 4, 4])], "probe/Reshape")
        if kind == "interrupted":
            split = g.node("Mul", [split, g.const("gamma", np.full([4], 2.0))], "probe/per_head_Mul")
        if kind == "sliced":
            split = g.node("Slice", [split, g.ints("st", [0]), g.ints("en", [4]), g.ints("ax", [2])], "probe/Slice")
        if kind != "none":
            split = g.node("Transpose", [split], "probe/Transpose", perm=[0, 2, 1, 3])
            split = g.node("Transpose", [split], "probe/Transpose_back", perm=[0, 2, 1, 3])
        merged = g.node("Reshape", [split, g.ints("tokens", [1, 8, 16])], "probe/Reshape_back")
        g.output(g.linear(merged, 16, 16, "probe/post"))
        return g.model()

    return build


def _ex_split_three() -> onnx.ModelProto:
    g, x = _ex_tokens("split_last_three", c=24)
    split = g.node("Reshape", [x, g.ints("qkv", [1, 8, 3, 2, 4])], "probe/Reshape")
    scaled = g.node("Mul", [split, g.const("k", 2.0)], "probe/Mul")
    back = g.node("Reshape", [scaled, g.ints("tokens", [1, 8, 24])], "probe/Reshape_back")
    g.output(g.linear(back, 24, 24, "probe/post"))
    return g.model()


def _ex_image(name: str, c: int = 8, h: int = 1, w: int = 16) -> tuple[Builder, str]:
    g = Builder(name)
    x = g.input("x", [1, c, h, w])
    return g, g.conv1x1(x, c, c, "probe/pre")


def _ex_image_channel_split() -> onnx.ModelProto:
    g, x = _ex_image("image_channel_split")
    split = g.node("Reshape", [x, g.ints("heads", [1, 2, 4, 16])], "probe/Reshape")
    g.output(g.conv1x1(split, 2, 2, "probe/post"))
    return g.model()


def _ex_reshape_5d_to_4d() -> onnx.ModelProto:
    g, x = _ex_image("reshape_5d_to_4d", c=8, h=4, w=4)
    five = g.node("Reshape", [x, g.ints("five", [1, 4, 2, 4, 4])], "probe/Reshape_5d")
    four = g.node("Reshape", [five, g.ints("four", [1, 8, 4, 4])], "probe/Reshape")
    g.output(g.conv1x1(four, 8, 8, "probe/post"))
    return g.model()


def _ex_batch_axis() -> onnx.ModelProto:
    g, x = _ex_image("batch_axis", c=8, h=4, w=4)
    tiled = g.node("Tile", [x, g.ints("repeats", [2, 1, 1, 1])], "probe/Tile")
    g.output(g.conv1x1(tiled, 8, 8, "probe/post"))
    return g.model()


def _ex_lone_transpose() -> onnx.ModelProto:
    g, x = _ex_image("lone_transpose_0213", c=8, h=4, w=4)
    t = g.node("Transpose", [x], "probe/Transpose", perm=[0, 2, 1, 3])
    g.output(g.conv1x1(t, 4, 4, "probe/post"))
    return g.model()


# ---------------------------------------------------------------------- softmax, layernorm, concat


def _softmax_axis_is_last(ctx: Context, node: onnx.NodeProto) -> bool:
    rank = len(ctx.shape(node.input[0]) or ())
    axis = _int_attr(node, "axis", -1 if (ctx.graph.opset or 13) >= 13 else 1)
    return bool(rank) and axis % rank == rank - 1


def _softmax(state: str) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        last = _softmax_axis_is_last(ctx, node)
        fmt = ctx.format(node.input[0])
        if state == "not_last":
            return (
                None
                if last
                else f"axis {attribute(node, 'axis', -1)} of a rank-{len(ctx.shape(node.input[0]) or ())} input"
            )
        if not last:
            return None
        if state == TRACKED and fmt == TRACKED:
            return "last axis, input format tracked"
        if state == LOST and fmt == LOST:
            return "last axis, but its input lost its format upstream (a refused shuffle)"
        return None

    return match


def _ex_softmax(state: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        if state == LOST:
            g, x = _ex_image("softmax_untracked", c=8, h=1, w=16)
            heads = g.node("Reshape", [x, g.ints("heads", [1, 2, 4, 16])], "probe/Reshape")
            qt = g.node("Transpose", [heads], "probe/Transpose", perm=[0, 1, 3, 2])
            s = g.node("MatMul", [qt, heads], "probe/MatMul")
            p = g.node("Softmax", [s], "probe/Softmax", axis=-1)
            g.output(g.node("MatMul", [p, qt], "probe/MatMul_1"))
            return g.model()
        g, x = _ex_tokens(f"softmax_{state}")
        s = g.node("MatMul", [x, g.node("Transpose", [x], "probe/Transpose", perm=[0, 2, 1])], "probe/MatMul")
        p = g.node("Softmax", [s], "probe/Softmax", axis=-1 if state == TRACKED else 1)
        g.output(g.linear(g.node("MatMul", [p, x], "probe/MatMul_1"), 16, 16, "probe/post"))
        return g.model()

    return build


def _layernorm(state: str) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        rank = len(ctx.shape(node.input[0]) or ())
        last = bool(rank) and _int_attr(node, "axis", -1) % rank == rank - 1
        source = ctx.producer(node.input[0])
        fed_by_concat = source is not None and source.op_type == "Concat"
        fmt = ctx.format(node.input[0])
        if state == "not_last":
            return None if last else f"axis {attribute(node, 'axis', -1)} of a rank-{rank} input"
        if state == "concat":
            return f"its input is Concat {source.name!r}" if fed_by_concat and source is not None else None
        if not last or fed_by_concat:
            return None
        if state == TRACKED and fmt == TRACKED:
            return f"last axis of a rank-{rank} input whose format is tracked"
        if state == LOST and fmt == LOST:
            return "its input lost its format upstream"
        return None

    return match


def _ex_layernorm(state: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_tokens(f"layernorm_{state}")
        if state == "concat":
            x = g.node("Concat", [x, g.const("cls", np.zeros((1, 1, 16)))], "probe/Concat", axis=1)
        if state == LOST:
            x = g.node("Reshape", [x, g.ints("view", [2, 4, 16])], "probe/Reshape_view")
        axis = 1 if state == "not_last" else -1
        shape = (8, 16) if state == "not_last" else (16,)
        n = g.node(
            "LayerNormalization",
            [x, g.const("ln.weight", np.ones(shape)), g.const("ln.bias", np.zeros(shape))],
            "probe/LayerNormalization",
            axis=axis,
        )
        g.output(g.node("Mul", [n, g.const("k", 2.0)], "probe/post_Mul"))
        return g.model()

    return build


def _concat(state: str) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        formats = [ctx.format(n) for n in node.input if n]
        if _batch_axis(ctx, node) or _rotate_half(ctx, node)[0]:
            return None
        if state == NONE:
            return "no input has a format (shape arithmetic or constants only)" if set(formats) == {NONE} else None
        shape = ctx.shape(node.output[0])
        height = shape is not None and len(shape) == 4 and _int_attr(node, "axis", 0) % 4 == 2
        if height != (state == "height") or not (TRACKED in formats and set(formats) <= {TRACKED, NONE}):
            return None
        where = "the height axis of an image" if height else f"axis {attribute(node, 'axis', 0)}"
        return f"over {where}, inputs with a tracked format" + (" and constants" if NONE in formats else "")

    return match


def _ex_concat(state: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_tokens(f"concat_{state}")
        if state == NONE:
            shape = g.node("Shape", [x], "probe/Shape")
            first = g.node("Gather", [shape, g.ints("zero", [0])], "probe/Gather", axis=0)
            target = g.node("Concat", [first, g.ints("rest", [8, 16])], "probe/Concat", axis=0)
            g.output(g.linear(g.node("Reshape", [x, target], "probe/Reshape"), 16, 16, "probe/post"))
            return g.model()
        if state == "height":
            g, x = _ex_image("concat_image_height", c=8, h=4, w=4)
            top = g.node("Slice", [x, g.ints("t0", [0]), g.ints("t1", [1]), g.ints("ta", [2])], "probe/Slice")
            g.output(g.conv1x1(g.node("Concat", [top, x], "probe/Concat", axis=2), 8, 8, "probe/post"))
            return g.model()
        joined = g.node("Concat", [g.const("cls", np.zeros((1, 1, 16))), x], "probe/Concat", axis=1)
        g.output(g.linear(joined, 16, 16, "probe/post"))
        return g.model()

    return build


def _rotate_half(ctx: Context, node: onnx.NodeProto) -> tuple[bool, bool]:
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


def _rope(partial: bool) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        found, is_partial = _rotate_half(ctx, node)
        if not found or is_partial != partial:
            return None
        return "rotate_half (Neg + Concat) over a slice of the head dim" if partial else "rotate_half (Neg + Concat)"

    return match


def _ex_rope(partial: bool) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_tokens("rotate_half_partial" if partial else "rotate_half")
        width = 8 if partial else 16
        if partial:
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

    return build


# --------------------------------------------------------------------------------------- reductions


def _reduce(kind: str) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        shape = ctx.shape(node.input[0])
        if shape is None:
            return None
        rank, axes = len(shape), _axes(ctx, node)
        keep = _int_attr(node, "keepdims", 1)
        if kind in ("channel", "max_channel"):
            ok = axes == [_channel_axis(rank)] and keep == 1 and ctx.format(node.input[0]) == TRACKED
            return f"axis {axes[0]} (features) of a rank-{rank} input, keepdims" if ok and axes else None
        if kind == "minus2_dropped":
            return "axis -2, keepdims 0" if rank >= 3 and axes == [rank - 2] and keep == 0 else None
        if kind == "spatial":
            return "axes [2, 3] of an image, keepdims" if rank == 4 and axes == [2, 3] and keep == 1 else None
        if kind == "last_rank4":
            return "axis 3 (the last) of a rank-4 input" if rank == 4 and axes == [3] else None
        return None

    return match


def _ex_reduce(kind: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        if kind == "spatial":
            g, x = _ex_image("reduce_spatial_axes", c=8, h=4, w=4)
            r = g.node("ReduceMax", [x], "probe/ReduceMax", axes=[2, 3], keepdims=1)
            g.output(g.conv1x1(r, 8, 8, "probe/post"))
            return g.model()
        g, x = _ex_tokens(f"reduce_{kind}")
        if kind == "last_rank4":  # QK-norm after the head Transpose: RMS over the head dim of [B, H, S, d]
            heads = g.node("Reshape", [x, g.ints("heads", [1, 8, 4, 4])], "probe/Reshape")
            heads = g.node("Transpose", [heads], "probe/Transpose", perm=[0, 2, 1, 3])
            sq = g.node("Mul", [heads, heads], "probe/Mul_sq")
            ms = g.node("ReduceMean", [sq], "probe/ReduceMean", axes=[-1], keepdims=1)
            normed = g.node("Div", [heads, g.node("Sqrt", [ms], "probe/Sqrt")], "probe/Div")
            back = g.node("Transpose", [normed], "probe/Transpose_back", perm=[0, 2, 1, 3])
            g.output(
                g.linear(
                    g.node("Reshape", [back, g.ints("tokens", [1, 8, 16])], "probe/Reshape_back"), 16, 16, "probe/post"
                )
            )
            return g.model()
        if kind == "max_channel":
            r = g.node("ReduceMax", [x], "probe/ReduceMax", axes=[-1], keepdims=1)
            g.output(g.node("Sub", [x, r], "probe/post_Sub"))
            return g.model()
        axis, keep = (-1, 1) if kind == "channel" else (-2, 0)
        r = g.node("ReduceSum", [x, g.ints("axes", [axis])], "probe/ReduceSum", keepdims=keep)
        g.output(g.node("Mul", [r, g.const("k", 2.0)], "probe/post_Mul"))
        return g.model()

    return build


# ---------------------------------------------------------------------------- gather, erf, onehot, conv


def _gather(constant: bool) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        if len(node.input) < 2:
            return None
        is_const = node.input[1] in ctx.graph.constants
        if is_const != constant:
            return None
        if constant:
            return "a constant index"
        source = ctx.producer(node.input[1])
        return f"an index computed by {source.op_type if source is not None else 'a graph input'}"

    return match


def _ex_gather(constant: bool) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_image("gather_constant_index" if constant else "gather_computed_index", c=8, h=4, w=4)
        if constant:
            index = g.ints("index", [0, 2, 4, 6])
            out = 4
        else:
            mean = g.node("ReduceMean", [x], "probe/index_ReduceMean", axes=[0, 2, 3], keepdims=0)
            index = g.node("ArgMax", [mean], "probe/ArgMax", axis=0, keepdims=1)
            out = 1
        picked = g.node("Gather", [x, index], "probe/Gather", axis=1)
        g.output(g.conv1x1(picked, out, 4, "probe/post"))
        return g.model()

    return build


def _gelu_erf(ctx: Context, node: onnx.NodeProto) -> bool:
    source = ctx.producer(node.input[0]) if node.input else None
    users = ctx.consumers(node.output[0])
    return (
        source is not None
        and source.op_type in ("Div", "Mul")
        and len(users) == 1
        and users[0].op_type == "Add"
        and any(u.op_type == "Mul" for u in ctx.consumers(users[0].output[0]))
    )


def _erf(in_gelu: bool) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        inside = _gelu_erf(ctx, node)
        if inside != in_gelu:
            return None
        return "x * 0.5 * (1 + erf(x / sqrt 2))" if inside else "not inside an exact GELU"

    return match


def _ex_erf(in_gelu: bool) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g, x = _ex_tokens("erf_in_gelu" if in_gelu else "erf_standalone")
        y = g.gelu(x, "probe/gelu") if in_gelu else g.node("Erf", [x], "probe/Erf")
        g.output(g.linear(y, 16, 16, "probe/post"))
        return g.model()

    return build


def _onehot_chain(ctx: Context, node: onnx.NodeProto) -> bool:
    """OneHot(axis -1) -> Transpose(perm [0, 4, 2, 3, 1]) -> Squeeze(axis 4 or -1), nothing between
    (the DFC's `is_supported_one_hot`, as weftspun/rf-detr-cpp scripts/gate_onnx_device.py records it)."""
    if _int_attr(node, "axis", -1) != -1:
        return False
    transpose = _sole_consumer(ctx, node, "Transpose")
    if transpose is None or _perm(transpose, 5) != [0, 4, 2, 3, 1]:
        return False
    squeeze = _sole_consumer(ctx, transpose, "Squeeze")
    if squeeze is None:
        return False
    axes = ctx.const(squeeze.input[1]) if len(squeeze.input) > 1 else _ints_attr(squeeze, "axes")
    return axes is not None and [int(a) for a in np.ravel(axes)] in ([4], [-1])


def _onehot(pattern: bool) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        if node.op_type != "OneHot":  # the chain's Transpose and Squeeze, judged with it
            head = ctx.producer(node.input[0])
            if node.op_type == "Squeeze" and head is not None and head.op_type == "Transpose":
                head = ctx.producer(head.input[0])
            if not pattern or head is None or head.op_type != "OneHot" or not _onehot_chain(ctx, head):
                return None
            return f"the end of the OneHot chain from {head.name!r}"
        chain = _onehot_chain(ctx, node)
        if chain != pattern:
            return None
        return "OneHot(-1) -> Transpose -> Squeeze" if chain else "not the chain OneHot(-1) -> Transpose -> Squeeze"

    return match


def _ex_onehot(pattern: bool) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = Builder("onehot_pattern" if pattern else "onehot_broken")
        index = g.input("index", [1, 1, 4, 4], onnx.TensorProto.INT64)
        hot = g.node("OneHot", [index, g.ints("depth", [8]), g.const("values", [0.0, 1.0])], "probe/OneHot", axis=-1)
        if not pattern:
            hot = g.node("Cast", [hot], "probe/Cast", to=onnx.TensorProto.FLOAT)
        t = g.node("Transpose", [hot], "probe/Transpose", perm=[0, 4, 2, 3, 1])
        sq = g.node("Squeeze", [t, g.ints("axes", [4])], "probe/Squeeze")
        g.output(g.conv1x1(sq, 8, 4, "probe/post"))
        return g.model()

    return build


def _conv_rank(rank: int) -> Callable[[Context, object], str | None]:
    def match(ctx: Context, node: object) -> str | None:
        assert isinstance(node, onnx.NodeProto)
        shape = ctx.shape(node.input[0])
        return f"a rank-{rank} input {list(shape)}" if shape is not None and len(shape) == rank else None

    return match


def _ex_conv(rank: int) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = Builder(f"conv_rank_{rank}")
        shape = [1, 4] + [4] * (rank - 2)
        x = g.input("x", shape)
        w = g.const("w", np.full([4, 4] + [3] * (rank - 2), 0.1))
        y = g.node("Conv", [x, w], "probe/Conv", kernel_shape=[3] * (rank - 2), pads=[1] * (2 * (rank - 2)))
        g.output(g.node("Mul", [y, g.const("k", 2.0)], "probe/post_Mul"))
        return g.model()

    return build


def _tile_other(ctx: Context, node: object) -> str | None:
    assert isinstance(node, onnx.NodeProto)
    return None if _batch_axis(ctx, node) else "repeats a non-batch axis"


def _ex_tile_other() -> onnx.ModelProto:
    g, x = _ex_image("tile_non_batch", c=4, h=4, w=4)
    tiled = g.node("Tile", [x, g.ints("repeats", [1, 2, 1, 1])], "probe/Tile")
    g.output(g.conv1x1(tiled, 8, 4, "probe/post"))
    return g.model()


# ------------------------------------------------------------------------------------------ registry

_SHUFFLES = ("Reshape",)
RULES: dict[str, Rule] = {
    r.name: r
    for r in [
        Rule("graph_without_input", (GRAPH,), _graph_without_input, _ex_graph_without_input),
        Rule(
            "input_static_shape",
            (INPUT,),
            _static,
            _ex_input("input_static_shape", [1, "seq", 16]),
        ),
        Rule("input_rank_1", (INPUT,), _input_rank(1), _ex_input("input_rank_1", [16])),
        Rule("input_rank_2", (INPUT,), _input_rank(2), _ex_input("input_rank_2", [8, 16])),
        Rule(
            "input_rank_3",
            (INPUT,),
            _input_rank(3),
            _ex_input("input_rank_3", [1, 8, 16]),
        ),
        Rule(
            "input_rank_4",
            (INPUT,),
            _input_rank(4),
            _ex_input("input_rank_4", [1, 4, 8, 8]),
        ),
        Rule("input_rank_5", (INPUT,), _input_rank(5), _ex_input("input_rank_5", [1, 4, 4, 4, 4])),
        Rule(
            "input_rank_other",
            (INPUT,),
            _input_rank(6),
            _ex_input("input_rank_other", [1, 2, 2, 2, 2, 4]),
        ),
        Rule(
            "head_split_glued",
            ("Reshape", "Transpose"),
            _head_split_glued,
            _ex_head_split("glued"),
        ),
        Rule(
            "head_split_interrupted",
            _SHUFFLES,
            _head_split_path("interrupted"),
            _ex_head_split("interrupted"),
        ),
        Rule(
            "head_split_sliced",
            _SHUFFLES,
            _head_split_path("sliced"),
            _ex_head_split("sliced"),
        ),
        Rule(
            "head_split_unglued",
            _SHUFFLES,
            _head_split_path("none"),
            _ex_head_split("none"),
        ),
        Rule(
            "split_last_three",
            _SHUFFLES,
            _split_three,
            _ex_split_three,
        ),
        Rule(
            "head_merge_glued",
            ("Transpose", "Reshape"),
            _head_merge_glued,
            _ex_head_split("glued"),
        ),
        Rule(
            "image_channel_split",
            _SHUFFLES,
            _image_channel_split,
            _ex_image_channel_split,
        ),
        Rule(
            "image_to_tokens",
            ("Reshape", "Transpose"),
            _pair(_is_image_flatten, [0, 2, 1]),
            _ex_pair("image_to_tokens"),
        ),
        Rule(
            "tokens_to_image",
            ("Reshape", "Transpose"),
            _pair(_is_tokens_unflatten, [0, 3, 1, 2]),
            _ex_pair("tokens_to_image"),
        ),
        Rule("reshape_5d_to_4d", _SHUFFLES, _reshape_5d_to_4d, _ex_reshape_5d_to_4d),
        Rule(
            "batch_axis",
            ("Reshape", "Concat", "Tile"),
            _batch_axis,
            _ex_batch_axis,
        ),
        Rule("channels_last_transpose", ("Transpose",), _channels_last("body"), _ex_channels_last("body")),
        Rule(
            "image_nhwc_to_tokens",
            ("Transpose", "Reshape"),
            _channels_last("tokens"),
            _ex_channels_last("tokens"),
        ),
        Rule("input_channels_last", ("Transpose",), _channels_last("input"), _ex_channels_last("input")),
        Rule(
            "lone_transpose_0213",
            ("Transpose",),
            _lone_transpose,
            _ex_lone_transpose,
        ),
        Rule(
            "softmax_tracked_last_axis",
            ("Softmax",),
            _softmax(TRACKED),
            _ex_softmax(TRACKED),
        ),
        Rule(
            "softmax_untracked",
            ("Softmax",),
            _softmax(LOST),
            _ex_softmax(LOST),
            downstream=True,
        ),
        Rule(
            "softmax_not_last_axis",
            ("Softmax",),
            _softmax("not_last"),
            _ex_softmax("not_last"),
        ),
        Rule(
            "layernorm_tracked",
            ("LayerNormalization",),
            _layernorm(TRACKED),
            _ex_layernorm(TRACKED),
        ),
        Rule(
            "layernorm_untracked",
            ("LayerNormalization",),
            _layernorm(LOST),
            _ex_layernorm(LOST),
            downstream=True,
        ),
        Rule(
            "layernorm_fed_by_concat",
            ("LayerNormalization",),
            _layernorm("concat"),
            _ex_layernorm("concat"),
        ),
        Rule(
            "layernorm_not_last_axis",
            ("LayerNormalization",),
            _layernorm("not_last"),
            _ex_layernorm("not_last"),
        ),
        Rule(
            "concat_tracked",
            ("Concat",),
            _concat(TRACKED),
            _ex_concat(TRACKED),
        ),
        Rule(
            "concat_image_height",
            ("Concat",),
            _concat("height"),
            _ex_concat("height"),
        ),
        Rule(
            "concat_no_format",
            ("Concat",),
            _concat(NONE),
            _ex_concat(NONE),
        ),
        Rule(
            "rotate_half",
            ("Neg", "Concat"),
            _rope(False),
            _ex_rope(False),
        ),
        Rule(
            "rotate_half_partial",
            ("Neg", "Concat"),
            _rope(True),
            _ex_rope(True),
        ),
        Rule(
            "reduce_channel_axis",
            SUMMING,
            _reduce("channel"),
            _ex_reduce("channel"),
        ),
        Rule(
            "reduce_max_channel_axis",
            ("ReduceMax", "ReduceMin"),
            _reduce("max_channel"),
            _ex_reduce("max_channel"),
        ),
        Rule(
            "reduce_minus2_dropped",
            REDUCTIONS,
            _reduce("minus2_dropped"),
            _ex_reduce("minus2_dropped"),
        ),
        Rule("reduce_last_axis_rank4", REDUCTIONS, _reduce("last_rank4"), _ex_reduce("last_rank4")),
        Rule(
            "reduce_spatial_axes",
            REDUCTIONS,
            _reduce("spatial"),
            _ex_reduce("spatial"),
        ),
        Rule("gather_constant_index", ("Gather",), _gather(True), _ex_gather(True)),
        Rule("gather_computed_index", ("Gather",), _gather(False), _ex_gather(False)),
        Rule("erf_in_gelu", ("Erf",), _erf(True), _ex_erf(True)),
        Rule("erf_standalone", ("Erf",), _erf(False), _ex_erf(False)),
        Rule(
            "onehot_pattern",
            ("OneHot", "Transpose", "Squeeze"),
            _onehot(True),
            _ex_onehot(True),
        ),
        Rule("onehot_broken", ("OneHot",), _onehot(False), _ex_onehot(False)),
        Rule("conv_rank_3", ("Conv",), _conv_rank(3), _ex_conv(3)),
        Rule("conv_rank_5", ("Conv",), _conv_rank(5), _ex_conv(5)),
        Rule("tile_non_batch", ("Tile",), _tile_other, _ex_tile_other),
    ]
}


def rules_for(op: str) -> list[Rule]:
    """The rules that judge nodes of `op` (INPUT and GRAPH for the graph-level ones)."""
    return [r for r in RULES.values() if op in r.judges]
