"""The gate tested against the public record: the device gate run on every rebuilt outcome (`public_record`),
each row saying whether it agrees with what the DFC did:

- on the target DFC, a parse must be predicted to parse, and a refusal must be predicted refused with every
  node the DFC named among the refused;
- on another DFC 5.x, a refusal must never be predicted to parse (unjudged is allowed: the target may
  differ); a parse there is shown.
"""

from __future__ import annotations

import onnx

from ..onnx_core.walk import index_model
from .allowlist import Case, DeviceOps, Evidence
from .predict import FAIL, PASS, predict
from .public_record import BUILDERS
from .standing import reach

AGREES, DISAGREES, UNJUDGED = "agrees", "disagrees", "unjudged"


def judge(case: Case, model: onnx.ModelProto, ops: DeviceOps) -> dict[str, object]:
    """One row: the gate's verdict on the rebuilt `case`, and whether it agrees with the recorded outcome."""
    prediction = predict(index_model(model), ops)
    where = reach_of(case, ops)
    refused_nodes = {f.node for f in prediction.refused()}
    named = sorted({f"{f.subject} @ {f.node}" for f in prediction.findings})
    missing = [n for n in case.refused_at if n not in refused_nodes]
    if case.refused:
        if prediction.verdict == PASS:
            agreement = DISAGREES
        elif where == "target" and (prediction.verdict != FAIL or missing):
            agreement = DISAGREES if prediction.verdict == FAIL else UNJUDGED
        else:
            agreement = AGREES if prediction.verdict == FAIL else UNJUDGED
    else:
        agreement = {PASS: AGREES, FAIL: DISAGREES}.get(prediction.verdict, UNJUDGED)
    return {
        "case": case.name,
        "source": case.source,
        "dfc": case.dfc,
        "arch": case.arch,
        "reach": where,
        "outcome": case.outcome,
        "prediction": prediction.verdict,
        "agreement": agreement,
        "refused nodes missed": ", ".join(missing),
        "findings": "; ".join(named),
    }


def reach_of(case: Case, ops: DeviceOps) -> str:
    return reach(Evidence("parsed", case.dfc, case.arch), ops.target_dfc, ops.target_arch)


def backtest(ops: DeviceOps) -> list[dict[str, object]]:
    """The gate on every rebuilt outcome of the public record (cases with no builder are named, not run)."""
    rows = []
    for name, case in ops.cases.items():
        if not case.rebuilt:
            continue
        if name not in BUILDERS:
            raise KeyError(f"public_record.{name}: marked rebuilt, but weftlib.gate.public_record has no builder")
        rows.append(judge(case, BUILDERS[name](), ops))
    return rows


def held(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The rows that break the backtest's contract: a target outcome not agreed with, or a refusal on
    another DFC 5.x predicted to parse."""
    return [
        r
        for r in rows
        if (r["reach"] == "target" and r["agreement"] != AGREES)
        or (r["reach"] == "sibling" and r["outcome"] != "parsed" and r["prediction"] == PASS)
    ]
