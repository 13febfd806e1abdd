"""The exact reference a fix is also held to: the original graph with the nodes the rewrites replaced computed
in float64, every other node as it is.

Both graphs run the nodes outside the rewritten region alike; inside it the original's own float32 kernel
rounds too, and over a large reduction (a GroupNorm's 8M elements per group at the appendix's NAF geometry)
it rounds by more than the proof's tolerance (onnxruntime's InstanceNormalization measured 3e-5 of the
output's scale from float64 at 2M elements). Where the fixed graph is not within the tolerance of the
original, the proof asks whether it is within the tolerance of this reference: then the gap is the original's
rounding, not the rewrite's. onnxruntime has no float64 kernel for InstanceNormalization (nor Conv): an
InstanceNormalization in the region is written by its definition in the ONNX spec, in float64; a region with
another op of that kind has no reference, and only the comparison with the original proves.

A region node that only moves elements (`MOVES`) while every float it reads is still float32 stays as written:
moving rounds nothing in any width, and onnxruntime moves float64 slowly (at NAF's 512² the nearest gather's
Transpose of `[1, 1024, 512, 512]` took 12 of the reference run's 24 s in float64, 0.7 s in float32). The first
node that computes widens what it reads, as before.
"""

from __future__ import annotations

from collections.abc import Collection

import onnx
from onnx import TensorProto, helper, numpy_helper

WIDE = "@f64"  # suffix of a region tensor's float64 twin
SPEC_WRITTEN = {"InstanceNormalization"}  # no float64 kernel in onnxruntime: written by the spec's formula
# ops whose every output element is one of their inputs' elements (or a constant of the node): exact in float32
MOVES = frozenset(
    {
        *("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Tile"),
        *("Gather", "GatherND", "GatherElements", "Slice", "Concat", "Split", "DepthToSpace", "SpaceToDepth"),
    }
)


def _types(model: onnx.ModelProto) -> dict[str, int]:
    g = model.graph
    out = {t.name: t.data_type for t in g.initializer}
    out.update({v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]})
    return out


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)


def _widened(node: onnx.NodeProto, inputs: list[str], outputs: list[str]) -> onnx.NodeProto:
    """`node` on float64 tensors: its float constants and its Cast to float made float64."""
    wide = helper.make_node(node.op_type, inputs, outputs, name=f"{node.name}{WIDE}", domain=node.domain)
    for a in node.attribute:
        copy = onnx.AttributeProto()
        copy.CopyFrom(a)
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
            copy.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype("float64"), a.t.name))
        if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
            copy.i = TensorProto.DOUBLE
        wide.attribute.append(copy)
    return wide


