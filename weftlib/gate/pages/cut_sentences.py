"""Notebook 06's sentences: what each answer graph's cut puts on the device and what crosses, the cut pack and
its command, the merge, and the answer with what it rests on and its unmet preconditions, worded from the
figures `run.cutting` measured. Markdown where a notebook displays it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...formatting import format_value
from ..compiler.dfc_log import DfcResult
from ..compiler.dfc_target import image
from ..compiler.pack import DfcPack
from ..cut.segments import Partition
from ..estimate.device_model import Calibration
from ..estimate.payoff import CutEstimate, sources
from ..run.cutting import host_ops
from ..vocabulary import DfcSource
from .gate_sentences import run_command


def _graph_phrase(name: str, part: Partition, host: dict[str, int]) -> str:
    c = part.coverage
    if not part.device_segments:
        return f"{name}: nothing is predicted to run on the device (the host computes all {c.nodes[1]} nodes)"
    ends = [e for s in part.device_segments for e in s.end_node_names]
    computed = ", ".join(f"{op} x{n}" for op, n in list(host.items())[:4]) or "nothing"
    return (
        f"{name}: {len(part.device_segments)} device graph(s) with {c.share('macs'):.0%} of the MACs "
        f"({c.nodes[0]} of {c.nodes[1]} nodes), {c.crossings} tensors ({c.bytes_crossing / 2**20:.2f} MiB) in or "
        f"out of the device per inference, cut at {', '.join(ends[:3])}{' …' if len(ends) > 3 else ''}; "
        f"the host computes {computed}"
    )


def cut_sentence(
    partitions: dict[str, Partition],
    host: dict[str, dict[str, int]],
    questions: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The practical answer, per named graph: how many device graphs (compiled networks) it takes, the share
    of MACs on the device, what crosses per inference, where it is cut and what the host computes. Given
    `questions` (question -> stems), each question's graphs stand side by side (the faithful graph, then the
    exact variant)."""
    if questions is None:
        return "; ".join(_graph_phrase(name, part, host[name]) for name, part in partitions.items())
    return ". ".join(
        f"{question}: "
        + "; beside it ".join(_graph_phrase(s, partitions[s], host[s]) for s in stems if s in partitions)
        for question, stems in questions.items()
        if any(s in partitions for s in stems)
    )


def unmet(results: dict[str, DfcResult], script: Path, run_dir: str | os.PathLike | None = None) -> list[str]:
    """Notebook 06's unmet precondition when no DFC result came back: the script to run, named inside the run
    folder (the published appendix is a copy of it, so the command names no machine's path)."""
    if results:
        return []
    return [
        f"DFC not run here: needs the {image()} image; run {run_command(script, run_dir)} and rerun 06 with dfc_results_dir set to its "
        "folder (the cuts rest on the gate's prediction)"
    ]


def pack_sentence(pack: DfcPack, cuts: int) -> str:
    """What the cut pack holds and the one command that parses it all (Markdown)."""
    return f"**{len(pack.graphs)} graphs and {cuts} cuts** in `{pack.folder}`; run them all with `bash {pack.script}`."


def viewer_sentence(model: Path, node_data: Path, run_dir: str | os.PathLike) -> str:
    """How to look at a graph of the run beyond the pictures (Markdown): netron, which the project installs,
    named with the graph's path inside the run folder; and the Model Explorer overlay 06 writes, named as a file
    for those who have Model Explorer (the project does not install it, so the page gives no command for it)."""
    graph, data = (Path(os.path.relpath(p, run_dir)).as_posix() for p in (model, node_data))
    return (
        f"To browse a graph node by node: `.venv/bin/netron {graph}` from the run folder (netron is installed "
        f"with the project and serves the viewer from this machine, offline). The side each node runs on is also "
        f"written as a Model Explorer overlay, `{data}`, for Google's Model Explorer (not installed by the project)."
    )


def short_answer(
    partitions: dict[Path, Partition],
    named: Mapping[str, Path],
    answer_graphs: Mapping[str, Sequence[str]],
    tolerance: float,
) -> str:
    """Notebook 06's answer at a glance (at most 40 words): every cut proven, and the range of the device's
    share of the MACs over the RFD graphs' faithful graphs, then over their best exact variants (`answer_graphs`:
    question -> stems, the faithful graph first; `named`: stem -> model, `run.cutting.answer_models`)."""

    def share(stem: str) -> float:
        return partitions[named[stem]].coverage.share("macs")

    def span(values: list[float]) -> str:
        low, high = (format_value(round(100 * v, 2), "%", 4) for v in (min(values), max(values)))
        return low if low == high else f"{low} to {high}"

    chosen = [stems for stems in answer_graphs.values() if stems and all(s in named for s in stems)]
    faithful = [share(stems[0]) for stems in chosen]
    best = [max(share(s) for s in stems[1:]) for stems in chosen if len(stems) > 1]
    return (
        f"Every cut is proven equal to its graph within {format_value(tolerance)}; the faithful graphs put "
        f"{span(faithful) if faithful else 'none'} of their MACs on the device"
        + (f", the best exact variants {span(best)}." if best else ".")
    )


