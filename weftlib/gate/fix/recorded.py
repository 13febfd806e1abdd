"""The run an exporter recorded beside a graph for its fix's proof, `<stem>.proof/`: at a geometry where
onnxruntime's every run of the original is minutes (NAF's 512², notebook 02), the fix is proven once at full
geometry on the inputs the export itself ran, held to the outputs the exported graph gave there, and on random
sets on the same builder's graph at a reduced geometry, fixed by the same rewrites (`Plan.RECORDED`).
The reduced graph must be the graph at another size: the same inputs and outputs (names, types, ranks) and the
same ops on the inputs' path, and the rewrites must fix it alike (the same rewrites, rounds and node counts).

The folder holds `run.npz` (`input/<name>` and `output/<name>`: every input and output of the graph, as
onnxruntime ran the exported file; `graph/sha256`: the digest of the file it ran; `graph/as_written`: run with
onnxruntime's optimisations off), `reduced.pb` (the builder's graph at the smaller size; not `.onnx`, so a
run's graphs do not include it) and `record.json` (who built it and at which sizes). What does not fit the
graph is named and the full proof runs instead (`Plan.FULL`, with the reason); so does a reduced graph whose
ops differ from the graph's, or one the rewrites fix differently.

The same run is 06's reference for the cut of the graph (`cut_reference`): run as written, it is the very
arithmetic the chain of segments repeats, so the chain is held to its outputs instead of running the graph whole
once more. 05 keeps such a run beside each fixed graph it proved on a record (`write_run`: the fixed graph's
outputs on the recorded inputs, as its proof ran it), so 06 holds the fixed graph's cut to it too. That use asks
more of the run than 05's: the digest of the very file (a stale or copied-over record is refused, by name) and
the as-written mark; where either is missing the cut is proven on a fresh run.
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
from ..compiler.dfc_log import file_sha256
from .loop import Applied
from .sets import Geometry, SetOrigin, mismatch, shapes_text

FOLDER = parity.PROOF_FOLDER
RUN = "run.npz"
REDUCED = "reduced.pb"
MANIFEST = "record.json"
INPUT, OUTPUT = "input/", "output/"
DIGEST = "graph/sha256"  # in `run.npz`: the sha256 of the graph file the run was made on
AS_WRITTEN = "graph/as_written"  # in `run.npz`: True where onnxruntime ran it with its optimisations off


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
    return _misfit(record.inputs, record.outputs, model)


def _misfit(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], model: onnx.ModelProto) -> str | None:
    why = mismatch({shapes_text(inputs): inputs}, model)
    if why:
        return f"the recorded run does not fit the graph: {why}"
    declared = {v.name: v.type.tensor_type for v in model.graph.output}
    if set(declared) != set(outputs):
        return f"the recorded outputs {sorted(outputs)} are not the graph's {sorted(declared)}"
    for name, kind in declared.items():
        dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
        got = outputs[name].shape
        if len(dims) != len(got) or any(d is not None and d != n for d, n in zip(dims, got, strict=True)):
            return f"the recorded output {name!r} has shape {list(got)}, the graph's is {dims}"
        if outputs[name].dtype != onnx.helper.tensor_dtype_to_np_dtype(kind.elem_type):
            return f"the recorded output {name!r} is {outputs[name].dtype}, the graph's is another type"
    return None


def write_run(
    folder: str | os.PathLike,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    graph: str | os.PathLike,
    *,
    as_written: bool,
    sha256: str | None = None,
) -> Path:
    """`folder/run.npz` (the folder made first): the run of the graph file `graph` on `inputs`, giving `outputs`,
    bound to that file by its sha256 (`sha256`, where the caller has just read it, else read here); `as_written`:
    onnxruntime ran it with its optimisations off. Written to a hidden name and renamed into place, so a reader
    finds the whole run or none."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    arrays = {f"{INPUT}{k}": np.asarray(v) for k, v in inputs.items()}
    arrays |= {f"{OUTPUT}{k}": np.asarray(v) for k, v in outputs.items()}
    arrays |= {DIGEST: np.array(sha256 or file_sha256(graph)), AS_WRITTEN: np.array(bool(as_written))}
    tmp = target / f".{RUN}"
    with tmp.open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, target / RUN)
    return target / RUN


@dataclass(frozen=True)
class KeptRun:
    """A graph's outputs on a recorded run's inputs, run as written on the file whose sha256 is `sha256`: what 05
    keeps of a fixed graph's proof on a record, for 06's proof of its cut (`keep_beside`)."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    sha256: str


def keep_beside(run: KeptRun, graph: str | os.PathLike) -> Path | None:
    """`run` written beside the graph file `graph` (`<stem>.proof/run.npz`, `write_run`) where `graph` is the very
    file it ran (the same sha256), else nothing (None): a run is never bound to a file it did not run."""
    if file_sha256(graph) != run.sha256:
        return None
    return write_run(folder_for(graph), run.inputs, run.outputs, graph, as_written=True, sha256=run.sha256)


@dataclass(frozen=True)
class RecordedRun:
    """A run recorded beside a graph and found to be a run of that very file, as written (`cut_reference`)."""

    folder: Path
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]

    @property
    def source(self) -> str:
        return f"{self.folder.name}/{RUN}"


def cut_reference(model_path: str | os.PathLike) -> tuple[RecordedRun | None, str]:
    """The run recorded beside `model_path` where a cut's chain may be held to it: bound to this very file (its
    sha256, checked before the arrays are read), run as written, and fitting the graph's inputs and outputs; else
    None and why not, in words (the cut is then proven on a fresh run of the whole graph)."""
    path = Path(model_path)
    run = folder_for(path) / RUN
    if not run.is_file():
        return None, f"no run recorded beside the graph ({run.parent.name}/{RUN} absent)"
    try:
        with np.load(run, allow_pickle=False) as data:
            why = _unbound(data, path)
            inputs = {k.removeprefix(INPUT): data[k] for k in data.files if k.startswith(INPUT)} if not why else {}
            outputs = {k.removeprefix(OUTPUT): data[k] for k in data.files if k.startswith(OUTPUT)} if not why else {}
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, ValueError, KeyError) as exc:
        return None, f"{run.parent.name}/{RUN} cannot be read ({type(exc).__name__}: {exc})"
    if not why and any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        why = f"{path.name} keeps weights in other files, which its sha256 does not cover"
    why = why or _misfit(inputs, outputs, model)
    return (None, why) if why else (RecordedRun(run.parent, inputs, outputs), "")


def _unbound(data: Any, path: Path) -> str | None:
    """Why the run in `data` (an open `run.npz`) is not a run of the file at `path` as written, None when it is."""
    where = f"{folder_for(path).name}/{RUN}"
    if DIGEST not in data.files or AS_WRITTEN not in data.files:
        return f"{where} names no graph digest or no as-written mark (an older record)"
    if str(data[DIGEST]) != file_sha256(path):
        return f"{where} was recorded on another file than {path.name} (its sha256 differs)"
    if not bool(data[AS_WRITTEN]):
        return f"{where} was run with onnxruntime's optimisations on, not as written"
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
