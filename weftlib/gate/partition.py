"""What runs on the device and what stays on the host: the cut of a graph, proven equal by running it.

The gate's per-node prediction decides the side of each node: a node predicted to parse may go to the
device, any other stays on the host. Nodes are placed in execution order on alternating levels (host,
device, host, ...), each node on the lowest level of its side that comes after all of its producers, so no
path leaves a segment and comes back: every level splits into connected segments that run one after the
other. A device segment whose inputs break the input rules (a rank or a shape the parser refuses or leaves
unjudged) hands the nodes that read them to the host, and the cut is made again until it holds.

Each segment is extracted as its own ONNX file with `onnx.utils.Extractor`. For a device segment the cut is
also given as the DFC takes it on the original graph: `start_node_names` (the segment's first nodes, or the
graph input's name where it starts at one), `end_node_names` (node names, never tensor names: the record
shows `MisspellNodeError` for a tensor name) and `net_input_shapes`. `prove` runs the segments as a chain in
onnxruntime and compares the graph's outputs with the whole graph run in one piece.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

import numpy as np
import onnx

from ..onnx_core import compare, runtime
from ..onnx_core.walk import Graph, graph_inputs, index_model
from .allowlist import DeviceOps
from .predict import Prediction, predict
from .standing import PARSE

DEVICE, HOST = "device", "host"
TOLERANCE = 1e-6  # onnxruntime, optimisations off, the same kernels on both sides: equal but for summation order
SHUFFLES_ABSORBED = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity"}


class PartitionError(ValueError):
    """The graph cannot be partitioned (unreadable, dynamic, or without named nodes); the message says why."""


@dataclass(frozen=True)
class Segment:
    """A part of the graph that runs on one side, in execution order."""

    index: int
    runs_on: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]  # tensors of the original graph that come from outside the segment
    outputs: tuple[str, ...]  # tensors it hands on (to a later segment, or as graph outputs)
    file: str = ""
    start_node_names: tuple[str, ...] = ()
    end_node_names: tuple[str, ...] = ()
    net_input_shapes: dict[str, list[int]] = field(default_factory=dict)
    largest_layer: dict[str, Any] = field(default_factory=dict)
    end_risks: tuple[str, ...] = ()  # end nodes the parser may absorb (InvalidHNError ... missing in the HN)


@dataclass(frozen=True)
class Coverage:
    """The share of the graph on the device, and what crosses between device and host per inference."""

    nodes: tuple[int, int]  # (on the device, in all)
    macs: tuple[int, int]
    params: tuple[int, int]
    crossings: int  # tensors entering or leaving a device segment
    bytes_crossing: int

    def share(self, what: str) -> float:
        on, total = getattr(self, what)
        return on / total if total else 0.0


@dataclass(frozen=True)
class Partition:
    """The segments of one graph, their coverage, and the proof once `prove` has run."""

    model: str
    segments: tuple[Segment, ...]
    coverage: Coverage
    moved_to_host: dict[str, str]  # node -> why it could have gone to the device and did not (judged cut out)
    max_abs_diff: float | None = None
    tolerance: float = TOLERANCE
    prediction: Prediction | None = field(default=None, compare=False, repr=False)  # the whole graph's, cut from

    @property
    def device_segments(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.runs_on == DEVICE)

    @property
    def proven(self) -> bool:
        return self.max_abs_diff is not None and self.max_abs_diff <= self.tolerance

    def as_json(self) -> dict[str, Any]:
        segments = []
        for s in self.segments:
            row: dict[str, Any] = {
                "file": s.file,
                "runs_on": s.runs_on,
                "inputs": list(s.inputs),
                "outputs": list(s.outputs),
                "nodes": len(s.nodes),
            }
            if s.runs_on == DEVICE:
                row.update(
                    start_node_names=list(s.start_node_names),
                    end_node_names=list(s.end_node_names),
                    net_input_shapes=s.net_input_shapes,
                    largest_layer=s.largest_layer,
                    end_risks=list(s.end_risks),
                )
            segments.append(row)
        c = self.coverage
        return {
            "model": self.model,
            "segments": segments,
            "max_abs_diff": self.max_abs_diff,
            "tolerance": self.tolerance,
            "proven": self.proven,
            "coverage": {
                "nodes": {"device": c.nodes[0], "total": c.nodes[1], "share": c.share("nodes")},
                "macs": {"device": c.macs[0], "total": c.macs[1], "share": c.share("macs")},
                "params": {"device": c.params[0], "total": c.params[1], "share": c.share("params")},
                "crossings": c.crossings,
                "bytes_crossing": c.bytes_crossing,
            },
            "moved_to_host": self.moved_to_host,
        }


# ------------------------------------------------------------------------------------------ the cut


def _top_nodes(graph: Graph) -> list[onnx.NodeProto]:
    return list(graph.model.graph.node)


def _levels(nodes: list[onnx.NodeProto], side: dict[str, str], producer: dict[str, int]) -> list[int]:
    """Per node, its level: even levels host, odd device, never below a producer's level."""
    levels: list[int] = []
    for node in nodes:
        floor = max((levels[producer[t]] for t in node.input if t in producer), default=0)
        want = 1 if side[node.name] == DEVICE else 0
        levels.append(floor if floor % 2 == want else floor + 1)
    return levels


