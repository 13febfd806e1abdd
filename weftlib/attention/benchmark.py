"""Time and peak memory of each neighborhood-attention formulation in torch and onnxruntime, against natten.

Why it is built this way:
- Peak memory is measured in a fresh process per (geometry, formulation, backend) (`measure.
  peak_rss_subprocess`), under an address-space cap: natten's CPU path (Flex, uncompiled) is dense
  attention over all H*W keys, and 'gather' holds kh*kw copies of k and v, so at NAF's geometry some
  entries cannot run at all. A capped child fails alone and its row says so; the sweep goes on.
- That child also gives the entry's timing samples and its output's largest difference from the reference, from
  the same calls (the reference's child saves its output once, a .npy file in memory-backed scratch where there
  is room, and each later child reads it in place: at NAF's geometry an output is a gigabyte, and writing and
  loading one per row cost seconds): its first call, after a warm-up on a tiny map, is the peak and the first
  sample, so no call (natten's dense one is long at 128^2) is made twice for the two measurements; a call of
  seconds stops at two samples that agree
  (`measure.settled`). Without memory measured, entries are timed here, the output call their
  warm-up. torch and onnxruntime run on the same thread count, so the ratios in one run are comparable.
- Each timed row is bracketed by the machine's rates (`measure.Bracket`): it carries the rates taken nearer
  it and `contended` when the machine was not quiet, and `with_bounds` sets its lower bound (compulsory bytes
  at the copy rate or FLOPs at the sgemm rate) and refuses a row that beats it. A geometry's graphs are all
  exported first (`sweep_exports`), so its rows run back to back and each shares the rate measurement between
  it and the row before (`Bracket(follows=...)`): half the measurements, the same verdicts.
- Every output is compared with natten (`attention.natten_reference`) where natten fits, else with the
  named fallback formulation (itself proven equal to natten at small sizes by the tests).
"""

from __future__ import annotations

import dataclasses
import math
import resource
import statistics
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from weftlib import measure
from weftlib.formatting import error_sentence
from weftlib.onnx_core import compare

from . import calls, naf_records
from .geometry import Geometry, make_inputs, methods_for, tiny
from .sweep_exports import Exported, export_all

