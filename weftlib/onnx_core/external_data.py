"""External data read only from beside its model: one verdict per model however its weights are packaged.

A model's weights may live in files next to it (`save_as_external_data`). Every command reads a model by its
path so these are found, and none reads a location outside the model's folder: an absolute path, a `..`, or
a symbolic link anywhere on the way would let a model file make the suite read (and, in a cut or a fix,
copy) any file of the machine. The ONNX checker refuses the same locations; this names them in one line
before any work, with the file, the tensor and the place it points at.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import AttributeProto


def tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every initializer and constant tensor of `graph`, sparse ones' values and subgraphs' included."""
    yield from graph.initializer
    yield from (t.values for t in graph.sparse_initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == AttributeProto.GRAPH:
                yield from tensors(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from tensors(sub)


def external_data_problem(model: onnx.ModelProto, folder: str | os.PathLike) -> str | None:
    """Why the external data of `model` (read without it, its file in `folder`) cannot be read from beside
    it: a location outside the folder, a link, a missing file, a range past its end; None when every
    external tensor's data is a plain file inside `folder` that holds its bytes."""
    folder = Path(folder)
    for tensor in tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = {e.key: e.value for e in tensor.external_data}
        location = where.get("location", "")
        named = f"initializer {tensor.name!r} keeps its data in {location!r}"
        outside = _outside(folder, location)
        if outside:
            return f"{named}, {outside}: external data is read only from the model's own folder"
        path = folder / location
        if not path.is_file():
            return f"{named}, which is not a file in {folder}"
        try:
            offset, length = int(where.get("offset") or 0), int(where.get("length") or 0)
        except ValueError:
            return f"{named} at offset {where.get('offset')!r}, length {where.get('length')!r}: not numbers"
        needed = declared_bytes(tensor)
        if length and needed is not None and length != needed:
            return f"{named}, {length} bytes of it, but its shape and type declare {needed}"
        end, size = offset + (length or needed or 0), path.stat().st_size
        if end > size:
            return f"{named} and reads bytes up to {end} of it, which holds {size}"
    return None


PACKED = frozenset(  # element types ONNX stores two to a byte
    getattr(onnx.TensorProto, name) for name in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(onnx.TensorProto, name)
)


def declared_bytes(tensor: onnx.TensorProto) -> int | None:
    """The bytes `tensor`'s shape and element type declare (None for strings and types numpy cannot size)."""
    count = 1
    for d in tensor.dims:
        count *= int(d)
    if tensor.data_type in PACKED:
        return (count + 1) // 2
    if tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    try:
        return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, TypeError, ValueError):
        return None


def _outside(folder: Path, location: str) -> str | None:
    """How `location` leaves `folder` (absolute, `..`, a link on the way); None when it stays inside."""
    if not location:
        return "an empty location"
    if os.path.isabs(location) or Path(location).drive:
        return "an absolute path"
    parts = Path(location).parts
    if ".." in parts:
        return "a path that climbs out with '..'"
    step = folder
    for part in parts:
        step = step / part
        if step.is_symlink():
            return f"through the symbolic link {step} (to {os.readlink(step)})"
    return None
