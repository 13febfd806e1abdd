"""How much memory each submanifold-convolution method needs: an analytic model, and measurements against it.

The model counts the bytes a method allocates on top of its inputs (features, neighbour table, weight) while it
runs, following the implementation in `weftlib.sparse` tensor by tensor. Measurements run each method in a
fresh Python process (`measure.peak_rss_subprocess`): the workload is built there from the voxel set and
neighbour table the parent built once and saved (`child_inputs`), warmed up on a tiny problem so library
initialisation is not counted, and the extra peak resident memory of one forward is read from the kernel. The
dense method's model is exact for its two grids; its conv3d workspace is the CPU backend's business and is
reported, not modelled. At 1024 the dense case is only ever computed from the model.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import statistics
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable, Iterator

import torch

from weftlib import measure

from . import conv, pairs, voxels

if TYPE_CHECKING:  # pandas is imported where tables are built: measuring subprocesses start faster without it
    import pandas as pd

DTYPES = {"float32": torch.float32, "float16": torch.float16}
TARGET = "weftlib.sparse.memory:conv_workload"
# TRELLIS.2 sparse decoder: channel width per grid resolution (one 64-wide conv at 1024, 128 at 512, ...)
DECODER_STAGES = ((64, 1024), (128, 512), (256, 256), (512, 128), (1024, 64))


def _itemsize(dtype: str) -> int:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
    return torch.empty((), dtype=DTYPES[dtype]).element_size()


# ----------------------------------------------------------------------------------------------- bytes
# Each byte formula of the study is written here once; `conv`'s dense budget check and the measurements call them.
INDEX_BYTES = 8  # the neighbour table and gather indices are int64


def grid_bytes(res: int, channels: int, itemsize: int) -> int:
    """A dense [channels, res^3] grid: what densifying costs per tensor."""
    return res**3 * channels * itemsize


def features_bytes(n: int, channels: int, itemsize: int) -> int:
    """Sparse features [n, channels]: one value per active voxel and channel."""
    return n * channels * itemsize


def table_bytes(n: int, taps: int) -> int:
    """The int64 neighbour table [n, taps] (taps = k^3)."""
    return n * taps * INDEX_BYTES


def gathered_bytes(n: int, taps: int, channels: int, itemsize: int) -> int:
    """The gathered rows [n, taps * channels]: im2col's buffer, and what a host-gather split sends."""
    return n * taps * channels * itemsize


# ----------------------------------------------------------------------------------------------- model
def components(res: int, n: int, cin: int, cout: int, dtype: str = "float16", kernel_size: int = 3) -> dict[str, int]:
    """The named quantities of the RFD in bytes: dense tensor, dense conv in+out, sparse features, im2col
    buffer, accumulate peak, neighbour table."""
    e, k3 = _itemsize(dtype), kernel_size**3
    return {
        "dense_tensor": grid_bytes(res, cout, e),
        "dense_conv_in_out": grid_bytes(res, cin + cout, e),
        "sparse_features": features_bytes(n, cin + cout, e),
        "im2col_buffer": gathered_bytes(n, k3, cin, e),
        "accumulate_peak": features_bytes(n, cin + cout, e),
        "neighbor_table": table_bytes(n, k3),
    }


