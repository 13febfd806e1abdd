"""What notebook 06 shows of the cuts: coverage and segment tables, compile risks, the DFC's verdicts, the
sentences and the answer with what it rests on, built from the partitions `cuts` made and proved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

from ...onnx_core.walk import index_model
from ..compiler.dfc_log import DfcResult
from ..cut.segments import HOST, Partition
from ..record.allowlist import DeviceOps
from ..run_graphs import graph_label
from .cuts import CutVerdict

if TYPE_CHECKING:
    import pandas as pd

    from ..compiler.pack import DfcPack


def host_ops(part: Partition, model: Path) -> dict[str, int]:
    """Op types computed on the host, with counts."""
    graph = index_model(onnx.load(str(model), load_external_data=False))
    kinds = {n.name: n.op_type for n in graph.nodes}
    counts: dict[str, int] = {}
    for s in part.segments:
        if s.runs_on == HOST:
            for n in s.nodes:
                counts[kinds[n]] = counts.get(kinds[n], 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


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


def coverage_table(partitions: dict[Path, Partition], root: str | os.PathLike):
    """One row per graph: segments, the device's share of nodes, MACs and parameters, what crosses, the proof."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        c = part.coverage
        rows.append(
            {
                "graph": graph_label(model, root),
                "segments": len(part.segments),
                "device segments": len(part.device_segments),
                "nodes on device": f"{c.nodes[0]} of {c.nodes[1]}",
                "MACs on device": c.share("macs"),
                "params on device": c.share("params"),
                "tensors in/out of the device": c.crossings,
                "MiB per inference": c.bytes_crossing / 2**20,
                "chain vs graph": part.max_abs_diff,
                "proven": part.proven,
            }
        )
    return pd.DataFrame(rows)


