"""The verdict table: one row per RFD graph (notebook 06's `answer_graphs`): its faithful graph's verdict and the
rules that refuse it, counted; its best exact variant and that one's verdict; what would settle the rest (a probe,
a DFC run or a rewrite); the device's share of the cut. And its figure: the RFD graphs by verdict, before and
after the exact variants (and after `gate fix`, once 05 records it).

Every cell is read from the run's records, never restated: 05's `graph_standing` (`gate.run.gating.graph_standing`),
`dfc_script`, `probe_script` and, when present, `fix_verdicts`; 06's `answer_graphs`, `device_share` and
`coverage`. The run index keeps the rows in `summary.json`; the index, the RFD page and notebook 06 render them
with one template (`templates/verdicts.html.j2`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import markupsafe

from ..formatting import format_value
from .pages import ENV
from .record import load_metrics, save_figure

GATE_NOTEBOOK, CUT_NOTEBOOK = "05_gate_pairing", "06_device_cut"  # `gate.notebooks`' GATE and CUT
VERDICTS = ("pass", "unjudged", "refused")
CELL_COLOURS = {"pass": "#d7f5dd", "unjudged": "#fff1c2", "refused": "#fbd5d5", "not run": "#eeeeee"}
FIGURE = "verdicts.png"
_RANK = {"pass": 0, "unjudged": 1, "refused": 2}


def verdict_rows(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """One row per RFD graph; none when 05 or 06 left no record to read (a plan without them, or a failed run)."""
    from ..gate.notebooks import CutRecord, GateRecord  # the gate's package imports onnx: only when read

    gate = load_metrics(run_dir, GATE_NOTEBOOK)["metrics"]
    cut = load_metrics(run_dir, CUT_NOTEBOOK)["metrics"]
    standing, graphs = GateRecord.graph_standing.of(gate) or {}, CutRecord.answer_graphs.of(cut) or {}
    if not standing or not graphs:
        return []
    coverage = CutRecord.coverage.of(cut) or []
    context = {
        "run_dir": Path(run_dir),
        "files": {Path(row["graph"]).stem: row["graph"] for row in coverage},
        "coverage": {Path(row["graph"]).stem: row for row in coverage},
        "share": CutRecord.device_share.of(cut) or {},
        "payoff": CutRecord.device_payoff.of(cut) or {},
        "dfc_script": _in_run(GateRecord.dfc_script.of(gate)),
        "probe_script": _in_run(GateRecord.probe_script.of(gate)),
    }
    fixed = GateRecord.fix_verdicts.of(gate) or {}
    return [_row(label, stems, standing, fixed, context) for label, stems in graphs.items() if stems]


def _row(
    label: str, stems: list[str], standing: dict[str, Any], fixed: dict[str, str], context: dict[str, Any]
) -> dict[str, Any]:
    """One RFD graph: its faithful graph (the first stem), the variant nearest to parsing among the others, what
    settles that one, and its verdict after `gate fix` when 05 recorded one."""
    faithful = _side(stems[0], standing, context)
    variants = [_side(stem, standing, context) for stem in stems[1:]]
    best = min(variants, key=lambda s: (_RANK[s["verdict"]], s["findings"])) if variants else None
    row: dict[str, Any] = {"graph": label, "faithful": faithful, "variant": best}
    row["settle"] = _settle(best or faithful, context)
    verdict = fixed.get(stems[0])  # None until `gate fix` runs in 05: the column and the bar stay out
    row["fixed"] = {"verdict": {"fail": "refused"}.get(verdict, verdict)} if verdict else None
    return row


def share_text(share: float | None, coverage: dict[str, Any] | None = None) -> str:
    """A device share as the table prints it: the MACs' percentage to four digits (from 06's unrounded coverage
    row when it has one: never "100 %" for a share short of the whole, which reads "> 99.99 %"), then the nodes
    on the device, so a refused graph whose refused nodes do no arithmetic reads as what it is; "not cut" for
    a graph 06 did not cut."""
    if share is None:
        return "not cut"
    exact = (coverage or {}).get("MACs on device")
    share = float(exact) if isinstance(exact, (int, float)) else share
    text = "> 99.99 %" if 0.9999 <= share < 1 else format_value(round(100 * share, 2), "%", 4)
    nodes = (coverage or {}).get("nodes on device")
    return f"{text} ({nodes} nodes)" if nodes else text


def _side(stem: str, standing: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """One graph of a row: its verdict and basis, the rules behind it counted, its share, its links."""
    found = standing.get(stem)
    share = context["share"].get(stem)
    side = {
        "stem": stem,
        "share": share,
        "share_text": share_text(share, context["coverage"].get(stem)),
        "payoff": context["payoff"].get(stem, "not estimated"),
        "links": _links(stem, context),
    }
    if found is None:
        return {**side, "verdict": "unjudged", "basis": "not gated", "by": "05 gated no such graph", "findings": 0}
    counts = {"refused": found["refused_by"], "unjudged": found["unjudged_by"]}.get(found["verdict"], {})
    return {
        **side,
        "verdict": found["verdict"],
        "basis": found["basis"],
        "by": ", ".join(f"{subject} ×{n}" for subject, n in counts.items()),
        "findings": sum(found["refused_by"].values()) + sum(found["unjudged_by"].values()),
        "refusing": list(found["refused_by"]),
        "waiting": list(found["unjudged_by"]),
        "probes": dict(found["probes"]),
    }


def _settle(side: dict[str, Any], context: dict[str, Any]) -> dict[str, str]:
    """What would settle the best variant's verdict: nothing (the DFC parsed it), a DFC run (predicted to
    parse), the probes on what leaves it unjudged (a DFC run for what no probe asks), or a rewrite."""
    dfc_run = {"kind": "DFC run", "text": f"`bash {context['dfc_script']}`"}
    if side["verdict"] == "pass":
        return {"kind": "settled", "text": "the DFC parses it"} if side["basis"] == "DFC" else dfc_run
    if side["verdict"] == "refused":
        return {"kind": "rewrite", "text": "an exact rewrite of " + ", ".join(side.get("refusing") or ["its refusals"])}
    probes = list(dict.fromkeys(side.get("probes", {}).values()))
    if not probes:
        return dfc_run
    unprobed = [w for w in side.get("waiting", []) if w not in side.get("probes", {})]
    text = ", ".join(f"`{p}`" for p in probes) + f" in `bash {context['probe_script']}`"
    return {"kind": "probe", "text": text + (f"; no probe asks about {', '.join(unprobed)}" if unprobed else "")}


def pack_scripts(run_dir: str | os.PathLike) -> dict[str, str]:
    """The DFC packs' scripts a DFC run needs, by notebook (05's graphs, 06's cuts), each as its path inside
    the run folder; a notebook that recorded none is left out."""
    from ..gate.notebooks import CutRecord, GateRecord

    recorded = {
        GATE_NOTEBOOK: GateRecord.dfc_script.of(load_metrics(run_dir, GATE_NOTEBOOK)["metrics"]),
        CUT_NOTEBOOK: CutRecord.cut_pack_script.of(load_metrics(run_dir, CUT_NOTEBOOK)["metrics"]),
    }
    return {name: _in_run(script, name) for name, script in recorded.items() if script}


def _in_run(script: str | None, notebook: str = GATE_NOTEBOOK) -> str:
    """A recorded script path from its notebook's folder on (the run folder is copied whole to the appendix)."""
    if not script:
        return "(not recorded)"
    parts = Path(script).parts
    return Path(*parts[parts.index(notebook) :]).as_posix() if notebook in parts else script