def conclusion(
    partitions: dict[Path, Partition],
    named: Mapping[str, Path],
    tolerance: float,
    results: dict[str, DfcResult],
    script: Path,
    run_dir: str | os.PathLike | None = None,
    questions: Mapping[str, Sequence[str]] | None = None,
    sources: str = "unknown",
) -> tuple[str, dict[str, str], list[str]]:
    """Notebook 06's answer (`cut_sentence` over the `named` graphs: stem -> model, grouped by `questions`
    where given), what it rests on (`sources`: what the graphs' notebooks rested on, `run_graphs.graph_sources`)
    and its unmet preconditions (`unmet`)."""
    parts = {stem: partitions[model] for stem, model in named.items()}
    host = {stem: host_ops(parts[stem], model) for stem, model in named.items()}
    sentence = cut_sentence(parts, host, questions)
    answer = f"Every graph cut and proven (chain vs graph within {format_value(tolerance)}): {sentence}."
    rests_on = {"dfc": "run" if results else DfcSource.NOT_RUN, "sources": sources}
    return answer, rests_on, unmet(results, script, run_dir)


def merge_sentence(totals: Mapping[str, int], graphs: int) -> str:
    """What the merge did to the run's cuts (Markdown)."""
    return (
        f"Over {graphs} graphs the merge takes the device segments from **{totals['device_segments_before']} to "
        f"{totals['device_segments_after']}** and the tensors in or out of the device per inference from "
        f"{totals['tensors_before']} to {totals['tensors_after']}."
    )


def calibration_sentence(calibration: Calibration) -> str:
    """The fit in one sentence (Markdown): rows, families, the chosen terms and coefficients, the held-out error."""
    m, e = calibration.model, calibration.error
    slopes = " ".join(f"{'-' if c < 0 else '+'} {abs(c):.2f} log {t}" for t, c in zip(m.terms, m.coefficients[1:]))
    return (
        f"**An estimate, not a measurement**: log FPS at batch 1 = {m.coefficients[0]:.2f} {slopes}, fitted by least "
        f"squares on **{len(calibration.rows)} hailo10h networks** of the vendor's zoo ({e.families} families). "
        f"Each family predicted from the others is off by a factor of {math.exp(e.median):.2f} "
        f"at the median and {e.band:.2f} at the 90th percentile: the band every device estimate carries."
    )


def estimate_sentence(estimates: Mapping[str, CutEstimate], calibration: Calibration) -> str:
    """Per named graph (stem -> estimate): host alone against the cut, the ratio and the verdict, then the
    sources of every figure (Markdown)."""
    lines = [
        f"- `{stem}`: host alone {1e3 * e.host_only:.3g} ms (measured) against the cut's "
        f"{1e3 * e.total:.3g} ms (estimate; {1e3 * e.total_low:.3g} to {1e3 * e.total_high:.3g}): host / cut "
        f"{e.ratio:.3g}, device pays off: **{e.verdict}**"
        for stem, e in estimates.items()
    ]
    return "\n".join([*lines, "", "Sources: " + "; ".join(sources(calibration)) + "."])


def estimate_lines(estimate: CutEstimate, calibration: Calibration) -> list[str]:
    """What `gate partition` prints of a cut's time per inference: the figures, each labelled measured or an
    estimate, the verdict, then the sources."""
    e = estimate

    def ms(seconds: float) -> str:
        return f"{1e3 * seconds:.3g} ms"

    lines = [
        f"time per inference: host alone {ms(e.host_only)} (measured here); the cut {ms(e.total)} (an estimate, "
        f"{ms(e.total_low)} to {ms(e.total_high)}): host segments {ms(e.host_segments)} (measured), device "
        f"{ms(e.device)} (estimate, x/÷ {calibration.error.band:.2f}), transfers {ms(e.transfer)} for "
        f"{e.transfers} tensors, {e.bytes_crossing:,} bytes (estimate)",
        f"host alone / cut {e.ratio:.3g}: device pays off: {e.verdict}",
    ]
    lines += [f"  outside the calibration: {o}" for o in e.outside]
    return lines + [f"  source: {s}" for s in sources(calibration)]
