"""What runs on the device and what stays on the host: the cut of a graph, proven equal by running it.

The gate's per-node prediction decides the side of each node: a node predicted to parse may go to the
device, any other stays on the host. Nodes are placed in execution order on alternating levels (host,
device, host, ...), each node on the lowest level of its side that comes after all of its producers, so no
path leaves a level and comes back: each level is one segment (independent branches included: as few device
segments as acyclicity allows, `merge`), and the levels run one after the other. A device segment whose work
does not pay for its transfers (a crumb) stays on the host. A device segment whose inputs break the input
rules (a rank or a shape the parser refuses or leaves unjudged) hands the nodes that read them to the host,
and the cut is made again until it holds.

Each segment is extracted as its own ONNX file with `onnx.utils.Extractor`. For a device segment the cut is
also given as the DFC takes it on the original graph: `start_node_names` (the segment's first nodes, or the
graph input's name where it starts at one), `end_node_names` (node names, never tensor names: the record
shows `MisspellNodeError` for a tensor name) and `net_input_shapes`. `cut_proof.prove` runs the segments as a chain in
onnxruntime and compares the graph's outputs with the whole graph run in one piece.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import onnx

from ...onnx_core.walk import Graph, checker_complaint, graph_inputs, index_model, walk_nodes
from ..folder_swap import building
from ..predict import graph_checks
from ..predict.device import file_problems, graph_limits
from ..predict.nodes import GraphPrediction, predict
from ..predict.shuffles import ABSORBED_AT_END
from ..record.allowlist import DeviceOps
from ..vocabulary import FolderKind, Prediction, Side
from . import merge
from .coverage import coverage, largest_layer, static_dims
from .merge import MERGED, CutRule
from .proof import Reference, prove, prove_by_reading
from .segments import TOLERANCE, Partition, Segment

PARTITION_FILE = "partition.json"
WHOLE_FILE = "the gate fails the whole file: "  # why every node of such a file stays on the host


class PartitionError(ValueError):
    """The graph cannot be partitioned (unreadable, dynamic, or without named nodes); the message says why."""


# ------------------------------------------------------------------------------------------ the cut


def _top_nodes(graph: Graph) -> list[onnx.NodeProto]:
    return list(graph.model.graph.node)


def _levels(nodes: list[onnx.NodeProto], side: dict[str, Side], producer: dict[str, int]) -> list[int]:
    """Per node, its level: even levels host, odd device, never below a producer's level."""
    levels: list[int] = []
    for node in nodes:
        floor = max((levels[producer[t]] for t in node.input if t in producer), default=0)
        want = 1 if side[node.name] == Side.DEVICE else 0
        levels.append(floor if floor % 2 == want else floor + 1)
    return levels


def _boundary(indices: list[int], nodes: list[onnx.NodeProto], constants: set[str]) -> tuple[list[str], list[str]]:
    """(tensors the group reads from outside it, tensors it makes), each in graph order."""
    made = list(dict.fromkeys(t for i in indices for t in nodes[i].output if t))
    own = set(made)
    inputs = [t for i in indices for t in nodes[i].input if t and t not in own and t not in constants]
    return list(dict.fromkeys(inputs)), made


