"""What notebook 05 publishes: its graphs gathered and gated, the tables, the op-matrix and backtest plots and
the sentences, built from gate results and pairings.

The notebook may not loop, so gathering the graphs and shaping the tables lives here, where it is tested; the
DFC's results are collected in `dfc_results`, the words for a graph's prediction are `explain`'s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..compiler.dfc_log import DfcResult
from ..compiler.dfc_target import image
from ..compiler.pairing import Pairing
from ..predict.device import GateResult, device_gate
from ..record.allowlist import DeviceOps
from ..record.standing import read_key
from ..run_graphs import graph_label, graph_sources, notebook_folders

if TYPE_CHECKING:
    import pandas as pd

    from ..compiler.pack import DfcPack
    from ..compiler.probes import ProbePack

STATUS_COLOURS = {"parse": "#4caf50", "unjudged": "#ffb300", "refused": "#e53935"}


def gate_all(models: Sequence[Path], ops: DeviceOps) -> dict[Path, GateResult]:
    """The device gate over each model (a progress bar when someone is watching)."""
    from ...console import headless
    from ...console import progress as tqdm

    return {m: device_gate(m, ops) for m in tqdm(models, desc="device gate", disable=headless() or len(models) < 4)}


def gate_table(results: dict[Path, GateResult], root: str | os.PathLike) -> pd.DataFrame:
    import pandas as pd

    rows = [
        {
            "model": graph_label(path, root),
            "gate": r.verdict.upper(),
            "inputs": ", ".join(f"{n} {list(s)}" for n, s in r.inputs),
            "refused": ", ".join(sorted({f.subject for f in r.findings if f.prediction == "refused"})),
            "unjudged": ", ".join(sorted({f.subject for f in r.findings if f.prediction == "unjudged"})),
            "nodes": r.nodes,
            "ir": r.ir_version,
            "opset": r.opset,
            "torch vs onnxruntime": (
                f"{r.parity['max_abs_diff']:.2g} (within {r.parity['atol']:.0e})" if r.parity else "no export check"
            ),
            "ops outside DEVICE_OPS": ", ".join(f"{op} x{u.count}" for op, u in r.outside.items()),
            "problems": len(r.problems),
        }
        for path, r in results.items()
    ]
    return pd.DataFrame(rows)


def pairing_table(pairings: dict[Path, Pairing], root: str | os.PathLike) -> pd.DataFrame:
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
        if row["kind"] != "op":
            continue
        if row["listed"] == "device_ops" and row["prediction"] == "refused":
            rows.append({"from": "evidence", "action": "move out", "op": row["name"], "why": row["basis"]})
        elif row["listed"] == "known_blockers" and row["prediction"] == "parse":
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
        [[_cell_status(r, op, ops) if r.ops.get(op) else "" for op in names] for r in results.values()],
        index=counts.index,
        columns=names,
    )
    return counts, status


def _cell_status(result: GateResult, op: str, ops: DeviceOps) -> str:
    from ..record.standing import worst

    if result.prediction is None:
        return "unjudged"
    ops_of = {f.node: f.op for f in result.prediction.judgements}
    return worst(p for n, p in result.prediction.nodes.items() if ops_of.get(n) == op)


def plot_op_matrix(counts: pd.DataFrame, status: pd.DataFrame):
    """A heat-map-like grid: one row per model, one column per op, coloured by allowlist status."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    rows, cols = counts.shape
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * cols + 2), max(2.0, 0.45 * rows + 1.5)))
    image = [[to_rgb(STATUS_COLOURS.get(status.iat[i, j], "#ffffff")) for j in range(cols)] for i in range(rows)]
    ax.imshow(image, aspect="auto")
    for (i, j), n in ((ij, counts.iat[ij]) for ij in ((i, j) for i in range(rows) for j in range(cols))):
        if n:
            ax.text(j, i, str(n), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(cols), counts.columns, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), counts.index, fontsize=8)
    ax.set_title("ONNX ops per exported graph, coloured by the gate's prediction (numbers: node count)")
    ax.legend(
        handles=[Patch(color=c, label=s) for s, c in STATUS_COLOURS.items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
    )
    return fig


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


def backtest_counts(rows: list[dict]) -> pd.DataFrame:
    """The backtest by source: how many recorded outcomes the gate agrees with, leaves unjudged, disagrees with."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame["source"] = frame["source"].str.split(" ", n=1).str[0].str.rstrip(";")
    counts = frame.pivot_table(
        index=["source", "dfc"], columns="agreement", values="case", aggfunc="count", fill_value=0
    )
    return counts.reindex(columns=["agrees", "unjudged", "disagrees"], fill_value=0).reset_index()


def plot_backtest(counts: pd.DataFrame):
    """One bar per source of the public record: outcomes the gate agrees with, leaves unjudged, disagrees with."""
    import matplotlib.pyplot as plt

    labels = [f"{s} (DFC {d})" for s, d in zip(counts["source"], counts["dfc"])]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(labels) + 1.4))
    left = [0] * len(labels)
    for column, colour in (("agrees", "#4caf50"), ("unjudged", "#ffb300"), ("disagrees", "#e53935")):
        values = list(counts[column])
        ax.barh(labels, values, left=left, color=colour, label=column)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("public DFC outcomes rebuilt as graphs")
    ax.set_title("The device gate against the public record")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def pack_models(models: Sequence[Path], folder: str | os.PathLike, arch: str) -> tuple[DfcPack, list[Path]]:
    """Copy every graph (with its parity file) into one DFC pack folder; the copies are what gets gated and
    paired, so the graph, its result file and the DFC's model name all share one stem."""
    from ..compiler.pack import write_dfc_pack

    root = Path(os.path.commonpath([Path(m).resolve().parent for m in models])).parent if models else Path(".")
    sources = {Path(m).name: graph_label(Path(m).resolve(), root) for m in models}  # relative: the pack stays copyable
    pack = write_dfc_pack(models, folder, arch, extra={"sources": sources})
    return pack, [pack.folder / name for name in pack.graphs]


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
                "rests on": "DFC" if pairings[path].judged else "prediction only",
            }
            for path, r in results.items()
        ],
        columns=["graph", "prediction", "refused ops", "unjudged ops", "DFC", "verdict", "rests on"],
    )