def peak_model(
    method: str,
    res: int,
    n: int,
    cin: int,
    cout: int,
    dtype: str = "float16",
    kernel_size: int = 3,
    chunk_rows: int | None = None,
    rulebook: bool = False,
    chunk_pairs: int | None = None,
) -> int:
    """Bytes `conv.submanifold_conv3d(method)` allocates beyond its inputs at its peak.

    im2col: output + the [rows, k^3 Cin] buffer (all rows, or one reused chunk, then also the features
    padded with a zero row) + its int64 gather index;
    accumulate: output + one offset's gathered rows (+ an int64 index column); the product is added in place;
    scatter: output + one offset's gathered rows + their product + the compacted destination/source indices;
    compact (a rulebook given): output + the gathered rows and products of the fullest chunk's pairs
      (`chunk_pairs`, `pairs.most_chunk_pairs`; at most rows x k^3 when not given) + one chunk's summed
      output (`conv.auto_chunk_rows` rows when no chunk is given);
    dense: the two grids + the gathered output and its transposed copy (conv3d's workspace not included);
    auto: the method and chunking `conv.submanifold_conv3d` picks for these shapes, given a table or, with
      `rulebook=True`, a rulebook.
    """
    if method not in conv.METHODS + (conv.AUTO,):
        raise ValueError(f"method must be one of {conv.METHODS + (conv.AUTO,)}, got {method!r}")
    e, k3 = _itemsize(dtype), kernel_size**3
    if method == conv.AUTO:
        method = conv.choose_method(n, k3, has_rulebook=rulebook)
        chunk_rows = chunk_rows or conv.auto_chunk_rows(method, k3, cin, e, n)
    out = features_bytes(n, cout, e)
    if method == "compact":
        rows = min(n, chunk_rows or conv.rulebook_rows(n, k3, cin, e))
        return out + features_bytes(chunk_pairs or rows * k3, cin + cout, e) + features_bytes(rows, cout, e)
    if method == "im2col":
        if chunk_rows is None or chunk_rows >= n:  # buffer + its int64 index (or the mask, whichever is larger)
            return out + gathered_bytes(n, k3, cin, e) + table_bytes(n, k3)
        # features padded with a zero row + the reused buffer and its index + one chunk's bool mask
        chunk = gathered_bytes(chunk_rows, k3, cin, e) + table_bytes(chunk_rows, k3) + chunk_rows * k3
        return out + features_bytes(n + 1, cin, e) + chunk
    if method == "accumulate":
        return out + features_bytes(n, cin, e) + table_bytes(n, 1)
    if method == "scatter":
        return out + features_bytes(n, cin + cout, e) + table_bytes(n, 2)
    return grid_bytes(res, cin + cout, e) + 2 * out


def model_table(
    res: int, n: int, cin: int, cout: int, dtype: str = "float16", kernel_size: int = 3, chunk_rows: int | None = None
) -> pd.DataFrame:
    """Modelled peak of every method at one geometry, with its ratio to the dense route."""
    import pandas as pd

    rows = [
        {
            "method": m,
            "peak_bytes": peak_model(m, res, n, cin, cout, dtype, kernel_size, chunk_rows if m == "im2col" else None),
        }
        for m in conv.METHODS
    ]
    df = pd.DataFrame(rows)
    df["GiB"] = df["peak_bytes"] / 2**30
    df["dense_over_method"] = df["peak_bytes"].iloc[0] / df["peak_bytes"]
    return df


# ----------------------------------------------------------------------------------------------- workloads
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


def _rss_tracks_tensors(threshold: int = 1 << 16) -> bool:
    """Make resident memory follow live tensors in a measuring process (glibc only; False elsewhere).

    glibc raises its mmap threshold after a large free (up to 32 MiB), so later buffers below that size come
    from heap pages that stay resident after use: a method then appears to need less (it reuses pages freed
    during setup) or more (two generations of buffers) than it holds. A fixed threshold of `threshold` bytes
    maps every tensor-sized block on its own and unmaps it on free, which is the default behaviour for the
    large buffers of the 1024 grid anyway.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False


@functools.lru_cache(maxsize=8)
def kernel_map_of(shape: str, res: int) -> torch.Tensor:
    """The 3x3x3 neighbour table of `voxels.voxel_set(shape, res)`, built once per process for the eight sets
    last asked for (03's appendix asks for six; at 1024 a table is about 1 GB and up to a minute's work on 2
    cores). Shared: do not modify."""
    return conv.kernel_map(voxels.voxel_set(shape, res))


@contextlib.contextmanager
def child_inputs() -> Iterator[Path]:
    """A temporary folder where `save_inputs` leaves voxel sets and tables for measuring children, removed
    on exit: a child loads them instead of building them again."""
    with tempfile.TemporaryDirectory(prefix="weftlib-voxels-") as folder:
        yield Path(folder)


def save_inputs(folder: Path, shape: str, res: int) -> Path:
    """Save (once) the voxel set of (shape, res) and its table into `folder` (`child_inputs`); return it."""
    import numpy as np

    coords, table = _input_files(folder, shape, res)
    if not table.exists():
        np.save(coords, voxels.voxel_set(shape, res).numpy())
        np.save(table, kernel_map_of(shape, res).numpy())
    return folder


def _input_files(folder: str | Path, shape: str, res: int) -> tuple[Path, Path]:
    return Path(folder) / f"{shape}_{res}_coords.npy", Path(folder) / f"{shape}_{res}_table.npy"


def _voxels_and_table(
    shape: str, res: int, kernel_size: int = 3, inputs_dir: str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Voxel set and neighbour table: read from `inputs_dir` where the parent saved them, else built."""
    if inputs_dir is not None and kernel_size == 3:
        import numpy as np

        coords, table = _input_files(inputs_dir, shape, res)
        return torch.from_numpy(np.load(coords)), torch.from_numpy(np.load(table))
    coords = voxels.voxel_set(shape, res)
    return coords, conv.kernel_map(coords, kernel_size)


