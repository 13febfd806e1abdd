"""Time and peak memory of each neighborhood-attention formulation in torch and onnxruntime, against natten.

Why it is built this way:
- Peak memory is measured in a fresh process per (geometry, formulation, backend) (`measure.
  peak_rss_subprocess`), under an address-space cap: natten's CPU path (Flex, uncompiled) is dense
  attention over all H*W keys, and 'gather' holds kh*kw copies of k and v, so at NAF's geometry some
  entries cannot run at all. A capped child fails alone and its row says so; the sweep goes on.
- Only entries whose child fitted are then timed here (median of repeats, `measure.median_seconds`), with
  torch and onnxruntime on the same thread count, so the ratios in one run are comparable.
- Every output is compared with natten (`attention.natten_reference`) where natten fits, else with the
  named fallback formulation (itself proven equal to natten at small sizes by the tests).
"""

from __future__ import annotations

import dataclasses
import math
import resource
import statistics
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from weftlib import measure
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

    def gathered_bytes(self) -> int:
        """fp32 bytes of every query's kh*kw keys and values: what a full-resolution formulation moves when
        it reads each neighbour once per query (its data-movement bound)."""
        return 4 * self.batch * self.tokens * self.kernel**2 * self.heads * (self.dim + self.v_dim)

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
    (not measured) and return the call to measure."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if cap_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (int(cap_bytes), int(cap_bytes)))
    torch.set_num_threads(threads)
    geom = Geometry(**{k: tuple(v) if isinstance(v, list) else v for k, v in geometry.items()})
    inputs = make_inputs(geom, seed)
    if backend == "natten":
        return _natten_call(geom, inputs)
    if backend == "torch":
        return _torch_call(geom, method, inputs)
    if onnx_path is None:
        raise ValueError("onnx_path is required for backend 'onnxruntime'")
    return _ort_call(onnx_path, geom, method, inputs, threads)


def _peak(
    backend: str, method: str, geom: Geometry, threads: int, cap_bytes: int, onnx_path: Path | None = None
) -> tuple[int | None, str]:
    """Peak extra RSS of one call in a capped child, or (None, why it could not run)."""
    kwargs = {
        "backend": backend,
        "method": method,
        "geometry": dataclasses.asdict(geom),
        "threads": threads,
        "cap_bytes": cap_bytes,
        "onnx_path": str(onnx_path) if onnx_path else None,
    }
    try:
        return int(measure.peak_rss_subprocess("weftlib.attention.benchmark:workload", kwargs)["peak_bytes"]), "ok"
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
    }
    row.update(values)
    return row


def _diff(out: Any, ref: torch.Tensor | None) -> float | None:
    return None if ref is None else onnx_export.max_abs_diff([ref.numpy()], [np.asarray(out)])


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
    `natten_max_bytes`. natten's reference call doubles as its warm-up, and its row records the spread of
    its `natten_repeats` timed calls ((max - min) / median), so few repeats of a long call stay honest."""
    torch.set_num_threads(threads)
    inputs = make_inputs(geom)
    methods = tuple(methods or geom.methods or methods_for(geom))
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
        peak, status = _peak("natten", "natten", geom, threads, cap_bytes) if memory else (None, "ok")
        row = _row(geom, "natten", "natten", status=status, peak_bytes=peak)
        if status == "ok":
            call = _natten_call(geom, inputs)
            ref, ref_name = call(), "natten"  # the reference call is also the warm-up
            samples = measure.sample_seconds(call, repeats=natten_repeats, warmup=0)
            row["seconds"] = statistics.median(samples)
            row["spread"] = (max(samples) - min(samples)) / row["seconds"] if len(samples) > 1 else None
            row["repeats"] = natten_repeats
        rows.append(row)
    if ref is None and run_natten:  # natten too big: a formulation proven equal to it answers, timed or not
        ref, ref_name = _torch_call(geom, fallback, inputs)(), fallback
    for method in methods:
        rows.extend(
            _measure_method(
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
        )
    return rows


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
) -> list[dict[str, Any]]:
    """torch row, then (if torch fitted) export and onnxruntime row for one formulation."""
    peak, status = _peak("torch", method, geom, threads, cap_bytes) if memory else (None, "ok")
    call = None
    if status == "ok":
        try:
            call = _torch_call(geom, method, inputs)
            out = call()
        except (ValueError, RuntimeError, MemoryError) as exc:  # e.g. 'masked' refusing a large map
            status, call = f"refused: {str(exc)[:200]}", None
    torch_row = _row(geom, method, "torch", status=status, peak_bytes=peak, reference=ref_name)
    if call is None:
        return [torch_row, _row(geom, method, "onnxruntime", status="not exported: torch did not run")]
    torch_row.update(
        seconds=measure.median_seconds(call, repeats=repeats, warmup=0),  # `out` was the warm-up
        max_abs_diff=_diff(out, ref),
        repeats=repeats,
    )
    if geom.export_methods is not None and method not in geom.export_methods:
        return [
            torch_row,
            _row(geom, method, "onnxruntime", status="not exported: graphs are exported at their small geometry"),
        ]
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
        return [torch_row, _row(geom, method, "onnxruntime", status=f"export failed: {str(exc)[:200]}")]
    peak, status = _peak("onnxruntime", method, geom, threads, cap_bytes, path) if memory else (None, "ok")
    ort_row = _row(
        geom,
        method,
        "onnxruntime",
        status=status,
        peak_bytes=peak,
        reference=ref_name,
        onnx_bytes=rep.file_bytes,
        onnx_path=str(rep.path),
    )
    if status == "ok":
        ort = _ort_call(path, geom, method, inputs, threads)
        ort_row.update(
            seconds=measure.median_seconds(ort, repeats=repeats, warmup=1),
            max_abs_diff=_diff(ort(), ref),
            repeats=repeats,
        )
    return [torch_row, ort_row]


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


def against_limits(
    rows: list[dict[str, Any]], geometries: Iterable[Geometry], limits: dict[str, float]
) -> list[dict[str, Any]]:
    """Per timed full-resolution row: its data-movement bound (`Geometry.gathered_bytes` at the copy rate,
    or the FLOPs at the sgemm rate if longer; `measure.limit_seconds`) and time / bound. Rows of 'lowres',
    which reads the small grid, and of natten get the bound for reference only."""
    by_name = {g.name: g for g in geometries}
    out = []
    for r in rows:
        geom = by_name.get(r["geometry"])
        if geom is None or r["seconds"] is None or math.isnan(r["seconds"]):  # not run (None, or NaN via pandas)
            continue
        bound = measure.limit_seconds(geom.attention_flops(), geom.gathered_bytes(), limits)
        out.append(
            {
                "geometry": r["geometry"],
                "method": r["method"],
                "backend": r["backend"],
                "seconds": r["seconds"],
                "bound_seconds": bound,
                "over_bound": r["seconds"] / bound,
                "peak_GiB": None if r["peak_bytes"] is None else r["peak_bytes"] / 2**30,
            }
        )
    return out