def _links(stem: str, context: dict[str, Any]) -> list[dict[str, str]]:
    """The graph's ONNX file (the table's caption says how to open it in netron, which the project installs)
    and 06's picture of its cut; those the run holds, paths inside the run folder. 06's Model Explorer overlay
    is not linked: a browser shows it as raw JSON, and the project does not install Model Explorer."""
    run_dir, onnx_file = context["run_dir"], context["files"].get(stem)
    if onnx_file is None:
        return []
    links = [
        {"label": "ONNX", "href": onnx_file, "title": f"the graph file; open it with: .venv/bin/netron {onnx_file}"},
        {"label": "cut", "href": f"{CUT_NOTEBOOK}/pictures/{stem}.png", "title": "06's picture of the cut"},
    ]
    return [link for link in links if (run_dir / link["href"]).is_file()]


def verdict_table_html(rows: list[dict[str, Any]], links: bool = True) -> markupsafe.Markup:
    """The table as HTML, coloured by verdict (inline styles: the index, the page and a notebook show it
    alike); `links` off for the RFD page, which lives outside the run folder."""
    return markupsafe.Markup(
        ENV.get_template("verdicts.html.j2").render(
            rows=rows, links=links, colours=CELL_COLOURS, fixed=any(r["fixed"] for r in rows)
        )
    )


