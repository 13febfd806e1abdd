"""The run an exporter recorded beside a graph for its fix's proof, `<stem>.proof/`: at a geometry where
onnxruntime's every run of the original is minutes (NAF's 512², notebook 02), the fix is proven once at full
geometry on the inputs the export itself ran, held to the outputs the exported graph gave there, and on random
sets on the same builder's graph at a reduced geometry, fixed by the same rewrites (`Plan.RECORDED`).
The reduced graph must be the graph at another size: the same inputs and outputs (names, types, ranks) and the
same ops on the inputs' path, and the rewrites must fix it alike (the same rewrites, rounds and node counts).

The folder holds `run.npz` (`input/<name>` and `output/<name>`: every input and output of the graph, as
onnxruntime ran the exported file), `reduced.pb` (the builder's graph at the smaller size; not `.onnx`, so a
run's graphs do not include it) and `record.json` (who built it and at which sizes). What does not fit the
graph is named and the full proof runs instead (`Plan.FULL`, with the reason); so does a reduced graph whose
ops differ from the graph's, or one the rewrites fix differently.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ...onnx_core import parity
from .loop import Applied
from .sets import Geometry, SetOrigin, mismatch, shapes_text

FOLDER = parity.PROOF_FOLDER
RUN = "run.npz"
REDUCED = "reduced.pb"
MANIFEST = "record.json"
INPUT, OUTPUT = "input/", "output/"


def folder_for(model_path: str | os.PathLike) -> Path:
    """Where an exporter records the run of the graph at `model_path`."""
    return Path(model_path).with_suffix(FOLDER)


@dataclass(frozen=True)
class Record:
    """One recorded run of a graph and the reduced graph of its builder."""

    folder: Path
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    reduced: Path
    builder: str  # who built both graphs, in words
    inputs_from: str  # where the recorded inputs came from, in words

    def origin(self) -> SetOrigin:
        """The recorded set's origin: full geometry, the exporter's inputs, its outputs the reference."""
        return SetOrigin(
            Geometry.FULL,
            shapes_text(self.inputs),
            self.inputs_from,
            f"the outputs the exported graph gave there, recorded with it ({self.folder.name}/{RUN})",
        )


def read(model_path: str | os.PathLike) -> tuple[Record | None, str]:
    """The record beside `model_path`, or None and why there is none or it cannot be read (in words)."""
    folder = folder_for(model_path)
    if not folder.is_dir():
        return None, (
            f"no run recorded beside the graph ({folder.name}/ absent: a graph its exporter records none for, as 02's "
            "below NAF's size, a user's graph, or 05 run alone)"
        )
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        with np.load(folder / RUN, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, KeyError) as exc:
        return None, f"the run recorded in {folder.name}/ cannot be read ({type(exc).__name__}: {exc})"
    reduced = folder / REDUCED
    if not reduced.is_file():
        return None, f"{folder.name}/ holds no reduced graph ({REDUCED})"
    inputs = {k.removeprefix(INPUT): a for k, a in arrays.items() if k.startswith(INPUT)}
    outputs = {k.removeprefix(OUTPUT): a for k, a in arrays.items() if k.startswith(OUTPUT)}
    builder = str(manifest.get("builder", "the exporter")) if isinstance(manifest, dict) else "the exporter"
    came = str(manifest.get("inputs_from", "recorded by the exporter")) if isinstance(manifest, dict) else ""
    return Record(folder, inputs, outputs, reduced, builder, came or "recorded by the exporter"), ""


def misfit(record: Record, model: onnx.ModelProto) -> str | None:
    """Why the record does not fit the graph (its inputs, or its outputs' names, dtypes and shapes), None when
    it does."""
    why = mismatch({record.origin().inputs: record.inputs}, model)
    if why:
        return f"the recorded run does not fit the graph: {why}"
    declared = {v.name: v.type.tensor_type for v in model.graph.output}
    if set(declared) != set(record.outputs):
        return f"the recorded outputs {sorted(record.outputs)} are not the graph's {sorted(declared)}"
    for name, kind in declared.items():
        dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
        got = record.outputs[name].shape
        if len(dims) != len(got) or any(d is not None and d != n for d, n in zip(dims, got, strict=True)):
            return f"the recorded output {name!r} has shape {list(got)}, the graph's is {dims}"
    return None


def _live(model: onnx.ModelProto) -> tuple[Counter[str], set[str]]:
    """The op of every node that reads the graph's inputs (directly or through other nodes), counted, with every
    node inside a subgraph; and the names of the main graph's nodes that read only constants. Those are left out
    of the count: the exporter folds them or not by their size (NAF's rotary tables at 512² stay nodes, at 160²
    they fold), a difference of size, not of graph."""
    weights = {t.name for t in model.graph.initializer}
    live = {v.name for v in model.graph.input if v.name not in weights}
    out: Counter[str] = Counter()
    constant: set[str] = set()
    for node in model.graph.node:
        subgraphs = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
        subgraphs += [g for a in node.attribute for g in a.graphs]
        if not subgraphs and not live & set(node.input):
            constant.add(node.name)
            continue
        live |= set(node.output)
        out[f"{node.domain}:{node.op_type}"] += 1
        stack = subgraphs
        while stack:
            graph = stack.pop()
            for inner in graph.node:
                out[f"{inner.domain}:{inner.op_type}"] += 1
                stack += [a.g for a in inner.attribute if a.type == onnx.AttributeProto.GRAPH]
                stack += [g for a in inner.attribute for g in a.graphs]
    return out, constant


def _interface(model: onnx.ModelProto) -> list[tuple[str, int, int]]:
    """Each real input and output: name, element type, rank (the reduced graph keeps them, at other sizes)."""
    weights = {t.name for t in model.graph.initializer}
    values = [v for v in model.graph.input if v.name not in weights] + list(model.graph.output)
    return [(v.name, v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim)) for v in values]


def not_the_same_graph(reduced: onnx.ModelProto, model: onnx.ModelProto) -> str | None:
    """Why the reduced graph is not the graph at another size (other inputs or outputs, other ops or op counts on
    the inputs' path: `_live`), None when it is."""
    if _interface(reduced) != _interface(model):
        return f"the reduced graph's inputs and outputs {_interface(reduced)} are not the graph's {_interface(model)}"
    mine, theirs = _live(model)[0], _live(reduced)[0]
    if mine != theirs:
        diff = sorted(set((mine - theirs) | (theirs - mine)))
        return f"the reduced graph's ops differ from the graph's ({', '.join(diff[:6])})"
    return None


def _shape(applied: Sequence[Applied], constant: set[str]) -> list[tuple[Any, ...]]:
    """Each rewrite applied on the inputs' path: its name, what it answers, how many nodes it took out, its round.
    Not one that took out only nodes reading constants (`_live`: at a size where the exporter folded them a
    rewrite of constants applies, TrigOfConstant on NAF's rotary tables at 160²), and not how many nodes it put
    in: that may follow the size (GroupNormByReductions pools a larger image in more levels); the recorded set
    at full geometry runs what it put in there."""
    return [(a.rewrite, a.answers, len(a.replaced), a.round) for a in applied if not set(a.replaced) <= constant]


def fixed_otherwise(
    full: Sequence[Applied], reduced: Sequence[Applied], model: onnx.ModelProto, small: onnx.ModelProto
) -> str | None:
    """Why the rewrites fixed the reduced graph `small` otherwise than the graph `model` on the inputs' path
    (another rewrite, round, or number of nodes taken out), None when they fixed both alike."""
    if _shape(full, _live(model)[1]) == _shape(reduced, _live(small)[1]):
        return None
    names = [a.rewrite for a in reduced]
    return f"the rewrites fixed the reduced graph otherwise ({', '.join(names) or 'none applied'})"
