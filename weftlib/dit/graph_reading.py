"""An exported variant's ONNX file read back for what notebook 04 shows of it: the ranks its inputs ended with,
the Reshapes that split the heads (and whether each is glued to its Transpose), and the torch module each op was
traced from. Descriptions of the graph only; the verdict on a pattern is the device gate's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from weftlib.onnx_core import origins

op_origins = origins.op_origins  # for each op, the torch modules its nodes were traced from


def input_ranks(path: str | Path) -> dict[str, int]:
    """Graph input name -> rank, for the ONNX file at `path` (initializers are not inputs)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    return {v.name: len(v.type.tensor_type.shape.dim) for v in proto.graph.input if v.name not in inits}


def _origin(node: Any) -> str:
    """The torch module a node was traced from (`onnx_core.origins.module_of`), the top level without one."""
    return origins.module_of(node) or origins.TOP_LEVEL


def head_splits(path: str | Path, heads: int, head_dim: int) -> list[dict[str, Any]]:
    """Every Reshape of the graph that splits the channel axis into [..., heads, head_dim] (the head split,
    [B, L, C] -> [B, L, H, d], or upstream's fused split [B, L, 3C] -> [B, L, 3, H, d]), with the ops that read its output and
    whether they are all Transposes (the pair DFC 5.3.0 fuses into a format conversion). A description of
    the graph for the tables; the verdict on the pattern is the device gate's."""
    import onnx

    proto = onnx.shape_inference.infer_shapes(onnx.load(str(path), load_external_data=False))
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*proto.graph.value_info, *proto.graph.input, *proto.graph.output]
    }
    readers: dict[str, list[str]] = {}
    for node in proto.graph.node:
        for name in dict.fromkeys(node.input):  # a node reading one tensor twice reads it once
            readers.setdefault(name, []).append(node.op_type)
    rows = []
    for node in proto.graph.node:
        if node.op_type != "Reshape":
            continue
        before, out = shapes.get(node.input[0], []), shapes.get(node.output[0], [])
        lead = len(before) - 1
        splits_channels = (
            0 < lead < len(out) - 1 and out[:lead] == before[:lead] and math.prod(out[lead:]) == before[-1]
        )
        if splits_channels and out[-2:] == [heads, head_dim]:
            after = readers.get(node.output[0], [])
            rows.append(
                {
                    "reshape": node.name,
                    "from": _origin(node),
                    "input": shapes.get(node.input[0], []),
                    "output": out,
                    "read by": ", ".join(sorted(after)),
                    "glued to its Transpose": bool(after) and set(after) == {"Transpose"},
                }
            )
    return rows