def _components(members: list[int], nodes: list[onnx.NodeProto]) -> list[list[int]]:
    """The connected parts of one level (nodes linked by a tensor one makes and another reads)."""
    parent = {i: i for i in members}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    made = {t: i for i in members for t in nodes[i].output if t}
    for i in members:
        for t in nodes[i].input:
            if t in made:
                parent[root(i)] = root(made[t])
    groups: dict[int, list[int]] = {}
    for i in members:
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _boundary(indices: list[int], nodes: list[onnx.NodeProto], constants: set[str]) -> tuple[list[str], list[str]]:
    """(tensors the group reads from outside it, tensors it makes), each in graph order."""
    made = list(dict.fromkeys(t for i in indices for t in nodes[i].output if t))
    own = set(made)
    inputs = [t for i in indices for t in nodes[i].input if t and t not in own and t not in constants]
    return list(dict.fromkeys(inputs)), made


def _segments(nodes: list[onnx.NodeProto], side: dict[str, str], graph: Graph) -> list[Segment]:
    """The segments of `nodes` for the sides given, in execution order."""
    producer = {t: i for i, n in enumerate(nodes) for t in n.output if t}
    outputs = {o.name for o in graph.model.graph.output}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(i)
    levels = _levels(nodes, side, producer)
    groups = [
        g
        for level in sorted(set(levels))
        for g in _components([i for i, lv in enumerate(levels) if lv == level], nodes)
    ]
    segments = []
    for index, group in enumerate(groups):
        inputs, made = _boundary(group, nodes, graph.constants)
        inside = set(group)
        handed = [t for t in made if t in outputs or any(c not in inside for c in consumers.get(t, []))]
        segments.append(
            Segment(
                index, side[nodes[group[0]].name], tuple(nodes[i].name for i in group), tuple(inputs), tuple(handed)
            )
        )
    return segments


