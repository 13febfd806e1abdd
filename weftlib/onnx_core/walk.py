"""Reading an ONNX file defensively, and the graph facts the exporter, the device gate and the pairing need.

The gate runs on whatever a notebook exported, including a half-written or corrupt file; it has to answer
FAIL with the reason instead of a traceback. External weights are never loaded: the gate reads structure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from .external_data import external_data_problem

STANDARD_DOMAINS = ("", "ai.onnx")  # the default ONNX domain, as written in node.domain and opset_import
# What every graph the suite writes carries (exports and probes alike): the DFC's bundled checker refuses
# IR above 10, and opset 17 is the one the DFC parsed in practice (`params/device_ops.yaml` `compiler`).
WRITTEN_IR_VERSION = 10
WRITTEN_OPSET = 17


def default_opset(model: onnx.ModelProto) -> int | None:
    """The default-domain (ai.onnx) opset a model imports; None when it imports none."""
    versions = [int(o.version) for o in model.opset_import if o.domain in STANDARD_DOMAINS]
    return max(versions) if versions else None


@dataclass
class Graph:
    """A loaded model and the lookups built once over it (every node, subgraphs included)."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)
    ranks: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int | None, ...]] = field(default_factory=dict)  # None: a dimension not static
    folder: Path | None = None  # where the file's external data lies, for a constant read by value (`constant`)

    @property
    def opset(self) -> int | None:
        return default_opset(self.model)

    def op_key(self, node: onnx.NodeProto) -> str:
        """The op type, prefixed by its domain when it is not the standard one (`com.microsoft::Gelu`)."""
        return node.op_type if node.domain in STANDARD_DOMAINS else f"{node.domain}::{node.op_type}"

    def constant(self, tensor: onnx.TensorProto) -> np.ndarray:
        """An initializer's value, read from the file's external data (beside it, in `folder`) when the model
        was loaded without it: the graph of a large file is read as structure, and a rule that needs a
        constant's value reads that one tensor."""
        if uses_external_data(tensor) and self.folder is None:
            raise ValueError(f"{tensor.name}: its value is external data and the graph was indexed without its folder")
        return numpy_helper.to_array(tensor, base_dir=str(self.folder or ""))

    def node_ops(self) -> dict[str, str]:
        """Node name -> op key, for mapping DFC error lines (which name nodes) to op types."""
        return {n.name: self.op_key(n) for n in self.nodes if n.name}


def read_graph(path: str | os.PathLike) -> tuple[Graph | None, str | None]:
    """Load `path` without its external data: (graph, the ONNX checker's complaint or None), or (None, why it
    is unreadable).

    Every command reads a model this way, by its path: external data is looked for beside the file and
    nowhere else (`external_data`: a location outside its folder makes the file unreadable), and the checker
    runs on the file, where it finds that data. The graph of a model the checker rejects is still indexed, so
    that a caller can name what is malformed in words of its own first (the device gate then refuses it).
    """
    path = Path(path)
    if not path.is_file():
        return None, f"{path}: no such file"
    if path.stat().st_size == 0:
        return None, f"{path}: empty file, not an ONNX model"
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError, ValueError, OSError...: all mean "not a readable model"
        return None, f"{path}: not a readable ONNX model ({type(exc).__name__}: {str(exc)[:200]})"
    if model.ir_version == 0 or not model.HasField("graph"):
        return None, f"{path}: not an ONNX model (no IR version or no graph)"
    outside = external_data_problem(model, path.parent)
    if outside:
        return None, f"{path}: {outside}"
    return index_model(model, path.parent), checker_complaint(path)


def read_structure(path: str | os.PathLike) -> Graph:
    """The graph of a file the suite wrote or cached, its weights left on disk (a constant that a rule reads by
    value is read from there, `Graph.constant`): the gate reads structure, and loading a large file's weights
    costs seconds. Unlike `read_graph`, an unreadable file raises and no checker runs."""
    return index_model(onnx.load(os.fspath(path), load_external_data=False), Path(path).parent)


def checker_complaint(model: onnx.ModelProto | str | os.PathLike) -> str | None:
    """What the ONNX checker holds against `model` (or the file at that path: read there, any size, its
    external data found beside it), in one line; None when it is clean."""
    try:
        onnx.checker.check_model(os.fspath(model) if isinstance(model, (str, os.PathLike)) else model)
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        return f"the ONNX checker rejects it ({type(exc).__name__}: {text}); no command judges an invalid graph"
    return None


def walk_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` in order, each Loop/If/Scan body's nodes after the node that holds it."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from walk_nodes(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from walk_nodes(sub)


def index_model(model: onnx.ModelProto, folder: str | os.PathLike | None = None) -> Graph:
    """Every node (subgraphs included), producers, consumers and constant names of an in-memory model; `folder`:
    where its external data lies, when it was loaded without (`Graph.constant`)."""
    g = Graph(model=model, folder=None if folder is None else Path(folder), nodes=list(walk_nodes(model.graph)))
    g.constants = {t.name for t in model.graph.initializer}
    g.constants |= {t.values.name for t in model.graph.sparse_initializer}
    for node in g.nodes:
        for out in node.output:
            g.producer[out] = node
        for name in node.input:
            g.consumers.setdefault(name, []).append(node)
        if node.op_type == "Constant" and node.domain in STANDARD_DOMAINS:
            g.constants.update(node.output)
    g.shapes = _shapes(model)
    g.ranks = {name: len(dims) for name, dims in g.shapes.items()}
    return g


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """Tensor shapes from shape inference, initializers included (best effort: an op the inferencer lacks
    leaves its outputs unknown); a dimension that is not a positive integer is None. A model that already
    carries every node output's static shape (one inferred before) is read as it is: inference copies the
    whole model, weights included, and a cut reads the same large graph several times."""
    inferred = model
    if not fully_shaped(model.graph):
        with contextlib.suppress(Exception):  # a graph shape inference cannot follow keeps its own shapes
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    shapes: dict[str, tuple[int | None, ...]] = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            shapes[info.name] = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor.shape.dim
            )
    return shapes


def fully_shaped(graph: onnx.GraphProto) -> bool:
    """Every node output has a fully known static shape already, so inference could add nothing."""
    known = {
        t.name
        for t in [*graph.input, *graph.value_info, *graph.output]
        if t.type.HasField("tensor_type")
        and t.type.tensor_type.HasField("shape")
        and all(d.HasField("dim_value") for d in t.type.tensor_type.shape.dim)
    }
    return bool(graph.node) and all(o in known for n in graph.node for o in n.output if o)


def graph_inputs(graph: Graph) -> list[tuple[str, tuple[int | str, ...]]]:
    """(name, shape) of every real graph input (initializers listed as inputs are weights, not inputs)."""
    out = []
    for info in graph.model.graph.input:
        if info.name in graph.constants:
            continue
        tensor = info.type.tensor_type
        dims = (
            tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim)
            if tensor.HasField("shape")
            else ()
        )
        out.append((info.name, dims))
    return out


def attribute(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def constant_index(node: onnx.NodeProto, graph: Graph) -> str | None:
    """A Gather whose index input is an initializer or a Constant output (the compiler folds it)."""
    if len(node.input) < 2:
        return "has no index input"
    index = node.input[1]
    if index in graph.constants:
        return None
    source = graph.producer.get(index)
    made_by = f"the output of {source.op_type} {source.name!r}" if source is not None else "a graph input"
    return f"index {index!r} is {made_by}, not an initializer or Constant"