BACKENDS = ("torch", "onnxruntime", "natten")
DEFAULT_CAP_BYTES = 16 << 30
SHM_FREE = 8 << 30  # measuring memory, the reference output is kept between children in /dev/shm when it has this free
STOPPED = (
    "stopped"  # a row's status when its measuring process ran out of time (its `contended` says if others slowed it)
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """How every entry of one geometry is measured: ONNX files go to `folder`, `repeats` timed calls at most
    on `threads` threads, peak memory (`memory`) in a child capped at `cap_bytes`. Given once, read by each
    entry's measurement."""

    folder: Path
    repeats: int
    threads: int
    memory: bool
    cap_bytes: int
    scratch: Path | None = None  # measuring memory: where the reference output is saved for the children
    chain: measure.BracketChain = dataclasses.field(default_factory=measure.BracketChain)  # rows back to back

    def child(self, backend: str, method: str, geom: Geometry) -> dict[str, Any]:
        """The arguments of the capped child (`_peak`) that measures one entry."""
        return {
            "backend": backend,
            "method": method,
            "geom": geom,
            "threads": self.threads,
            "cap_bytes": self.cap_bytes,
        }


@dataclasses.dataclass
class Reference:
    """The output every row of a geometry is compared with (natten's, or the fallback formulation's) and its
    name. Measuring memory it is the .npy `file` its own child saved, which each later child reads in place and
    answers only its largest difference from; otherwise the tensor `out`."""

    name: str | None = None
    out: torch.Tensor | None = None
    file: Path | None = None

    @property
    def ready(self) -> bool:
        return self.out is not None or self.file is not None

    def keep(self, out: torch.Tensor, settings: Settings) -> None:
        """`out` (computed here) as the reference, saved for the children when they measure memory."""
        if settings.memory and settings.scratch is not None:
            self.file = settings.scratch / "reference.npy"
            np.save(self.file, out.numpy())
        else:
            self.out = out


def differs_from(result: Any, reference: str) -> float:
    """In a measuring child: the largest difference of its first result from the reference output saved at
    `reference` (read in place, by a memory map)."""
    return compare.max_abs_diff([np.load(reference, mmap_mode="r")], [result])


def workload(
    backend: str,
    method: str,
    geometry: dict[str, Any],
    threads: int = 2,
    onnx_path: str | None = None,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    seed: int = 0,
) -> Callable[[], Any]:
    """Entry for `measure.peak_rss_subprocess`: cap this (fresh) process's address space, build the inputs
    (not measured), run natten or the torch formulation once on a tiny map (so one-off library setup is not
    measured) and return the call to measure."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if cap_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (int(cap_bytes), int(cap_bytes)))
    torch.set_num_threads(threads)
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in geometry.items()}
    geom = Geometry(**fields)
    inputs = make_inputs(geom, seed)
    warm = tiny(geom)
    if backend == "natten":
        calls.natten_call(warm, make_inputs(warm, seed))()
        return calls.natten_call(geom, inputs)
    if backend == "torch":
        calls.torch_call(warm, method, make_inputs(warm, seed))()
        return calls.torch_call(geom, method, inputs)
    if onnx_path is None:
        raise ValueError("onnx_path is required for backend 'onnxruntime'")
    return calls.ort_call(onnx_path, geom, method, inputs, threads)


def _peak(
    backend: str,
    method: str,
    geom: Geometry,
    threads: int,
    cap_bytes: int,
    onnx_path: Path | None = None,
    repeats: int = 1,
    save: Path | None = None,
    against: Path | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """The capped child's measurement of one call (`measure.peak_rss_subprocess`: `peak_bytes`, with `repeats`
    > 1 its timing `samples`, and with `against` its first output's largest difference from that reference
    file as `checked`), or (None, why it could not run)."""
    kwargs = {
        "backend": backend,
        "method": method,
        "geometry": dataclasses.asdict(geom),
        "threads": threads,
        "cap_bytes": cap_bytes,
        "onnx_path": str(onnx_path) if onnx_path else None,
    }
    try:
        return measure.peak_rss_subprocess(
            "weftlib.attention.benchmark:workload",
            kwargs,
            repeats=repeats,
            save=save,
            check="weftlib.attention.benchmark:differs_from" if against else None,
            check_kwargs={"reference": str(against)} if against else None,
        ), "ok"
    except measure.MeasurementStopped as exc:  # its window and CPU let the bracket judge the machine (`_timed`)
        return {"stopped": exc}, f"{STOPPED}: {exc}"
    except RuntimeError as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        last = lines[-1][:200] if lines else str(exc)[:200]  # the child's own error, the last line of its traceback
        if "MemoryError" in last or "alloc" in last.lower():
            return None, f"out of memory under a {cap_bytes / 2**30:.0f} GiB cap: {error_sentence(last)}"
        return None, f"failed: {error_sentence(last)}"  # a page shows the sentence, not the exception's class


def _row(geom: Geometry, method: str, backend: str, **values: Any) -> dict[str, Any]:
    row = {
        "geometry": geom.name,
        "tokens": geom.tokens,
        "method": method,
        "backend": backend,
        "status": "ok",
        "seconds": None,
        "peak_bytes": None,
        "max_abs_diff": None,
        "reference": None,
        "onnx_bytes": None,
        "onnx_path": None,
        "spread": None,
        "repeats": None,
        "contended": None,
    }
    row.update(values)
    return row


def _timed_row(row: dict[str, Any], samples: list[float], block: measure.Bracket) -> dict[str, Any]:
    """A row's median, spread and repeats from its samples, and its bracket's rates and `contended`."""
    row.update(
        seconds=statistics.median(samples), spread=measure.spread(samples), repeats=len(samples), **block.verdict()
    )
    return row


def measure_geometry(
    geom: Geometry,
    methods: Iterable[str] | None = None,
    *,
    folder: str | Path,
    repeats: int = 5,
    natten_repeats: int = 1,
    threads: int = 2,
    memory: bool = True,
    run_natten: bool = True,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    natten_max_bytes: int = DEFAULT_CAP_BYTES // 4,
    fallback: str = "shift",
    done: Callable[[str], Any] | None = None,
    record_from: int = naf_records.RECORD_FROM,
) -> list[dict[str, Any]]:
    """All rows of one geometry (`done(method)` called as each formulation finishes, for a progress bar): natten first (the reference), then each formulation in torch and in
    onnxruntime (exported to `folder`; `geom.export_methods` only). Entries that do not fit the cap are
    reported, not timed; natten is not even tried when its dense score matrix alone exceeds
    `natten_max_bytes`. Every timed row records the spread of its samples ((max - min) / median), so few
    repeats of a long call stay honest, and its bracket's rates and `contended` (`measure.Bracket`). natten, the
    reference, runs `natten_repeats` times, once by default (the owner's decision, issue 33): its dense CPU call
    takes about 25 s at 128^2, so its time and peak come from that one call and its spread is not shown (None)."""
    with (
        measure.torch_threads(threads),
        tempfile.TemporaryDirectory(dir=measure.scratch_root(SHM_FREE) if memory else None) as tmp,
    ):
        inputs = make_inputs(geom)
        order = tuple(methods or geom.methods or methods_for(geom))
        repeats = geom.repeats or repeats
        settings = Settings(Path(folder), repeats, threads, memory, cap_bytes, Path(tmp))
        rows: list[dict[str, Any]] = []
        ref = Reference()
        # every graph exported before any row is timed, two at a time: no export runs beside or between timed rows
        wanted = [m for m in order if _exported_here(geom, m)]
        exported = export_all(geom, wanted, inputs, settings.folder, record_from=record_from)
        if run_natten:
            natten = dataclasses.replace(settings, repeats=natten_repeats)  # the same chain of brackets
            rows = _reference(geom, inputs, natten, natten_max_bytes, ref)
        # natten too big: a formulation proven equal to it answers; timed first, its output is the reference
        methods = order
        if not ref.ready and run_natten and fallback in order:
            ref.name, methods = fallback, (fallback, *(m for m in order if m != fallback))
        elif not ref.ready and run_natten:
            ref.keep(calls.torch_call(geom, fallback, inputs)(), settings)
            ref.name = fallback
        by_method = {}
        for method in methods:
            by_method[method] = _measure_method(geom, method, inputs, ref, settings, exported.get(method))
            if done is not None:
                done(method)
    return rows + [r for m in order for r in by_method[m]]


def _reference(
    geom: Geometry, inputs: dict[str, torch.Tensor], settings: Settings, natten_max_bytes: int, ref: Reference
) -> list[dict[str, Any]]:
    """natten's row, its output made `ref` (left unset, the row saying why, when its dense scores exceed
    `natten_max_bytes` or it could not run)."""
    if geom.natten_dense_bytes() > natten_max_bytes:
        why = (
            f"skipped: its dense scores alone need "
            f"{geom.natten_dense_bytes() / 2**30:.1f} GiB (limit {natten_max_bytes / 2**30:.1f} GiB)"
        )
        return [_row(geom, "natten", "natten", status=why)]
    row = _row(geom, "natten", "natten")
    # up to `settings.repeats` samples, two for a call of seconds whose two samples agree (`measure.settled`)
    if _timed(
        row, lambda: calls.natten_call(geom, inputs), settings.child("natten", "natten", geom), settings, ref, True
    ):
        ref.name = "natten"
    return [row]


def _timed(
    row: dict[str, Any],
    make_call: Callable[[], Callable[[], Any]],
    child: dict[str, Any],
    settings: Settings,
    ref: Reference,
    gives: bool,
    refusals: tuple[type[BaseException], ...] = (),
) -> bool:
    """Time one entry into `row`; whether it ran (`row["status"]` says why not). Its output becomes `ref` when
    it `gives` the reference; otherwise its largest difference from `ref` (once set) is `row["max_abs_diff"]`.

    Measuring memory, one capped child (`_peak(**child)`) gives the peak, the timing samples and the output's
    difference of the same calls: its first call, after a warm-up on a tiny map, is the peak and the first
    sample, so no call is made twice for the measurements. Without, the output call here is the warm-up of the
    timed calls. Either way the timed calls are bracketed by the machine's rates (`measure.Bracket`)."""
    repeats = settings.repeats
    out = None
    with settings.chain.next(settings.threads) as block:
        if settings.memory:
            save = settings.scratch / "reference.npy" if gives and settings.scratch is not None else None
            against = None if gives else ref.file
            got, status = _peak(**child, repeats=repeats, save=save, against=against)
            stopped = got.pop("stopped", None) if got else None
            if stopped is not None:  # out of time: the row says whether the machine was busy meanwhile
                (start, end), cpu = stopped.window, stopped.cpu_seconds
                block.note(start, end, cpu)
                got = None
            if got is not None:
                start, end = got["window"]
                block.note(start, end, got["cpu_seconds"])
                samples, row["peak_bytes"] = got["samples"], int(got["peak_bytes"])
                ref.file = save if gives else ref.file
                row["max_abs_diff"] = got["checked"] if against is not None else row["max_abs_diff"]
            ran = got is not None
        else:
            try:
                call = make_call()
                out, status = call(), "ok"
            except refusals as exc:  # e.g. 'masked' refusing a large map
                out, status = None, f"refused: {str(exc)[:200]}"
            if out is not None:
                samples = block.timed(call, repeats, settle=True)
            ran = out is not None
    row["status"] = status
    if ran:
        _timed_row(row, samples, block)
    elif status.startswith(STOPPED):
        row.update(block.verdict())
    if out is not None and gives:
        ref.out = out
    elif out is not None:
        row["max_abs_diff"] = calls.diff(out, ref.out)
    return ran


