"""One layer timed against this machine's limit: the default two-line pipeline (`default_pipeline`, 03's
headline), time per method in one sweep, fresh-process benchmarks, the roofline bound (the occupied taps' FLOPs at the sgemm rate or the compulsory bytes at the copy rate), the
rulebook's build time and spconv's SubMConv3d on the same voxels when spconv is installed.

The measured figures live in docs/timings.md and in the benchmark's output (`scripts/bench_sparse.py`,
`summary.format_benchmark`), never here.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from weftlib import measure

from . import conv, neighbours, pairs, voxels, workloads
from .chunk_threads import workers_for
from .footprint import DTYPES, features_bytes, itemsize
from .memory import layer_row, measured_row

if TYPE_CHECKING:  # pandas is imported where tables are built
    import pandas as pd


def time_methods(
    coords: torch.Tensor,
    nbr: torch.Tensor,
    res: int,
    channels: int,
    methods: Iterable[str],
    dtype: str = "float32",
    repeats: int = 3,
    chunk_rows: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Median forward seconds per method on one voxel set, measured in this process in the same sweep, each
    method bracketed by the machine's rates (`measure.Bracket`: `contended` per row).

    'auto' and 'compact' are handed the rulebook (column `given`), built once before the sweep; its build
    time is `df.attrs["rulebook_seconds"]` (median of `repeats`), paid once per voxel set, not per layer."""
    import pandas as pd

    from weftlib.console import progress as tqdm

    methods = list(methods)
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn((len(coords), channels), generator=gen).to(DTYPES[dtype])
    weight = (torch.randn((channels, channels, 3, 3, 3), generator=gen) / (27 * channels) ** 0.5).to(DTYPES[dtype])
    book, book_s = None, None
    if any(workloads.given_rulebook(m) for m in methods):
        book, book_s = _timed_rulebook(nbr, channels, feats.element_size(), repeats)
    rows = []
    for method in tqdm(methods, desc="time per method", disable=not progress):
        given = book if workloads.given_rulebook(method) else nbr

        def run(m: str = method, kernel: Any = given) -> torch.Tensor:
            return conv.submanifold_conv3d(
                feats,
                kernel,
                weight,
                method=m,
                coords=coords,
                res=res,
                chunk_rows=chunk_rows if m == "im2col" else None,
            )

        with measure.Bracket() as block:
            samples = block.timed(run, repeats=repeats, warmup=1)
        rows.append(
            {
                "method": method,
                "given": "rulebook" if given is book else "table",
                "seconds": statistics.median(samples),
                "spread": measure.spread(samples),
                **block.verdict(),
            }
        )
    df = pd.DataFrame(rows)
    df["over_fastest"] = df["seconds"] / df["seconds"].min()
    df.attrs["rulebook_seconds"] = book_s
    return df


