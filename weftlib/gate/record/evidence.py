"""The listing against its own evidence: what each op entry and each graph rule predicts, and on what.

An entry is only as good as what was seen: an op listed in DEVICE_OPS whose evidence predicts a refusal (or
a blocker whose evidence predicts a parse) is a contradiction the listing has to answer for; an unjudged
entry is one a probe (`weftlib.gate.compiler.probes`) can turn into an observation.
"""

from __future__ import annotations

from .allowlist import DeviceOps, Evidence
from .standing import PARSE, REFUSED, UNJUDGED, Standing, op_key, op_standing, reach, rule_standing


def _row(kind: str, name: str, listed: str, standing: Standing, items: tuple[Evidence, ...], ops: DeviceOps) -> dict:
    where = [reach(e, ops.target_dfc, ops.target_arch) for e in items if e.seen not in ("assumed",)]
    return {
        "kind": kind,
        "name": name,
        "listed": listed,
        "prediction": standing.prediction,
        "basis": standing.basis,
        "inferred": standing.inferred,
        "on_target": where.count("target"),
        "other_5x": where.count("sibling"),
        "off_target": where.count("off"),
        "retracted": sum(bool(e.retracted) for e in items),
        "sources": standing.sources,
    }


def evidence_table(ops: DeviceOps) -> list[dict[str, object]]:
    """One row per op entry and per graph rule: its listing, its prediction, the basis and where from.

    A `by_pattern` op's own prediction is "by pattern": its nodes are judged by the rules that cover them."""
    rows = []
    for op, entry in ops.entries.items():
        standing = op_standing(op, ops)
        if entry.by_pattern:
            standing = Standing("by pattern", "judged by the graph rules that cover its nodes", (), standing.shown)
        rows.append(_row("op", op, entry.listed, standing, entry.evidence, ops))
    for name, rule in ops.rules.items():
        rows.append(_row("rule", name, "graph_rules", rule_standing(name, ops), rule.evidence, ops))
    return rows


def contradictions(ops: DeviceOps) -> list[dict[str, object]]:
    """Op entries whose listing says the opposite of their evidence: an allowed op predicted refused, or a
    known blocker predicted to parse. (Unjudged entries are not contradictions: they wait for a probe.)"""
    return [
        row
        for row in evidence_table(ops)
        if row["kind"] == "op"
        and (
            (row["listed"] == "device_ops" and row["prediction"] == REFUSED)
            or (row["listed"] == "known_blockers" and row["prediction"] == PARSE)
        )
    ]


def unjudged(ops: DeviceOps) -> dict[str, str]:
    """name -> why, for every op entry and rule the record leaves unjudged or rests on an inference: each
    wants a probe."""
    out: dict[str, str] = {}
    for row in evidence_table(ops):
        if row["prediction"] == UNJUDGED or row["inferred"]:
            key = str(row["name"]) if row["kind"] == "rule" else op_key(str(row["name"]))
            out[key] = f"{row['prediction']}: {row['basis']}" + (" (inferred)" if row["inferred"] else "")
    return dict(sorted(out.items()))