# ------------------------------------------------------------ notebook 05's figures, rows and sentences


def public_record_summary(rows: list[dict], counts: pd.DataFrame) -> dict[str, object]:
    """The backtest in figures: cases, how many the gate agrees with, leaves unjudged or disagrees with, how
    many were observed on the target DFC, and `counts` (`backtest_counts`) by source."""

    def count(key: str, value: str) -> int:
        return sum(row[key] == value for row in rows)

    return {
        "cases": len(rows),
        "agreed": count("agreement", "agrees"),
        "unjudged": count("agreement", "unjudged"),
        "disagreed": count("agreement", "disagrees"),
        "on_target": count("reach", "target"),
        "by_source": counts,
    }


def not_rebuilt(ops: DeviceOps) -> dict[str, str]:
    """Public-record cases the record does not describe well enough to rebuild as a graph -> its note."""
    return {name: case.note for name, case in ops.cases.items() if not case.rebuilt}


def not_rebuilt_table(cases: dict[str, str]) -> pd.DataFrame:
    """The cases `not_rebuilt` names, one row each with why."""
    import pandas as pd

    return pd.DataFrame([{"case": n, "why not rebuilt": why} for n, why in cases.items()])


def prediction_counts(evidence: pd.DataFrame) -> dict[tuple[str, str], int]:
    """How many entries of each kind (op, rule) the evidence predicts to parse, refused or unjudged."""
    return {key: int(n) for key, n in evidence.groupby(["kind", "prediction"]).size().to_dict().items()}


def contradicted(ops: DeviceOps) -> list[str]:
    """The names of the entries listed against what their own evidence predicts (`evidence.contradictions`)."""
    from ..record.evidence import contradictions

    return [str(row["name"]) for row in contradictions(ops)]


