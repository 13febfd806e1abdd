"""Time and peak memory of each neighborhood-attention formulation in torch and onnxruntime, against natten.

Why it is built this way:
- Peak memory is measured in a fresh process per (geometry, formulation, backend) (`measure.
  peak_rss_subprocess`), under an address-space cap: natten's CPU path (Flex, uncompiled) is dense
  attention over all H*W keys, and 'gather' holds kh*kw copies of k and v, so at NAF's geometry some
  entries cannot run at all. A capped child fails alone and its row says so; the sweep goes on.
- That child also gives the entry's output and its timing samples, from the same calls: its first call,
  after a warm-up on a tiny map, is the peak and the first sample, so no call (tens of seconds for natten at
  128^2) is made twice for the two measurements; a call of seconds stops at two samples that agree
  (`measure.settled`). Without memory measured, entries are timed here, the output call their
  warm-up. torch and onnxruntime run on the same thread count, so the ratios in one run are comparable.
- Each timed row is bracketed by the machine's rates (`measure.Bracket`): it carries the rates taken nearer
  it and `contended` when the machine was not quiet, and `with_bounds` sets its lower bound (compulsory bytes
  at the copy rate or FLOPs at the sgemm rate) and refuses a row that beats it.
- Every output is compared with natten (`attention.natten_reference`) where natten fits, else with the
  named fallback formulation (itself proven equal to natten at small sizes by the tests).
"""

from __future__ import annotations

import dataclasses
import math
import resource
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

import numpy as np
import torch

from weftlib import measure
from weftlib.onnx_core import compare
from weftlib.onnx_core import export as onnx_export

from . import neighborhood as attention

BACKENDS = ("torch", "onnxruntime", "natten")
DEFAULT_CAP_BYTES = 16 << 30


