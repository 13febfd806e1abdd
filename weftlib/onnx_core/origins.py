"""Which torch module each exported node came from, read from the exporter's own metadata.

torch's dynamo exporter writes `pkg.torch.onnx.name_scopes` on every node it traced: the module path from
the exported module down to the op (e.g. `['', 'model', 'model.upsampler', '_unsafe_index']`). Nodes the
ONNX optimizer created afterwards (a Split it fused from a chunk) carry none; they are given the origin of
the node that produces their first input, and marked so.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from pathlib import Path

import onnx

SCOPES_KEY = "pkg.torch.onnx.name_scopes"
TOP_LEVEL = "(top level)"
INFERRED = " (no metadata: from its input)"


def module_of(node: onnx.NodeProto) -> str | None:
    """The innermost module of the node's name scopes, wrapper prefixes (`model.`) dropped and block
    indices folded to `*` (so one line says e.g. 'blocks.*.self_attn'); None when it carries none."""
    meta = {p.key: p.value for p in node.metadata_props}
    if SCOPES_KEY not in meta:
        return None
    try:
        scopes = ast.literal_eval(meta[SCOPES_KEY])
    except (ValueError, SyntaxError):
        return None
    modules = [s for s in scopes[:-1] if s]
    where = re.sub(r"^(model\.)+", "", modules[-1]) if modules else TOP_LEVEL
    where = TOP_LEVEL if where == "model" else where
    return re.sub(r"\.\d+(?=\.|$)", ".*", where)


def node_origins(model: onnx.ModelProto) -> dict[str, str]:
    """Node name -> the module it was traced from (`module_of`); a node without metadata takes its first
    input's producer's origin, marked as inferred, or the top level when nothing upstream has one."""
    producer = {out: n for n in model.graph.node for out in n.output}
    found: dict[str, str] = {}

    def origin(node: onnx.NodeProto, depth: int = 0) -> str:
        scoped = module_of(node)
        if scoped is not None:
            return scoped
        upstream = next((producer[i] for i in node.input if i in producer), None)
        if upstream is None or depth > 32:
            return TOP_LEVEL
        return origin(upstream, depth + 1).removesuffix(INFERRED) + INFERRED

    for node in model.graph.node:
        found[node.name] = origin(node)
    return found


def op_origins(path: str | os.PathLike, ops: Sequence[str]) -> dict[str, list[str]]:
    """For each op type in `ops`, the modules its nodes were traced from (sorted, each once)."""
    model = onnx.load(str(Path(path)), load_external_data=False)
    where = node_origins(model)
    found: dict[str, set[str]] = {op: set() for op in ops}
    for node in model.graph.node:
        if node.op_type in found:
            found[node.op_type].add(where[node.name])
    return {op: sorted(s) for op, s in found.items()}