def sources_table(ops: DeviceOps) -> pd.DataFrame:
    """The short source names the evidence cites, each spelled out."""
    import pandas as pd

    return pd.DataFrame([{"source": k, "in full": v} for k, v in ops.sources.items()])


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many graphs of a `gate_table` the gate predicts to pass, fail and leaves unjudged."""
    return {v: int((table["gate"] == v.upper()).sum()) for v in ("pass", "fail", "unjudged")}


def refused_rules(findings: pd.DataFrame) -> list[str]:
    """The rules (and "op <type>") of a `findings_table` that predict a node refused, sorted."""
    return sorted(set(findings.loc[findings["prediction"] == "refused", "rule"]))


def results_found(dfc: dict[Path, DfcResult | None]) -> int:
    """How many graphs have a DFC result (`collect_dfc`)."""
    return sum(r is not None for r in dfc.values())


def dfc_sentence(source: str, found: int, graphs: int, script: str | os.PathLike) -> str:
    """Where the DFC results came from and, for the graphs without one, the script to run (Markdown)."""
    missing = graphs - found
    return f"**DFC results: {source}** ({found} of {graphs} graphs)." + (
        f" **DFC not run here** for {missing} graphs: run `bash {script}` where "
        "Docker and the image are, then rerun with `dfc_results_dir` set to that folder."
        if missing > 0
        else ""
    )


def pack_table(pack: DfcPack, found: int) -> pd.DataFrame:
    """The DFC pack in one row: its folder, script and manifest, how many graphs, how many without a result."""
    import pandas as pd

    return pd.DataFrame(
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


def pair_all(results: dict[Path, GateResult], dfc: dict[Path, DfcResult | None]) -> dict[Path, Pairing]:
    """Each gated graph paired with its DFC result (None: not run), matched by model name."""
    from ..compiler.pairing import pair

    return {m: pair(r, dfc[m], m) for m, r in results.items()}


def pairing_verdicts(table: pd.DataFrame) -> dict[str, int]:
    """How many graphs of a `pairing_table` got each pairing verdict, most frequent first."""
    return {str(k): int(n) for k, n in table["verdict"].value_counts().to_dict().items()}


def graphs_unjudged(standing: pd.DataFrame) -> int:
    """How many graphs of a `standing_table` rest on the prediction only (no DFC verdict on their ops)."""
    return int((standing["rests on"] == "prediction only").sum())


def refused_in_matrix(counts: pd.DataFrame, status: pd.DataFrame) -> list[str]:
    """The op types an `op_matrix` shows refused in at least one graph, sorted."""
    return sorted({op for op in counts.columns if status[op].eq("refused").any()})


def ops_used(results: dict[Path, GateResult]) -> list[str]:
    """Every op type the gated graphs use, sorted (the probes cover the unjudged ones among them)."""
    return sorted({op for r in results.values() for op in r.ops})


def probe_table(probes: ProbePack) -> pd.DataFrame:
    """One row per probe written: its file, what it asks about, the nodes the question is about, and why."""
    import pandas as pd

    return pd.DataFrame(
        [{"probe": p.file, "asks about": p.label, "nodes": ", ".join(p.nodes), "why": p.why} for p in probes.probes]
    )


def unprobed_rules(probes: ProbePack) -> list[str]:
    """The unjudged graph rules left without a proven probe (an op without a builder is named, not a rule)."""
    return [subject for subject in probes.unbuilt if read_key(subject)[0] == "rule"]


def probe_evidence(results_dir: str, ops_path: str | os.PathLike | None) -> tuple[str, list[dict]]:
    """The edit the probe results in `results_dir` imply (`probe_evidence.evidence_diff`); nothing without results."""
    from ..compiler.probe_evidence import evidence_diff

    return evidence_diff(results_dir, ops_path) if results_dir else ("", [])


def probes_sentence(probes: ProbePack) -> str:
    """How many probes, where, the one command that runs them, and what could not be probed (Markdown)."""
    return f"**{len(probes.probes)} probes** in `{probes.folder}`; run them all with `bash {probes.script}`." + (
        f" Not probed (no builder, named): {', '.join(probes.unbuilt)}." if probes.unbuilt else ""
    )


def diff_markdown(diff: str, results_given: bool) -> str:
    """The probe results' edit to `params/device_ops.yaml` as a diff block, or why there is none."""
    if diff:
        return f"```diff\n{diff}\n```"
    return (
        "No probe result changes the allowlist." if results_given else "No probe results given (`probe_results_dir`)."
    )


def answer_markdown(answer: str, unmet: Sequence[str]) -> str:
    """The answer in bold, then each unmet precondition as a list item (Markdown)."""
    return f"**{answer}**\n\n" + "\n".join(f"- unmet: {u}" for u in unmet)


def graph_standing(
    results: dict[Path, GateResult], pairings: dict[Path, Pairing], probes: ProbePack
) -> dict[str, dict[str, object]]:
    """Per graph (by stem): its verdict, `pass` / `refused` / `unjudged` (the DFC's where it judged the ops,
    else the gate's prediction), what that rests on (`DFC` or `prediction`), the rules and ops that refuse it
    or leave it unjudged, counted (causes only, `explain.blocking`), and the probe asking about each unjudged
    one. The run index's verdict table per RFD graph reads this record (`suite.verdicts`)."""
    from ..predict.explain import blocking

    asks = {p.label: p.stem for p in probes.probes}
    standing: dict[str, dict[str, object]] = {}
    for path, result in results.items():
        pairing = pairings[path]
        unjudged = blocking(result, "unjudged", causes_only=True)
        standing[Path(path).stem] = {
            "verdict": _verdict_word(result.verdict, pairing),
            "basis": "DFC" if pairing.judged else "prediction",
            "refused_by": blocking(result, "refused", causes_only=True),
            "unjudged_by": unjudged,
            "probes": {subject: asks[subject] for subject in unjudged if subject in asks},
        }
    return standing