def _instance_norm(node: onnx.NodeProto, inputs: list[str], out: str, rank: int, opset: int) -> list[onnx.NodeProto]:
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, mean and var over the axes after the channels."""
    x, scale, bias = inputs
    eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
    p, axes = f"{node.name}{WIDE}/", list(range(2, rank))

    def mean(src: str, dst: str) -> list[onnx.NodeProto]:
        if opset >= 18:
            shape = helper.make_node(
                "Constant", [], [f"{dst}.axes"], value=helper.make_tensor("", 7, [len(axes)], axes)
            )
            return [shape, helper.make_node("ReduceMean", [src, f"{dst}.axes"], [dst], keepdims=1)]
        return [helper.make_node("ReduceMean", [src], [dst], axes=axes, keepdims=1)]

    def column(src: str, dst: str) -> list[onnx.NodeProto]:  # [C] -> [C, 1, ...]: broadcast over the image
        shape = helper.make_tensor("", TensorProto.INT64, [rank - 1], [-1] + [1] * (rank - 2))
        return [
            helper.make_node("Constant", [], [f"{dst}.shape"], value=shape),
            helper.make_node("Reshape", [src, f"{dst}.shape"], [dst]),
        ]

    eps_t = helper.make_node("Constant", [], [f"{p}eps"], value=helper.make_tensor("", TensorProto.DOUBLE, [], [eps]))
    nodes = [
        *mean(x, f"{p}mean"),
        helper.make_node("Sub", [x, f"{p}mean"], [f"{p}centred"]),
        helper.make_node("Mul", [f"{p}centred", f"{p}centred"], [f"{p}square"]),
        *mean(f"{p}square", f"{p}var"),
        eps_t,
        helper.make_node("Add", [f"{p}var", f"{p}eps"], [f"{p}var_eps"]),
        helper.make_node("Sqrt", [f"{p}var_eps"], [f"{p}std"]),
        helper.make_node("Div", [f"{p}centred", f"{p}std"], [f"{p}normed"]),
        *column(scale, f"{p}scale"),
        *column(bias, f"{p}bias"),
        helper.make_node("Mul", [f"{p}normed", f"{p}scale"], [f"{p}scaled"]),
        helper.make_node("Add", [f"{p}scaled", f"{p}bias"], [out]),
    ]
    # Constants first: a node must follow what it reads
    return sorted(nodes, key=lambda n: n.op_type != "Constant")


def _wide_inputs(
    node: onnx.NodeProto, types: dict[str, int], produced: set[str], widened: set[str], out: list[onnx.NodeProto]
) -> list[str]:
    """`node`'s inputs with each float one read as its float64 twin: a widened node's (in `produced`), or a Cast
    of the float32 tensor added to `out` (once per tensor, recorded in `widened`)."""
    inputs = []
    for t in node.input:
        if not t or types[t] != TensorProto.FLOAT:
            inputs.append(t)
            continue
        if t not in produced and t not in widened:
            out.append(helper.make_node("Cast", [t], [t + WIDE], to=TensorProto.DOUBLE, name=f"{t}{WIDE}/cast"))
            widened.add(t)
        inputs.append(t + WIDE)
    return inputs


def exact_reference(model: onnx.ModelProto, region: Collection[str]) -> onnx.ModelProto | None:
    """`model` (its shapes inferred, its nodes named) with the nodes named in `region` computed in float64,
    their float inputs widened and their outputs read outside the region rounded back; None when the region
    holds none of its nodes or a tensor's type is unknown. (An op onnxruntime cannot run in float64 shows when
    the proof opens it: then there is no reference either.)"""
    g, types = model.graph, _types(model)
    nodes = [n for n in g.node if n.name in region]
    if not nodes or any(n.domain not in ("", "ai.onnx") for n in nodes):
        return None
    read_outside = {i for n in g.node if n.name not in region for i in n.input} | {o.name for o in g.output}
    if any(t not in types for n in nodes for t in [*n.input, *n.output] if t):
        return None
    shapes = {v.name: len(v.type.tensor_type.shape.dim) for v in [*g.input, *g.value_info]}
    produced: set[str] = set()  # outputs of widened region nodes: their values exist in float64 only (`t + WIDE`)
    widened: set[str] = set()  # float32 tensors given a float64 twin by a Cast
    out: list[onnx.NodeProto] = []
    for node in g.node:
        if node.name not in region:
            out.append(node)
            continue
        if node.op_type in MOVES and not produced.intersection(node.input):
            out.append(node)  # moves float32 elements as the original does: nothing to round
            continue
        inputs = _wide_inputs(node, types, produced, widened, out)
        outputs = [t + WIDE if t and types[t] == TensorProto.FLOAT else t for t in node.output]
        produced.update(t for t, wide in zip(node.output, outputs, strict=True) if wide != t)
        if node.op_type in SPEC_WRITTEN:
            if node.input[0] not in shapes:
                return None
            out += _instance_norm(node, inputs, outputs[0], shapes[node.input[0]], _opset(model))
        else:
            out.append(_widened(node, inputs, outputs))
        for t, wide in zip(node.output, outputs, strict=True):
            if wide != t and t in read_outside:
                out.append(helper.make_node("Cast", [wide], [t], to=TensorProto.FLOAT, name=f"{t}{WIDE}/round"))
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    del reference.graph.node[:]
    reference.graph.node.extend(out)
    del reference.graph.value_info[:]  # the region's tensors changed type: onnxruntime infers them again
    return reference
