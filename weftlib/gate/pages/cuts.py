"""Every graph of a run cut into device and host segments, the cuts packed for one DFC session, and the
DFC's word on them read back.

The DFC pack parses each graph whole and each device segment as a cut of the original graph (its start and
end node names). A segment the DFC rejects on an operator sends the nodes it named to the host (all of the
segment's nodes when it names none of them), and the graph is cut again and proven again; a failure before
any operator, or an inconclusive one, moves nothing and leaves the segment unjudged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from ...onnx_core.walk import index_model
from ..compiler.dfc_log import DfcResult, failure_cause
from ..cut.partition import write_partition
from ..cut.segments import Partition
from ..record.allowlist import DeviceOps

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
    """Cut every model (its segments and partition.json under `folder/<stem>/`, each written by the folder
    rule: `partition.write_partition`) and prove each chain."""
    from ...console import headless
    from ...console import progress as tqdm

    out = {}
    for model in tqdm(list(models), desc="cut", disable=headless() or len(models) < 4):
        out[model] = write_partition(model, ops, Path(folder) / model.stem)
    return out


def before_merge(
    models: Sequence[Path], ops: DeviceOps, partitions: dict[Path, Partition] | None = None
) -> dict[Path, Partition]:
    """Each graph's cut as it was before the merge (`merge.UNMERGED`: each level's connected parts, crumbs
    kept): its segments and coverage, neither written nor proven, for the figures beside the merged cut's.
    The prediction comes from `partitions` where it has one."""
    from ..cut.coverage import coverage
    from ..cut.merge import UNMERGED
    from ..cut.partition import cut

    out = {}
    for model in models:
        inferred = onnx.shape_inference.infer_shapes(onnx.load(str(model)), data_prop=True)
        known = (partitions or {}).get(model)
        prediction = known.prediction if known else None
        segments, moved = cut(inferred, ops, prediction, rule=UNMERGED)
        graph = index_model(inferred)
        out[model] = Partition(model.stem, tuple(segments), coverage(segments, graph), moved, prediction=prediction)
    return out


def merge_findings(partitions: dict[Path, Partition]) -> dict[str, list[str]]:
    """Per graph, what breaks the merge's two rules: two device segments that could be merged without a cycle,
    and a device segment that does not pay for its transfers (`merge.crumbs`); graphs with none left out."""
    from ..cut.merge import crumbs, mergeable_pairs

    found = {}
    for model, part in partitions.items():
        graph = index_model(onnx.load(str(model), load_external_data=False))
        problems = [
            f"segments {a} and {b} could be merged" for a, b in mergeable_pairs(part.segments, graph.model.graph.node)
        ]
        problems += [
            f"segment {s.index}: {macs:,} MACs for {moved:,} elements moved"
            for s, macs, moved in crumbs(part.segments, graph)
        ]
        if problems:
            found[part.model] = problems
    return found


def cut_stem(model: Path, segment: int) -> str:
    return f"{model.stem}{CUT}{segment:02d}"


def pack_cuts(partitions: dict[Path, Partition], folder: str | os.PathLike, arch: str):
    """One DFC pack: every graph parsed whole, and every device segment parsed as its cut."""
    from ..compiler.pack import write_dfc_pack

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
            again[model] = write_partition(model, ops, Path(folder) / model.stem, host=forced)
        else:
            again[model] = part
    return again, verdicts


def predictions(
    models: Sequence[Path], ops: DeviceOps, partitions: dict[Path, Partition] | None = None
) -> dict[Path, object]:
    """The gate's per-node prediction for each model (what the pictures colour by): the one its cut started
    from where `partitions` has it (predicting a large graph again is seconds), else predicted here."""
    from ..predict.nodes import predict

    known = {m: p.prediction for m, p in (partitions or {}).items() if p.prediction is not None}
    return {
        m: known[m] if m in known else predict(index_model(onnx.load(str(m), load_external_data=False)), ops)
        for m in models
    }


def pictures(
    partitions: dict[Path, Partition], prediction: dict[Path, object], only: Iterable[Path] | None = None
) -> dict[str, object]:
    """A picture of each cut (file name -> figure): `cut_plots.plot_partition`; of the models in `only` when given."""
    from .cut_plots import plot_partition

    chosen = list(partitions) if only is None else list(only)
    return {f"{model.stem}.png": plot_partition(partitions[model], prediction[model]) for model in chosen}


def node_data_files(
    partitions: dict[Path, Partition], prediction: dict[Path, object], folder: str | os.PathLike
) -> list[Path]:
    """Model Explorer node data for each cut, written as `<stem>.node_data.json` into `folder`."""
    import json

    from .cut_plots import node_data

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


def cut_results(partitions: dict[Path, Partition], folder: str | os.PathLike) -> dict[str, DfcResult]:
    """The DFC results found in `folder` for the cuts of `partitions`, by cut stem (`cut_stem`)."""
    from ..compiler.pack import results_in

    return results_in(folder, [cut_stem(m, s.index) for m, p in partitions.items() for s in p.device_segments])


def after_dfc(
    partitions: dict[Path, Partition], results: dict[str, DfcResult], ops: DeviceOps, folder: str | os.PathLike
) -> tuple[dict[Path, Partition], list[CutVerdict]]:
    """`read_back` when the DFC's results came back; without any, the cuts stand as predicted, unverdicted."""
    return read_back(partitions, results, ops, folder) if results else (partitions, [])
