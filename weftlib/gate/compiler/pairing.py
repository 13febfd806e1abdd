"""Pairing the device gate with the DFC: their disagreement is the finding, and says which entry to move.

| device gate  | DFC        | verdict                  | edit                                        |
|--------------|------------|--------------------------|---------------------------------------------|
| PASS         | parses     | allowlist held           | none                                        |
| PASS         | rejects Y  | DEVICE_OPS too generous  | move Y out                                  |
| FAIL on X    | parses     | DEVICE_OPS too strict    | move X in (or add the parse to its rule)    |
| FAIL on X    | rejects Y  | both reject              | move out any Y the gate allowed             |
| UNJUDGED     | parses     | now observed             | add the parse to each unjudged op and rule  |
| UNJUDGED     | rejects Y  | now observed             | add the refusal of Y; Y's rule or op entry  |
plus "DFC not run" and "DFC unrecognised" (never counted as a pass).

The pairing compares causes, not verdicts (RFD 1154 details: a predicted rejection met a rejection for another
reason and was reported as agreement). A DFC failure is (a) an operator rejection naming a node or op, (b) a
failure before any operator is read (input layers, "Inputs found: 0", `output_format is None`) or (c)
inconclusive (a harness artefact, or an error naming nothing). In (b) and (c) the gate's ops stay *unjudged*:
never "both reject", never "allowlist held", and no op is moved out.

A DFC result is paired only with the graph it is about. A result the parse wrote carries the sha256 of the graph
file it parsed (`dfc_log.file_sha256`): it pairs with the graph of that hash, whatever either file is named, and is
refused for any other (the fixed graph's "parsed" saved under the original's name is not the original's). A result
without a hash is *unbound*: a raw DFC log (the DFC prints no hash) or a JSON written before results carried one.
It pairs by the model name it prints, and the pairing says so ("by model name, unbound"); one naming another
model is refused; one naming no model pairs only when the caller says which graph it is about (`by_hand=True`).
Hashing the file is linear in its size, as is every step here in the result's size (a result may name
hundreds of thousands of nodes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from ...onnx_core.walk import read_graph
from ..predict.device import GateResult
from ..vocabulary import (
    UNJUDGED_PAIR_VERDICTS,
    DfcVerdict,
    DfcWord,
    EditAction,
    FailureCause,
    GateVerdict,
    PairVerdict,
    Prediction,
)
from .dfc_log import DfcResult, failure_cause, file_sha256

PAIR_VERDICTS = tuple(PairVerdict)  # every verdict, in the order tables list them


@dataclass(frozen=True)
class Edit:
    """A change to `params/device_ops.yaml` that a pairing implies."""

    action: EditAction
    op: str
    reason: str


@dataclass(frozen=True)
class Pairing:
    """One model's device-gate verdict next to the DFC's, and what their (dis)agreement means."""

    model: str
    gate: str
    gate_ops: tuple[str, ...]
    dfc: str
    dfc_ops: tuple[str, ...]
    unresolved_nodes: tuple[str, ...]
    verdict: PairVerdict
    agreement: str
    meaning: str
    edits: tuple[Edit, ...]
    cause: FailureCause | Literal[""] = ""  # why the DFC rejected it ("": not a DFC rejection)
    matched: str = ""  # "by graph hash", "by model name, unbound", "by hand", or why the result was not paired

    @property
    def judged(self) -> bool:
        """Whether the DFC judged this graph's ops (a verdict that rests on the compiler, not the allowlist)."""
        return self.verdict not in UNJUDGED_PAIR_VERDICTS


def same_model(a: str, b: str) -> bool:
    """Model names as the DFC writes them (the runner turns '-' into '_'), compared case-sensitively."""
    return a.replace("-", "_") == b.replace("-", "_")


