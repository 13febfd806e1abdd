"""The fix loop: gate the graph, apply the rewrites that answer its refused and unjudged findings, gate the
result again, and repeat until no rewrite applies. Once the rewrites have settled, every node that reads only
constants is folded (`folding`) and the graph gated again, so no arithmetic on the constants they made is left
for the gate (a table folded can answer another rewrite's precondition: the loop goes on). Every application
is recorded with the nodes it took out and the nodes it put in, so `fix.json` says what changed
and why. The nodes are counted at every depth:
onnxscript's rewriter also rewrites inside If branches and Loop bodies, and a rewrite there is recorded (and
must be reached by the proof) as one in the main graph is.

Each round's graph is gated as a file in a scratch folder, with the original's export check (`<stem>.parity.json`,
`weftlib.onnx_core.export`) copied beside it under the same stem: a graph whose export failed its numeric check
fails the gate whatever the rewrites make of its ops.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnx_ir.passes.common as ir_passes
from onnxscript import ir

from ..predict.device import GateResult, device_gate
from ..record.allowlist import DeviceOps
from .base import ExactRewrite
from .folding import FOLD, fold_constants

MAX_ROUNDS = 8  # each round answers what the last one uncovered; a graph still changing after 8 is a bug


@dataclass(frozen=True)
class Applied:
    """One rewrite applied in one round (possibly at several places): what it answers, took out, put in."""

    rewrite: str
    answers: tuple[str, ...]  # the gate keys of the findings it replaced
    replaced: tuple[str, ...]
    produced: tuple[str, ...]
    round: int

    def as_json(self) -> dict[str, object]:
        return {
            "rewrite": self.rewrite,
            "answers": list(self.answers),
            "replaced": list(self.replaced),
            "produced": list(self.produced),
            "round": self.round,
        }


def gate_proto(
    model: onnx.ModelProto,
    ops: DeviceOps,
    name: str,
    *,
    sidecar: str | os.PathLike | None = None,
    scratch: str | os.PathLike | None = None,
) -> GateResult:
    """The device gate on an in-memory model (the gate reads files: it is written to a temporary folder, inside
    `scratch` when given), with `sidecar` (the original's export check) beside it when it exists."""
    with tempfile.TemporaryDirectory(prefix="weftlib-fix-", dir=scratch) as folder:
        path = Path(folder) / f"{name}.onnx"
        onnx.save(model, path)
        if sidecar is not None and Path(sidecar).is_file():
            shutil.copyfile(sidecar, path.with_suffix(".parity.json"))
        result = device_gate(path, ops)
    return result


def node_names(graph: ir.Graph) -> set[str]:
    """The names of every node of `graph`, inside its subgraphs (If branches, Loop bodies) too."""
    return {n.name or "" for n in ir.traversal.RecursiveGraphIterator(graph)}


def to_ir(model: onnx.ModelProto) -> ir.Model:
    """The model in onnxscript's IR, its shapes inferred and every node named (the gate names findings by
    node, and a rewrite is aimed at those names)."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = ir.serde.deserialize_model(inferred)
    ir_passes.NameFixPass()(graph)
    return graph


def to_proto(model: ir.Model) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(ir.serde.serialize_model(model), data_prop=True)


def _apply(model: ir.Model, rewrite: ExactRewrite, findings: dict[str, set[str]], round_: int) -> Applied | None:
    """`rewrite` aimed at the findings it answers (node -> its findings' keys); None when it applied nowhere."""
    targets = {node: keys & set(rewrite.answers) for node, keys in findings.items() if keys & set(rewrite.answers)}
    if not targets:
        return None
    rewrite.aim(targets)
    rewrite.touched.clear()
    before = node_names(model.graph)
    if rewrite.apply_to(model) == 0:
        return None
    after = node_names(model.graph)
    replaced = tuple(sorted(before - after))
    hits = [n for n in (*replaced, *rewrite.touched) if n in targets]
    answers = tuple(sorted(set().union(*(targets[n] for n in hits))))
    return Applied(rewrite.name, answers, replaced, tuple(sorted(after - before)), round_)


def _fold(model: ir.Model, findings: dict[str, set[str]], round_: int) -> Applied | None:
    """The rewrites settled: every node that reads only constants folded (`folding`), recorded with
    the findings on the nodes it took out; None when nothing folded."""
    before = node_names(model.graph)
    fold_constants(model)
    after = node_names(model.graph)
    if before == after:
        return None
    replaced = tuple(sorted(before - after))
    answers = tuple(sorted(set().union(*(findings.get(n, set()) for n in replaced))))
    return Applied(FOLD, answers, replaced, tuple(sorted(after - before)), round_)


def rewrite_until_settled(
    model: onnx.ModelProto,
    ops: DeviceOps,
    library: Sequence[ExactRewrite],
    name: str,
    *,
    sidecar: str | os.PathLike | None = None,
    scratch: str | os.PathLike | None = None,
) -> tuple[onnx.ModelProto, list[GateResult], list[Applied]]:
    """The rewritten model, the gate's result on each round's graph (the first on the original, its nodes
    named), and every rewrite applied, in order. `sidecar`, `scratch`: as `gate_proto`."""
    current = to_proto(to_ir(model))
    gates = [gate_proto(current, ops, name, sidecar=sidecar, scratch=scratch)]
    applied: list[Applied] = []
    for round_ in range(1, MAX_ROUNDS + 1):
        findings: dict[str, set[str]] = {}
        for f in gates[-1].findings:
            findings.setdefault(f.node, set()).add(f.key)
        graph = to_ir(current)
        done = [a for rw in library if (a := _apply(graph, rw, findings, round_)) is not None]
        if not done and applied:  # the rewrites have settled: fold what reads only constants, then gate again
            done = [folded] if (folded := _fold(graph, findings, round_)) is not None else []
        if not done:
            return current, gates, applied
        applied += done
        current = to_proto(graph)
        gates.append(gate_proto(current, ops, name, sidecar=sidecar, scratch=scratch))
    raise RuntimeError(f"{name}: the rewrites still changed the graph after {MAX_ROUNDS} rounds")
