"""What the rules of several topics share: a node's integer attributes, a Transpose's perm, a sole consumer,
and the start of an example graph (tokens or an image behind one layer, so the rule's node has a producer)."""

from __future__ import annotations

from typing import SupportsInt

import onnx

from ....onnx_core.walk import attribute
from ...graphs import Builder
from ..formats import Context


def int_attr(node: onnx.NodeProto, name: str, default: int) -> int:
    """An INT attribute (axis, keepdims) as the int the rules compare, or `default` when it is absent."""
    value = attribute(node, name, default)
    if not isinstance(value, SupportsInt):
        raise TypeError(f"attribute {name!r} of {node.name!r} is not an integer: {value!r}")
    return int(value)


def ints_attr(node: onnx.NodeProto, name: str) -> list[int] | None:
    """An INTS attribute (perm, axes) as a list of ints, or None when it is absent."""
    value = attribute(node, name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError(f"attribute {name!r} of {node.name!r} is not a list of integers: {value!r}")
    return [int(v) for v in value]


def perm(node: onnx.NodeProto, rank: int | None) -> list[int]:
    """A Transpose's perm; absent, the reversal of its `rank` axes (ONNX's default)."""
    given = ints_attr(node, "perm")
    return list(given) if given is not None else (list(range(rank))[::-1] if rank else [])


def sole_consumer(ctx: Context, node: onnx.NodeProto, op: str) -> onnx.NodeProto | None:
    """The one node reading `node`'s first output, when there is exactly one and it is an `op`."""
    users = ctx.consumers(node.output[0])
    return users[0] if len(users) == 1 and users[0].op_type == op else None


def tokens_graph(name: str, s: int = 8, c: int = 16) -> tuple[Builder, str]:
    """An example's start: tokens [1, s, c] through a Linear."""
    g = Builder(name)
    x = g.input("x", [1, s, c])
    return g, g.linear(x, c, c, "probe/pre")


def image_graph(name: str, c: int = 8, h: int = 1, w: int = 16) -> tuple[Builder, str]:
    """An example's start: an NCHW image [1, c, h, w] through a 1x1 Conv."""
    g = Builder(name)
    x = g.input("x", [1, c, h, w])
    return g, g.conv1x1(x, c, c, "probe/pre")