def cut(
    model: onnx.ModelProto,
    ops: DeviceOps,
    prediction: Prediction | None = None,
    host: frozenset[str] | set[str] = frozenset(),
    extractor: onnx.utils.Extractor | None = None,
) -> tuple[list[Segment], dict[str, str]]:
    """The segments of `model` (no files yet) and why each node that could not go to the device stays on
    the host.

    A node may go to the device when it is predicted to parse, or when it is unjudged only for what an
    earlier node left it (its input's format): cut out, it starts from a fresh input. Each device segment is
    then extracted and judged alone, as the DFC parses a cut; a node that does not parse there goes to the
    host, and the graph is cut again until every device segment parses alone. `host`: nodes kept on the host
    whatever their prediction (the DFC refused them in a cut). `extractor`: one already built on `model`
    (building one infers the model's shapes again)."""
    graph = index_model(model)
    prediction = prediction or predict(graph, ops)
    nodes = _top_nodes(graph)
    names = [n.name for n in nodes]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise PartitionError("every node needs a unique name: the DFC's start and end nodes are node names")
    causes = {f.node for f in prediction.judgements if f.prediction != PARSE and not f.downstream}
    side = {n.name: DEVICE if n.name not in causes and not _has_subgraph(n) else HOST for n in nodes}
    moved: dict[str, str] = {}
    for name in host:
        if side.get(name) == DEVICE:
            side[name], moved[name] = HOST, "the DFC refused it in a cut"
    extractor = extractor or onnx.utils.Extractor(model)
    while True:
        segments = _segments(nodes, side, graph)
        changed = False
        for s in segments:
            if s.runs_on != DEVICE:
                continue
            alone = predict(index_model(extractor.extract_model(list(s.inputs), list(s.outputs))), ops)
            for f in alone.judgements:
                if f.prediction != PARSE:
                    for name in (
                        [f.node]
                        if f.node in side
                        else [c.name for c in graph.consumers.get(f.node, []) if c.name in s.nodes]
                    ):
                        if side.get(name) == DEVICE:
                            side[name] = HOST
                            moved[name] = (
                                f"cut out, it is {f.prediction} by {f.rule if f.rule != 'op' else 'op ' + f.op}"
                            )
                            changed = True
        if not changed:
            return segments, moved


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


# ------------------------------------------------------------------------------- DFC arguments, coverage


def translate_args(segment: Segment, graph: Graph) -> dict[str, Any]:
    """`start_node_names`, `end_node_names` and `net_input_shapes` for `translate_onnx_model` on the original
    graph: a graph input starts the parse by its own name, any other input by the nodes that read it."""
    inputs = {name for name, _ in graph_inputs(graph)}
    members = set(segment.nodes)
    starts: dict[str, list[int]] = {}
    for t in segment.inputs:
        shape = list(_dims(graph.shapes.get(t) or ()))
        if t in inputs:
            starts[t] = shape
            continue
        for node in graph.consumers.get(t, []):
            if node.name in members:
                starts.setdefault(node.name, shape)
    ends = [graph.producer[t].name for t in segment.outputs]
    return {
        "start_node_names": list(starts),
        "end_node_names": list(dict.fromkeys(ends)),
        "net_input_shapes": starts,
    }


def _dims(shape: tuple[int | None, ...]) -> tuple[int, ...]:
    """A shape whose dimensions are all static; a None one is a TypeError, as int(None) or math.prod was."""
    dims = tuple(d for d in shape if d is not None)
    if len(dims) != len(shape):
        raise TypeError(f"shape {shape} has a dimension that is not static")
    return dims


def node_macs(node: onnx.NodeProto, graph: Graph) -> int:
    """Multiply-accumulates of a MatMul, Gemm or Conv from its static shapes (0 for anything else)."""
    out = graph.shapes.get(node.output[0]) if node.output else None
    if not out or any(d is None for d in out):
        return 0
    if node.op_type in ("MatMul", "Gemm"):
        a = graph.shapes.get(node.input[0]) or ()
        k = (
            a[0]
            if node.op_type == "Gemm" and any(x.name == "transA" and x.i for x in node.attribute)
            else (a[-1] if a else None)
        )
        return int(math.prod(_dims(out)) * k) if isinstance(k, int) else 0
    if node.op_type == "Conv":
        w = graph.shapes.get(node.input[1]) or ()
        if len(w) < 3 or any(d is None for d in w):
            return 0
        return int(math.prod(_dims(out)) * math.prod(_dims(w[1:])))
    return 0


