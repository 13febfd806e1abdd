"""Notebook 06's run: every graph cut into device and host segments (each cut written and proven), the cuts
packed for one DFC session, the DFC's word on them read back, and the figures 06 records of the cuts.

The DFC pack parses each graph whole and each device segment as a cut of the original graph (its start and
end node names). A segment the DFC rejects on an operator sends the nodes it named to the host (all of the
segment's nodes when it names none of them), and the graph is cut again and proven again; a failure before
any operator, or an inconclusive one, moves nothing and leaves the segment unjudged. What 06 shows of the cuts
is `pages.cut_tables`, `pages.cut_sentences` and `pages.plots`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import onnx

from ...console import progress as tqdm
from ...onnx_core.walk import index_model, read_structure
from ..compiler.dfc_log import DfcResult, failure_cause
from ..compiler.pack import DfcPack, results_in, write_dfc_pack
from ..cut.coverage import coverage
from ..cut.merge import UNMERGED, crumbs, mergeable_pairs
from ..cut.partition import PARTITION_FILE, cut, write_partition
from ..cut.proof import Reference
from ..cut.segments import TOLERANCE, Coverage, Partition, Segment
from ..estimate.device_model import Calibration
from ..estimate.host_time import REPEATS, host_times
from ..estimate.payoff import CutEstimate, estimate_cut
from ..fix import recorded
from ..predict.nodes import GraphPrediction, predict
from ..record.allowlist import DeviceOps
from ..run_graphs import identity
from ..vocabulary import DfcVerdict, FailureCause, GraphKind, PaysOff, SegmentVerdict, Side
from .by_size import map_by_size

CUT = ".cut"  # a cut's result stem: <graph stem>.cut<segment index>


@dataclass(frozen=True)
class CutVerdict:
    """One device segment next to what the DFC did when parsing it as a cut."""

    model: str
    segment: int
    dfc: SegmentVerdict
    moved: tuple[str, ...] = ()  # nodes sent to the host
    why: str = ""


def cut_all(
    models: Sequence[Path], ops: DeviceOps, folder: str | os.PathLike, tolerance: float = TOLERANCE
) -> dict[Path, Partition]:
    """Cut every model (its segments and partition.json under `folder/<stem>/`, each written by the folder
    rule: `partition.write_partition`) and prove each chain within `tolerance`; the small graphs two at a time
    (`by_size`)."""
    models = list(models)
    bar = tqdm(None, total=len(models), desc="cut", disable=len(models) < 4)

    def one(model: Path) -> Partition:
        return write_partition(
            model, ops, Path(folder) / model.stem, tolerance=tolerance, reference_for=partial(held_to, model)
        )

    done = map_by_size(one, models, progress=lambda _: bar.update())
    bar.close()
    return dict(zip(models, done, strict=True))


def held_to(model: Path) -> tuple[Reference | None, str]:
    """The run recorded beside `model` that its cut's chain may be held to instead of running the graph whole
    again (`fix.recorded.cut_reference`: 02's run of a NAF graph at 512², 05's of a fixed one), or None and why
    the one there does not stand (empty where none was recorded)."""
    run, why = recorded.cut_reference(model)
    if run is not None:
        return Reference(run.inputs, run.outputs, run.source), ""
    return None, why if recorded.folder_for(model).exists() else ""


def before_merge(
    models: Sequence[Path], ops: DeviceOps, partitions: dict[Path, Partition] | None = None
) -> dict[Path, Partition]:
    """Each graph's cut as it was before the merge (`merge.UNMERGED`: each level's connected parts, crumbs
    kept): its segments and coverage, neither written nor proven, for the figures beside the merged cut's.
    The prediction comes from `partitions` where it has one. The small graphs two at a time (`by_size`)."""
    models = list(models)
    known = partitions or {}

    def one(model: Path) -> tuple[tuple[Segment, ...], Coverage, dict[str, str]]:
        inferred = onnx.shape_inference.infer_shapes(onnx.load(str(model)), data_prop=True)
        segments, moved = cut(inferred, ops, known[model].prediction if model in known else None, rule=UNMERGED)
        return tuple(segments), coverage(segments, index_model(inferred)), moved

    # the prediction is attached here, not in a worker: each cut holds the very prediction it was given
    return {
        model: Partition(model.stem, *made, prediction=known[model].prediction if model in known else None)
        for model, made in zip(models, map_by_size(one, models), strict=True)
    }


def merge_findings(partitions: dict[Path, Partition]) -> dict[str, list[str]]:
    """Per graph, what breaks the merge's two rules: two device segments that could be merged without a cycle,
    and a device segment that does not pay for its transfers (`merge.crumbs`); graphs with none left out."""
    found = {}
    for model, part in partitions.items():
        graph = read_structure(model)
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


def pack_cuts(partitions: dict[Path, Partition], folder: str | os.PathLike, arch: str) -> DfcPack:
    """One DFC pack: every graph parsed whole, and every device segment parsed as its cut."""
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
    partitions: dict[Path, Partition],
    results: dict[str, DfcResult],
    ops: DeviceOps,
    folder: str | os.PathLike,
    tolerance: float = TOLERANCE,
) -> tuple[dict[Path, Partition], list[CutVerdict]]:
    """The partitions again, with every device segment the DFC rejected sent (by node name) to the host,
    cut and proven again; and one verdict per device segment."""
    verdicts, again = [], {}
    for model, part in partitions.items():
        node_ops = read_structure(model).node_ops()  # node names only: the weights stay on disk
        forced: set[str] = set()
        for s in part.device_segments:
            result = results.get(cut_stem(model, s.index))
            if result is None:
                verdicts.append(CutVerdict(part.model, s.index, SegmentVerdict.NOT_RUN))
                continue
            if result.verdict == DfcVerdict.PARSED:
                verdicts.append(CutVerdict(part.model, s.index, SegmentVerdict.PARSED))
                continue
            rejected = result.verdict == DfcVerdict.REJECTED
            cause = failure_cause(result, node_ops) if rejected else FailureCause.INCONCLUSIVE
            if cause != FailureCause.OPERATOR:
                verdicts.append(
                    CutVerdict(part.model, s.index, SegmentVerdict.UNJUDGED, why=f"{cause}: {result.reason}")
                )
                continue
            named = {e.node for e in result.errors if e.node} & set(s.nodes)
            moved = tuple(n for n in s.nodes if n in (named or set(s.nodes)))
            forced |= set(moved)
            why = "; ".join(e.cls for e in result.errors)
            verdicts.append(CutVerdict(part.model, s.index, SegmentVerdict.REJECTED, moved, why))
        if forced:
            again[model] = write_partition(
                model,
                ops,
                Path(folder) / model.stem,
                host=forced,
                tolerance=tolerance,
                reference_for=partial(held_to, model),
            )
        else:
            again[model] = part
    return again, verdicts


def predictions(
    models: Sequence[Path], ops: DeviceOps, partitions: dict[Path, Partition] | None = None
) -> dict[Path, GraphPrediction]:
    """The gate's per-node prediction for each model (what the pictures colour by): the one its cut started
    from where `partitions` has it (predicting a large graph again is seconds), else predicted here."""
    known = {m: p.prediction for m, p in (partitions or {}).items() if p.prediction is not None}
    return {m: known[m] if m in known else predict(read_structure(m), ops) for m in models}


def cut_results(partitions: dict[Path, Partition], folder: str | os.PathLike) -> dict[str, DfcResult]:
    """The DFC results found in `folder` for the cuts of `partitions`, by cut stem (`cut_stem`)."""
    return results_in(folder, [cut_stem(m, s.index) for m, p in partitions.items() for s in p.device_segments])


def after_dfc(
    partitions: dict[Path, Partition],
    results: dict[str, DfcResult],
    ops: DeviceOps,
    folder: str | os.PathLike,
    tolerance: float = TOLERANCE,
) -> tuple[dict[Path, Partition], list[CutVerdict]]:
    """`read_back` when the DFC's results came back; without any, the cuts stand as predicted, unverdicted."""
    return read_back(partitions, results, ops, folder, tolerance) if results else (partitions, [])


