"""A malformed graph refused before any work, in one line naming the problem (the command's exit 2).

`structure_problem` is what every command that reads a model refuses: a tensor made twice (a node output
named like a graph input, an initializer or another node's output), a read of a tensor nothing makes, a
cycle, nodes out of topological order (the ONNX spec requires it: nothing here sorts a graph silently), two
nodes of one graph with one name (onnxruntime refuses to load it, and the DFC's start and end nodes are
names), a sparse initializer (the suite reads, rewrites and cuts dense weights only), and external data
that is missing or outside the model's folder. `cut_problem` is what a cut must also be able to do, and
`proof_problem` what a fix must, since both run the graph in onnxruntime on random inputs: have inputs of
types those can be made of, nodes, static input shapes, ops onnxruntime has kernels for, no subgraph
reading its enclosing graph (a segment boundary cannot carry that read), and tensors that fit in memory.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import onnx
from onnx import AttributeProto, helper

from ...onnx_core.external_data import external_data_problem
from ...onnx_core.walk import STANDARD_DOMAINS, walk_nodes

RUNTIME_DOMAINS = (*STANDARD_DOMAINS, "ai.onnx.ml", "com.microsoft")  # the domains onnxruntime has kernels for
GiB = 1 << 30
T = onnx.TensorProto
FED = frozenset(  # the element types `random_feeds` makes and onnxruntime's CPU kernels take
    (T.FLOAT, T.DOUBLE, T.FLOAT16, T.BOOL, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64)
)


def structure_problem(model: onnx.ModelProto, folder: str | os.PathLike | None) -> str | None:
    """What makes `model` (its weights not loaded) no graph at all; None when nothing does. `folder`: where
    its external data must be (the model file's folder); None skips that check."""
    graph = model.graph
    missing = external_data_problem(model, Path(folder)) if folder is not None else None
    return missing or _sparse(graph) or _named_twice(graph) or _made_twice(graph) or _order(graph)


def cut_problem(model: onnx.ModelProto, budget: int | None = None) -> str | None:
    """What keeps a cut of `model` from being made and run (module docstring); None when nothing does.
    `budget`: the most bytes one tensor, or all the inputs together, may declare (default: this machine's memory)."""
    graph = model.graph
    if not graph.node:
        return "the graph has no nodes: nothing to cut (the device gate fails it for that)"
    weights = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    if not inputs:
        return "the graph has no input"
    unfed = unfed_input(model)
    if unfed:
        return unfed
    for info in inputs:
        if _dims(info) is None:
            return f"input {info.name!r} has a shape that is not static ({_shape_text(info)}), so no cut can be checked"
    return _foreign_op(model) or _outer_read(graph) or too_large(model, budget)


@functools.cache
def memory() -> int:
    """This machine's physical memory in bytes: the default budget of one run of a graph."""
    import psutil

    return int(psutil.virtual_memory().total)


def proof_problem(model: onnx.ModelProto, budget: int | None = None) -> str | None:
    """What keeps `gate fix` from proving a rewrite of `model` on random inputs: an input of a type they cannot
    be made of, or tensors over the memory budget; None when nothing does."""
    return unfed_input(model) or too_large(model, budget)


def unfed_input(model: onnx.ModelProto) -> str | None:
    """A graph input the proofs cannot feed random values (`onnx_core.runtime.random_feeds`): one that is no
    tensor (a sequence, a map, an optional) or a tensor of an element type numpy and onnxruntime's CPU kernels
    do not both take (string, bfloat16, float8, 4-bit, complex); None when every input is fed."""
    weights = {t.name for t in model.graph.initializer} | {t.values.name for t in model.graph.sparse_initializer}
    for info in model.graph.input:
        if info.name in weights:
            continue
        kind = info.type.WhichOneof("value")
        if kind != "tensor_type":
            what = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional"}
            return (
                f"input {info.name!r} is {what.get(kind or '', 'no tensor')}: the proof feeds tensors of random "
                "values only, so no rewrite or cut of it can be proven"
            )
        elem = info.type.tensor_type.elem_type
        if elem not in FED:
            return (
                f"input {info.name!r} is a tensor of {_type_name(elem)}: the proof feeds random float, integer and "
                "bool tensors only, so no rewrite or cut of it can be proven"
            )
    return None


def _type_name(elem: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem).lower()
    except ValueError:
        return f"element type {elem}"


def _sparse(graph: onnx.GraphProto) -> str | None:
    if graph.sparse_initializer:
        name = graph.sparse_initializer[0].values.name
        return (
            f"initializer {name!r} is sparse: the suite reads, rewrites and cuts dense weights only (save it "
            "dense, e.g. numpy_helper.from_array of its values)"
        )
    return None


def _named_twice(graph: onnx.GraphProto) -> str | None:
    """Two nodes of one graph (a subgraph is a graph of its own) with one non-empty name."""
    seen: set[str] = set()
    for node in graph.node:
        if node.name and node.name in seen:
            return (
                f"two nodes are named {node.name!r}: onnxruntime refuses to load such a graph, and the DFC names "
                "its start and end nodes by name (name each node once)"
            )
        seen.add(node.name)
        for sub in (g for attr in node.attribute for g in _subgraphs(attr)):
            twice = _named_twice(sub)
            if twice:
                return twice
    return None


def _subgraphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    return list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []


def _made_twice(graph: onnx.GraphProto) -> str | None:
    made = {i.name: "a graph input" for i in graph.input}
    made.update({t.name: "an initializer" for t in graph.initializer if t.name not in made})
    for node in graph.node:
        for out in (o for o in node.output if o):
            if out in made:
                return f"node {node.name!r} makes {out!r}, which is {made[out]} already: a tensor is made once"
            made[out] = f"made by node {node.name!r}"
    return None


def _order(graph: onnx.GraphProto) -> str | None:
    """A read of a tensor nothing makes, a cycle, or a node before the node whose output it reads."""
    known = {"", *(i.name for i in graph.input), *(t.name for t in graph.initializer)}
    known |= {t.values.name for t in graph.sparse_initializer}
    maker = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    needs = [(set(n.input) | outer_reads(n)) - known for n in graph.node]
    for node, reads in zip(graph.node, needs):
        orphan = sorted(reads - set(maker))
        if orphan:
            return f"node {node.name!r} reads {orphan[0]!r}, which no node, input or initializer makes"
    after = [{maker[t] for t in reads} for reads in needs]
    done: set[int] = set()
    while len(done) < len(after):
        ready = [i for i, deps in enumerate(after) if i not in done and deps <= done]
        if not ready:
            return f"the nodes {_cycle(after, done, graph)} form a cycle: each waits for another's output"
        done.update(ready)
    for i, deps in enumerate(after):
        later = sorted(d for d in deps if d > i)
        if later:
            tensor = next(t for t in needs[i] if maker[t] == later[0])
            return (
                f"node {graph.node[i].name!r} reads {tensor!r} before node {graph.node[later[0]].name!r} makes it: "
                "the nodes are not in topological order, as ONNX requires (save the graph sorted)"
            )
    return None


def _cycle(after: list[set[int]], done: set[int], graph: onnx.GraphProto) -> list[str]:
    """The names of (up to four) nodes on a cycle: those left unsorted, less the ones only waiting on it."""
    left = {i for i in range(len(after)) if i not in done}
    while True:
        waited_on = {d for i in left for d in after[i]}
        sinks = {i for i in left if i not in waited_on}
        if not sinks:
            return [graph.node[i].name for i in sorted(left)][:4]
        left -= sinks


def outer_reads(node: onnx.NodeProto) -> set[str]:
    """The tensors `node`'s subgraphs (If, Loop, Scan bodies) read from the graphs around them."""
    return {t for attr in node.attribute for sub in _subgraphs(attr) for t in _free(sub)}


def _free(graph: onnx.GraphProto) -> set[str]:
    own = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    own |= {o for n in graph.node for o in n.output}
    reads = {t for n in graph.node for t in (*n.input, *outer_reads(n)) if t}
    reads |= {o.name for o in graph.output}
    return reads - own


def _foreign_op(model: onnx.ModelProto) -> str | None:
    local = {(f.domain, f.name) for f in model.functions}
    for node in walk_nodes(model.graph):
        if (node.domain, node.op_type) in local:
            continue
        if node.domain not in RUNTIME_DOMAINS:
            return (
                f"node {node.name!r} is op {node.op_type} of the custom domain {node.domain!r}: onnxruntime has no "
                "kernel for it, so no cut can be run"
            )
        domain = "" if node.domain in STANDARD_DOMAINS else node.domain
        if domain in ("", "ai.onnx.ml") and not onnx.defs.has(node.op_type, domain):
            return f"node {node.name!r} is op {node.op_type}, which ONNX does not define"
    return None


def _outer_read(graph: onnx.GraphProto) -> str | None:
    for node in graph.node:
        reads = sorted(outer_reads(node))
        if reads:
            return (
                f"node {node.name!r} holds a subgraph that reads {reads[0]!r} from the graph around it: a cut "
                "cannot carry such a read across a segment boundary yet"
            )
    return None


def too_large(model: onnx.ModelProto, budget: int | None = None) -> str | None:
    """A tensor whose declared or inferred shape (an input, an output, a value_info), or all the inputs
    together, is over `budget` bytes (default: this machine's memory); None when none is."""
    budget = budget or memory()
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    sizes = {i.name: _bytes(i) for i in inputs}
    over = f"over the memory budget of {budget / GiB:.1f} GiB (this machine's memory), so the proof cannot run it"
    for info in [*inputs, *model.graph.output, *model.graph.value_info]:
        size = sizes.get(info.name) or _bytes(info)
        if size > budget:
            return f"tensor {info.name!r} declares {_shape_text(info)}, {size / GiB:,.1f} GiB, {over}"
    if sum(sizes.values()) > budget:
        return f"the inputs declare {sum(sizes.values()) / GiB:,.1f} GiB together, {over}"
    return None


def _dims(info: onnx.ValueInfoProto) -> list[int] | None:
    """The static shape of a tensor value, or None when a dimension is not a positive number."""
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    return dims if all(d > 0 for d in dims) else None


def _bytes(info: onnx.ValueInfoProto) -> int:
    dims = _dims(info)
    elem = info.type.tensor_type.elem_type
    if dims is None or elem in (onnx.TensorProto.UNDEFINED, onnx.TensorProto.STRING):
        return 0
    try:
        itemsize = helper.tensor_dtype_to_np_dtype(elem).itemsize
    except (KeyError, TypeError, ValueError):
        return 0
    count = 1
    for d in dims:
        count *= d
    return count * itemsize


def _shape_text(info: onnx.ValueInfoProto) -> str:
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return "no shape"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
    return f"[{', '.join(dims)}] {onnx.TensorProto.DataType.Name(tensor.elem_type).lower()}"
