"""Pairing the device gate with the DFC: their disagreement is the finding, and says which entry to move.

| device gate | DFC        | verdict                  | edit                              |
|-------------|------------|--------------------------|-----------------------------------|
| PASS        | parses     | allowlist held           | none                              |
| PASS        | rejects Y  | DEVICE_OPS too generous  | move Y out                        |
| FAIL on X   | parses     | DEVICE_OPS too strict    | move X in (or relax its condition)|
| FAIL on X   | rejects Y  | both reject              | move out any Y the gate allowed   |
plus "DFC not run" and "DFC unrecognised" (never counted as a pass).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .device import GateResult
from .dfc_log import DfcResult
from .graph import read_graph

HELD = "allowlist held"
TOO_GENEROUS = "DEVICE_OPS too generous"
TOO_STRICT = "DEVICE_OPS too strict"
BOTH_REJECT = "both reject"
NOT_RUN = "DFC not run"
UNRECOGNISED = "DFC unrecognised"
PAIR_VERDICTS = (HELD, TOO_GENEROUS, TOO_STRICT, BOTH_REJECT, NOT_RUN, UNRECOGNISED)


@dataclass(frozen=True)
class Edit:
    """A change to `params/device_ops.yaml` that a pairing implies."""

    action: str  # "move out", "move in", "relax condition", "review"
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
    verdict: str
    agreement: str
    meaning: str
    edits: tuple[Edit, ...]


def pair(gate: GateResult, dfc: DfcResult | None, onnx_path: str | os.PathLike) -> Pairing:
    """Put `gate` and `dfc` (None: the DFC was not run) side by side for the model at `onnx_path`."""
    if not isinstance(gate, GateResult):
        raise TypeError(f"gate: expected a GateResult from device_gate, got {type(gate).__name__}")
    if dfc is not None and not isinstance(dfc, DfcResult):
        raise TypeError(f"dfc: expected a DfcResult or None, got {type(dfc).__name__}")
    ops, unresolved = resolve_ops(dfc, onnx_path) if dfc is not None else ((), ())
    gate_word = "PASS" if gate.passed else "FAIL"
    dfc_word = {None: "not run", "parsed": "parses", "rejected": "rejects", "unrecognised": "unrecognised"}[
        dfc.verdict if dfc is not None else None]
    verdict, agreement, meaning, edits = _judge(gate, dfc, ops, unresolved)
    return Pairing(model=gate.name, gate=gate_word, gate_ops=gate.failing_ops, dfc=dfc_word, dfc_ops=ops,
                   unresolved_nodes=unresolved, verdict=verdict, agreement=agreement, meaning=meaning,
                   edits=tuple(edits))


def resolve_ops(dfc: DfcResult, onnx_path: str | os.PathLike) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Op types of the nodes the DFC named, looked up in the graph (the DFC names nodes, not ops).

    Falls back to the op the message names; nodes found neither way are returned as unresolved.
    """
    graph, _ = read_graph(onnx_path)
    names = graph.node_ops() if graph is not None else {}
    ops, unresolved = set(), []
    for error in dfc.errors:
        if error.node is None:
            continue
        op = names.get(error.node) or names.get(error.node.lstrip("/")) or names.get("/" + error.node)
        op = op or error.op
        if op:
            ops.add(op)
        elif error.node not in unresolved:
            unresolved.append(error.node)
    return tuple(sorted(ops)), tuple(unresolved)


def _judge(gate: GateResult, dfc: DfcResult | None, ops: tuple[str, ...],
           unresolved: tuple[str, ...]) -> tuple[str, str, str, list[Edit]]:
    if dfc is None:
        return NOT_RUN, "", "the DFC has not been run on this graph; the device gate's verdict stands alone", []
    if dfc.verdict == "unrecognised":
        return UNRECOGNISED, "", f"the DFC output could not be classified ({dfc.reason}); not a pass", []
    parsed = dfc.verdict == "parsed"
    if gate.passed and parsed:
        return HELD, "agree", "the allowlist held: the gate passed and the DFC parsed", []
    if gate.passed:
        return TOO_GENEROUS, "disagree", _generous_meaning(ops, dfc), _move_out(ops, unresolved, dfc)
    if parsed:
        return TOO_STRICT, "disagree", "the gate failed a graph the DFC parsed", _move_in(gate)
    return BOTH_REJECT, *_both(gate, ops, unresolved, dfc)


def _generous_meaning(ops: tuple[str, ...], dfc: DfcResult) -> str:
    named = ", ".join(ops) if ops else f"no op ({dfc.exception or dfc.reason})"
    return f"the gate passed a graph the DFC rejects on {named}"


def _move_out(ops: tuple[str, ...], unresolved: tuple[str, ...], dfc: DfcResult) -> list[Edit]:
    edits = [Edit("move out", op, "allowlisted, yet the DFC rejected it in this graph") for op in ops]
    edits += [Edit("review", node, "the DFC named this node, which is not in the graph") for node in unresolved]
    if not ops and not unresolved:
        edits.append(Edit("review", "?", f"the DFC failed naming no op ({dfc.exception or dfc.reason}); "
                                         "bisect with end node names to find it"))
    return edits


def _move_in(gate: GateResult) -> list[Edit]:
    edits = [Edit("move in", op, f"the DFC parsed {use.count} node(s) of it") for op, use in gate.outside.items()]
    relaxed = sorted({(c.op, c.condition) for c in gate.conditions})
    edits += [Edit("relax condition", op, f"the DFC parsed it without {cond}") for op, cond in relaxed]
    if not edits:
        edits = [Edit("review", "(graph limits)", "; ".join(gate.problems))]
    return edits


def _both(gate: GateResult, ops: tuple[str, ...], unresolved: tuple[str, ...],
          dfc: DfcResult) -> tuple[str, str, list[Edit]]:
    x, y = set(gate.failing_ops), set(ops)
    if not y:
        agreement = "DFC names no op"
    elif x == y:
        agreement = "same ops"
    else:
        agreement = "overlap" if x & y else "different ops"
    meaning = (f"both reject: the gate on {', '.join(sorted(x)) or 'graph limits'}, "
               f"the DFC on {', '.join(sorted(y)) or (dfc.exception or dfc.reason)}")
    edits = [Edit("move out", op, "the gate allowed it, the DFC rejected it") for op in sorted(y - x)]
    edits += [Edit("review", node, "the DFC named this node, which is not in the graph") for node in unresolved]
    return agreement, meaning, edits
