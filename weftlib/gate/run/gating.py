"""Notebook 05's run: every graph copied into one DFC pack, gated and paired with its DFC result, and the figures
05 records of it (each graph's standing for the run's verdict table, the backtest's, the probes').

The notebook may not loop, so gathering the graphs lives here, where it is tested; the DFC's results are
collected in `compiler.results`. Nothing here is worded for a page: that is `pages.gate_tables` and
`pages.gate_sentences`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...console import headless
from ...console import progress as tqdm
from ..compiler.dfc_log import DfcResult
from ..compiler.pack import DfcPack, write_dfc_pack
from ..compiler.pairing import Pairing, pair
from ..compiler.probe_evidence import evidence_diff
from ..compiler.probes import ProbePack
from ..predict.device import GateResult, device_gate
from ..predict.explain import blocking
from ..record.allowlist import DeviceOps
from ..record.evidence import contradictions
from ..record.standing import read_key
from ..run_graphs import graph_label
from ..vocabulary import Agreement, DfcWord, GateVerdict, Prediction, Reach, Subject

if TYPE_CHECKING:
    import pandas as pd

BASIS_DFC, BASIS_PREDICTION = "DFC", "prediction"  # what a graph's standing rests on
_GATE_WORD: dict[str, str] = {GateVerdict.PASS: GateVerdict.PASS, GateVerdict.FAIL: Prediction.REFUSED}


def gate_all(models: Sequence[Path], ops: DeviceOps) -> dict[Path, GateResult]:
    """The device gate over each model (a progress bar when someone is watching)."""
    return {m: device_gate(m, ops) for m in tqdm(models, desc="device gate", disable=headless() or len(models) < 4)}


def pack_models(models: Sequence[Path], folder: str | os.PathLike, arch: str) -> tuple[DfcPack, list[Path]]:
    """Copy every graph (with its parity file) into one DFC pack folder; the copies are what gets gated and
    paired, so the graph, its result file and the DFC's model name all share one stem, and the hash the pack
    gives each parse is the copy's."""
    root = Path(os.path.commonpath([Path(m).resolve().parent for m in models])).parent if models else Path(".")
    sources = {Path(m).name: graph_label(Path(m).resolve(), root) for m in models}  # relative: the pack stays copyable
    pack = write_dfc_pack(models, folder, arch, extra={"sources": sources})
    return pack, [pack.folder / name for name in pack.graphs]


def pair_all(results: dict[Path, GateResult], dfc: dict[Path, DfcResult | None]) -> dict[Path, Pairing]:
    """Each gated graph paired with its DFC result (None: not run): bound by the graph's hash, which the pack gave
    every parse (a result of another graph is refused), else, for a raw log, by model name (`pairing`)."""
    return {m: pair(r, dfc[m], m) for m, r in results.items()}


def results_found(dfc: dict[Path, DfcResult | None]) -> int:
    """How many graphs have a DFC result (`collect_dfc`)."""
    return sum(r is not None for r in dfc.values())


def ops_used(results: dict[Path, GateResult]) -> list[str]:
    """Every op type the gated graphs use, sorted (the probes cover the unjudged ones among them)."""
    return sorted({op for r in results.values() for op in r.ops})


def public_record_summary(rows: list[dict], counts: pd.DataFrame) -> dict[str, object]:
    """The backtest in figures: cases, how many the gate agrees with, leaves unjudged or disagrees with, how
    many were observed on the target DFC, and `counts` (`gate_tables.backtest_counts`) by source."""

    def count(key: str, value: str) -> int:
        return sum(row[key] == value for row in rows)

    return {
        "cases": len(rows),
        "agreed": count("agreement", Agreement.AGREES),
        "unjudged": count("agreement", Agreement.UNJUDGED),
        "disagreed": count("agreement", Agreement.DISAGREES),
        "on_target": count("reach", Reach.TARGET),
        "by_source": counts,
    }


def not_rebuilt(ops: DeviceOps) -> dict[str, str]:
    """Public-record cases the record does not describe well enough to rebuild as a graph -> its note."""
    return {name: case.note for name, case in ops.cases.items() if not case.rebuilt}


def contradicted(ops: DeviceOps) -> list[str]:
    """The names of the entries listed against what their own evidence predicts (`evidence.contradictions`)."""
    return [str(row["name"]) for row in contradictions(ops)]


def unprobed_rules(probes: ProbePack) -> list[str]:
    """The unjudged graph rules left without a proven probe (an op without a builder is named, not a rule)."""
    return [subject for subject in probes.unbuilt if read_key(subject)[0] == Subject.RULE]


def probe_evidence(results_dir: str, ops_path: str | os.PathLike | None) -> tuple[str, list[dict]]:
    """The edit the probe results in `results_dir` imply (`probe_evidence.evidence_diff`); nothing without results."""
    return evidence_diff(results_dir, ops_path) if results_dir else ("", [])


def graph_standing(
    results: dict[Path, GateResult], pairings: dict[Path, Pairing], probes: ProbePack
) -> dict[str, dict[str, object]]:
    """Per graph (by stem): its verdict, `pass` / `refused` / `unjudged` (the DFC's where it judged the ops,
    else the gate's prediction), what that rests on (`DFC` or `prediction`), the rules and ops that refuse it
    or leave it unjudged, counted (causes only, `explain.blocking`), and the probe asking about each unjudged
    one. The run index's verdict table per RFD graph reads this record (`suite.verdicts`)."""
    asks = {p.label: p.stem for p in probes.probes}
    standing: dict[str, dict[str, object]] = {}
    for path, result in results.items():
        pairing = pairings[path]
        unjudged = blocking(result, Prediction.UNJUDGED, causes_only=True)
        standing[Path(path).stem] = {
            "verdict": verdict_word(result.verdict, pairing),
            "basis": BASIS_DFC if pairing.judged else BASIS_PREDICTION,
            "refused_by": blocking(result, Prediction.REFUSED, causes_only=True),
            "unjudged_by": unjudged,
            "probes": {subject: asks[subject] for subject in unjudged if subject in asks},
        }
    return standing


def verdict_word(predicted: str, pairing: Pairing) -> str:
    """The DFC's verdict where it judged the graph's ops, else the gate's, in the words a verdict table uses:
    pass, refused or unjudged."""
    if pairing.judged:
        return GateVerdict.PASS if pairing.dfc == DfcWord.PARSES else Prediction.REFUSED
    return _GATE_WORD.get(predicted, Prediction.UNJUDGED)


def refusing_counts(results: dict[Path, GateResult]) -> dict[str, int]:
    """Each rule or op that refuses a graph (causes only, `explain.blocking`) -> how many graphs it refuses."""
    refusing: dict[str, int] = {}
    for r in results.values():
        for subject in blocking(r, Prediction.REFUSED, causes_only=True):
            refusing[subject] = refusing.get(subject, 0) + 1
    return refusing