def host_ops(part: Partition, model: Path) -> dict[str, int]:
    """Op types computed on the host, with counts, most first."""
    graph = read_structure(model)
    kinds = {n.name: n.op_type for n in graph.nodes}
    counts: dict[str, int] = {}
    for s in part.segments:
        if s.runs_on == Side.HOST:
            for n in s.nodes:
                counts[kinds[n]] = counts.get(kinds[n], 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def answer_models(models: Sequence[Path], answer_graphs: Mapping[str, Sequence[str]]) -> dict[str, Path]:
    """Stem -> model for every graph `answer_graphs` names (question -> stems, its faithful graph first, then its
    exact variants) that this run exported; a ValueError where a graph's identity says otherwise (`misplaced`)."""
    by_stem = {m.stem: m for m in models}
    named = {stem: by_stem[stem] for stems in answer_graphs.values() for stem in stems if stem in by_stem}
    wrong = misplaced(named, answer_graphs)
    if wrong:
        raise ValueError(f"answer_graphs: a faithful graph first, then its variants; by their identities {wrong}")
    return named


def misplaced(named: Mapping[str, Path], answer_graphs: Mapping[str, Sequence[str]]) -> list[str]:
    """The graphs `answer_graphs` names out of place by the identity their exporter wrote: a first graph that is
    not faithful, a later one that is not a variant. A graph of unknown identity (a user's ONNX) is not judged."""
    wrong = []
    for stems in answer_graphs.values():
        for place, stem in enumerate(stems):
            found = identity(named[stem]) if stem in named else None
            expected = GraphKind.FAITHFUL if place == 0 else GraphKind.VARIANT
            if found is not None and found.kind != expected:
                wrong.append(f"{stem} is {found}, not {expected}")
    return wrong


def absent_graphs(models: Sequence[Path], answer_graphs: Mapping[str, Sequence[str]]) -> list[str]:
    """The stems `answer_graphs` names that no model of this run has, sorted."""
    stems = {m.stem for m in models}
    return sorted(s for named in answer_graphs.values() for s in named if s not in stems)


def cut_count(partitions: dict[Path, Partition]) -> int:
    """How many device segments, so how many cuts the DFC parses beside the whole graphs."""
    return sum(len(p.device_segments) for p in partitions.values())


def device_share(partitions: dict[Path, Partition], named: Mapping[str, Path]) -> dict[str, float]:
    """Name -> the share of the multiply-accumulates of that model's cut that runs on the device, to four places."""
    return {name: round(partitions[model].coverage.share("macs"), 4) for name, model in named.items()}


def merge_totals(partitions: dict[Path, Partition], before: dict[Path, Partition]) -> dict[str, int]:
    """The run's device segments (so cuts for the DFC to parse) and crossing tensors, before and after the merge."""
    return {
        "device_segments_before": cut_count(before),
        "device_segments_after": cut_count(partitions),
        "tensors_before": sum(p.coverage.crossings for p in before.values()),
        "tensors_after": sum(p.coverage.crossings for p in partitions.values()),
    }


def segment_folders(partitions: dict[Path, Partition], *folders: str | os.PathLike) -> dict[Path, Path]:
    """Where each partition's segment files are: the first of `folders` (e.g. the DFC's re-cut, then `cut_all`'s)
    whose `<stem>/partition.json` records this very cut; a ValueError naming the graph when none does."""
    out = {}
    for model, part in partitions.items():
        recorded = json.loads(json.dumps(part.as_json()["segments"]))  # as the file holds it: lists, not tuples
        for folder in folders:
            file = Path(folder) / model.stem / PARTITION_FILE
            if file.is_file() and json.loads(file.read_text())["segments"] == recorded:
                out[model] = file.parent
                break
        else:
            raise ValueError(f"{model.stem}: no folder of {[str(f) for f in folders]} holds its cut's segment files")
    return out


def estimate_cuts(
    partitions: dict[Path, Partition],
    folders: Mapping[Path, Path],
    calibration: Calibration,
    repeats: int = REPEATS,
) -> dict[Path, CutEstimate]:
    """Each graph's time per inference: the host alone and its host segments measured here (their files in
    `folders`), its device segments estimated (`calibration`), its transfers at the link's rate, the verdict."""
    out = {}
    for model, part in tqdm(list(partitions.items()), desc="time", disable=len(partitions) < 4):
        graph = index_model(onnx.shape_inference.infer_shapes(onnx.load(str(model)), data_prop=True))
        out[model] = estimate_cut(part, graph, calibration, host_times(part, model, folders[model], repeats))
    return out


def payoff_verdicts(estimates: dict[Path, CutEstimate], named: Mapping[str, Path]) -> dict[str, PaysOff]:
    """Stem -> whether the device pays off, for the `named` graphs estimated (the verdict table's column)."""
    return {stem: estimates[model].verdict for stem, model in named.items() if model in estimates}
