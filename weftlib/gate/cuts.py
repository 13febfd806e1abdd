"""Every graph of a run cut into device and host segments, the cuts packed for one DFC session, and the
DFC's word on them read back.

The DFC pack parses each graph whole and each device segment as a cut of the original graph (its start and
end node names). A segment the DFC rejects on an operator sends the nodes it named to the host (all of the
segment's nodes when it names none of them), and the graph is cut again and proven again; a failure before
any operator, or an inconclusive one, moves nothing and leaves the segment unjudged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import onnx

from ..onnx_core.walk import index_model
from .allowlist import DeviceOps
from .dfc_log import DfcResult, failure_cause
from .partition import HOST, Partition, partition, prove

if TYPE_CHECKING:
    import pandas as pd

    from .probes import DfcPack

CUT = ".cut"  # a cut's result stem: <graph stem>.cut<segment index>


@dataclass(frozen=True)
class CutVerdict:
    """One device segment next to what the DFC did when parsing it as a cut."""

    model: str
    segment: int
    dfc: str  # "not run", "parsed", "rejected", "unjudged"
    moved: tuple[str, ...] = ()  # nodes sent to the host
    why: str = ""


def cut_all(models: Sequence[Path], ops: DeviceOps, folder: str | os.PathLike) -> dict[Path, Partition]:
    """Cut every model (its segments under `folder/<stem>/`) and prove each chain."""
    from ..console import headless
    from ..console import progress as tqdm

    out = {}
    for model in tqdm(list(models), desc="cut", disable=headless() or len(models) < 4):
        target = Path(folder) / model.stem
        target.mkdir(parents=True, exist_ok=True)
        out[model] = prove(partition(model, ops, target), model, target)
    return out


def cut_stem(model: Path, segment: int) -> str:
    return f"{model.stem}{CUT}{segment:02d}"


def pack_cuts(partitions: dict[Path, Partition], folder: str | os.PathLike, arch: str):
    """One DFC pack: every graph parsed whole, and every device segment parsed as its cut."""
    from .probes import write_dfc_pack

    cuts = {
        cut_stem(model, s.index): {
            "graph": model.name,
            "start_node_names": list(s.start_node_names),
            "end_node_names": list(s.end_node_names),
            "net_input_shapes": s.net_input_shapes,
        }
        for model, part in partitions.items()
        for s in part.device_segments
    }
    return write_dfc_pack(list(partitions), folder, arch, cuts=cuts)


def read_back(
    partitions: dict[Path, Partition], results: dict[str, DfcResult], ops: DeviceOps, folder: str | os.PathLike
) -> tuple[dict[Path, Partition], list[CutVerdict]]:
    """The partitions again, with every device segment the DFC rejected sent (by node name) to the host,
    cut and proven again; and one verdict per device segment."""
    verdicts, again = [], {}
    for model, part in partitions.items():
        graph = index_model(onnx.load(str(model)))
        node_ops = graph.node_ops()
        forced: set[str] = set()
        for s in part.device_segments:
            result = results.get(cut_stem(model, s.index))
            if result is None:
                verdicts.append(CutVerdict(part.model, s.index, "not run"))
                continue
            if result.verdict == "parsed":
                verdicts.append(CutVerdict(part.model, s.index, "parsed"))
                continue
            cause = failure_cause(result, node_ops) if result.verdict == "rejected" else "inconclusive"
            if cause != "operator":
                verdicts.append(CutVerdict(part.model, s.index, "unjudged", why=f"{cause}: {result.reason}"))
                continue
            named = {e.node for e in result.errors if e.node} & set(s.nodes)
            moved = tuple(n for n in s.nodes if n in (named or set(s.nodes)))
            forced |= set(moved)
            verdicts.append(CutVerdict(part.model, s.index, "rejected", moved, "; ".join(e.cls for e in result.errors)))
        if forced:
            target = Path(folder) / model.stem
            target.mkdir(parents=True, exist_ok=True)
            again[model] = prove(partition(model, ops, target, host=forced), model, target)
        else:
            again[model] = part
    return again, verdicts


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


def cut_sentence(partitions: dict[str, Partition], host: dict[str, dict[str, int]]) -> str:
    """The practical answer, per named graph: the share of MACs on the device, where the graph is cut, and
    what the host computes."""
    parts = []
    for name, part in partitions.items():
        c = part.coverage
        if not part.device_segments:
            parts.append(
                f"{name}: nothing is predicted to run on the device (the host computes all {c.nodes[1]} nodes)"
            )
            continue
        ends = [e for s in part.device_segments for e in s.end_node_names]
        computed = ", ".join(f"{op} x{n}" for op, n in list(host[name].items())[:4]) or "nothing"
        parts.append(
            f"{name}: {c.share('macs'):.0%} of the MACs ({c.nodes[0]} of {c.nodes[1]} nodes) on the device in "
            f"{len(part.device_segments)} segment(s), cut at {', '.join(ends[:3])}{' …' if len(ends) > 3 else ''}; "
            f"the host computes {computed}"
        )
    return "; ".join(parts)


def predictions(
    models: Sequence[Path], ops: DeviceOps, partitions: dict[Path, Partition] | None = None
) -> dict[Path, object]:
    """The gate's per-node prediction for each model (what the pictures colour by): the one its cut started
    from where `partitions` has it (predicting a large graph again is seconds), else predicted here."""
    from .predict import predict

    known = {m: p.prediction for m, p in (partitions or {}).items() if p.prediction is not None}
    return {
        m: known[m] if m in known else predict(index_model(onnx.load(str(m), load_external_data=False)), ops)
        for m in models
    }


def coverage_table(partitions: dict[Path, Partition], root: str | os.PathLike):
    """One row per graph: segments, the device's share of nodes, MACs and parameters, what crosses, the proof."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        c = part.coverage
        rows.append(
            {
                "graph": _label(model, root),
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
                    "graph": _label(model, root),
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
                "graph": _label(model, root),
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


def pictures(
    partitions: dict[Path, Partition], prediction: dict[Path, object], only: Iterable[Path] | None = None
) -> dict[str, object]:
    """A picture of each cut (file name -> figure): `summary.plot_partition`; of the models in `only` when given."""
    from .summary import plot_partition

    chosen = list(partitions) if only is None else list(only)
    return {f"{model.stem}.png": plot_partition(partitions[model], prediction[model]) for model in chosen}


def node_data_files(
    partitions: dict[Path, Partition], prediction: dict[Path, object], folder: str | os.PathLike
) -> list[Path]:
    """Model Explorer node data for each cut, written as `<stem>.node_data.json` into `folder`."""
    import json

    from .summary import node_data

    Path(folder).mkdir(parents=True, exist_ok=True)
    written = []
    for model, part in partitions.items():
        graph_id = onnx.load(str(model), load_external_data=False).graph.name
        path = node_data_file(folder, model)
        path.write_text(json.dumps(node_data(part, prediction[model], graph_id), indent=1))
        written.append(path)
    return written


def node_data_file(folder: str | os.PathLike, model: Path) -> Path:
    """Where `node_data_files` writes a model's node data: `<folder>/<stem>.node_data.json`."""
    return Path(folder) / f"{model.stem}.node_data.json"


def _label(path: Path, root: str | os.PathLike) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name


def unmet(results: dict[str, DfcResult], script: Path, run_dir: str | os.PathLike | None = None) -> list[str]:
    """Notebook 06's unmet precondition when no DFC result came back: the script to run, named inside the run
    folder (the published appendix is a copy of it, so the command names no machine's path)."""
    from .dfc_runner import image

    if results:
        return []
    command = f"`bash {script}`" if run_dir is None else f"`bash {os.path.relpath(script, run_dir)}` in the run folder"
    return [
        f"DFC not run here: needs the {image()} image; run {command} and rerun 06 with dfc_results_dir set to its "
        "folder (the cuts rest on the gate's prediction)"
    ]


# ------------------------------------------------------------ notebook 06's figures, rows and sentences


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


def cut_results(partitions: dict[Path, Partition], folder: str | os.PathLike) -> dict[str, DfcResult]:
    """The DFC results found in `folder` for the cuts of `partitions`, by cut stem (`cut_stem`)."""
    from .probes import results_in

    return results_in(folder, [cut_stem(m, s.index) for m, p in partitions.items() for s in p.device_segments])


def after_dfc(
    partitions: dict[Path, Partition], results: dict[str, DfcResult], ops: DeviceOps, folder: str | os.PathLike
) -> tuple[dict[Path, Partition], list[CutVerdict]]:
    """`read_back` when the DFC's results came back; without any, the cuts stand as predicted, unverdicted."""
    return read_back(partitions, results, ops, folder) if results else (partitions, [])


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


def conclusion(
    partitions: dict[Path, Partition],
    named: Mapping[str, Path],
    tolerance: float,
    results: dict[str, DfcResult],
    script: Path,
    run_dir: str | os.PathLike | None = None,
) -> tuple[str, dict[str, str], list[str]]:
    """Notebook 06's answer (`cut_sentence` over the `named` graphs: stem -> model), what it rests on, and its
    unmet preconditions (`unmet`)."""
    parts = {stem: partitions[model] for stem, model in named.items()}
    sentence = cut_sentence(parts, {stem: host_ops(parts[stem], model) for stem, model in named.items()})
    answer = f"Every graph cut and proven (chain vs graph within {tolerance:g}): {sentence}."
    rests_on = {"dfc": "run" if results else "not run", "sources": "the graphs of this run"}
    return answer, rests_on, unmet(results, script, run_dir)