def _measure_method(
    geom: Geometry,
    method: str,
    inputs: dict[str, torch.Tensor],
    ref: Reference,
    settings: Settings,
    export: Exported | None = None,
) -> list[dict[str, Any]]:
    """torch row, then (if torch ran) the onnxruntime row of its graph (`export`, made before any row was timed)
    for one formulation; its torch output is the reference when natten could not give one (`ref` named it, not
    yet set). A graph whose torch call did not run is removed: it is no export of this sweep."""
    gives = not ref.ready and method == ref.name  # the fallback answers for natten
    torch_row = _row(geom, method, "torch", reference=ref.name)
    ran = _timed(
        torch_row,
        lambda: calls.torch_call(geom, method, inputs),
        settings.child("torch", method, geom),
        settings,
        ref,
        gives,
        (ValueError, RuntimeError, MemoryError),
    )
    if not ran:
        if export is not None:
            export.discard()
        return [torch_row, _row(geom, method, "onnxruntime", status="not exported: torch did not run")]
    if gives:
        torch_row["max_abs_diff"] = 0.0  # the reference itself
    if export is None:
        not_exported = "not exported: graphs are exported at their small geometry"
        return [torch_row, _row(geom, method, "onnxruntime", status=not_exported)]
    return [torch_row, _measure_export(geom, method, inputs, ref, settings, export)]