def node_params(node: onnx.NodeProto, graph: Graph) -> int:
    return sum(
        int(math.prod(_dims(graph.shapes.get(t) or ())))
        for t in node.input
        if t in graph.constants and t in graph.shapes
    )


def largest_layer(segment: Segment, graph: Graph, ops: DeviceOps) -> dict[str, Any]:
    """The segment's largest weighted layer (most parameters) with the compile-stage figures of the record
    beside it: a risk to check, not a verdict."""
    best: dict[str, Any] = {}
    for name in segment.nodes:
        node = next(n for n in graph.nodes if n.name == name)
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        params = node_params(node, graph)
        if params > best.get("params", 0):
            w = graph.shapes.get(node.input[1]) or ()
            best = {
                "node": name,
                "op": node.op_type,
                "weight_shape": list(w),
                "params": params,
                "macs": node_macs(node, graph),
            }
    if best:
        best["compile_record"] = ops.compile_figures
    return best


def coverage(segments: list[Segment], graph: Graph) -> Coverage:
    """Nodes, MACs and parameters on the device against the whole graph, and every tensor that enters or
    leaves a device segment (each device segment is its own network: what it reads and what it hands on
    travel to or from the device, whichever segment is on the other side)."""
    nodes = {n.name: n for n in _top_nodes(graph)}
    device = {name for s in segments if s.runs_on == DEVICE for name in s.nodes}
    macs = {name: node_macs(n, graph) for name, n in nodes.items()}
    params = {name: node_params(n, graph) for name, n in nodes.items()}
    moving = [t for s in segments if s.runs_on == DEVICE for t in (*s.inputs, *s.outputs)]
    return Coverage(
        nodes=(len(device), len(nodes)),
        macs=(sum(macs[n] for n in device), sum(macs.values())),
        params=(sum(params[n] for n in device), sum(params.values())),
        crossings=len(moving),
        bytes_crossing=sum(int(math.prod(_dims(graph.shapes.get(t) or (0,)))) * _itemsize(graph, t) for t in moving),
    )


def _itemsize(graph: Graph, name: str) -> int:
    for info in [*graph.model.graph.input, *graph.model.graph.value_info, *graph.model.graph.output]:
        if info.name == name:
            return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)).itemsize)
    return 4


# ---------------------------------------------------------------------------------- files and the proof


def partition(
    path: str | os.PathLike, ops: DeviceOps, folder: str | os.PathLike, host: frozenset[str] | set[str] = frozenset()
) -> Partition:
    """Cut the graph at `path`, write each segment as its own ONNX file into `folder`, and describe the cut
    (`host`: nodes kept on the host whatever their prediction). `prove` then runs it."""
    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = index_model(inferred)
    extractor = onnx.utils.Extractor(inferred)
    prediction = predict(graph, ops)
    segments, moved = cut(inferred, ops, prediction, host=host, extractor=extractor)
    if not graph_inputs(graph):
        raise PartitionError(f"{path}: the graph has no input")
    if any(any(d is None for d in graph.shapes.get(t) or (None,)) for name, _ in graph_inputs(graph) for t in [name]):
        raise PartitionError(f"{path}: an input shape is not static, so no cut can be checked")
    folder = Path(folder)
    stem = Path(path).stem
    written = []
    for s in segments:
        file = f"{stem}.{s.index:02d}.{s.runs_on}.onnx"
        sub = extractor.extract_model(list(s.inputs), list(s.outputs))
        sub.graph.name = f"{stem}_{s.index:02d}_{s.runs_on}"
        onnx.save(sub, str(folder / file))
        extra: dict[str, Any] = {"file": file}
        if s.runs_on == DEVICE:
            args = translate_args(s, graph)
            ends = [next(n for n in graph.nodes if n.name == e) for e in args["end_node_names"]]
            extra.update(
                start_node_names=tuple(args["start_node_names"]),
                end_node_names=tuple(args["end_node_names"]),
                net_input_shapes=args["net_input_shapes"],
                largest_layer=largest_layer(s, graph, ops),
                end_risks=tuple(n.name for n in ends if n.op_type in SHUFFLES_ABSORBED),
            )
        written.append(Segment(**{**asdict(s), **extra}))
    return Partition(
        model=stem,
        segments=tuple(written),
        coverage=coverage(written, graph),
        moved_to_host=moved,
        prediction=prediction,
    )


