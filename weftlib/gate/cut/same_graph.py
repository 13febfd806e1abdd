"""Whether a one-segment cut is the graph itself, read from the two files rather than run.

A cut whose single segment holds every node (all on the host, or all on the device) hands nothing between
segments: its chain is one call of the segment file. Running that file beside the graph at NAF's 512² costs
seconds per graph and proves only that `onnx.utils.Extractor` copied the graph faithfully. That is checked
here directly: the same operator sets, the same nodes (each compared whole, attributes and subgraphs
included, in any order: onnxruntime orders them itself), the same weights byte for byte, and the same graph
inputs and outputs with their types. Any difference (a weight the extractor dropped, an input listed as an
initializer) is named, and the caller runs the chain as for any other cut.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

import onnx


def _serialized(items: Iterable[onnx.NodeProto | onnx.TensorProto | onnx.FunctionProto]) -> Counter[bytes]:
    return Counter(item.SerializeToString(deterministic=True) for item in items)


def _typed(values: Iterable[onnx.ValueInfoProto]) -> dict[str, bytes]:
    return {v.name: v.type.SerializeToString(deterministic=True) for v in values}


def difference(segment: str | os.PathLike, original: str | os.PathLike) -> str:
    """What keeps the segment file from being the original graph, in words; "" when it is the same graph (the
    same computation on the same inputs, whatever its node order, graph name and value_info)."""
    seg, whole = onnx.load(str(segment)), onnx.load(str(original))
    a, b = seg.graph, whole.graph
    checks = (
        (
            "operator sets",
            {(o.domain, o.version) for o in seg.opset_import},
            {(o.domain, o.version) for o in whole.opset_import},
        ),
        ("local functions", _serialized(seg.functions), _serialized(whole.functions)),
        ("graph inputs", _typed(a.input), _typed(b.input)),
        ("graph outputs", _typed(a.output), _typed(b.output)),
        ("nodes", _serialized(a.node), _serialized(b.node)),
        ("weights", _serialized(a.initializer), _serialized(b.initializer)),
        ("sparse weights", len(a.sparse_initializer), len(b.sparse_initializer)),
    )
    return next((f"its {what} differ from the graph's" for what, mine, theirs in checks if mine != theirs), "")
