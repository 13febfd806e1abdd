"""Rewrite an opset-18 graph as opset 17, op by op, and refuse what has no opset-17 form.

Why: torch's dynamo exporter only implements ops at opset >= 18 and down-converts with onnx's C API
version converter, which (onnx 1.23) either keeps the whole graph at 18 when one op fails or writes an
invalid node (a `Split` keeping the opset-18 `num_outputs` attribute). The changes between 17 and 18 that
matter here are few and mechanical, so they are done explicitly, with shapes from ONNX shape inference.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .walk import STANDARD_DOMAINS, default_opset, fully_shaped

SOURCE, TARGET = 18, 17
REDUCE_AXES_INPUT = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
)
SAME_SIGNATURE = ("ScatterElements", "ScatterND")  # 18 only added reduction='max'/'min'


class OpsetError(ValueError):
    """A node that cannot be expressed at the target opset; the message names the node and why."""


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def _drop_attr(node: onnx.NodeProto, name: str) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)


def _const(name: str, consts: dict[str, np.ndarray], node: onnx.NodeProto) -> np.ndarray:
    if name not in consts:
        raise OpsetError(
            f"node {node.name!r} ({node.op_type}): input {name!r} must be a constant to convert to opset {TARGET}"
        )
    return consts[name]


def _dims(name: str, shapes: dict[str, list[int | None]], node: onnx.NodeProto) -> list[int]:
    dims = shapes.get(name)
    if dims is None or any(d is None for d in dims):
        raise OpsetError(f"node {node.name!r} ({node.op_type}): the static shape of {name!r} is unknown")
    return dims  # type: ignore[return-value]


def _split(node, consts, shapes, new_inits) -> None:
    num = _attr(node, "num_outputs")
    if num is None:
        return
    axis_attr = _attr(node, "axis")
    dims = _dims(node.input[0], shapes, node)
    axis = (axis_attr.i if axis_attr else 0) % len(dims)
    chunk = -(-dims[axis] // num.i)
    sizes = [chunk] * (num.i - 1) + [dims[axis] - chunk * (num.i - 1)]
    name = f"{node.name}_split_sizes"
    new_inits.append(numpy_helper.from_array(np.array(sizes, dtype=np.int64), name=name))
    del node.input[1:]
    node.input.append(name)
    _drop_attr(node, "num_outputs")


def _reduce(node, consts, shapes, new_inits) -> None:
    noop = _attr(node, "noop_with_empty_axes")
    if len(node.input) > 1 and node.input[1]:
        axes = _const(node.input[1], consts, node)
        del node.input[1:]
        node.attribute.append(helper.make_attribute("axes", [int(a) for a in axes.reshape(-1)]))
    elif noop is not None and noop.i:
        raise OpsetError(f"node {node.name!r} ({node.op_type}): noop_with_empty_axes=1 has no opset-17 form")
    _drop_attr(node, "noop_with_empty_axes")


def _pad(node, consts, shapes, new_inits) -> None:
    if len(node.input) < 4 or not node.input[3]:
        del node.input[3:]
        return
    rank = len(_dims(node.input[0], shapes, node))
    axes = [int(a) % rank for a in _const(node.input[3], consts, node).reshape(-1)]
    pads = _const(node.input[1], consts, node).reshape(-1)
    full = np.zeros(2 * rank, dtype=np.int64)
    for i, a in enumerate(axes):
        full[a], full[a + rank] = pads[i], pads[i + len(axes)]
    name = f"{node.name}_pads_all_axes"
    new_inits.append(numpy_helper.from_array(full, name=name))
    node.input[1] = name
    del node.input[3:]


def _resize(node, consts, shapes, new_inits) -> None:
    for name, default in (("antialias", 0), ("axes", None), ("keep_aspect_ratio_policy", b"stretch")):
        attr = _attr(node, name)
        if attr is None:
            continue
        value = helper.get_attribute_value(attr)
        if value != default:
            raise OpsetError(f"node {node.name!r} (Resize): {name}={value!r} has no opset-17 form")
        _drop_attr(node, name)


def _scatter(node, consts, shapes, new_inits) -> None:
    red = _attr(node, "reduction")
    if red is not None and red.s in (b"max", b"min"):
        raise OpsetError(f"node {node.name!r} ({node.op_type}): reduction={red.s.decode()} needs opset 18")


HANDLERS = {
    "Split": _split,
    "Pad": _pad,
    "Resize": _resize,
    **{op: _reduce for op in REDUCE_AXES_INPUT},
    **{op: _scatter for op in SAME_SIGNATURE},
}


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    inferred = model if fully_shaped(model.graph) else onnx.shape_inference.infer_shapes(model, data_prop=True)
    values = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    return {
        v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        for v in values
        if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")
    }


def _changed_at_source(op_type: str) -> bool:
    """True when the op's definition changed at opset 18 (so its opset-17 form may differ)."""
    try:
        return onnx.defs.get_schema(op_type, SOURCE).since_version == SOURCE
    except onnx.defs.SchemaError:
        return False


def _drop_unused_initializers(model: onnx.ModelProto) -> None:
    """Axes moved into attributes leave their constants behind; a clean file keeps none unused."""
    used = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)


def to_opset17(model: onnx.ModelProto) -> onnx.ModelProto:
    """Convert an opset-18 model (default domain) to opset 17 in place and return it."""
    version = default_opset(model)
    if version == TARGET:
        return model
    if version != SOURCE:
        raise OpsetError(f"model: expected default-domain opset {SOURCE}, got {version}")
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    shapes = _static_shapes(model)
    new_inits: list[onnx.TensorProto] = []
    for node in model.graph.node:
        if node.domain not in STANDARD_DOMAINS:
            continue
        if node.op_type in HANDLERS:
            HANDLERS[node.op_type](node, consts, shapes, new_inits)
        elif _changed_at_source(node.op_type):
            raise OpsetError(
                f"node {node.name!r}: {node.op_type} changed in opset {SOURCE} and has no "
                f"conversion to opset {TARGET} here"
            )
    model.graph.initializer.extend(new_inits)
    _drop_unused_initializers(model)
    for opset in model.opset_import:
        if opset.domain in STANDARD_DOMAINS:
            opset.version = TARGET
    return model