def pair(gate: GateResult, dfc: DfcResult | None, onnx_path: str | os.PathLike, *, by_hand: bool = False) -> Pairing:
    """Put `gate` and `dfc` (None: the DFC was not run) side by side for the model at `onnx_path`.

    `by_hand=True` states that `dfc` is about this graph although it names no model (a pasted log).
    """
    if not isinstance(gate, GateResult):
        raise TypeError(f"gate: expected a GateResult from device_gate, got {type(gate).__name__}")
    if dfc is not None and not isinstance(dfc, DfcResult):
        raise TypeError(f"dfc: expected a DfcResult or None, got {type(dfc).__name__}")
    if not gate.read:
        raise ValueError(f"{onnx_path}: the gate could not read it ({'; '.join(gate.problems)}): nothing to pair")
    gate_word = {GateVerdict.PASS: "PASS", GateVerdict.UNJUDGED: "UNJUDGED"}.get(
        gate.verdict, "FAIL (inputs)" if not gate.readable else "FAIL"
    )
    if dfc is not None:
        matched, refusal = _match(gate.name, dfc, by_hand, onnx_path)
        if refusal:
            return Pairing(
                model=gate.name,
                gate=gate_word,
                gate_ops=gate.failing_ops,
                dfc="refused",
                dfc_ops=(),
                unresolved_nodes=(),
                verdict=refusal,
                agreement="",
                meaning=matched,
                edits=(),
                matched=matched,
            )
    else:
        matched = ""
    ops, unresolved = resolve_ops(dfc, onnx_path) if dfc is not None else ((), ())
    graph, _ = read_graph(onnx_path)
    found = failure_cause(dfc, graph.node_ops() if graph is not None else None) if dfc is not None else None
    cause: FailureCause | Literal[""] = found if found is not None else ""
    dfc_word = {
        None: DfcWord.NOT_RUN,
        DfcVerdict.PARSED: DfcWord.PARSES,
        DfcVerdict.REJECTED: DfcWord.REJECTS,
        DfcVerdict.UNRECOGNISED: DfcWord.UNRECOGNISED,
    }[dfc.verdict if dfc is not None else None]
    verdict, agreement, meaning, edits = _judge(gate, dfc, ops, unresolved, cause)
    return Pairing(
        model=gate.name,
        gate=gate_word,
        gate_ops=gate.failing_ops,
        dfc=dfc_word,
        dfc_ops=ops,
        unresolved_nodes=unresolved,
        verdict=verdict,
        agreement=agreement,
        meaning=meaning,
        edits=tuple(edits),
        cause=cause,
        matched=matched,
    )


def _match(graph: str, dfc: DfcResult, by_hand: bool, onnx_path: str | os.PathLike) -> tuple[str, PairVerdict | None]:
    """(how the result was matched to the graph, or why not; the refusal verdict or None)."""
    if dfc.sha256 is not None:
        why = bound_elsewhere(dfc, onnx_path)
        return (why, PairVerdict.FOREIGN_RESULT) if why else ("by graph hash (sha256)", None)
    if dfc.model is not None:
        if same_model(dfc.model, graph):
            return UNBOUND, None
        return (
            f"the DFC result is about model {dfc.model!r}, not {graph!r}: refused, not counted "
            f"({dfc.source or 'no file'})",
            PairVerdict.FOREIGN_RESULT,
        )
    if by_hand:
        return "by hand (the result names no model; the caller said it is about this graph)", None
    return (
        f"the DFC result names no model ({dfc.source or 'no file'}); pair it only by saying which graph it "
        "is about (`pair MODEL --dfc R --matched-by-hand`)",
        PairVerdict.UNMATCHED,
    )


UNBOUND = "by model name, unbound (the result carries no graph hash)"


def bound_elsewhere(dfc: DfcResult, onnx_path: str | os.PathLike) -> str:
    """Why `dfc` is the result of another graph than the file at `onnx_path` (their hashes differ), or ""
    when it is this graph's or carries no hash (unbound)."""
    if dfc.sha256 is None:
        return ""
    here = file_sha256(onnx_path)
    if dfc.sha256 == here:
        return ""
    return (
        f"the DFC result ({dfc.source or 'no file'}) is of another graph: sha256 {dfc.sha256[:12]}..., "
        f"not {here[:12]}... of {onnx_path}; refused, not counted"
    )