def _inputs(
    shape: str, res: int, channels: int, dtype: str, seed: int, kernel_size: int = 3, inputs_dir: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Voxel set, neighbour table, random features and a Conv3d-layout weight scaled to unit gain. Drawn
    uniform with unit variance: three times faster than normal draws (5 s for the features of one layer at
    the 1024 grid), and what a peak or a time measures does not depend on the values."""
    coords, nbr = _voxels_and_table(shape, res, kernel_size, inputs_dir)
    gen = torch.Generator().manual_seed(seed)
    unit = 3**0.5  # U(-a, a) has variance a^2 / 3
    feats = torch.empty((len(coords), channels)).uniform_(-unit, unit, generator=gen).to(DTYPES[dtype])
    fan_in = channels * kernel_size**3
    weight = torch.empty((channels, channels, kernel_size, kernel_size, kernel_size)).uniform_(
        -unit, unit, generator=gen
    )
    return coords, nbr, feats, (weight / fan_in**0.5).to(DTYPES[dtype])


def _warm_up(method: str, channels: int, dtype: str) -> None:
    """Run the method once on a tiny voxel set, given its kernel map in the form the measured layer is given
    (a rulebook for 'auto' and 'compact'), so the one-off allocations of that path's kernels happen before
    measuring. Warmed through the table, 'auto' took another path, and the first calls of the measured one
    counted in its peak: a few MB, a tenth of a small layer's modelled bytes and more on some runners."""
    coords, nbr, feats, weight = _inputs("sphere", 8, channels, dtype, seed=1)
    kernel: Any = conv.rulebook(nbr, 64, channels, feats.element_size()) if _given_rulebook(method) else nbr
    chunk_rows = None if _given_rulebook(method) else 64
    conv.submanifold_conv3d(feats, kernel, weight, method=method, coords=coords, res=8, chunk_rows=chunk_rows)


def conv_workload(
    shape: str,
    res: int,
    channels: int,
    method: str,
    dtype: str = "float32",
    threads: int = 1,
    chunk_rows: int | None = None,
    budget_bytes: int = conv.DEFAULT_DENSE_BUDGET,
    seed: int = 0,
    inputs_dir: str | None = None,
) -> Callable[[], torch.Tensor]:
    """Measurement target: build one layer's inputs here (not counted) and return its forward as `run`.

    The kernel map is an input: the table, or for 'auto' and 'compact' its pair form (`conv.rulebook`), which a
    network builds once per voxel set and reuses in every layer (`rulebook_seconds` times the build). The
    voxel set and table come from `inputs_dir` when the parent saved them there (`save_inputs`)."""
    _rss_tracks_tensors()
    torch.set_num_threads(threads)
    _warm_up(method, channels, dtype)
    coords, nbr, feats, weight = _inputs(shape, res, channels, dtype, seed, inputs_dir=inputs_dir)
    kernel: Any = nbr
    if _given_rulebook(method):
        kernel, chunk_rows = conv.rulebook(nbr, chunk_rows, channels, feats.element_size()), None

    def run() -> torch.Tensor:
        return conv.submanifold_conv3d(
            feats,
            kernel,
            weight,
            method=method,
            coords=coords,
            res=res,
            budget_bytes=budget_bytes,
            chunk_rows=chunk_rows,
        )

    return run


def _given_rulebook(method: str) -> bool:
    """Whether a measured layer of `method` is handed the rulebook (the fast path's input) or the table."""
    return method in (conv.AUTO, "compact")


def _most_chunk_pairs(shape: str, res: int, channels: int, dtype: str, chunk_rows: int | None) -> int:
    """The fullest rulebook chunk of (shape, res), chunked as `conv.rulebook` chunks it for this layer."""
    nbr = kernel_map_of(shape, res)
    return pairs.most_chunk_pairs(
        nbr, chunk_rows or conv.rulebook_rows(len(nbr), nbr.shape[1], channels, _itemsize(dtype))
    )


def kernel_map_workload(
    shape: str, res: int, threads: int = 1, inputs_dir: str | None = None
) -> Callable[[], torch.Tensor]:
    """Measurement target for `conv.kernel_map` itself (its table is part of what it allocates); the voxel
    set is read from `inputs_dir` when the parent saved it there."""
    _rss_tracks_tensors()
    torch.set_num_threads(threads)
    conv.kernel_map(voxels.voxel_set("sphere", 8))
    if inputs_dir is None:
        coords = voxels.voxel_set(shape, res)
    else:
        import numpy as np

        coords = torch.from_numpy(np.load(_input_files(inputs_dir, shape, res)[0]))
    return lambda: conv.kernel_map(coords)


# ----------------------------------------------------------------------------------------------- measurement
def measured_row(
    method: str,
    shape: str,
    res: int,
    channels: int,
    n: int,
    dtype: str = "float32",
    threads: int = 1,
    chunk_rows: int | None = None,
    chunk_pairs: int | None = None,
    inputs_dir: Path | None = None,
    block: measure.Bracket | None = None,
) -> dict[str, Any]:
    """One model-versus-measured row: a fresh subprocess runs one forward of `method` at (shape, res).

    A method handed a rulebook needs its fullest chunk's pair count for the model (`chunk_pairs`); it is
    counted here from the voxel set's table when not given. The child reads its voxel set and table from
    `inputs_dir` (`save_inputs`) when given; a `block` (`measure.Bracket`) is told when its forward ran."""
    if _given_rulebook(method) and chunk_pairs is None:
        chunk_pairs = _most_chunk_pairs(shape, res, channels, dtype, chunk_rows)
    got = measure.peak_rss_subprocess(
        TARGET,
        {
            "shape": shape,
            "res": res,
            "channels": channels,
            "method": method,
            "dtype": dtype,
            "threads": threads,
            "chunk_rows": chunk_rows,
            "budget_bytes": 1 << 62,
            "inputs_dir": str(save_inputs(inputs_dir, shape, res)) if inputs_dir else None,
        },
    )
    if block is not None:
        block.note(*got["window"], got["cpu_seconds"])
    model = peak_model(
        method,
        res,
        n,
        channels,
        channels,
        dtype,
        chunk_rows=chunk_rows,
        rulebook=_given_rulebook(method),
        chunk_pairs=chunk_pairs,
    )
    return {
        "shape": shape,
        "res": res,
        "N": n,
        "method": method,
        "C": channels,
        "dtype": dtype,
        "chunk_rows": chunk_rows,
        "model_bytes": model,
        "measured_bytes": got["peak_bytes"],
        "measured_over_model": got["peak_bytes"] / model,
        "seconds": got["seconds"],
    }


def measure_table(
    cases: Iterable[tuple[str, int, str]],
    counts: dict[tuple[str, int], int],
    channels: int,
    dtype: str = "float32",
    threads: int = 1,
    chunk_rows: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Model versus measured peak for each (shape, res, method) case, one fresh process per case."""
    import pandas as pd
    from weftlib.console import progress as tqdm

    cases = list(cases)
    missing = [(s, r) for s, r, _ in cases if (s, r) not in counts]
    if missing:
        raise ValueError(f"counts has no voxel count for {missing}; count those sets first")
    with child_inputs() as folder:
        rows = [
            measured_row(
                m, s, r, channels, counts[(s, r)], dtype, threads, chunk_rows if m == "im2col" else None, None, folder
            )
            for s, r, m in tqdm(cases, desc="peak memory", disable=not progress)
        ]
    return pd.DataFrame(rows)


def measure_kernel_map(shape: str, res: int, n: int, threads: int = 1) -> dict[str, Any]:
    """Peak of building the neighbour table, against the table's own size (the child reads the voxel set
    this process built)."""
    import numpy as np

    with child_inputs() as folder:
        np.save(_input_files(folder, shape, res)[0], voxels.voxel_set(shape, res).numpy())
        got = measure.peak_rss_subprocess(
            "weftlib.sparse.memory:kernel_map_workload",
            {"shape": shape, "res": res, "threads": threads, "inputs_dir": str(folder)},
        )
    table = conv.kernel_map_bytes(n)
    return {
        "shape": shape,
        "res": res,
        "N": n,
        "table_bytes": table,
        "measured_bytes": got["peak_bytes"],
        "measured_over_table": got["peak_bytes"] / table,
        "seconds": got["seconds"],
    }


# ----------------------------------------------------------------------------------------------- timing
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
    if any(_given_rulebook(m) for m in methods):
        book, book_s = _timed_rulebook(nbr, channels, feats.element_size(), repeats)
    rows = []
    for method in tqdm(methods, desc="time per method", disable=not progress):
        given = book if _given_rulebook(method) else nbr

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
    """Forward time and peak of one layer, each repeat in a fresh process: median seconds, worst peak, and
    the machine's rates right before and after the repeats with `contended` (`measure.Bracket`). Up to
    `repeats` processes, fewer once their times are `measure.settled` (`repeats` in the row says how many).

    `n` (the voxel count) and `chunk_pairs` (`measured_row`) are counted here when the caller does not know them;
    the children read the voxel set and table from `inputs_dir` (`save_inputs`) when given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    n = len(voxels.voxel_set(shape, res)) if n is None else n
    if _given_rulebook(method) and chunk_pairs is None:
        chunk_pairs = _most_chunk_pairs(shape, res, channels, dtype, chunk_rows)
    runs: list[dict[str, Any]] = []
    with measure.Bracket(threads) as block:
        while len(runs) < repeats and not measure.settled([r["seconds"] for r in runs]):
            runs.append(
                measured_row(
                    method, shape, res, channels, n, dtype, threads, chunk_rows, chunk_pairs, inputs_dir, block
                )
            )
    worst = max(r["measured_bytes"] for r in runs)
    seconds = [r["seconds"] for r in runs]
    return {
        "shape": shape,
        "res": res,
        "N": n,
        "C": channels,
        "dtype": dtype,
        "method": method,
        "threads": threads,
        "chunk_rows": chunk_rows,
        "repeats": len(runs),
        "median_seconds": statistics.median(seconds),
        "seconds": seconds,
        "spread": measure.spread(seconds),
        "model_bytes": runs[0]["model_bytes"],
        "peak_bytes": worst,
        "peak_over_model": worst / runs[0]["model_bytes"],
        **block.verdict(),
    }


# ----------------------------------------------------------------------------------------------- split
def split_transfer(n: int, cin: int, cout: int, dtype: str = "float16", kernel_size: int = 3) -> dict[str, int]:
    """Bytes a host-gather / device-matmul split moves for one layer: the gathered [N, k^3 Cin] rows in, the
    [N, Cout] result out (the weight stays resident on the device)."""
    e, k3 = _itemsize(dtype), kernel_size**3
    to_device, to_host = gathered_bytes(n, k3, cin, e), features_bytes(n, cout, e)
    return {
        "to_device_bytes": to_device,
        "to_host_bytes": to_host,
        "total_bytes": to_device + to_host,
        "weight_bytes": k3 * cin * cout * e,
    }


def decoder_transfers(
    counts: dict[int, int], dtype: str = "float16", stages: Iterable[tuple[int, int]] = DECODER_STAGES
) -> pd.DataFrame:
    """Per decoder stage (res, channels) with a known voxel count: what one conv layer moves under the split."""
    import pandas as pd

    rows = [
        {"res": r, "C": c, "N": counts[r], **split_transfer(counts[r], c, c, dtype)} for r, c in stages if r in counts
    ]
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- machine limit
def conv_work(nbr: torch.Tensor, cin: int, cout: int, dtype: str = "float32") -> dict[str, int]:
    """What one layer must do on this voxel set: the FLOPs of all k^3 taps, of the taps that have a
    neighbour (what 'compact' multiplies: the least any method must), and its compulsory bytes (the
    features and the weight read once, the output written once) before the kernel map, which a method reads
    in the form it is given (`table_bytes` here, the rulebook's own bytes for 'auto' and 'compact')."""
    e = _itemsize(dtype)
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
    row that beats its bound), `of_sgemm` = useful GFLOP/s over the sgemm rate."""
    seconds = row["median_seconds"] if "median_seconds" in row else row["seconds"]
    bound, side = measure.bound_of(work["flops_occupied"], work["layer_bytes"] + kernel_bytes, row)
    useful = work["flops_occupied"] / seconds / 1e9
    return {
        "limit_seconds": bound,
        "limit_by": side,
        "of_limit": 1 / measure.check_bound(seconds, bound, what),
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
    installed (it is optional, never a dependency of the suite)."""
    try:
        import spconv.pytorch as spconv
    except ImportError:
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    fx_log = logging.getLogger("torch.fx._symbolic_trace")  # spconv 2.3.8 calls torch.fx.is_fx_tracing(), which
    fx_level = fx_log.level  # torch 2.13 answers with a deprecation line on stderr at every layer call
    fx_log.setLevel(logging.ERROR)
    try:
        gen = torch.Generator().manual_seed(seed)
        feats = torch.randn((len(coords), channels), generator=gen)
        weight = torch.randn((channels, channels, 3, 3, 3), generator=gen) / (27 * channels) ** 0.5
        layer = spconv.SubMConv3d(channels, channels, 3, bias=False, indice_key="subm")
        with torch.no_grad():
            layer.weight.copy_(weight.permute(0, 2, 3, 4, 1))  # spconv 2 keeps [Cout, k, k, k, Cin]
            indices = torch.cat([torch.zeros((len(coords), 1), dtype=torch.int32), coords.to(torch.int32)], 1)
            first = layer(spconv.SparseConvTensor(feats, indices, [res] * 3, 1))  # builds the rulebook

            def run() -> torch.Tensor:
                return layer(first.replace_feature(feats)).features

            with measure.Bracket(threads) as block:
                samples = block.timed(run, repeats=repeats, warmup=0)
            ours = conv.submanifold_conv3d(feats, conv.kernel_map(coords) if nbr is None else nbr, weight)
            diff = float((run() - ours).abs().max())
    finally:
        torch.set_num_threads(before)
        fx_log.setLevel(fx_level)
    return {
        "seconds": statistics.median(samples),
        "spread": measure.spread(samples),
        **block.verdict(),
        "threads": threads,
        "max_abs_diff_vs_ours": diff,
        "version": getattr(spconv, "__version__", None) or _version("spconv"),
    }