def segment_table(partitions: dict[Path, Partition], root: str | os.PathLike):
    """One row per device segment: the DFC's translate arguments on the original graph, its largest layer and
    the end nodes the parser may absorb."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        for s in part.device_segments:
            layer = s.largest_layer
            rows.append(
                {
                    "graph": graph_label(model, root),
                    "segment": s.index,
                    "nodes": len(s.nodes),
                    "start_node_names": ", ".join(s.start_node_names),
                    "end_node_names": ", ".join(s.end_node_names),
                    "net_input_shapes": s.net_input_shapes,
                    "largest layer": f"{layer['node']} {layer['weight_shape']} ({layer['params']:,} params)"
                    if layer
                    else "",
                    "end nodes the parser may absorb": ", ".join(s.end_risks),
                }
            )
    return pd.DataFrame(rows)


def compile_risks(partitions: dict[Path, Partition], ops: DeviceOps, root: str | os.PathLike):
    """Each graph's largest device layer beside the compile-stage figures of the public record: a layer at
    least as large as one the compiler needed several contexts for, or could not place, is a risk to check
    at compile time (the record is about DFC 5.4.0 mostly), never a parse verdict."""
    import pandas as pd

    figures = sorted(ops.compile_figures, key=lambda f: f["params"])
    rows = []
    for model, part in partitions.items():
        layers = [s.largest_layer for s in part.device_segments if s.largest_layer]
        if not layers:
            continue
        top = max(layers, key=lambda layer: layer["params"])
        beyond = [f for f in figures if f["params"] <= top["params"]]
        nearest = beyond[-1] if beyond else figures[0]
        rows.append(
            {
                "graph": graph_label(model, root),
                "largest device layer": f"{top['node']} {top['weight_shape']}",
                "params": top["params"],
                "nearest recorded layer": nearest["layer"] + ("" if beyond else " (larger than this one)"),
                "what the compiler did with it": f"{nearest['result']} (DFC {nearest['dfc']}, {nearest['source']})",
                "risk": "check at compile"
                if beyond and any(w in nearest["result"] for w in ("failed", "contexts"))
                else "none recorded at this size",
            }
        )
    return pd.DataFrame(rows)


def unmet(results: dict[str, DfcResult], script: Path, run_dir: str | os.PathLike | None = None) -> list[str]:
    """Notebook 06's unmet precondition when no DFC result came back: the script to run, named inside the run
    folder (the published appendix is a copy of it, so the command names no machine's path)."""
    from ..compiler.dfc_target import image

    if results:
        return []
    command = f"`bash {script}`" if run_dir is None else f"`bash {os.path.relpath(script, run_dir)}` in the run folder"
    return [
        f"DFC not run here: needs the {image()} image; run {command} and rerun 06 with dfc_results_dir set to its "
        "folder (the cuts rest on the gate's prediction)"
    ]


def answer_models(models: Sequence[Path], answer_graphs: Mapping[str, Sequence[str]]) -> dict[str, Path]:
    """Stem -> model for every graph `answer_graphs` names (question -> stems) that this run exported."""
    by_stem = {m.stem: m for m in models}
    return {stem: by_stem[stem] for stems in answer_graphs.values() for stem in stems if stem in by_stem}


def absent_graphs(models: Sequence[Path], answer_graphs: Mapping[str, Sequence[str]]) -> list[str]:
    """The stems `answer_graphs` names that no model of this run has, sorted."""
    stems = {m.stem for m in models}
    return sorted(s for named in answer_graphs.values() for s in named if s not in stems)


def cut_count(partitions: dict[Path, Partition]) -> int:
    """How many device segments, so how many cuts the DFC parses beside the whole graphs."""
    return sum(len(p.device_segments) for p in partitions.values())


def verdict_table(verdicts: Sequence[CutVerdict]) -> pd.DataFrame:
    """One row per device segment the DFC parsed as a cut: its verdict, the nodes it moved, why."""
    import pandas as pd

    return pd.DataFrame([vars(v) for v in verdicts], columns=["model", "segment", "dfc", "moved", "why"])


def pack_sentence(pack: DfcPack, cuts: int) -> str:
    """What the cut pack holds and the one command that parses it all (Markdown)."""
    return f"**{len(pack.graphs)} graphs and {cuts} cuts** in `{pack.folder}`; run them all with `bash {pack.script}`."


def device_share(partitions: dict[Path, Partition], named: Mapping[str, Path]) -> dict[str, float]:
    """Name -> the share of the multiply-accumulates of that model's cut that runs on the device, to four places."""
    return {name: round(partitions[model].coverage.share("macs"), 4) for name, model in named.items()}


def short_answer(
    partitions: dict[Path, Partition],
    named: Mapping[str, Path],
    answer_graphs: Mapping[str, Sequence[str]],
    tolerance: float,
) -> str:
    """Notebook 06's answer at a glance (at most 40 words): every cut proven, and the range of the device's
    share of the MACs over the RFD graphs' faithful graphs, then over their best exact variants (`answer_graphs`:
    question -> stems, the faithful graph first; `named`: stem -> model, `answer_models`)."""
    from ...formatting import format_value

    def share(stem: str) -> float:
        return partitions[named[stem]].coverage.share("macs")

    def span(values: list[float]) -> str:
        low, high = (format_value(round(100 * v, 2), "%", 4) for v in (min(values), max(values)))
        return low if low == high else f"{low} to {high}"

    chosen = [stems for stems in answer_graphs.values() if stems and all(s in named for s in stems)]
    faithful = [share(stems[0]) for stems in chosen]
    best = [max(share(s) for s in stems[1:]) for stems in chosen if len(stems) > 1]
    return (
        f"Every cut is proven equal to its graph within {tolerance:g}; the faithful graphs put "
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
    answer = f"Every graph cut and proven (chain vs graph within {tolerance:g}): {sentence}."
    rests_on = {"dfc": "run" if results else "not run", "sources": sources}
    return answer, rests_on, unmet(results, script, run_dir)


def merge_table(partitions: dict[Path, Partition], before: dict[Path, Partition], root: str | os.PathLike):
    """One row per graph: device segments, tensors and MiB crossing per inference, and the device's share of
    the MACs, before the merge (`cuts.before_merge`) and after it."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        old, c, b = before[model], part.coverage, before[model].coverage
        rows.append(
            {
                "graph": graph_label(model, root),
                "device segments before": len(old.device_segments),
                "device segments after": len(part.device_segments),
                "tensors before": b.crossings,
                "tensors after": c.crossings,
                "MiB before": b.bytes_crossing / 2**20,
                "MiB after": c.bytes_crossing / 2**20,
                "MACs on device before": b.share("macs"),
                "MACs on device after": c.share("macs"),
            }
        )
    return pd.DataFrame(rows)


def merge_totals(partitions: dict[Path, Partition], before: dict[Path, Partition]) -> dict[str, int]:
    """The run's device segments (so cuts for the DFC to parse) and crossing tensors, before and after the merge."""
    return {
        "device_segments_before": cut_count(before),
        "device_segments_after": cut_count(partitions),
        "tensors_before": sum(p.coverage.crossings for p in before.values()),
        "tensors_after": sum(p.coverage.crossings for p in partitions.values()),
    }


def merge_sentence(totals: Mapping[str, int], graphs: int) -> str:
    """What the merge did to the run's cuts (Markdown)."""
    return (
        f"Over {graphs} graphs the merge takes the device segments from **{totals['device_segments_before']} to "
        f"{totals['device_segments_after']}** and the tensors in or out of the device per inference from "
        f"{totals['tensors_before']} to {totals['tensors_after']}."
    )


def deployable_table(
    partitions: dict[Path, Partition], questions: Mapping[str, Sequence[str]], named: Mapping[str, Path]
):
    """The deployable cut of each RFD graph, the faithful graph beside its exact variant: device graphs (each a
    compiled network), the tensors and bytes crossing per inference and their time at `merge.LINK`'s line
    rate beside the device MACs' time at its rated speed, and the device's share of the MACs."""
    import pandas as pd

    from ..cut.merge import LINK

    rows = []
    for question, stems in questions.items():
        for stem in (s for s in stems if s in named):
            c = partitions[named[stem]].coverage
            rows.append(
                {
                    "question": question,
                    "graph": stem,
                    "device graphs": len(partitions[named[stem]].device_segments),
                    "tensors in/out of the device": c.crossings,
                    "MiB per inference": c.bytes_crossing / 2**20,
                    f"ms on the link ({LINK.name})": 1e3 * LINK.seconds(c.bytes_crossing),
                    "ms of device MACs at the rated INT8 speed": 1e3 * c.macs[0] / LINK.macs_per_s,
                    "MACs on device": c.share("macs"),
                }
            )
    return pd.DataFrame(rows)
