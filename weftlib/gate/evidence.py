"""Check the allowlist against its own recorded evidence and against the recorded whole-graph verdicts.

An entry is only as good as what was seen: an allowlisted op the DFC rejected on the target (or a blocker
it parsed) is a contradiction the allowlist has to answer for. Evidence from another compiler version or
arch (Hailo-8 parts need DFC 3.x) is shown but not weighed, because DFC 5.x on the target arch may differ.
"""

from __future__ import annotations

from .allowlist import OBSERVED, DeviceOps, Evidence, OpEntry, RecordedVerdict

# Standings that are not an on-target observation: a probe (weftlib.gate.probes) can turn each into one.
UNJUDGED_STATUSES = ("assumed", "documented", "documented otherwise", "contested", "off-target only")


def target_match(dfc: str, arch: str, ops: DeviceOps) -> str:
    """ "on" (same DFC major and arch as the target), "off" (known to differ) or "unknown"."""
    major = ops.target_dfc.split(".")[0]
    dfc_known, arch_known = dfc != "unknown", arch != "unknown"
    if (dfc_known and dfc.split(".")[0] != major) or (arch_known and arch != ops.target_arch):
        return "off"
    return "on" if dfc_known and arch_known else "unknown"


def _direction(entry: OpEntry, ev: Evidence) -> str:
    """ "for", "against" or "condition" (the observation is about the condition, not the op)."""
    if entry.condition is not None and ev.condition_met is False:
        return "condition"
    agrees = (ev.seen in ("parsed", "documented")) == (entry.listed == "device_ops")
    return "for" if agrees else "against"


def op_evidence(entry: OpEntry, ops: DeviceOps) -> dict[str, object]:
    """One row of the evidence table: what was seen for this op and whether it backs its listing.

    An on-target observation decides; a vendor table ("documented") decides only where nothing was observed
    on the target, and where the two disagree both are shown (`documented` column) and the observation wins.
    """
    seen = [e for e in entry.evidence if e.seen in OBSERVED]
    weighed = [e for e in seen if target_match(e.dfc, e.arch, ops) != "off"]
    off = [e for e in seen if target_match(e.dfc, e.arch, ops) == "off"]
    docs = [e for e in entry.evidence if e.seen == "documented" and target_match(e.dfc, e.arch, ops) != "off"]
    directions = [_direction(entry, e) for e in weighed]
    n_for, n_against = directions.count("for"), directions.count("against")
    doc_agrees = entry.listed == "device_ops" if docs else None
    if weighed and n_against == 0:
        status = "supported"
    elif weighed:
        status = "contested" if n_for else "contradicted"
    elif docs:
        status = "documented" if doc_agrees else "documented otherwise"
    elif seen:
        status = "off-target only"
    else:
        status = "assumed"
    return {
        "op": entry.op,
        "listed": entry.listed,
        "condition": entry.condition or "",
        "status": status,
        "for": n_for,
        "against": n_against,
        "condition_cases": directions.count("condition"),
        "documented": (
            ""
            if not docs
            else "vendor table lists it"
            + ("" if doc_agrees else "; listed as a blocker here")
            + (" (an observation decides)" if weighed and bool(n_for) != bool(doc_agrees) else "")
        ),
        "off_target": "; ".join(f"{e.seen} ({e.dfc}, {e.arch})" for e in off),
        "sources": "; ".join(sorted({e.source for e in seen + docs})),
    }


def evidence_table(ops: DeviceOps) -> list[dict[str, object]]:
    """Every DEVICE_OPS and KNOWN_BLOCKERS entry checked against its evidence."""
    return [op_evidence(entry, ops) for entry in ops.entries.values()]


def _verdict_row(verdict: RecordedVerdict, op: str, ops: DeviceOps, statuses: dict[str, str]) -> dict:
    listed = ops.status(op)
    rejected = verdict.verdict == "rejected"
    if rejected:
        agrees = listed != "allowed" or ops.condition(op) is not None
    else:
        agrees = listed == "allowed"
    where = target_match(verdict.dfc, verdict.arch, ops)
    if agrees:
        finding = "agrees" + (" (conditional entry)" if rejected and listed == "allowed" else "")
    elif where == "off":
        finding = "differs, but another DFC/arch: not weighed"
    elif rejected:
        finding = "allowlisted, yet the DFC named it in a rejected graph"
    else:
        finding = f"{listed} here, yet the graph parsed: the allowlist is too strict"
    explained = agrees or where == "off" or statuses.get(op) == "contested"
    return {
        "graph": verdict.graph,
        "dfc": verdict.dfc,
        "arch": verdict.arch,
        "verdict": verdict.verdict,
        "op": op,
        "listed": listed,
        "target": where,
        "agrees": agrees,
        "explained": explained,
        "finding": finding,
        "source": verdict.source,
    }


def check_recorded_verdicts(ops: DeviceOps) -> list[dict[str, object]]:
    """One row per (recorded graph, op it names): does the allowlist agree with what the DFC did?

    A disagreement is `explained` when it comes from another DFC/arch or when the op's own evidence already
    records both outcomes (status "contested"); an unexplained one means the allowlist ignores evidence.
    """
    statuses = {row["op"]: row["status"] for row in evidence_table(ops)}
    return [
        _verdict_row(v, op, ops, statuses)
        for v in ops.verdicts
        if v.verdict != "unjudged"
        for op in (v.blocked_by if v.verdict == "rejected" else v.contains)
    ]