def rulebook_seconds(
    nbr: torch.Tensor, channels: int, itemsize: int, threads: int = 2, repeats: int = 3
) -> dict[str, Any]:
    """Median seconds of building the rulebook from a given table (once per voxel set, not per layer)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        book, seconds = _timed_rulebook(nbr, channels, itemsize, repeats)
    finally:
        torch.set_num_threads(before)
    return {
        "seconds": seconds,
        "chunk_rows": book.chunk_rows,
        "pairs": book.pairs,
        "max_chunk_pairs": book.max_chunk_pairs,
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
) -> dict[str, Any]:
    """One layer per method (`benchmark`: fresh process per repeat, median time, worst peak) against its lower
    bound (`against_limit`), with the machine's rates measured right before and after each method's repeats
    (`contended` per row), and spconv's time on the same voxels when spconv is installed. The voxel set and
    its table are built once (`voxels.voxel_set`, `kernel_map_of`) and read by every child."""
    from weftlib.console import progress as tqdm

    coords = voxels.voxel_set(shape, res)
    nbr = kernel_map_of(shape, res)
    work = conv_work(nbr, channels, channels, dtype)
    itemsize = _itemsize(dtype)
    book = rulebook_seconds(nbr, channels, itemsize, threads, repeats)
    rows = []
    with child_inputs() as folder:
        save_inputs(folder, shape, res)
        for method in tqdm(list(methods), desc="methods", disable=not progress):
            rows_for = (chunk_rows or {}).get(method)
            given = _given_rulebook(method) and rows_for in (None, book["chunk_rows"])
            row = benchmark(
                shape,
                res,
                channels,
                method,
                dtype,
                threads,
                repeats,
                rows_for,
                n=len(coords),
                chunk_pairs=book["max_chunk_pairs"] if given else None,
                inputs_dir=folder,
            )
            kernel_bytes = book["bytes"] if _given_rulebook(method) else work["table_bytes"]
            row.update(against_limit(row, work, kernel_bytes, f"{shape} {res} {method}"))
            rows.append(row)
    run_spconv = bool(spconv_threads) and dtype == "float32"
    spc = spconv_seconds(coords, res, channels, spconv_threads, repeats, nbr=nbr) if run_spconv else None
    if spc:  # spconv reads its own rulebook: only the features, weight and output are counted for it
        spc.update(against_limit(spc, work, 0, f"{shape} {res} spconv"))
    return {
        "work": work,
        "rulebook": book,
        "rows": rows,
        "spconv": spc,
        "spconv_status": ("ok" if spc else "not installed") if run_spconv else "not asked",
    }


def format_benchmark(result: dict[str, Any]) -> str:
    """The compact, self-explaining summary the benchmark script prints."""
    w, rows = result["work"], result["rows"]
    r0 = rows[0] if rows else {}
    book = result.get("rulebook")
    given = (
        [
            f"'auto' and 'compact' are handed the rulebook (`sparse.rulebook`, {book['pairs']:,} pairs in "
            f"{book['chunk_rows']}-voxel chunks, {book['bytes'] / 2**20:.0f} MiB), built once per voxel set in "
            f"{book['seconds']:.2f} s; the other methods the table"
        ]
        if book
        else []
    )
    lines = [
        f"one submanifold conv layer: {r0.get('shape')} {r0.get('res')}, N = {w['N']:,}, C = {r0.get('C')}, "
        f"{r0.get('dtype')}, {r0.get('threads')} threads, kernel map given; median of "
        f"{' or '.join(sorted({str(r['repeats']) for r in rows})) or '?'} fresh processes",
        *given,
        f"work: {w['flops_occupied'] / 1e12:.3f} TFLOP on taps with a neighbour "
        f"({w['flops_occupied'] / w['flops_all_taps']:.2f} of the {w['flops_all_taps'] / 1e12:.3f} of all taps)",
        "limit: the lower bound, those FLOPs at the sgemm rate or the compulsory bytes (features and weight read "
        "once, output written once, the kernel map as given) at the copy rate, both measured right before and "
        "after each row (the nearer kept); contended: the two differed by over 25 % or other work took a "
        "quarter core",
        f"{'method':<11}{'chunk':>7}{'median s':>10}{'limit s':>9}{'of limit':>10}{'GFLOP/s':>9}{'of sgemm':>10}"
        f"{'peak GiB':>10}{'peak/model':>12}{'sgemm':>7}{'copy':>6}  contended",
    ]
    for r in rows:
        lines.append(
            f"{r['method']:<11}{r['chunk_rows'] or 'auto'!s:>7}{r['median_seconds']:>10.2f}{r['limit_seconds']:>9.2f}"
            f"{r['of_limit']:>10.2f}{r['useful_gflops']:>9.0f}{r['of_sgemm']:>10.2f}"
            f"{r['peak_bytes'] / 2**30:>10.2f}{r['peak_over_model']:>12.2f}{r['sgemm_gflops']:>7.0f}"
            f"{r['copy_gbps']:>6.1f}  {'yes' if r['contended'] else 'no'}"
        )
    spc = result.get("spconv")
    if spc is None and result.get("spconv_status") == "not asked":
        lines.append("spconv: not run (--spconv-threads 0, or not fp32)")
    elif spc is None:
        lines.append("spconv: not installed (optional; pip install spconv to compare)")
    else:
        lines.append(
            f"spconv {spc['version']} SubMConv3d, {spc['threads']} thread(s), rulebook reused: "
            f"{spc['seconds']:.2f} s ({spc['of_limit']:.2f} of its limit at {spc['threads']} thread(s)"
            f"{', contended' if spc['contended'] else ''}); max |spconv - ours| {spc['max_abs_diff_vs_ours']:.2g}"
        )
    return "\n".join(lines)