def benchmark(
    shape: str = "bunny",
    res: int = 1024,
    channels: int = 64,
    method: str = "accumulate",
    dtype: str = "float32",
    threads: int = 2,
    repeats: int = 3,
    chunk_rows: int | None = None,
    n: int | None = None,
    chunk_pairs: int | None = None,
    inputs_dir: Path | None = None,
) -> dict[str, Any]:
    """Forward time and peak of one layer in one fresh process: its first call is the peak (net of that
    process's baseline) and the first timing sample, later calls of the same process the other samples, up to
    `repeats`, fewer once `measure.settled` (`repeats` in the row says how many); median seconds, with the
    machine's rates right before and after and `contended` (`measure.Bracket`). The peak needs a fresh
    process, the later samples do not: a process per repeat paid the load of the voxel set and its ~1 GB table
    (and the rulebook's build) once per sample at the 1024 grid.

    `n` (the voxel count) and `chunk_pairs` (`measured_row`) are counted here when the caller does not know them;
    the child reads the voxel set and table from `inputs_dir` (`save_inputs`) when given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    n = len(voxels.voxel_set(shape, res)) if n is None else n
    if workloads.given_rulebook(method) and chunk_pairs is None:
        chunk_pairs = workloads.most_chunk_pairs(shape, res, channels, dtype, chunk_rows, threads)
    with measure.Bracket(threads) as block:
        got = measured_row(
            method, shape, res, channels, n, dtype, threads, chunk_rows, chunk_pairs, inputs_dir, block, repeats
        )
    return layer_row(got, block.verdict(), threads)


def conv_work(nbr: torch.Tensor, cin: int, cout: int, dtype: str = "float32") -> dict[str, int]:
    """What one layer must do on this voxel set: the FLOPs of all k^3 taps, of the taps that have a
    neighbour (what 'compact' multiplies: the least any method must), and its compulsory bytes (the
    features and the weight read once, the output written once) before the kernel map, which a method reads
    in the form it is given (`table_bytes` here, the rulebook's own bytes for 'auto' and 'compact')."""
    e = itemsize(dtype)
    n, k3 = nbr.shape
    pairs = int((nbr >= 0).sum())
    return {
        "N": n,
        "pairs": pairs,
        "flops_all_taps": 2 * n * k3 * cin * cout,
        "flops_occupied": 2 * pairs * cin * cout,
        "layer_bytes": features_bytes(n, cin + cout, e) + k3 * cin * cout * e,
        "table_bytes": int(nbr.nbytes),
    }


def against_limit(row: dict[str, Any], work: dict[str, int], kernel_bytes: int, what: str) -> dict[str, Any]:
    """One timed layer (`seconds`, and the rates of its bracket) against its lower bound: the occupied taps'
    FLOPs at the sgemm rate or the compulsory bytes (`conv_work`'s plus the `kernel_bytes` of the kernel map
    as given) at the copy rate, the longer. `of_limit` = bound / time (<= 1; `measure.check_bound` refuses a
    quiet row that beats its bound; a contended one is not judged), `of_sgemm` = useful GFLOP/s over the sgemm rate."""
    seconds = row["median_seconds"] if "median_seconds" in row else row["seconds"]
    limits = measure.MachineLimits(
        sgemm_gflops=row["sgemm_gflops"],
        copy_gbps=row["copy_gbps"],
        load_average=row.get("load_average", 0.0),
        threads=row.get("threads"),
    )
    bound, side = measure.bound_of(work["flops_occupied"], work["layer_bytes"] + kernel_bytes, limits)
    useful = work["flops_occupied"] / seconds / 1e9
    return {
        "limit_seconds": bound,
        "limit_by": side,
        "of_limit": 1 / measure.check_bound(seconds, bound, what, contended=bool(row.get("contended"))),
        "useful_gflops": useful,
        "of_sgemm": useful / row["sgemm_gflops"],
    }


def spconv_seconds(
    coords: torch.Tensor,
    res: int,
    channels: int,
    threads: int = 1,
    repeats: int = 3,
    seed: int = 0,
    nbr: torch.Tensor | None = None,
) -> dict[str, Any] | None:
    """spconv's SubMConv3d on the same voxels, rulebook built once and reused (as a network reuses it), its
    timed calls bracketed by the machine's rates (`measure.Bracket`), and the largest difference from
    `submanifold_conv3d` (on `nbr`, the voxels' table, built here when not given); None when spconv is not
    installed (pyproject installs it for 03's headline; everything else runs without it)."""
    try:
        import spconv.pytorch as spconv
    except ImportError:
        return None
    fx_log = logging.getLogger("torch.fx._symbolic_trace")  # spconv 2.3.8 calls torch.fx.is_fx_tracing(), which
    fx_level = fx_log.level  # torch 2.13 answers with a deprecation line on stderr at every layer call
    fx_log.setLevel(logging.ERROR)
    with measure.torch_threads(threads):
        try:
            gen = torch.Generator().manual_seed(seed)
            feats = torch.randn((len(coords), channels), generator=gen)
            weight = torch.randn((channels, channels, 3, 3, 3), generator=gen) / (27 * channels) ** 0.5
            layer = spconv.SubMConv3d(channels, channels, 3, bias=False, indice_key="subm")
            with torch.no_grad():
                layer.weight.copy_(weight.permute(0, 2, 3, 4, 1))  # spconv 2 keeps [Cout, k, k, k, Cin]
                indices = torch.cat([torch.zeros((len(coords), 1), dtype=torch.int32), coords.to(torch.int32)], 1)
                first = layer(spconv.SparseConvTensor(feats, indices, [res] * 3, 1))  # builds the rulebook
                ours = conv.submanifold_conv3d(feats, neighbours.kernel_map(coords) if nbr is None else nbr, weight)
                diff = float((first.features - ours).abs().max())  # the first call's output: no call more to check
                del ours

                def run() -> torch.Tensor:
                    return layer(first.replace_feature(feats)).features

                with measure.Bracket(threads) as block:  # calls of 10 s at the 1024 grid: two that agree suffice
                    samples = block.timed(run, repeats, settle=True)
        finally:
            fx_log.setLevel(fx_level)
    return {
        "seconds": statistics.median(samples),
        "spread": measure.spread(samples),
        **block.verdict(),
        "threads": threads,
        "max_abs_diff_vs_ours": diff,
        "version": getattr(spconv, "__version__", None) or _version("spconv"),
    }


def rulebook_facts(nbr: torch.Tensor, channels: int, itemsize: int, threads: int = 2) -> dict[str, Any]:
    """The shape of the rulebook a layer on `threads` threads gets for table `nbr` (`conv.rulebook_of`, built
    here if it was not, and kept for the table): its chunks, pairs, buffers and bytes. Its build time is
    shown once per voxel set, by `default_pipeline`, not here."""
    with measure.torch_threads(threads):
        book = conv.rulebook_of(nbr, channels, itemsize)
    return {
        "chunk_rows": book.chunk_rows,
        "pairs": book.pairs,
        "max_chunk_pairs": book.max_chunk_pairs,
        "buffer_pairs": workers_for(len(book.tap_ends), threads) * book.max_chunk_pairs,  # `pairs.buffer_pairs`
        "bytes": book.nbytes,
    }


def _timed_rulebook(nbr: torch.Tensor, channels: int, itemsize: int, repeats: int) -> tuple[pairs.Rulebook, float]:
    """The rulebook of `nbr` and the median seconds of building it (the first build is the warm-up)."""
    book = conv.rulebook(nbr, channels=channels, itemsize=itemsize)
    seconds = measure.median_seconds(lambda: conv.rulebook(nbr, channels=channels, itemsize=itemsize), repeats, 0)
    return book, seconds


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def benchmark_against_limits(
    shape: str = "bunny",
    res: int = 1024,
    channels: int = 64,
    methods: Iterable[str] = ("auto",),
    dtype: str = "float32",
    threads: int = 2,
    repeats: int = 3,
    chunk_rows: dict[str, int | None] | None = None,
    spconv_threads: int | None = 1,
    progress: bool = True,
    measured: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One layer per method (`benchmark`: one fresh process, its first call the peak, median time) against its lower
    bound (`against_limit`), with the machine's rates measured right before and after each method's repeats
    (`contended` per row), and spconv's time on the same voxels when spconv is installed. The voxel set and
    its table are built once (`voxels.voxel_set`, `workloads.kernel_map_of`) and read by every child.

    `measured`: a method's row already measured in this run by the same process `benchmark` would start (03's
    peak case of that layer, `memory.measure_table(timed=...)`), taken as it is; a row measured on another
    layer (shape, grid, width, dtype, threads, repeats or chunking) is refused."""
    from weftlib.console import progress as tqdm

    coords = voxels.voxel_set(shape, res)
    nbr = workloads.kernel_map_of(shape, res)
    work = conv_work(nbr, channels, channels, dtype)
    book = rulebook_facts(nbr, channels, itemsize(dtype), threads)  # kept: spconv's check below reuses it
    rows = []
    with workloads.child_inputs() as folder:
        workloads.save_inputs(folder, shape, res)
        for method in tqdm(list(methods), desc="methods", disable=not progress):
            rows_for = (chunk_rows or {}).get(method)
            given = workloads.given_rulebook(method) and rows_for in (None, book["chunk_rows"])
            asked = {"shape": shape, "res": res, "C": channels, "method": method, "dtype": dtype, "threads": threads}
            earlier = (measured or {}).get(method)
            row = (
                _measured_as_asked(dict(earlier), {**asked, "chunk_rows": rows_for}, repeats)
                if earlier is not None
                else benchmark(
                    *(shape, res, channels, method, dtype, threads, repeats, rows_for),
                    n=len(coords),
                    chunk_pairs=book["buffer_pairs"] if given else None,
                    inputs_dir=folder,
                )
            )
            kernel_bytes = book["bytes"] if workloads.given_rulebook(method) else work["table_bytes"]
            row.update(against_limit(row, work, kernel_bytes, f"{shape} {res} {method}"))
            rows.append(row)
    run_spconv = bool(spconv_threads) and dtype == "float32"
    spc = spconv_seconds(coords, res, channels, spconv_threads or 1, repeats, nbr=nbr) if run_spconv else None
    if spc:  # spconv reads its own rulebook: only the features, weight and output are counted for it
        spc.update(against_limit(spc, work, 0, f"{shape} {res} spconv"))
    return {
        "work": work,
        "rulebook": book,
        "rows": rows,
        "spconv": spc,
        "spconv_status": ("ok" if spc else "not installed") if run_spconv else "not asked",
    }


def _measured_as_asked(row: dict[str, Any], asked: dict[str, Any], repeats: int) -> dict[str, Any]:
    """`row` (a `benchmark` row measured earlier in the run), refused in one line unless it is the layer asked
    for, with at most `repeats` samples."""
    differs = {k: (row.get(k), v) for k, v in asked.items() if row.get(k) != v}
    if differs:
        raise ValueError(f"measured: the {asked['method']} row was measured on another layer: {differs} (row, asked)")
    if not 1 <= row.get("repeats", 0) <= repeats:
        raise ValueError(f"measured: the {asked['method']} row has {row.get('repeats')} samples, not 1 to {repeats}")
    return row


LAYER_TARGET = 2.0  # issue 33: the default layer within 2x of its lower bound ...
SPCONV_TARGET = 0.5  # ... and at most half of spconv's single-thread time


def default_pipeline(
    shape: str = "bunny",
    res: int = 1024,
    channels: int = 64,
    threads: int = 2,
    repeats: int = 3,
    spconv_threads: int | None = 1,
    seed: int = 0,
    spconv: dict[str, Any] | None = None,
    reference: measure.Rates | None = None,
) -> dict[str, Any]:
    """The two obvious lines, timed in one run: `table = kernel_map(coords)` and one layer of the default call
    `submanifold_conv3d(feats, table, weight)`, fp32, on `threads` threads.

    The map is built once per voxel set and shown once: the table, then the pair form the first layer builds
    and keeps for it (`conv.rulebook_of`, timed on its own here so the layer's samples are what every later
    layer costs). The layer's median of `repeats` stands against its lower bound (`conv_work`'s occupied-tap
    FLOPs at the sgemm rate, or its compulsory bytes with the pair form's at the copy rate) and against
    spconv's SubMConv3d on the same voxels (`spconv_seconds`, or `spconv`, its row from earlier in the run):
    medians to spconv, the fastest sample to the bound. `contended` (the claim, `pipeline_claims`, not judged)
    when either timed block was (`measure.Bracket`; the layer's held to `reference`, the run's best rates)."""
    coords = voxels.voxel_set(shape, res)
    with measure.torch_threads(threads):
        start = time.perf_counter()
        table = neighbours.kernel_map(coords)
        mapped = time.perf_counter()
        book = conv.rulebook_of(table, channels, itemsize("float32"))
        paired = time.perf_counter()
        feats, weight = _random_layer(len(coords), channels, seed)
        with measure.Bracket(threads, reference=reference) as block:
            # seconds a call at the 1024 grid: a third sample of two that agree moves their median little
            samples = block.timed(lambda: conv.submanifold_conv3d(feats, table, weight), repeats, 1, settle=True)
    layer = {
        "seconds": statistics.median(samples),
        "best_seconds": min(samples),
        "spread": measure.spread(samples),
        **block.verdict(),
    }
    work = conv_work(table, channels, channels)
    rates = measure.Rates(sgemm_gflops=layer["sgemm_gflops"], copy_gbps=layer["copy_gbps"])
    bound, side = measure.bound_of(work["flops_occupied"], work["layer_bytes"] + book.nbytes, rates)
    spc = spconv
    if spc is None and spconv_threads:
        spc = spconv_seconds(coords, res, channels, spconv_threads, repeats, seed, table)
    return {
        "shape": shape,
        "res": res,
        "N": len(coords),
        "C": channels,
        "threads": threads,
        "map": {"table_seconds": mapped - start, "pairs_seconds": paired - mapped, "pairs": book.pairs},
        "layer": layer,
        "work": work,
        "bound_seconds": bound,
        "bound_by": side,
        "over_bound": layer["best_seconds"] / bound,  # noise only adds time: the fastest sample is judged
        "spconv": spc,
        "over_spconv": layer["seconds"] / spc["seconds"] if spc else None,
        "contended": bool(layer["contended"] or (spc or {}).get("contended", False)),
    }


def _random_layer(n: int, channels: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 features [n, C] and a unit-gain 3x3x3 Conv3d weight, drawn as `spconv_seconds` draws them."""
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn((n, channels), generator=gen)
    return feats, torch.randn((channels, channels, 3, 3, 3), generator=gen) / (27 * channels) ** 0.5


def pipeline_claims(pipeline: dict[str, Any], claim_res: int = 1024) -> list[measure.Claim]:
    """03's time claim on `default_pipeline` (`measure.time_claim`): the layer's fastest sample over its lower
    bound, above 1 (faster would make it no bound) and under `LAYER_TARGET`; not judged when contended. None
    below `claim_res`: there a layer takes milliseconds and the per-chunk overhead, not the multiplies, sets
    its time (the ratios are shown, not claimed)."""
    if pipeline["res"] < claim_res:
        return []
    where = f"{pipeline['shape']} {pipeline['res']}, C = {pipeline['C']}, fp32, {pipeline['threads']} threads"
    return [
        measure.time_claim(
            "default layer over its bound",
            f"the default two-line pipeline's layer ({where}) within {LAYER_TARGET:g}x of its lower bound",
            pipeline["over_bound"],
            below=LAYER_TARGET,
            above=1.0,
            contended=pipeline["contended"],
            figures={"seconds": pipeline["layer"]["best_seconds"], "bound_seconds": pipeline["bound_seconds"]},
            taken_as="fastest of the repeats over the bound from the rates measured beside them",
        )
    ]
