"""Notebook 05's sentences: where the DFC results came from, the probes, the probe results' edit, and the answer
with what it rests on and its unmet preconditions, worded from figures the gate and the pairing measured
(`run.gating`). Markdown where a notebook displays it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..compiler.dfc_target import image
from ..compiler.pairing import Pairing
from ..compiler.probes import ProbePack
from ..predict.device import GateResult
from ..run.gating import refusing_counts
from ..run_graphs import graph_sources, notebook_folders
from ..vocabulary import DfcSource, GateVerdict, Prediction, Subject


def run_command(script: str | os.PathLike, run_dir: str | os.PathLike | None = None) -> str:
    """The command that runs a pack's `script` (Markdown), named inside the run folder when `run_dir` is given:
    the published appendix is a copy of that folder, so the command names no machine's path."""
    return f"`bash {script}`" if run_dir is None else f"`bash {os.path.relpath(script, run_dir)}` in the run folder"


def dfc_sentence(source: str, found: int, graphs: int, script: str | os.PathLike) -> str:
    """Where the DFC results came from and, for the graphs without one, the script to run (Markdown)."""
    missing = graphs - found
    return f"**DFC results: {source}** ({found} of {graphs} graphs)." + (
        f" **DFC not run here** for {missing} graphs: run `bash {script}` where "
        "Docker and the image are, then rerun with `dfc_results_dir` set to that folder."
        if missing > 0
        else ""
    )


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


def _by_verdict(results: dict[Path, GateResult]) -> str:
    verdicts = [r.verdict for r in results.values()]
    return (
        f"{verdicts.count(GateVerdict.PASS)} to parse, {verdicts.count(GateVerdict.FAIL)} refused and "
        f"{verdicts.count(GateVerdict.UNJUDGED)} unjudged"
    )


def short_answer(results: dict[Path, GateResult], pairings: dict[Path, Pairing]) -> str:
    """Notebook 05's answer at a glance (at most 40 words): the graphs by prediction, the rule refusing the
    most, and how many verdicts rest on the DFC."""
    refusing = refusing_counts(results)
    top = max(refusing, key=refusing.__getitem__, default="")
    judged = sum(p.judged for p in pairings.values())
    return (
        f"Of {len(results)} graphs the gate predicts {_by_verdict(results)}"
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
    refused = sorted(
        {f.rule for r in results.values() for f in r.findings if f.prediction == Prediction.REFUSED} - {Subject.OP}
    )
    refused_ops = sorted({op for r in results.values() for op in r.refused_ops})
    rejected = sorted({op for p in judged for op in p.dfc_ops})
    answer = (
        f"{len(results)} graphs gated: predicted {_by_verdict(results)}; refused by rule {', '.join(refused) or 'none'}, "
        f"refused ops {', '.join(refused_ops) or 'none'}. {len(judged)} verdicts rest on the DFC"
        + (f" (it rejected {', '.join(rejected)})" if rejected else "")
        + f", {unjudged} on the prediction only."
    )
    rests_on = {
        "dfc": "run" if dfc_source != DfcSource.NOT_RUN and judged else DfcSource.NOT_RUN,
        "sources": graph_sources(notebook_folders(run_dir, notebooks)) if run_dir and notebooks else "unknown",
        "geometry": f"the graphs {', '.join(n[:2] for n in notebooks)} exported in this run, at their geometries",
    }
    unmet = []
    if dfc_source == DfcSource.NOT_RUN:
        unmet.append(
            f"DFC not run here: needs the {image()} image; run {run_command(script, run_dir)} and "
            f"rerun 05 with dfc_results_dir set to its folder ({unjudged} graphs unjudged)"
        )
    elif unjudged:
        unmet.append(f"{unjudged} of {len(pairings)} graphs have no DFC verdict on their ops (see the pairing)")
    return answer, rests_on, unmet
