"""What an ONNX graph holds, as the compiler will see it: op counts, node names, domains, Gathers with run-time
indices, shape plumbing left, the largest stored constant and the largest intermediate tensor.

Kept apart from `export` (which writes files and imports torch): the notebooks, the graph view and the export's
own report read existing files through this module without torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from .walk import constant_index, default_opset, fully_shaped, index_model, walk_nodes

SHAPE_PLUMBING = ("Shape", "Size", "Range", "ConstantOfShape")
GATHER_OPS = ("Gather", "GatherND", "GatherElements")

ModelOrPath = str | os.PathLike | onnx.ModelProto


def load(path_or_model: ModelOrPath, *, weights: bool = True) -> onnx.ModelProto:
    """The model itself, or the file at the path loaded (a clear error when there is none); `weights=False`
    leaves external weight files unread, for a reader of the graph's structure only."""
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    path = Path(path_or_model)
    if not path.is_file():
        raise FileNotFoundError(f"no ONNX file at {str(path)!r}")
    return onnx.load(str(path), load_external_data=weights)


def all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every node, Loop/If/Scan bodies included, so nothing hides from the inventory (the gate's walk, without
    the shapes and producers `index_model` also works out)."""
    return list(walk_nodes(model.graph))


def opset_of(model: onnx.ModelProto) -> int:
    """The default-domain opset the model imports (-1 when it imports none)."""
    version = default_opset(model)
    return -1 if version is None else version


def inventory(path: ModelOrPath) -> dict[str, int]:
    """Op type -> node count over the whole graph (subgraphs included), most frequent first."""
    counts: dict[str, int] = {}
    for node in all_nodes(load(path)):
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def node_names(path: ModelOrPath) -> dict[str, list[str]]:
    """Op type -> names of its nodes, to find a refused op in netron or in the torch source."""
    names: dict[str, list[str]] = {}
    for node in all_nodes(load(path)):
        names.setdefault(node.op_type, []).append(node.name)
    return names


def domains(model: onnx.ModelProto) -> list[str]:
    """The op domains the nodes use ("" is the default ai.onnx domain), sorted."""
    return sorted({n.domain or "" for n in all_nodes(model)})


def plumbing(ops: dict[str, int]) -> dict[str, int]:
    """The shape computations left in an op inventory (a fixed-shape export folds them all away)."""
    return {op: ops[op] for op in SHAPE_PLUMBING if op in ops}


def dynamic_gathers(path: ModelOrPath) -> list[str]:
    """Names of Gather-family nodes whose indices are computed at run time (the compiler wants constants);
    the same rule as the device gate's `constant_index` condition."""
    graph = index_model(load(path))
    return [n.name for n in graph.nodes if n.op_type in GATHER_OPS and constant_index(n, graph) is not None]


def _dtype_bytes(elem_type: int) -> int:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize


def _value_bytes(value: onnx.ValueInfoProto) -> int | None:
    """Static byte size of a typed value, None when a dimension is unknown."""
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    if not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    return int(np.prod([d.dim_value for d in tensor.shape.dim], dtype=np.int64)) * _dtype_bytes(tensor.elem_type)


def _init_bytes(init: onnx.TensorProto) -> int:
    return int(np.prod(init.dims, dtype=np.int64)) * _dtype_bytes(init.data_type)


def initializer_bytes(model: onnx.ModelProto) -> int:
    """The bytes of all stored constants together."""
    return sum(_init_bytes(i) for i in model.graph.initializer)


def largest_initializer(model: onnx.ModelProto) -> tuple[str, int]:
    """Name and byte size of the biggest stored constant (("", 0) when there is none)."""
    sizes = [(init.name, _init_bytes(init)) for init in model.graph.initializer]
    return max(sizes, key=lambda s: s[1], default=("", 0))


def largest_intermediate(model: onnx.ModelProto) -> tuple[str, int]:
    """Largest tensor a node produces at run time (graph outputs included), from ONNX shape inference (or
    the shapes the model already carries for every node output, as `export` writes them)."""
    inferred = model if fully_shaped(model.graph) else onnx.shape_inference.infer_shapes(model, data_prop=True)
    typed = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    produced = [o for n in inferred.graph.node if n.op_type != "Constant" for o in n.output]
    sizes = [(name, _value_bytes(typed[name])) for name in produced if name in typed]
    known = [(name, b) for name, b in sizes if b is not None]
    return max(known, key=lambda s: s[1], default=("", 0))


def shapes(values: Sequence[onnx.ValueInfoProto]) -> dict[str, list[int]]:
    """Each value's static shape by name, -1 for a dimension without a fixed size."""
    return {
        v.name: [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim] for v in values
    }


def summarise(path: str | os.PathLike) -> dict[str, Any]:
    """What the gate and the notebook ask of an existing file: size, versions, ops, domains, Gathers with
    run-time indices, shape plumbing left, largest initializer and intermediate (bytes)."""
    target = Path(path)
    proto = load(target)
    ops = inventory(proto)
    return {
        "path": str(target),
        "file_bytes": target.stat().st_size,
        "ir_version": int(proto.ir_version),
        "opset": opset_of(proto),
        "nodes": sum(ops.values()),
        "ops": ops,
        "domains": domains(proto),
        "dynamic_gathers": dynamic_gathers(proto),
        "plumbing": plumbing(ops),
        "largest_initializer_bytes": largest_initializer(proto)[1],
        "largest_intermediate_bytes": largest_intermediate(proto)[1],
    }
