"""What the rules read off a node beyond its shapes (`formats.Context`): a Reshape's two shapes, its integer
attributes, a Transpose's perm, the one node that consumes it."""

from __future__ import annotations

from collections.abc import Container
from typing import SupportsInt

import onnx

from ....onnx_core.walk import attribute
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


def reshape_shapes(
    ctx: Context, node: onnx.NodeProto, ranks_in: Container[int], ranks_out: Container[int]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A Reshape's input and output shapes, both known and of one of those ranks each; None for any other node
    (every Reshape rule starts here)."""
    if node.op_type != "Reshape":
        return None
    before, after = ctx.io_shapes(node)
    if before is None or after is None or len(before) not in ranks_in or len(after) not in ranks_out:
        return None
    return before, after