def _verdict_word(predicted: str, pairing: Pairing) -> str:
    """The DFC's verdict where it judged the graph's ops, else the gate's, in the words a verdict table uses."""
    if pairing.judged:
        return "pass" if pairing.dfc == "parses" else "refused"
    return {"pass": "pass", "fail": "refused"}.get(predicted, "unjudged")


def short_answer(results: dict[Path, GateResult], pairings: dict[Path, Pairing]) -> str:
    """Notebook 05's answer at a glance (at most 40 words): the graphs by prediction, the rule refusing the
    most, and how many verdicts rest on the DFC."""
    from ..predict.explain import blocking

    verdicts = [r.verdict for r in results.values()]
    refusing: dict[str, int] = {}
    for r in results.values():
        for subject in blocking(r, "refused", causes_only=True):
            refusing[subject] = refusing.get(subject, 0) + 1
    top = max(refusing, key=refusing.__getitem__, default="")
    judged = sum(p.judged for p in pairings.values())
    return (
        f"Of {len(results)} graphs the gate predicts {verdicts.count('pass')} to parse, {verdicts.count('fail')} "
        f"refused and {verdicts.count('unjudged')} unjudged"
        + (f" ({top} refuses {refusing[top]})" if top else "")
        + f"; {judged} verdicts rest on the DFC, {len(pairings) - judged} on the public record alone."
    )


def conclusion(
    results: dict[Path, GateResult],
    pairings: dict[Path, Pairing],
    dfc_source: str,
    script: str | os.PathLike,
    run_dir: str | os.PathLike | None = None,
    notebooks: Sequence[str] = (),
) -> tuple[str, dict[str, str], list[str]]:
    """Notebook 05's answer sentence, what it rests on, and its unmet preconditions, from measured values.

    With `run_dir`, the DFC script is named relative to it: the run folder is copied to the published
    appendix, so the command stays right there and names no machine's path. `notebooks` are the notebooks
    whose graphs were gated: the geometry and the sources the answer rests on are theirs (the sources read from
    what each recorded in `run_dir`, `run_graphs.graph_sources`)."""
    judged = [p for p in pairings.values() if p.judged]
    unjudged = len(pairings) - len(judged)
    verdicts = [r.verdict for r in results.values()]
    refused = sorted({f.rule for r in results.values() for f in r.findings if f.prediction == "refused"} - {"op"})
    refused_ops = sorted({op for r in results.values() for op in r.refused_ops})
    rejected = sorted({op for p in judged for op in p.dfc_ops})
    answer = (
        f"{len(results)} graphs gated: predicted {verdicts.count('pass')} to parse, {verdicts.count('fail')} "
        f"refused and {verdicts.count('unjudged')} unjudged; refused by rule {', '.join(refused) or 'none'}, "
        f"refused ops {', '.join(refused_ops) or 'none'}. {len(judged)} verdicts rest on the DFC"
        + (f" (it rejected {', '.join(rejected)})" if rejected else "")
        + f", {unjudged} on the prediction only."
    )
    rests_on = {
        "dfc": "run" if dfc_source != "not run" and judged else "not run",
        "sources": graph_sources(notebook_folders(run_dir, notebooks)) if run_dir and notebooks else "unknown",
        "geometry": f"the graphs {', '.join(n[:2] for n in notebooks)} exported in this run, at their geometries",
    }
    unmet = []
    if dfc_source == "not run":
        command = (  # the run folder is what the appendix copies: name the script inside it
            f"`bash {script}`" if run_dir is None else f"`bash {os.path.relpath(script, run_dir)}` in the run folder"
        )
        unmet.append(
            f"DFC not run here: needs the {image()} image; run {command} and "
            f"rerun 05 with dfc_results_dir set to its folder ({unjudged} graphs unjudged)"
        )
    elif unjudged:
        unmet.append(f"{unjudged} of {len(pairings)} graphs have no DFC verdict on their ops (see the pairing)")
    return answer, rests_on, unmet