def stage_counts(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per stage (the faithful graphs, the best exact variants, after `gate fix` when recorded): how many RFD
    graphs have each verdict."""
    stages = {
        "faithful graphs": [r["faithful"]["verdict"] for r in rows],
        "best exact variants": [(r["variant"] or r["faithful"])["verdict"] for r in rows],
    }
    if any(r["fixed"] for r in rows):
        stages["after gate fix"] = [r["fixed"]["verdict"] if r["fixed"] else "not run" for r in rows]
    return {
        stage: {v: verdicts.count(v) for v in (*VERDICTS, "not run") if v in verdicts}
        for stage, verdicts in stages.items()
    }


def verdict_figure(rows: list[dict[str, Any]]) -> Any:
    """One bar per stage, the RFD graphs stacked by verdict (`stage_counts`)."""
    import matplotlib.pyplot as plt

    from ..gate.pages.colours import NEUTRAL, PREDICTION_COLOURS  # the op matrix's: a verdict looks alike everywhere
    from ..gate.vocabulary import Prediction

    colours = {
        "pass": PREDICTION_COLOURS[Prediction.PARSE],
        "unjudged": PREDICTION_COLOURS[Prediction.UNJUDGED],
        "refused": PREDICTION_COLOURS[Prediction.REFUSED],
        "not run": NEUTRAL,
    }
    counts = stage_counts(rows)
    fig, ax = plt.subplots(figsize=(7.0, 0.55 * len(counts) + 1.0))
    labels = list(counts)
    left = [0] * len(labels)
    for verdict, colour in colours.items():
        values = [counts[stage].get(verdict, 0) for stage in labels]
        if any(values):
            ax.barh(labels, values, left=left, color=colour, label=verdict, edgecolor="white")
            for i, v in enumerate(values):
                if v:
                    ax.text(left[i] + v / 2, i, str(v), ha="center", va="center", fontsize=9)
            left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlim(0, len(rows))
    ax.set_xlabel(f"RFD graphs ({len(rows)})")
    fix = " and gate fix" if "after gate fix" in counts else ""
    ax.set_title(f"The RFD graphs by verdict, before and after the exact variants{fix}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def write_figure(run_dir: Path, rows: list[dict[str, Any]]) -> Path | None:
    """Save `verdict_figure` (PNG and SVG twin) into the run folder; None when there are no rows to draw."""
    if not rows:
        return None
    import matplotlib.pyplot as plt

    fig = verdict_figure(rows)
    try:
        return save_figure(fig, Path(run_dir) / FIGURE, "verdicts")
    finally:
        plt.close(fig)


def notebook_table(rows: list[dict[str, Any]]) -> Any:
    """The table as a notebook shows it (notebook 06's answer): the same HTML, as a display object."""
    from IPython.display import HTML

    return HTML(str(verdict_table_html(rows)))