def resolve_ops(dfc: DfcResult, onnx_path: str | os.PathLike) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Op types of the nodes the DFC named, looked up in the graph (the DFC names nodes, not ops).

    Falls back to the op the message names; nodes found neither way are returned as unresolved, each once, in
    the order the DFC named them (kept in a dict: a result may name hundreds of thousands of nodes, so no step
    may scan what came before).
    """
    graph, _ = read_graph(onnx_path)
    names = graph.node_ops() if graph is not None else {}
    ops: set[str] = set()
    unresolved: dict[str, None] = {}
    for error in dfc.errors:
        if error.node is None:
            continue
        op = names.get(error.node) or names.get(error.node.lstrip("/")) or names.get("/" + error.node)
        op = op or error.op
        if op:
            ops.add(op)
        else:
            unresolved.setdefault(error.node)
    return tuple(sorted(ops)), tuple(unresolved)


def _judge(  # noqa: PLR0911 - a decision ladder, read top to bottom; each rung returns its verdict
    gate: GateResult,
    dfc: DfcResult | None,
    ops: tuple[str, ...],
    unresolved: tuple[str, ...],
    cause: FailureCause | Literal[""],
) -> tuple[PairVerdict, str, str, list[Edit]]:
    if dfc is None:
        return (
            PairVerdict.NOT_RUN,
            "",
            "the DFC has not been run on this graph; the device gate's verdict stands alone",
            [],
        )
    if dfc.verdict == DfcVerdict.UNRECOGNISED:
        return PairVerdict.UNRECOGNISED, "", f"the DFC output could not be classified ({dfc.reason}); not a pass", []
    parsed = dfc.verdict == DfcVerdict.PARSED
    unjudged = ", ".join(gate.failing_ops) or "none predicted refused"
    if cause == FailureCause.BEFORE_OPERATORS:
        agreement = (
            "same cause (an input the parser refuses)"
            if not gate.readable
            else "different causes: the gate predicted every input accepted"
        )
        return (
            PairVerdict.UNJUDGED_INPUTS,
            agreement,
            f"the DFC stopped before reading any operator ({dfc.exception or dfc.last_frame or dfc.reason}); "
            f"the gate's ops stay unjudged ({unjudged}); give every input a rank the parser takes and run it again",
            [],
        )
    if cause == FailureCause.INCONCLUSIVE:
        return (
            PairVerdict.UNJUDGED_INCONCLUSIVE,
            "",
            f"the DFC failed without naming an operator of this graph ({dfc.exception or dfc.reason}); "
            f"the gate's ops stay unjudged ({unjudged})",
            [
                Edit(EditAction.REVIEW, node, "the DFC named this node, which is not in the graph")
                for node in unresolved
            ],
        )
    if gate.verdict == GateVerdict.UNJUDGED:
        return PairVerdict.OBSERVED_NOW, "", *_observed(gate, ops, unresolved, dfc)
    if gate.passed and parsed:
        return PairVerdict.HELD, "agree", "the allowlist held: the gate passed and the DFC parsed", []
    if gate.passed:
        return PairVerdict.TOO_GENEROUS, "disagree", _generous_meaning(ops, dfc), _move_out(ops, unresolved, dfc)
    if parsed:
        return PairVerdict.TOO_STRICT, "disagree", "the gate failed a graph the DFC parsed", _move_in(gate)
    return PairVerdict.BOTH_REJECT, *_both(gate, ops, unresolved, dfc)


def _generous_meaning(ops: tuple[str, ...], dfc: DfcResult) -> str:
    named = ", ".join(ops) if ops else f"no op ({dfc.exception or dfc.reason})"
    return f"the gate passed a graph the DFC rejects on {named}"


def _move_out(ops: tuple[str, ...], unresolved: tuple[str, ...], dfc: DfcResult) -> list[Edit]:
    edits = [Edit(EditAction.MOVE_OUT, op, "allowlisted, yet the DFC rejected it in this graph") for op in ops]
    edits += [
        Edit(EditAction.REVIEW, node, "the DFC named this node, which is not in the graph") for node in unresolved
    ]
    if not ops and not unresolved:
        edits.append(
            Edit(
                EditAction.REVIEW,
                "?",
                f"the DFC failed naming no op ({dfc.exception or dfc.reason}); bisect with end node names to find it",
            )
        )
    return edits


def _observed(
    gate: GateResult, ops: tuple[str, ...], unresolved: tuple[str, ...], dfc: DfcResult
) -> tuple[str, list[Edit]]:
    """The gate left this graph unjudged and the DFC answered: every unjudged rule and op gains evidence."""
    subjects = sorted({f.key for f in gate.findings if f.prediction == Prediction.UNJUDGED})
    if dfc.verdict == DfcVerdict.PARSED:
        meaning = f"the gate left it unjudged ({', '.join(subjects)}); the DFC parsed it"
        return meaning, [Edit(EditAction.ADD_EVIDENCE, s, "parsed in this graph") for s in subjects]
    named = ", ".join(ops) or (dfc.exception or dfc.reason)
    meaning = f"the gate left it unjudged ({', '.join(subjects)}); the DFC rejected {named}"
    edits = [
        Edit(EditAction.ADD_EVIDENCE, op, "rejected in this graph (on the rule that covers its node)") for op in ops
    ]
    edits += [
        Edit(EditAction.REVIEW, node, "the DFC named this node, which is not in the graph") for node in unresolved
    ]
    return meaning, edits


def _move_in(gate: GateResult) -> list[Edit]:
    refused = {f.key for f in gate.findings if f.prediction == Prediction.REFUSED}
    edits = [
        Edit(EditAction.MOVE_IN, s, "predicted refused, yet the DFC parsed it in this graph") for s in sorted(refused)
    ]
    if not edits:
        edits = [Edit(EditAction.REVIEW, "(graph limits)", "; ".join(gate.problems))]
    return edits


def _both(
    gate: GateResult, ops: tuple[str, ...], unresolved: tuple[str, ...], dfc: DfcResult
) -> tuple[str, str, list[Edit]]:
    x, y = set(gate.failing_ops), set(ops)
    if not gate.readable:
        agreement = "different causes: the gate refused an input, the DFC read operators"
    elif not y:
        agreement = "DFC names no op"
    elif x == y:
        agreement = "same ops"
    else:
        agreement = "overlap" if x & y else "different ops"
    meaning = (
        f"both reject: the gate on {', '.join(sorted(x)) or 'graph limits'}, "
        f"the DFC on {', '.join(sorted(y)) or (dfc.exception or dfc.reason)}"
    )
    edits = [Edit(EditAction.MOVE_OUT, op, "the gate allowed it, the DFC rejected it") for op in sorted(y - x)]
    edits += [
        Edit(EditAction.REVIEW, node, "the DFC named this node, which is not in the graph") for node in unresolved
    ]
    return agreement, meaning, edits