def _exported_here(geom: Geometry, method: str) -> bool:
    return geom.export_methods is None or method in geom.export_methods


def _measure_export(
    geom: Geometry, method: str, inputs: dict[str, torch.Tensor], ref: Reference, settings: Settings, export: Exported
) -> dict[str, Any]:
    """The onnxruntime row of one formulation's graph exported up front (or the row saying the export failed)."""
    if export.report is None:
        if not export.export_error:
            raise RuntimeError(f"exporting {geom.name} {method}: {export.failure}")
        return _row(geom, method, "onnxruntime", status=f"export failed: {export.failure}")
    rep, path = export.report, export.path
    ort_row = _row(geom, method, "onnxruntime", reference=ref.name, onnx_bytes=rep.file_bytes, onnx_path=str(rep.path))
    _timed(
        ort_row,
        lambda: calls.ort_call(path, geom, method, inputs, settings.threads),
        settings.child("onnxruntime", method, geom) | {"onnx_path": path},
        settings,
        ref,
        False,
    )
    return ort_row


def sweep(
    geometries: Iterable[Geometry], *, folder: str | Path | None = None, progress: bool = False, **kwargs: Any
) -> list[dict[str, Any]]:
    """`measure_geometry` over several geometries (ONNX files in `folder`, a temporary one if None); with
    `progress`, one bar step per formulation of each geometry, so a long geometry moves the bar too."""
    from weftlib.console import progress as tqdm

    geometries = list(geometries)
    total = sum(len(tuple(kwargs.get("methods") or g.methods or methods_for(g))) for g in geometries)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(folder) if folder is not None else Path(tmp)
        target.mkdir(parents=True, exist_ok=True)
        rows: list[dict[str, Any]] = []
        with tqdm(None, total=total, desc="attention sweep", unit="formulation", disable=not progress) as bar:
            for geom in geometries:
                bar.set_postfix_str(geom.name, refresh=False)
                rows.extend(measure_geometry(geom, folder=target, done=lambda _: bar.update(1), **kwargs))
    return rows


def speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per geometry and formulation: natten time / formulation time (torch and onnxruntime), and
    onnxruntime time / torch time; None where either side did not run. `contended` says whether natten's row
    or the torch row was timed on a contended machine (a ratio of the two is then not judged)."""
    by = {(r["geometry"], r["method"], r["backend"]): r["seconds"] for r in rows}
    busy = {(r["geometry"], r["method"], r["backend"]) for r in rows if r.get("contended") is True}
    out = []
    for (geom, method, backend), secs in by.items():
        if backend != "torch":
            continue
        nat, ort = by.get((geom, "natten", "natten")), by.get((geom, method, "onnxruntime"))
        out.append(
            {
                "geometry": geom,
                "method": method,
                "natten_over_torch": nat / secs if nat and secs else None,
                "natten_over_ort": nat / ort if nat and ort else None,
                "ort_over_torch": ort / secs if ort and secs else None,
                "contended": bool({(geom, "natten", "natten"), (geom, method, backend)} & busy),
            }
        )
    return out


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """A plain markdown table of the rows (no extra dependency)."""
    if not rows:
        return ""
    cols = list(rows[0])

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v).replace("|", "/")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def with_bounds(rows: list[dict[str, Any]], geometries: Iterable[Geometry]) -> list[dict[str, Any]]:
    """The rows with each timed row's lower bound, from the rates its own bracket measured nearer it:
    `bound_seconds` (`measure.limit_seconds` of `Geometry.attention_flops` and `Geometry.compulsory_bytes`),
    `bound_by` (flops or bytes), `over_bound` (time / bound, >= 1), and `no_reuse_GB` (what 'gather' moves,
    `Geometry.no_reuse_bytes`; no bound). Rows that did not run (seconds None, or NaN via pandas) get None.
    A quiet timed row faster than its bound raises `measure.BoundBeaten` (a contended one is not judged)."""
    by_name = {g.name: g for g in geometries}
    out = []
    for r in rows:
        geom, seconds = by_name.get(r["geometry"]), r.get("seconds")
        bound: dict[str, Any] = dict.fromkeys(("bound_seconds", "bound_by", "over_bound", "no_reuse_GB"))
        if geom is not None and seconds is not None and not math.isnan(seconds):
            if r.get("sgemm_gflops") is None or r.get("copy_gbps") is None:
                raise ValueError(f"{r['geometry']} {r['method']} {r['backend']}: a timed row without its rates")
            limits: measure.Rates = {"sgemm_gflops": r["sgemm_gflops"], "copy_gbps": r["copy_gbps"]}
            flops, nbytes = geom.attention_flops(), geom.compulsory_bytes(r["method"])
            bound["bound_seconds"], bound["bound_by"] = measure.bound_of(flops, nbytes, limits)
            what = f"{r['geometry']} {r['method']} ({r['backend']})"
            bound["over_bound"] = measure.check_bound(
                seconds, bound["bound_seconds"], what, contended=bool(r.get("contended"))
            )
            bound["no_reuse_GB"] = geom.no_reuse_bytes() / 1e9
        out.append({**r, **bound})
    return out
