"""How much of a cut graph runs on the device: nodes, multiply-accumulates and parameters on each side, the
tensors that cross per inference, and each device segment's largest weighted layer beside the compile record.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from ...onnx_core.walk import Graph
from ..record.allowlist import DeviceOps
from ..vocabulary import Side
from .segments import Coverage, Segment


def static_dims(shape: tuple[int | None, ...]) -> tuple[int, ...]:
    """A shape whose dimensions are all static; a None one is a TypeError, as int(None) or math.prod was."""
    dims = tuple(d for d in shape if d is not None)
    if len(dims) != len(shape):
        raise TypeError(f"shape {shape} has a dimension that is not static")
    return dims


def node_macs(node: onnx.NodeProto, graph: Graph) -> int:
    """Multiply-accumulates of a MatMul, Gemm or Conv from its static shapes (0 for anything else)."""
    out = graph.shapes.get(node.output[0]) if node.output else None
    if not out or any(d is None for d in out):
        return 0
    if node.op_type in ("MatMul", "Gemm"):
        a = graph.shapes.get(node.input[0]) or ()
        k = (
            a[0]
            if node.op_type == "Gemm" and any(x.name == "transA" and x.i for x in node.attribute)
            else (a[-1] if a else None)
        )
        return int(math.prod(static_dims(out)) * k) if isinstance(k, int) else 0
    if node.op_type == "Conv":
        w = graph.shapes.get(node.input[1]) or ()
        if len(w) < 3 or any(d is None for d in w):
            return 0
        return int(math.prod(static_dims(out)) * math.prod(static_dims(w[1:])))
    return 0


def node_params(node: onnx.NodeProto, graph: Graph) -> int:
    return sum(
        int(math.prod(static_dims(graph.shapes.get(t) or ())))
        for t in node.input
        if t in graph.constants and t in graph.shapes
    )


def largest_layer(segment: Segment, graph: Graph, ops: DeviceOps) -> dict[str, Any]:
    """The segment's largest weighted layer (most parameters) with the compile-stage figures of the record
    beside it: a risk to check, not a verdict."""
    best: dict[str, Any] = {}
    for name in segment.nodes:
        node = next(n for n in graph.nodes if n.name == name)
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        params = node_params(node, graph)
        if params > best.get("params", 0):
            w = graph.shapes.get(node.input[1]) or ()
            best = {
                "node": name,
                "op": node.op_type,
                "weight_shape": list(w),
                "params": params,
                "macs": node_macs(node, graph),
            }
    if best:
        best["compile_record"] = ops.compile_figures
    return best


def coverage(segments: list[Segment], graph: Graph) -> Coverage:
    """Nodes, MACs and parameters on the device against the whole graph, and every tensor that enters or
    leaves a device segment (each device segment is its own network: what it reads and what it hands on
    travel to or from the device, whichever segment is on the other side)."""
    nodes = {n.name: n for n in graph.model.graph.node}
    device = {name for s in segments if s.runs_on == Side.DEVICE for name in s.nodes}
    macs = {name: node_macs(n, graph) for name, n in nodes.items()}
    params = {name: node_params(n, graph) for name, n in nodes.items()}
    moving = [t for s in segments if s.runs_on == Side.DEVICE for t in (*s.inputs, *s.outputs)]
    return Coverage(
        nodes=(len(device), len(nodes)),
        macs=(sum(macs[n] for n in device), sum(macs.values())),
        params=(sum(params[n] for n in device), sum(params.values())),
        crossings=len(moving),
        bytes_crossing=sum(
            int(math.prod(static_dims(graph.shapes.get(t) or (0,)))) * _itemsize(graph, t) for t in moving
        ),
    )


def _itemsize(graph: Graph, name: str) -> int:
    for info in [*graph.model.graph.input, *graph.model.graph.value_info, *graph.model.graph.output]:
        if info.name == name:
            return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)).itemsize)
    return 4
