"""The conditions under which an allowlisted op was seen to parse, checked node by node.

Some ops parse only in a particular shape (a Gather with a constant index, an Erf inside a GELU, a Softmax
over the last axis). Allowlisting the op type alone would pass the shapes the compiler rejected, so the
allowlist names the condition and the gate checks it on each node.
"""

from __future__ import annotations

from typing import Callable

import onnx

from ..onnx_core.walk import Graph, attribute, constant_index


def gelu_pattern(node: onnx.NodeProto, graph: Graph) -> str | None:
    """An Erf fed by x/sqrt(2) (Div or Mul) whose output goes through +1 into a Mul: the exact-GELU shape."""
    source = graph.producer.get(node.input[0]) if node.input else None
    if source is None or source.op_type not in ("Div", "Mul"):
        return "input is not a Div/Mul (x / sqrt(2)), so this is not the GELU pattern"
    users = graph.consumers.get(node.output[0], [])
    if len(users) != 1 or users[0].op_type != "Add":
        return "output does not feed exactly one Add (1 + erf), so this is not the GELU pattern"
    if not any(u.op_type == "Mul" for u in graph.consumers.get(users[0].output[0], [])):
        return "the 1 + erf sum does not feed a Mul, so this is not the GELU pattern"
    return None


def last_axis(node: onnx.NodeProto, graph: Graph) -> str | None:
    """A Softmax over the last axis (opset >= 13 default is -1; opset < 13 defaulted to axis 1)."""
    default = -1 if (graph.opset or 13) >= 13 else 1
    axis = attribute(node, "axis", default)
    if axis == -1:
        return None
    rank = graph.ranks.get(node.input[0]) if node.input else None
    if rank is None:
        return f"axis={axis} and the input rank is unknown, so the last axis cannot be confirmed"
    return None if axis == rank - 1 else f"axis={axis} is not the last axis of a rank-{rank} input"


CHECKS: dict[str, Callable[[onnx.NodeProto, Graph], str | None]] = {
    "constant_index": constant_index,
    "gelu_pattern": gelu_pattern,
    "last_axis": last_axis,
}
