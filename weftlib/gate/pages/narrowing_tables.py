"""The RFD's graphs judged before and after issue 42's narrowing of the rules (`predict.narrowing`): a row per
graph whose verdict or refusals changed, with the split-off rules that changed it and what they predict now."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from ..predict.device import GateResult
from ..predict.narrowing import SPLIT_FROM
from ..run_graphs import graph_label
from ..vocabulary import Prediction


def _refused(result: GateResult) -> str:
    return ", ".join(sorted({f.subject for f in result.findings if f.prediction == Prediction.REFUSED}))


def _split_off(result: GateResult) -> str:
    """The split-off rules that judged nodes of the graph now, each with its parent and its predictions."""
    judged = result.prediction.judgements if result.prediction else ()
    seen = Counter((f.rule, f.prediction) for f in judged if f.rule in SPLIT_FROM)
    return "; ".join(
        f"{rule} (split from {SPLIT_FROM[rule]}): {prediction} on {count} node(s)"
        for (rule, prediction), count in sorted(seen.items())
    )


def narrowing_rows(
    before: dict[Path, GateResult], now: dict[Path, GateResult], root: str | os.PathLike
) -> list[dict[str, object]]:
    """One row per graph whose verdict or refused rules differ between `before` (judged inside
    `narrowing.rules_before`) and `now`; a graph missing from `before` is a `KeyError` naming it."""
    rows: list[dict[str, object]] = []
    for path, result in now.items():
        if path not in before:
            raise KeyError(f"{graph_label(path, root)}: judged now but not before the narrowing")
        old = before[path]
        if (old.verdict, _refused(old)) == (result.verdict, _refused(result)):
            continue
        rows.append(
            {
                "graph": graph_label(path, root),
                "verdict before": old.verdict.upper(),
                "verdict now": result.verdict.upper(),
                "refused before": _refused(old),
                "refused now": _refused(result),
                "what changed it": _split_off(result),
            }
        )
    return rows


def verdicts_changed(rows: list[dict[str, object]]) -> dict[str, str]:
    """graph -> "BEFORE -> NOW" for the rows whose verdict changed (not only their refusals)."""
    return {
        str(r["graph"]): f"{r['verdict before']} -> {r['verdict now']}"
        for r in rows
        if r["verdict before"] != r["verdict now"]
    }