def _segments(
    nodes: list[onnx.NodeProto], side: dict[str, Side], graph: Graph, rule: CutRule = MERGED
) -> list[Segment]:
    """The segments of `nodes` for the sides given, in execution order, grouped as `rule` says (`merge`)."""
    producer = {t: i for i, n in enumerate(nodes) for t in n.output if t}
    outputs = {o.name for o in graph.model.graph.output}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(i)
    groups = merge.groups(nodes, side, _levels(nodes, side, producer), rule, graph)
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
    prediction: GraphPrediction | None = None,
    host: frozenset[str] | set[str] = frozenset(),
    extractor: onnx.utils.Extractor | None = None,
    rule: CutRule = MERGED,
) -> tuple[list[Segment], dict[str, str]]:
    """The segments of `model` (no files yet) and why each node that could not go to the device stays on
    the host.

    A node may go to the device when it is predicted to parse, or when it is unjudged only for what an
    earlier node left it (its input's format): cut out, it starts from a fresh input. Each device segment is
    then extracted and judged alone, as the DFC parses a cut; a node that does not parse there goes to the
    host, and the graph is cut again until every device segment parses alone. `host`: nodes kept on the host
    whatever their prediction (the DFC refused them in a cut). `extractor`: one already built on `model`
    (building one infers the model's shapes again). `rule`: how device nodes are grouped, and whether crumbs
    stay on the host (`merge`)."""
    graph = index_model(model)
    prediction = prediction or predict(graph, ops)
    nodes = _top_nodes(graph)
    names = [n.name for n in nodes]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise PartitionError("every node needs a unique name: the DFC's start and end nodes are node names")
    causes = {f.node for f in prediction.judgements if f.prediction != Prediction.PARSE and not f.downstream}
    side = {n.name: Side.DEVICE if n.name not in causes and not _has_subgraph(n) else Side.HOST for n in nodes}
    moved: dict[str, str] = {}
    for name in host:
        if side.get(name) == Side.DEVICE:
            side[name], moved[name] = Side.HOST, "the DFC refused it in a cut"
    extractor = extractor or onnx.utils.Extractor(model)
    while True:
        segments = _segments(nodes, side, graph, rule)
        if rule.crumbs_to_host and merge.crumbs_to_host(segments, graph, side, moved):
            continue  # crumbs went to the host: cut again before judging
        changed = False
        for s in segments:
            if s.runs_on != Side.DEVICE:
                continue
            alone = predict(index_model(extractor.extract_model(list(s.inputs), list(s.outputs))), ops)
            for f in alone.judgements:
                if f.prediction != Prediction.PARSE:
                    for name in (
                        [f.node]
                        if f.node in side
                        else [c.name for c in graph.consumers.get(f.node, []) if c.name in s.nodes]
                    ):
                        if side.get(name) == Side.DEVICE:
                            side[name] = Side.HOST
                            moved[name] = f"cut out, it is {f.prediction} by {f.subject}"
                            changed = True
        if not changed:
            return segments, moved


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


# ------------------------------------------------------------------------------------- DFC arguments


def translate_args(segment: Segment, graph: Graph) -> dict[str, Any]:
    """`start_node_names`, `end_node_names` and `net_input_shapes` for `translate_onnx_model` on the original
    graph: a graph input starts the parse by its own name, any other input by the nodes that read it."""
    inputs = {name for name, _ in graph_inputs(graph)}
    members = set(segment.nodes)
    starts: dict[str, list[int]] = {}
    for t in segment.inputs:
        shape = list(static_dims(graph.shapes.get(t) or ()))
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


# ---------------------------------------------------------------------------------- files and the proof


def partition(
    path: str | os.PathLike,
    ops: DeviceOps,
    folder: str | os.PathLike,
    host: frozenset[str] | set[str] = frozenset(),
    rule: CutRule = MERGED,
) -> Partition:
    """Cut the graph at `path`, write each segment as its own ONNX file into `folder`, and describe the cut
    (`host`: nodes kept on the host whatever their prediction). `prove` then runs it.

    A malformed graph, or one no cut can run, is refused before any work (`graph_checks`). A file the gate
    fails as a whole (`device.file_problems`: IR version, opset, domains, the export check) is
    cut with every node on the host, the reason recorded for each: no device segment is a graph the gate fails."""
    model = _checked_model(Path(path))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError) as exc:
        raise PartitionError(f"{path}: shape inference fails ({' '.join(str(exc).split())[:300]})") from exc
    too_large = graph_checks.too_large(inferred)
    if too_large:
        raise PartitionError(f"{path}: {too_large}")
    graph = index_model(inferred)
    extractor = onnx.utils.Extractor(inferred)
    prediction = predict(graph, ops)
    whole = file_problems(graph, ops, path)
    segments, moved = cut(
        inferred, ops, prediction, host=_all_nodes(inferred) if whole else host, extractor=extractor, rule=rule
    )
    if whole:
        moved = {name: WHOLE_FILE + "; ".join(whole) for name in moved}
    folder = Path(folder)
    stem = Path(path).stem
    written = []
    for s in segments:
        file = f"{stem}.{s.index:02d}.{s.runs_on}.onnx"
        sub = extractor.extract_model(list(s.inputs), list(s.outputs))
        sub.graph.name = f"{stem}_{s.index:02d}_{s.runs_on}"
        onnx.save(sub, str(folder / file))
        if s.runs_on == Side.DEVICE:
            _check_device_segment(folder / file, sub, ops)
        extra: dict[str, Any] = {"file": file}
        if s.runs_on == Side.DEVICE:
            args = translate_args(s, graph)
            ends = [next(n for n in graph.nodes if n.name == e) for e in args["end_node_names"]]
            extra.update(
                start_node_names=tuple(args["start_node_names"]),
                end_node_names=tuple(args["end_node_names"]),
                net_input_shapes=args["net_input_shapes"],
                largest_layer=largest_layer(s, graph, ops),
                end_risks=tuple(n.name for n in ends if n.op_type in ABSORBED_AT_END),
            )
        written.append(Segment(**{**asdict(s), **extra}))
    return Partition(
        model=stem,
        segments=tuple(written),
        coverage=coverage(written, graph),
        moved_to_host=moved,
        prediction=prediction,
    )


