"""What the suite computes from a graph, or from the nodes of one segment, for the time estimate: operations
(`figures.OPS_PER_MAC` per multiply-accumulate), parameters, the bytes of its inputs and of every tensor its
nodes write, and its layers by kind. The fit reads only what the zoo's rows also give (operations, parameters,
input size); the rest is shown beside it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx

from ...onnx_core.walk import Graph
from ..cut.coverage import node_macs, node_params
from .figures import OPS_PER_MAC

WEIGHTED = ("Conv", "ConvTranspose", "MatMul", "Gemm")


@dataclass(frozen=True)
class GraphFigures:
    """One graph's or segment's counts, in the zoo's units where the zoo has them."""

    gops: float  # 1e9 operations, OPS_PER_MAC per multiply-accumulate
    params_m: float  # millions of parameters (constant inputs of its nodes)
    input_elements: int  # elements of the tensors it reads from outside (the zoo's input resolution, H x W x C)
    activation_bytes: int  # bytes of every tensor its nodes write
    layers: dict[str, int] = field(default_factory=dict)  # weighted layers by op type


def _elements(graph: Graph, name: str) -> int:
    dims = graph.shapes.get(name)
    return int(math.prod(d for d in dims if d is not None)) if dims else 0


def _itemsizes(graph: Graph) -> dict[str, int]:
    infos = [*graph.model.graph.input, *graph.model.graph.value_info, *graph.model.graph.output]
    return {
        i.name: int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)).itemsize)
        for i in infos
        if i.type.tensor_type.elem_type
    }


def figures_of(graph: Graph, nodes: Iterable[str] | None = None) -> GraphFigures:
    """The counts of the named nodes of `graph` (every node when None): what they compute, hold, read and write."""
    names = None if nodes is None else set(nodes)
    chosen = [n for n in graph.nodes if names is None or n.name in names]
    written = {t for n in chosen for t in n.output if t}
    read = {t for n in chosen for t in n.input if t and t not in written and t not in graph.constants}
    sizes = _itemsizes(graph)
    return GraphFigures(
        gops=OPS_PER_MAC * sum(node_macs(n, graph) for n in chosen) / 1e9,
        params_m=sum(node_params(n, graph) for n in chosen) / 1e6,
        input_elements=sum(_elements(graph, t) for t in read),
        activation_bytes=sum(_elements(graph, t) * sizes.get(t, 4) for t in written),
        layers=dict(Counter(n.op_type for n in chosen if n.op_type in WEIGHTED)),
    )
