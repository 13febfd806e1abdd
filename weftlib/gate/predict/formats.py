"""The formats the DFC's parser tracks through a graph, and the context a rule reads a node in.

A tensor the parser can place has a tracked format. It starts at a graph input the input rules accept and
survives the nodes predicted to parse; a shuffle the parser refuses loses it (what follows has no format:
UnsupportedSoftmaxLayerError and the LayerNorm axis crashes in the record); an unjudged node leaves it
unknown; constants and shape arithmetic have none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from ...onnx_core.walk import Graph, attribute
from .shuffles import SLICING as SLICING  # noqa: PLC0414 - the rules read it here; its home is `shuffles`

TRACKED, UNKNOWN, LOST, NONE = "tracked", "unknown", "lost", "none"
_ORDER = {TRACKED: 0, UNKNOWN: 1, LOST: 2}
SUMMING = ("ReduceSum", "ReduceMean", "ReduceL2", "ReduceSumSquare")  # one reduce_sum-like layer each
REDUCTIONS = (*SUMMING, "ReduceMax", "ReduceMin", "ReduceProd")
# inputs that only parameterise the op (a shape, axes, indices into a shape): not data for the format; from 0,
# none is data, so the outputs are shape arithmetic with no format
_PARAMETER_INPUTS_FROM = {
    "Reshape": 1,
    "Expand": 1,
    "Tile": 1,
    "Slice": 1,
    "Squeeze": 1,
    "Unsqueeze": 1,
    "Pad": 1,
    "Resize": 1,
    "Split": 1,
    "CastLike": 1,
    "ConstantOfShape": 0,
    "Shape": 0,
    "Size": 0,
    **{op: 1 for op in REDUCTIONS},
}


def worse_format(formats: list[str]) -> str:
    """The format of a result made from data of these formats (NONE when no data is among them)."""
    live = [f for f in formats if f != NONE]
    return max(live, key=_ORDER.__getitem__) if live else NONE


@dataclass
class Context:
    """The graph and what the prediction has worked out so far (formats of the tensors already reached)."""

    graph: Graph
    formats: dict[str, str] = field(default_factory=dict)

    def shape(self, name: str) -> tuple[int, ...] | None:
        dims = self.graph.shapes.get(name)
        if dims is None or not all(isinstance(d, int) for d in dims):
            return None
        return tuple(d for d in dims if isinstance(d, int))

    def const(self, name: str) -> np.ndarray | None:
        """The value of an initializer or a Constant node's output; None for anything computed."""
        for init in self.graph.model.graph.initializer:
            if init.name == name:
                return self.graph.constant(init)
        node = self.graph.producer.get(name)
        if node is not None and node.op_type == "Constant":
            value = attribute(node, "value")
            return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else None
        return None

    def producer(self, name: str) -> onnx.NodeProto | None:
        return self.graph.producer.get(name)

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        return self.graph.consumers.get(name, [])

    def format(self, name: str) -> str:
        if name in self.graph.constants or not name:
            return NONE
        return self.formats.get(name, UNKNOWN)

    def data_inputs(self, node: onnx.NodeProto) -> list[str]:
        upto = _PARAMETER_INPUTS_FROM.get(node.op_type)
        names = list(node.input) if upto is None else list(node.input)[:upto] if upto else []
        return [n for n in names if n]

    def io_shapes(self, node: onnx.NodeProto) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        return (self.shape(node.input[0]) if node.input else None), (
            self.shape(node.output[0]) if node.output else None
        )