@dataclass(frozen=True)
class Geometry:
    """One attention call: q `[batch, H, W, heads, dim]`; k/v on `low` (nearest-upsampled by `dilation`
    to H x W, NAF's case) or random at full size when `low` is None."""

    name: str
    size: tuple[int, int]
    heads: int = 4
    dim: int = 32
    v_dim: int = 32
    kernel: int = 7
    dilation: int = 1
    batch: int = 1
    low: tuple[int, int] | None = None
    methods: tuple[str, ...] | None = None  # None: every formulation that applies
    export_methods: tuple[str, ...] | None = None  # exported to ONNX here (None: all); the others torch only
    repeats: int | None = None  # timed calls per entry here (None: the sweep's); each row records its count

    def __post_init__(self) -> None:
        if self.low is not None and tuple(n * self.dilation for n in self.low) != tuple(self.size):
            raise ValueError(
                f"geometry {self.name!r}: size {self.size} must be low {self.low} x dilation "
                f"{self.dilation} (k/v nearest-upsampled by the dilation)"
            )
        if any(self.kernel * self.dilation > s for s in self.size):
            raise ValueError(f"geometry {self.name!r}: kernel x dilation exceeds size {self.size}")

    @property
    def tokens(self) -> int:
        return self.size[0] * self.size[1]

    def no_reuse_bytes(self) -> int:
        """fp32 bytes of every query's kh*kw keys and values read once per query, with no reuse between
        queries: what 'gather' materialises. No bound: a formulation that reuses what it read moves less."""
        return 4 * self.batch * self.tokens * self.kernel**2 * self.heads * (self.dim + self.v_dim)

    def compulsory_bytes(self, method: str) -> int:
        """fp32 bytes any call must move: q, k and v as `method` takes them (the low-res grid for 'lowres'),
        each read once, and the output written once. With `attention_flops`, what bounds a time from below."""
        kv_tokens = self.low[0] * self.low[1] if method == "lowres" and self.low else self.tokens
        inputs = self.tokens * self.dim + kv_tokens * (self.dim + self.v_dim)
        return 4 * self.batch * self.heads * (inputs + self.tokens * self.v_dim)

    def attention_flops(self) -> int:
        """FLOPs of the scores and the weighted sum over each query's kh*kw neighbours."""
        return 2 * self.batch * self.tokens * self.kernel**2 * self.heads * (self.dim + self.v_dim)

    def natten_dense_bytes(self) -> int:
        """fp32 bytes of the dense [B, heads, HW, HW] score matrix natten's Flex path forms on CPU."""
        chunks = -(-self.v_dim // self.dim)
        return 4 * self.batch * chunks * self.heads * self.tokens**2


def grid(sizes: Iterable[int] = (32, 64, 128), kernel: int = 7, heads: int = 4, dim: int = 32) -> list[Geometry]:
    """The acceptance grid: square maps, k 7, 4 heads, dim 32 (v dim = q dim), dilation 1."""
    return [Geometry(f"{s}^2", (s, s), heads, dim, dim, kernel) for s in sizes]


def naf_geometry(
    size: int = 512,
    low: int = 32,
    heads: int = 4,
    dim: int = 64,
    v_dim: int = 256,
    kernel: int = 9,
    methods: Iterable[str] | None = None,
    repeats: int | None = None,
) -> Geometry:
    """NAF's call: queries at `size`^2, k/v nearest-resized from `low`^2, dilation = size / low.

    `methods` limits the formulations timed there (default: all). Full-resolution ones run in torch only,
    in bounded query bands; only 'lowres' is exported at this size. `repeats` (default: the sweep's) is the
    number of timed calls after the call that gives the output; the slowest formulation there, shift, takes
    about 10 s a call on 2 cores; every row records how many calls its median is of."""
    if size % low:
        raise ValueError(f"size {size} must be a multiple of low {low}")
    chosen = tuple(methods) if methods else None
    unknown = set(chosen or ()) - set(attention.METHODS)
    if unknown:
        raise ValueError(f"methods: unknown formulation(s) {sorted(unknown)}; known: {attention.METHODS}")
    # the graphs stay exported at their small geometry: at NAF's size only 'lowres' (small constants) is
    return Geometry(
        f"naf_{size}", (size, size), heads, dim, v_dim, kernel, size // low, 1, (low, low), chosen, ("lowres",), repeats
    )


def methods_for(geom: Geometry) -> tuple[str, ...]:
    """Formulations that apply: 'lowres' needs a low-res k/v grid."""
    return tuple(m for m in attention.METHODS if m != "lowres" or geom.low is not None)


def make_inputs(geom: Geometry, seed: int = 0) -> dict[str, torch.Tensor]:
    """Unit-scale random q, full-size k/v and, for NAF geometries, the low-res k/v they came from."""
    gen = torch.Generator().manual_seed(seed)
    b, (h, w) = geom.batch, geom.size
    q = torch.randn(b, h, w, geom.heads, geom.dim, generator=gen)
    kv_size = geom.low or geom.size
    k = torch.randn(b, *kv_size, geom.heads, geom.dim, generator=gen)
    v = torch.randn(b, *kv_size, geom.heads, geom.v_dim, generator=gen)
    out = {"q": q, "k_low": k, "v_low": v} if geom.low else {"q": q}
    if geom.low:
        k, v = (attention.upsample_nearest(t, geom.dilation) for t in (k, v))
    out.update(k=k, v=v)
    return out


def method_args(geom: Geometry, method: str, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """(q, k, v) as the formulation takes them: the low-res grid for 'lowres'."""
    if method == "lowres":
        return inputs["q"], inputs["k_low"], inputs["v_low"]
    return inputs["q"], inputs["k"], inputs["v"]


def _torch_call(geom: Geometry, method: str, inputs: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    module = attention.NA2d(geom.kernel, geom.dilation, method=method).eval()
    args = method_args(geom, method, inputs)

    def run() -> torch.Tensor:
        with torch.no_grad():
            return module(*args)

    return run


def _natten_call(geom: Geometry, inputs: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]

    def run() -> torch.Tensor:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Flex warns on every uncompiled call
            return attention.natten_reference(q, k, v, geom.kernel, geom.dilation)

    return run


def _ort_call(
    path: str | Path, geom: Geometry, method: str, inputs: dict[str, torch.Tensor], threads: int | None
) -> Callable[[], np.ndarray]:
    sess = onnx_export.session(path, threads=threads)
    feed = dict(zip(("q", "k", "v"), (t.numpy() for t in method_args(geom, method, inputs))))

    def run() -> np.ndarray:
        return onnx_export.run_onnx(sess, feed)[0]

    return run


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
    geom = Geometry(**{k: tuple(v) if isinstance(v, list) else v for k, v in geometry.items()})
    inputs = make_inputs(geom, seed)
    tiny = _tiny(geom)
    if backend == "natten":
        _natten_call(tiny, make_inputs(tiny, seed))()
        return _natten_call(geom, inputs)
    if backend == "torch":
        _torch_call(tiny, method, make_inputs(tiny, seed))()
        return _torch_call(geom, method, inputs)
    if onnx_path is None:
        raise ValueError("onnx_path is required for backend 'onnxruntime'")
    return _ort_call(onnx_path, geom, method, inputs, threads)


def _tiny(geom: Geometry) -> Geometry:
    """The smallest map of the same call (kernel, dilation, heads, dims, low grid or not): a warm-up."""
    k, d = geom.kernel, geom.dilation
    low = (k, k) if geom.low else None
    return Geometry("warm-up", (k * d, k * d), geom.heads, geom.dim, geom.v_dim, k, d, geom.batch, low)


def _peak(
    backend: str,
    method: str,
    geom: Geometry,
    threads: int,
    cap_bytes: int,
    onnx_path: Path | None = None,
    repeats: int = 1,
    save: Path | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """The capped child's measurement of one call (`measure.peak_rss_subprocess`: `peak_bytes`, and with
    `repeats` > 1 its timing `samples`), or (None, why it could not run)."""
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
            "weftlib.attention.benchmark:workload", kwargs, repeats=repeats, save=save
        ), "ok"
    except RuntimeError as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        last = lines[-1][:200] if lines else str(exc)[:200]
        if "MemoryError" in last or "alloc" in last.lower():
            return None, f"out of memory under a {cap_bytes / 2**30:.0f} GiB cap: {last}"
        return None, f"failed: {last}"


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


def _diff(out: Any, ref: torch.Tensor | None) -> float | None:
    return None if ref is None else compare.max_abs_diff([ref], [out])


def measure_geometry(
    geom: Geometry,
    methods: Iterable[str] | None = None,
    *,
    folder: str | Path,
    repeats: int = 5,
    natten_repeats: int = 2,
    threads: int = 2,
    memory: bool = True,
    run_natten: bool = True,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    natten_max_bytes: int = DEFAULT_CAP_BYTES // 4,
    fallback: str = "shift",
) -> list[dict[str, Any]]:
    """All rows of one geometry: natten first (the reference), then each formulation in torch and in
    onnxruntime (exported to `folder`; `geom.export_methods` only). Entries that do not fit the cap are
    reported, not timed; natten is not even tried when its dense score matrix alone exceeds
    `natten_max_bytes`. Every timed row records the spread of its samples ((max - min) / median), so few
    repeats of a long call stay honest, and its bracket's rates and `contended` (`measure.Bracket`)."""
    torch.set_num_threads(threads)
    inputs = make_inputs(geom)
    methods = order = tuple(methods or geom.methods or methods_for(geom))
    repeats = geom.repeats or repeats
    rows: list[dict[str, Any]] = []
    ref, ref_name = None, None
    if run_natten and geom.natten_dense_bytes() > natten_max_bytes:
        rows.append(
            _row(
                geom,
                "natten",
                "natten",
                status=f"skipped: its dense scores alone need "
                f"{geom.natten_dense_bytes() / 2**30:.1f} GiB (limit {natten_max_bytes / 2**30:.1f} GiB)",
            )
        )
    elif run_natten:
        row, ref = _measure_natten(geom, inputs, natten_repeats, threads, memory, cap_bytes)
        ref_name = "natten" if ref is not None else None
        rows.append(row)
    # natten too big: a formulation proven equal to it answers; timed first, its output is the reference
    if ref is None and run_natten and fallback in methods:
        ref_name, methods = fallback, (fallback, *(m for m in methods if m != fallback))
    elif ref is None and run_natten:
        ref, ref_name = _torch_call(geom, fallback, inputs)(), fallback
    by_method = {}
    for method in methods:
        by_method[method], out = _measure_method(
            geom,
            method,
            inputs,
            ref,
            ref_name,
            folder=Path(folder),
            repeats=repeats,
            threads=threads,
            memory=memory,
            cap_bytes=cap_bytes,
        )
        ref = out if ref is None and method == ref_name else ref
    return rows + [r for m in order for r in by_method[m]]


def _measure_natten(
    geom: Geometry, inputs: dict[str, torch.Tensor], repeats: int, threads: int, memory: bool, cap_bytes: int
) -> tuple[dict[str, Any], torch.Tensor | None]:
    """natten's row and its output (the reference), from as few of its dense calls as stay honest (`_timed`).
    Up to `repeats` samples, two for a call of seconds whose two samples agree (`measure.settled`)."""
    row = _row(geom, "natten", "natten")
    child = ("natten", "natten", geom, threads, cap_bytes)
    ref = _timed(row, lambda: _natten_call(geom, inputs), child, repeats, memory, threads)
    return row, ref


def _timed(
    row: dict[str, Any],
    make_call: Callable[[], Callable[[], Any]],
    child: tuple[Any, ...],
    repeats: int,
    memory: bool,
    threads: int,
    refusals: tuple[type[BaseException], ...] = (),
) -> Any:
    """Time one entry into `row` and return its output (None when it could not run; `row["status"]` says why).

    Measuring memory, one capped child (`_peak(*child)`) gives the peak, the output and the timing samples of
    the same calls: its first call, after a warm-up on a tiny map, is the peak and the first sample, so no
    call is made twice for the two measurements. Without, the output call here is the warm-up of the timed
    calls. Either way the timed calls are bracketed by the machine's rates (`measure.Bracket`)."""
    with measure.Bracket(threads) as block:
        if memory:
            with tempfile.TemporaryDirectory() as tmp:
                saved = Path(tmp) / "out.npy"
                got, status = _peak(*child, repeats=repeats, save=saved)
                out = torch.from_numpy(np.load(saved)) if got else None
            if got is not None:
                block.note(*got["window"], got["cpu_seconds"])
                samples, row["peak_bytes"] = got["samples"], int(got["peak_bytes"])
        else:
            try:
                call = make_call()
                out, status = call(), "ok"
            except refusals as exc:  # e.g. 'masked' refusing a large map
                out, status = None, f"refused: {str(exc)[:200]}"
            if out is not None:
                start = time.perf_counter()
                samples = measure.sample_adaptive(call, repeats)
                block.note(start, time.perf_counter())
    row["status"] = status
    if out is not None:
        _timed_row(row, samples, block)
    return out


def _measure_method(
    geom: Geometry,
    method: str,
    inputs: dict[str, torch.Tensor],
    ref: torch.Tensor | None,
    ref_name: str | None,
    *,
    folder: Path,
    repeats: int,
    threads: int,
    memory: bool,
    cap_bytes: int,
) -> tuple[list[dict[str, Any]], torch.Tensor | None]:
    """torch row, then (if torch ran) export and onnxruntime row for one formulation, and its torch output
    (the reference when natten could not give one)."""
    torch_row = _row(geom, method, "torch", reference=ref_name)
    out = _timed(
        torch_row,
        lambda: _torch_call(geom, method, inputs),
        ("torch", method, geom, threads, cap_bytes),
        repeats,
        memory,
        threads,
        (ValueError, RuntimeError, MemoryError),
    )
    if out is None:
        return [torch_row, _row(geom, method, "onnxruntime", status="not exported: torch did not run")], None
    ref = out if ref is None and method == ref_name else ref  # the fallback answers for natten
    torch_row["max_abs_diff"] = _diff(out, ref)
    if geom.export_methods is not None and method not in geom.export_methods:
        not_exported = "not exported: graphs are exported at their small geometry"
        return [torch_row, _row(geom, method, "onnxruntime", status=not_exported)], out
    path = folder / f"{geom.name.replace('^', 'p')}_{method}.onnx"
    args = method_args(geom, method, inputs)
    try:
        rep = onnx_export.export(
            attention.NA2d(geom.kernel, geom.dilation, method=method),
            args,
            path,
            input_names=["q", "k", "v"],
            output_names=["out"],
        )
    except (onnx_export.ExportError, MemoryError) as exc:
        return [torch_row, _row(geom, method, "onnxruntime", status=f"export failed: {str(exc)[:200]}")], out
    ort_row = _row(
        geom,
        method,
        "onnxruntime",
        reference=ref_name,
        onnx_bytes=rep.file_bytes,
        onnx_path=str(rep.path),
    )
    ort_out = _timed(
        ort_row,
        lambda: _ort_call(path, geom, method, inputs, threads),
        ("onnxruntime", method, geom, threads, cap_bytes, path),
        repeats,
        memory,
        threads,
    )
    if ort_out is not None:
        ort_row["max_abs_diff"] = _diff(ort_out, ref)
    return [torch_row, ort_row], out


def sweep(
    geometries: Iterable[Geometry], *, folder: str | Path | None = None, progress: bool = False, **kwargs: Any
) -> list[dict[str, Any]]:
    """`measure_geometry` over several geometries (ONNX files in `folder`, a temporary one if None)."""
    from weftlib.console import progress as tqdm

    geometries = list(geometries)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(folder) if folder is not None else Path(tmp)
        target.mkdir(parents=True, exist_ok=True)
        rows: list[dict[str, Any]] = []
        for geom in tqdm(geometries, desc="geometries", disable=not progress):
            rows.extend(measure_geometry(geom, folder=target, **kwargs))
    return rows


def equality(geom: Geometry, methods: Iterable[str] | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Max |formulation - natten| per formulation on one geometry (natten via its Flex backend)."""
    inputs = make_inputs(geom, seed)
    ref = _natten_call(geom, inputs)()
    rows = []
    for method in methods or methods_for(geom):
        out = _torch_call(geom, method, inputs)()
        rows.append(
            {
                "geometry": geom.name,
                "method": method,
                "size": list(geom.size),
                "kernel": geom.kernel,
                "dilation": geom.dilation,
                "dim": geom.dim,
                "v_dim": geom.v_dim,
                "max_abs_diff": _diff(out, ref),
            }
        )
    return rows


def speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per geometry and formulation: natten time / formulation time (torch and onnxruntime), and
    onnxruntime time / torch time; None where either side did not run."""
    by = {(r["geometry"], r["method"], r["backend"]): r["seconds"] for r in rows}
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
    A timed row faster than its bound raises `measure.BoundBeaten`."""
    by_name = {g.name: g for g in geometries}
    out = []
    for r in rows:
        geom, seconds = by_name.get(r["geometry"]), r.get("seconds")
        bound: dict[str, Any] = dict.fromkeys(("bound_seconds", "bound_by", "over_bound", "no_reuse_GB"))
        if geom is not None and seconds is not None and not math.isnan(seconds):
            if r.get("sgemm_gflops") is None or r.get("copy_gbps") is None:
                raise ValueError(f"{r['geometry']} {r['method']} {r['backend']}: a timed row without its rates")
            limits = {"sgemm_gflops": r["sgemm_gflops"], "copy_gbps": r["copy_gbps"]}
            flops, nbytes = geom.attention_flops(), geom.compulsory_bytes(r["method"])
            bound["bound_seconds"], bound["bound_by"] = measure.bound_of(flops, nbytes, limits)
            what = f"{r['geometry']} {r['method']} ({r['backend']})"
            bound["over_bound"] = measure.check_bound(seconds, bound["bound_seconds"], what)
            bound["no_reuse_GB"] = geom.no_reuse_bytes() / 1e9
        out.append({**r, **bound})
    return out
