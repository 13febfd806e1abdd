"""The listing against its own evidence: what each op entry and each graph rule predicts, and on what.

An entry is only as good as what was seen: an op listed in DEVICE_OPS whose evidence predicts a refusal (or
a blocker whose evidence predicts a parse) is a contradiction the listing has to answer for; an unjudged
entry is one a probe (`weftlib.gate.compiler.probes`) can turn into an observation.
"""

from __future__ import annotations

from ..vocabulary import Listing, Prediction, Reach, Seen, Subject
from .allowlist import DeviceOps, Evidence, OpEntry
from .standing import Standing, op_key, op_standing, reach, rule_standing

BY_PATTERN = "by pattern"  # a `by_pattern` op's own row: its nodes are judged by the rules that cover them


def _row(
    kind: Subject, name: str, listed: Listing, standing: Standing, items: tuple[Evidence, ...], ops: DeviceOps
) -> dict:
    where = [reach(e, ops.target_dfc, ops.target_arch) for e in items if e.seen != Seen.ASSUMED]
    return {
        "kind": kind,
        "name": name,
        "listed": listed,
        "prediction": standing.prediction,
        "basis": standing.basis,
        "inferred": standing.inferred,
        "on_target": where.count(Reach.TARGET),
        "other_5x": where.count(Reach.SIBLING),
        "off_target": where.count(Reach.OFF),
        "retracted": sum(bool(e.retracted) for e in items),
        "sources": standing.sources,
    }


def evidence_table(ops: DeviceOps) -> list[dict[str, object]]:
    """One row per op entry and per graph rule: its listing, its prediction, the basis and where from.

    A `by_pattern` op's own prediction is "by pattern": its nodes are judged by the rules that cover them."""
    rows = [_op_row(op, entry, ops) for op, entry in ops.entries.items()]
    for name, rule in ops.rules.items():
        rows.append(_row(Subject.RULE, name, Listing.GRAPH_RULES, rule_standing(name, ops), rule.evidence, ops))
    return rows


def _op_row(op: str, entry: OpEntry, ops: DeviceOps) -> dict:
    standing = op_standing(op, ops)
    row = _row(Subject.OP, op, entry.listed, standing, entry.evidence, ops)
    if entry.by_pattern:
        row.update(prediction=BY_PATTERN, basis="judged by the graph rules that cover its nodes", inferred=False)
        row.update(sources="; ".join(dict.fromkeys(e.source for e in standing.shown if e.source)))
    return row


def contradictions(ops: DeviceOps) -> list[dict[str, object]]:
    """Op entries whose listing says the opposite of their evidence: an allowed op predicted refused, or a
    known blocker predicted to parse. (Unjudged entries are not contradictions: they wait for a probe.)"""
    return [
        row
        for row in evidence_table(ops)
        if row["kind"] == Subject.OP
        and (
            (row["listed"] == Listing.DEVICE_OPS and row["prediction"] == Prediction.REFUSED)
            or (row["listed"] == Listing.KNOWN_BLOCKERS and row["prediction"] == Prediction.PARSE)
        )
    ]


def unjudged(ops: DeviceOps) -> dict[str, str]:
    """name -> why, for every op entry and rule the record leaves unjudged or rests on an inference: each
    wants a probe."""
    out: dict[str, str] = {}
    for row in evidence_table(ops):
        if row["prediction"] == Prediction.UNJUDGED or row["inferred"]:
            key = str(row["name"]) if row["kind"] == Subject.RULE else op_key(str(row["name"]))
            out[key] = f"{row['prediction']}: {row['basis']}" + (" (inferred)" if row["inferred"] else "")
    return dict(sorted(out.items()))
