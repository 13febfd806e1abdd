"""The sweep's graphs of one geometry exported before any of its rows is timed (`export_all`), two at a time in
forked workers: an export is seconds of mostly single-threaded tracing, and none may run beside or between timed
rows (their brackets would measure it). At NAF's geometry the graph records the run its export made, with the same
builder's graph at a reduced geometry (`naf_records`), so notebook 05 proves a fix of it there.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from weftlib.formatting import error_sentence
from weftlib.gate.fix import recorded
from weftlib.gate.run_graphs import GraphIdentity
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import export as onnx_export

from . import naf_records
from . import neighborhood as attention
from .geometry import Geometry, make_inputs, method_args

EXPORT_ATOL = 1e-4  # onnxruntime against torch, for the sweep's graphs and their reduced twins alike


@dataclasses.dataclass(frozen=True)
class Exported:
    """One formulation's graph as `export_all` left it: its path and report, or why the export failed
    (`failure`; `export_error` when the exporter refused it, which its row reports, anything else being raised
    when the row is reached, as an inline export would have raised it)."""

    path: Path
    report: Any = None  # onnx_export.ExportReport
    failure: str = ""
    export_error: bool = False

    def discard(self) -> None:
        """The graph and what the export wrote beside it removed."""
        for p in self.path.parent.glob(f"{self.path.stem}.*"):
            if p.is_file():
                p.unlink()


def reduced_geometry(geom: Geometry) -> Geometry | None:
    """NAF's call at the smallest coarse grid whose graph has the same nodes (low = kernel + 1, as
    `naf_variants.reduced`: at the kernel size every clamped window is the whole grid), the dilation, heads and
    head dims kept: where 05 proves a fix of the sweep's graph on random sets. None off NAF's geometry (no
    coarse grid, or not square) or where it is no smaller."""
    small = geom.kernel + 1
    if geom.low is None or geom.low[0] != geom.low[1] or small >= geom.low[0]:
        return None
    size = small * geom.dilation
    return dataclasses.replace(geom, name=f"naf_{size}", size=(size, size), low=(small, small))


def _records(geom: Geometry, record_from: int) -> Geometry | None:
    """The reduced geometry when the graph's run is worth recording for 05's proof (`naf_records.RECORD_FROM`
    output elements or more at NAF's geometry), else None."""
    elements = geom.batch * geom.tokens * geom.heads * geom.v_dim
    return reduced_geometry(geom) if elements >= record_from else None


def _export_job(job: tuple[Geometry, str, dict[str, torch.Tensor], Path, int]) -> Exported:
    """One formulation exported to `folder` (an `onnx_export.in_forks` job): never raises, so the other job runs on. At
    NAF's geometry the export's own onnxruntime run is recorded beside the graph with the same builder's graph
    at the reduced geometry (`naf_records`), so 05 proves a fix there without running the original in full."""
    geom, method, inputs, folder, record_from = job
    path = folder / f"{geom.graph_stem(method)}.onnx"
    identity = GraphIdentity(GraphNotebook.ATTENTION, GraphKind.FAITHFUL, method, geom.name)
    small = _records(geom, record_from)
    proof = recorded.folder_for(path)
    shutil.rmtree(proof, ignore_errors=True)  # an earlier run's record never stands for this export
    try:
        rep = onnx_export.export(
            attention.NA2d(geom.kernel, geom.dilation, method=method),
            method_args(geom, method, inputs),
            path,
            input_names=["q", "k", "v"],
            output_names=["out"],
            atol=EXPORT_ATOL,
            identity=identity.as_json(),
            keep_run=naf_records.keeper(proof) if small is not None else None,
        )
    except (onnx_export.ExportError, MemoryError) as exc:
        return Exported(path, failure=error_sentence(str(exc))[:200], export_error=True)
    except Exception as exc:  # e.g. 'masked' refusing a large map: its torch row says so, and the graph goes
        return Exported(path, failure=f"{type(exc).__name__}: {error_sentence(str(exc))[:200]}")
    if small is not None:
        naf_records.write_reduced(
            attention.NA2d(small.kernel, small.dilation, method=method).eval(),
            method_args(small, method, make_inputs(small)),
            proof,
            method=method,
            input_names=["q", "k", "v"],
            output_names=["out"],
            builder=f"benchmark.export_all (attention.NA2d '{method}', NAF's call at the smallest coarse grid)",
            atol=EXPORT_ATOL,
            identity=GraphIdentity(GraphNotebook.ATTENTION, GraphKind.FAITHFUL, method, small.name).as_json(),
        )
    return Exported(path, rep)


def export_all(
    geom: Geometry,
    methods: Iterable[str],
    inputs: dict[str, torch.Tensor],
    folder: Path,
    workers: int = 2,
    record_from: int = naf_records.RECORD_FROM,
) -> dict[str, Exported]:
    """Each formulation's graph at `geom` exported to `folder` before any row is timed, `workers` at a time
    (`onnx_export.in_forks`): an export is seconds of mostly single-threaded tracing, and none runs beside a
    timed row. At NAF's geometry only 'lowres' is exported, so that one runs here, alone, and records its run
    for 05 when its output has `record_from` elements or more (`_export_job`)."""
    methods = list(methods)
    jobs = [(geom, m, inputs, folder, record_from) for m in methods]
    return dict(zip(methods, onnx_export.in_forks(_export_job, jobs, min(workers, max(1, len(jobs)))), strict=True))
