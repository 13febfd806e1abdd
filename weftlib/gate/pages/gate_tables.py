"""Notebook 05's tables: the gate over a run's graphs, the findings, the pairings, the standing, the op matrix,
the suggested edits, the backtest by source, the pack and the probes; and the figures 05 records that are
read off those tables (so each column's meaning stays beside the table that defines it).

pandas is imported inside each function, as `gate` and the CLI start without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ...formatting import format_value
from ..compiler.pack import DfcPack
from ..compiler.pairing import Pairing
from ..compiler.probes import ProbePack
from ..predict.device import GateResult
from ..record.allowlist import DeviceOps
from ..record.standing import worst
from ..run.gating import BASIS_DFC, BASIS_PREDICTION
from ..run_graphs import graph_label, kind_label
from ..vocabulary import Agreement, GateVerdict, Listing, Prediction, Subject

if TYPE_CHECKING:
    import pandas as pd

PREDICTION_ONLY = f"{BASIS_PREDICTION} only"  # the standing's "rests on" for a graph the DFC did not judge
BY_AGREEMENT = (Agreement.AGREES, Agreement.UNJUDGED, Agreement.DISAGREES)  # `backtest_counts`' columns, in order


def gate_table(results: dict[Path, GateResult], root: str | os.PathLike) -> pd.DataFrame:
    """One row per graph: what its exporter says it is (`run_graphs.kind_label`: unknown for a user's ONNX), the
    gate's verdict, its inputs, the rules and ops refused or unjudged, its size and export check."""
    import pandas as pd

    rows = [
        {
            "model": graph_label(path, root),
            "graph": kind_label(path),
            "gate": r.verdict.upper(),
            "inputs": ", ".join(f"{n} {list(s)}" for n, s in r.inputs),
            "refused": ", ".join(sorted({f.subject for f in r.findings if f.prediction == Prediction.REFUSED})),
            "unjudged": ", ".join(sorted({f.subject for f in r.findings if f.prediction == Prediction.UNJUDGED})),
            "nodes": r.nodes,
            "ir": r.ir_version,
            "opset": r.opset,
            "torch vs onnxruntime": (
                f"{format_value(r.parity['max_abs_diff'], digits=2)} (within {format_value(r.parity['atol'])})"
                if r.parity
                else "no export check"
            ),
            "ops outside DEVICE_OPS": ", ".join(f"{op} x{u.count}" for op, u in r.outside.items()),
            "problems": len(r.problems),
        }
        for path, r in results.items()
    ]
    return pd.DataFrame(rows)


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many graphs of a `gate_table` the gate predicts to pass, fail and leaves unjudged."""
    return {v.value: int((table["gate"] == v.upper()).sum()) for v in GateVerdict}


def findings_table(results: dict[Path, GateResult], root: str | os.PathLike) -> pd.DataFrame:
    """Every refused and unjudged judgement of every graph: graph, node, op, rule, prediction, evidence."""
    import pandas as pd

    rows = [
        {
            "graph": graph_label(path, root),
            "node": f.node,
            "op": f.op,
            "rule": f.subject,
            "prediction": f.prediction,
            "detail": f.detail,
            "evidence": f.evidence,
        }
        for path, r in results.items()
        for f in r.findings
    ]
    return pd.DataFrame(rows, columns=["graph", "node", "op", "rule", "prediction", "detail", "evidence"])


def refused_rules(findings: pd.DataFrame) -> list[str]:
    """The rules (and "op <type>") of a `findings_table` that predict a node refused, sorted."""
    return sorted(set(findings.loc[findings["prediction"] == Prediction.REFUSED, "rule"]))


def pairing_table(pairings: dict[Path, Pairing], root: str | os.PathLike) -> pd.DataFrame:
    """One row per graph: the gate's verdict and the DFC's beside it, the cause, and what their pairing means."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "model": graph_label(path, root),
                "device gate": p.gate,
                "gate fails on": ", ".join(p.gate_ops),
                "DFC": p.dfc,
                "DFC rejects": ", ".join(p.dfc_ops + p.unresolved_nodes),
                "cause": p.cause,
                "matched": p.matched,
                "verdict": p.verdict,
                "agreement": p.agreement,
                "meaning": p.meaning,
            }
            for path, p in pairings.items()
        ]
    )


def pairing_verdicts(table: pd.DataFrame) -> dict[str, int]:
    """How many graphs of a `pairing_table` got each pairing verdict, most frequent first."""
    return {str(k): int(n) for k, n in table["verdict"].value_counts().to_dict().items()}