def _session(path: Path):
    return runtime.session(path, once=True, optimize=False)


def random_feeds(model_path: str | os.PathLike, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for every graph input, of its type and static shape."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in _session(Path(model_path)).get_inputs():
        shape = [int(d) for d in info.shape]
        if "int" in info.type:
            feeds[info.name] = rng.integers(0, 4, shape).astype(np.int64 if "64" in info.type else np.int32)
        elif "bool" in info.type:
            feeds[info.name] = rng.random(shape) > 0.5
        else:
            feeds[info.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def run_chain(
    part: Partition,
    folder: str | os.PathLike,
    feeds: Mapping[str, np.ndarray],
    replace: Mapping[str, np.ndarray] | None = None,
    outputs: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """Every tensor the chain hands on, segment by segment; `replace` overrides a handed tensor (a broken
    edge, for the negative control). Given `outputs`, only those are returned, and each other tensor is let
    go once no later segment reads it: at NAF's geometry one handed tensor is a gigabyte, and a graph cut
    into dozens of segments would otherwise hold all of them at once."""
    env = dict(feeds)
    segments = list(part.segments)
    keep = None if outputs is None else set(outputs)
    for i, s in enumerate(segments):
        session = _session(Path(folder) / s.file)
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, {t: env[t] for t in s.inputs})
        del session
        env.update(zip(names, values))
        for t, v in (replace or {}).items():
            if t in names:
                env[t] = v
        if keep is not None:
            later = keep.union(*(later_s.inputs for later_s in segments[i + 1 :]))
            env = {t: v for t, v in env.items() if t in later}
    return env


def prove(
    part: Partition,
    original: str | os.PathLike,
    folder: str | os.PathLike,
    *,
    tolerance: float = TOLERANCE,
    seed: int = 0,
    replace: Mapping[str, np.ndarray] | None = None,
) -> Partition:
    """Run the whole graph and the chain of segments on the same random inputs; the largest difference on
    any graph output, against `tolerance`."""
    from dataclasses import replace as with_fields

    feeds = random_feeds(original, seed)
    session = _session(Path(original))
    names = [o.name for o in session.get_outputs()]
    whole = dict(zip(names, session.run(names, feeds)))
    del session
    chained = run_chain(part, folder, feeds, replace, outputs=names)
    diff = compare.max_abs_diff([whole[n] for n in names], [chained[n] for n in names])
    return with_fields(part, max_abs_diff=diff, tolerance=tolerance)


def write_partition(
    path: str | os.PathLike, ops: DeviceOps, out: str | os.PathLike, *, tolerance: float = TOLERANCE
) -> Partition:
    """The command line's job: cut, write the segment files and `partition.json` into `out`, prove the chain.

    `out` must be absent or empty, or a folder this function wrote before (replaced whole); everything is
    built beside it first, so a failure leaves `out` as it was."""
    target = Path(out)
    if target.exists() and (
        not target.is_dir() or (any(target.iterdir()) and not (target / "partition.json").is_file())
    ):
        raise PartitionError(
            f"--out: {target} is not empty and not a partition of this suite; give an empty or new folder"
        )
    from .folder_swap import building

    with building(target) as build:
        part = prove(partition(path, ops, build), path, build, tolerance=tolerance)
        (build / "partition.json").write_text(json.dumps(part.as_json(), indent=2))
    return part