def _checked_model(path: Path) -> onnx.ModelProto:
    """The model at `path`, its external data loaded from beside it; refused with the problem named, before
    its weights are read, when `graph_checks` finds it malformed or finds what keeps a cut from running, or
    when the ONNX checker rejects the file (read by its path, as the device gate reads it)."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError, OSError ...: not a model
        raise PartitionError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from exc
    if model.ir_version == 0 or not model.HasField("graph"):  # what an empty or foreign file reads as
        raise PartitionError(f"{path}: not an ONNX model (no IR version or no graph)")
    problem = graph_checks.structure_problem(model, path.parent) or graph_checks.cut_problem(model)
    if problem:
        raise PartitionError(f"{path}: {problem}")
    complaint = checker_complaint(path)
    if complaint:
        raise PartitionError(f"{path}: {complaint}")
    onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    return model


def _all_nodes(model: onnx.ModelProto) -> frozenset[str]:
    return frozenset(n.name for n in model.graph.node)


def _check_device_segment(file: Path, sub: onnx.ModelProto, ops: DeviceOps) -> None:
    """Refuse the cut if the gate would fail a device segment's own file (the guard behind `partition`'s
    promise: the file-level objections were all sent to the host before the cut)."""
    limits = graph_limits(Graph(sub, list(walk_nodes(sub.graph))), ops)
    problem = checker_complaint(str(file)) or (limits[0] if limits else None)
    if problem:
        raise PartitionError(f"the cut is refused: its device segment {file.name} is a graph the gate fails: {problem}")


def write_partition(
    path: str | os.PathLike,
    ops: DeviceOps,
    out: str | os.PathLike,
    *,
    tolerance: float = TOLERANCE,
    host: frozenset[str] | set[str] = frozenset(),
    reference_for: Callable[[], tuple[Reference | None, str]] | None = None,
) -> Partition:
    """The command line's job: cut, write the segment files and `partition.json` into `out`, prove the chain: by
    reading where the cut is one segment that is the graph itself (`proof.prove_by_reading`), else held to the
    run `reference_for()` finds of this file, which stands in for the whole graph's, else to a fresh run of it,
    with why no recorded run stood in (`proof.prove`). `reference_for` is asked only when the chain must run: a
    recorded run at NAF's geometry is a gigabyte to read.

    `out` follows the suite's folder rule (`folder_swap.building`): absent, empty or an earlier partition, built
    beside it and swapped in whole; files the suite did not write there (the model itself, a user's) are kept."""
    with building(out, FolderKind.PARTITION, inputs=[path]) as build:
        cut_made = partition(path, ops, build, host=host)
        part = prove_by_reading(cut_made, path, build, tolerance)
        if part is None:
            reference, why_fresh = reference_for() if reference_for is not None else (None, "")
            part = prove(cut_made, path, build, tolerance=tolerance, reference=reference, why_fresh=why_fresh)
        (build / PARTITION_FILE).write_text(json.dumps(part.as_json(), indent=2))
    return part