def standing_table(
    results: dict[Path, GateResult], pairings: dict[Path, Pairing], root: str | os.PathLike
) -> pd.DataFrame:
    """Per graph: the gate's prediction, the ops it predicts refused, and whether the verdict rests on the DFC
    or only on the public record's prediction."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "graph": graph_label(path, root),
                "prediction": r.verdict,
                "refused ops": ", ".join(r.refused_ops) or "none",
                "unjudged ops": ", ".join(r.unjudged_ops) or "none",
                "DFC": pairings[path].dfc,
                "verdict": pairings[path].verdict,
                "rests on": BASIS_DFC if pairings[path].judged else PREDICTION_ONLY,
            }
            for path, r in results.items()
        ],
        columns=["graph", "prediction", "refused ops", "unjudged ops", "DFC", "verdict", "rests on"],
    )


def graphs_unjudged(standing: pd.DataFrame) -> int:
    """How many graphs of a `standing_table` rest on the prediction only (no DFC verdict on their ops)."""
    return int((standing["rests on"] == PREDICTION_ONLY).sum())


def edits_table(pairings: dict[Path, Pairing], evidence: list[dict], root: str | os.PathLike) -> pd.DataFrame:
    """Suggested `params/device_ops.yaml` edits: from the pairings (what the DFC did with these graphs) and
    from the listing's own evidence (an op listed against what its evidence predicts). Unjudged entries are
    no edit: they are what the probes ask."""
    import pandas as pd

    rows = [
        {"from": f"pairing: {graph_label(path, root)}", "action": e.action, "op": e.op, "why": e.reason}
        for path, p in pairings.items()
        for e in p.edits
    ]
    for row in evidence:
        if row["kind"] != Subject.OP:
            continue
        if row["listed"] == Listing.DEVICE_OPS and row["prediction"] == Prediction.REFUSED:
            rows.append({"from": "evidence", "action": "move out", "op": row["name"], "why": row["basis"]})
        elif row["listed"] == Listing.KNOWN_BLOCKERS and row["prediction"] == Prediction.PARSE:
            rows.append({"from": "evidence", "action": "move in", "op": row["name"], "why": row["basis"]})
    return pd.DataFrame(rows, columns=["from", "action", "op", "why"])


def op_matrix(
    results: dict[Path, GateResult], ops: DeviceOps, root: str | os.PathLike
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Model x op counts, and the prediction of each non-empty cell (the strongest over its nodes)."""
    import pandas as pd

    names = sorted({op for r in results.values() for op in r.ops})
    counts = pd.DataFrame(
        [[r.ops.get(op, 0) for op in names] for r in results.values()],
        index=[graph_label(p, root) for p in results],
        columns=names,
        dtype=int,
    )
    status = pd.DataFrame(
        [[_cell_status(r, op) if r.ops.get(op) else "" for op in names] for r in results.values()],
        index=counts.index,
        columns=names,
    )
    return counts, status


def _cell_status(result: GateResult, op: str) -> str:
    if result.prediction is None:
        return Prediction.UNJUDGED
    ops_of = {f.node: f.op for f in result.prediction.judgements}
    return worst(p for n, p in result.prediction.nodes.items() if ops_of.get(n) == op)


def refused_in_matrix(counts: pd.DataFrame, status: pd.DataFrame) -> list[str]:
    """The op types an `op_matrix` shows refused in at least one graph, sorted."""
    return sorted({op for op in counts.columns if status[op].eq(Prediction.REFUSED).any()})


def backtest_counts(rows: list[dict]) -> pd.DataFrame:
    """The backtest by source: how many recorded outcomes the gate agrees with, leaves unjudged, disagrees with."""
    frame = _frame(rows)
    frame["source"] = frame["source"].str.split(" ", n=1).str[0].str.rstrip(";")
    counts = frame.pivot_table(
        index=["source", "dfc"], columns="agreement", values="case", aggfunc="count", fill_value=0
    )
    return counts.reindex(columns=[a.value for a in BY_AGREEMENT], fill_value=0).reset_index()


def not_rebuilt_table(cases: dict[str, str]) -> pd.DataFrame:
    """The cases `run.gating.not_rebuilt` names, one row each with why."""
    return _frame([{"case": n, "why not rebuilt": why} for n, why in cases.items()])


def prediction_counts(evidence: pd.DataFrame) -> dict[tuple[str, str], int]:
    """How many entries of each kind (op, rule) the evidence predicts to parse, refused or unjudged."""
    return {key: int(n) for key, n in evidence.groupby(["kind", "prediction"]).size().to_dict().items()}


def sources_table(ops: DeviceOps) -> pd.DataFrame:
    """The short source names the evidence cites, each spelled out."""
    return _frame([{"source": k, "in full": v} for k, v in ops.sources.items()])


def pack_table(pack: DfcPack, found: int) -> pd.DataFrame:
    """The DFC pack in one row: its folder, script and manifest, how many graphs, how many without a result."""
    return _frame(
        [
            {
                "DFC pack": str(pack.folder),
                "script": str(pack.script),
                "manifest": str(pack.manifest),
                "graphs": len(pack.graphs),
                "without a result": len(pack.graphs) - found,
            }
        ]
    )


def probe_table(probes: ProbePack) -> pd.DataFrame:
    """One row per probe written: its file, what it asks about, the nodes the question is about, and why."""
    return _frame(
        [{"probe": p.file, "asks about": p.label, "nodes": ", ".join(p.nodes), "why": p.why} for p in probes.probes]
    )


def _frame(rows: list[dict]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows)
