"""How much memory each submanifold-convolution method needs: an analytic model, and peaks measured against it.

The model counts the bytes a method allocates on top of its inputs (features, neighbour table, weight) while it
runs, following the implementation in `weftlib.sparse` tensor by tensor, from the formulas in `footprint`.
Measurements run each method in a fresh Python process (`measure.peak_rss_subprocess` on a `workloads`
target) and read the extra peak resident memory of one forward from the kernel. The dense method's model is
exact for its two grids; its conv3d workspace is the CPU backend's business and is reported, not modelled. At
1024 the dense case is only ever computed from the model.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weftlib import measure

from . import conv, method_choice, neighbours, voxels, workloads
from .footprint import features_bytes, gathered_bytes, grid_bytes, itemsize, table_bytes

__all__ = [
    "layer_row",
    "measure_kernel_map",
    "measure_table",
    "measured_row",
    "model_table",
    "peak_claims",
    "peak_model",
]

if TYPE_CHECKING:  # pandas is imported where tables are built: measuring subprocesses start faster without it
    import pandas as pd


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
      output (`method_choice.auto_chunk_rows` rows when no chunk is given);
    dense: the two grids + the gathered output and its transposed copy (conv3d's workspace not included);
    auto: the method and chunking `conv.submanifold_conv3d` picks for these shapes, given a table or, with
      `rulebook=True`, a rulebook.
    """
    if method not in (*conv.METHODS, conv.AUTO):
        raise ValueError(f"method must be one of {(*conv.METHODS, conv.AUTO)}, got {method!r}")
    e, k3 = itemsize(dtype), kernel_size**3
    if method == conv.AUTO:
        method = method_choice.choose_method(n, k3, has_rulebook=rulebook)
        chunk_rows = chunk_rows or method_choice.auto_chunk_rows(method, k3, cin, e, n)
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
    repeats: int = 1,
) -> dict[str, Any]:
    """One model-versus-measured row: a fresh subprocess runs one forward of `method` at (shape, res), its peak
    net of that process's baseline; with `repeats` > 1 the same process times more calls (`measure_here`: the
    first call is the peak and the first sample, later ones stop once `measure.settled`), in `samples`.

    A method handed a rulebook needs its fullest chunk's pair count for the model (`chunk_pairs`); it is
    counted here from the voxel set's table when not given. The child reads its voxel set and table from
    `inputs_dir` (`save_inputs`) when given; a `block` (`measure.Bracket`) is told when its forward ran."""
    if workloads.given_rulebook(method) and chunk_pairs is None:
        chunk_pairs = workloads.most_chunk_pairs(shape, res, channels, dtype, chunk_rows, threads)
    got = measure.peak_rss_subprocess(
        workloads.TARGET,
        {
            "shape": shape,
            "res": res,
            "channels": channels,
            "method": method,
            "dtype": dtype,
            "threads": threads,
            "chunk_rows": chunk_rows,
            "budget_bytes": 1 << 62,
            "inputs_dir": str(workloads.save_inputs(inputs_dir, shape, res)) if inputs_dir else None,
        },
        repeats=repeats,
    )
    if block is not None:
        block.note(got["window"][0], got["window"][1], got["cpu_seconds"])
    rulebook = workloads.given_rulebook(method)
    model = peak_model(
        method, res, n, channels, channels, dtype, chunk_rows=chunk_rows, rulebook=rulebook, chunk_pairs=chunk_pairs
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
        "samples": got["samples"],
    }


def layer_row(got: dict[str, Any], verdict: dict[str, Any], threads: int) -> dict[str, Any]:
    """A timed layer's row (`benchmark.benchmark`'s) from its fresh process's `measured_row` (with its samples)
    and the verdict of the bracket around it: median seconds, spread, peak against the model."""
    seconds = got["samples"]
    return {
        "shape": got["shape"],
        "res": got["res"],
        "N": got["N"],
        "C": got["C"],
        "dtype": got["dtype"],
        "method": got["method"],
        "threads": threads,
        "chunk_rows": got["chunk_rows"],
        "repeats": len(seconds),
        "median_seconds": statistics.median(seconds),
        "seconds": seconds,
        "spread": measure.spread(seconds),
        "model_bytes": got["model_bytes"],
        "peak_bytes": got["measured_bytes"],
        "peak_over_model": got["measured_bytes"] / got["model_bytes"],
        **verdict,
    }


def measure_table(
    cases: Iterable[tuple[str, int, str]],
    counts: dict[tuple[str, int], int],
    channels: int,
    dtype: str = "float32",
    threads: int = 1,
    chunk_rows: int | None = None,
    progress: bool = True,
    timed: Mapping[tuple[str, int, str], int] | None = None,
) -> pd.DataFrame:
    """Model versus measured peak for each (shape, res, method) case, one fresh process per case.

    `timed`: cases whose process is also a timed layer of 03's bench (`benchmark.benchmark_against_limits`: the
    same fresh process, its first call the peak and the first sample), given with the bench's repeats. That
    process times its later calls too, in a bracket (`measure.Bracket`), and its bench row (`layer_row`) is kept
    in `df.attrs["timed_rows"]` by method, for the bench to take instead of starting the same process again
    (at the 1024 grid a process loads a gigabyte table and its first call is seconds). The table's row is the
    same either way: the peak and the time of the first call."""
    import pandas as pd

    from weftlib.console import progress as tqdm

    cases = list(cases)
    timed = dict(timed or {})
    missing = [(s, r) for s, r, _ in cases if (s, r) not in counts]
    if missing:
        raise ValueError(f"counts has no voxel count for {missing}; count those sets first")
    unknown = sorted(set(timed) - set(cases))
    if unknown:
        raise ValueError(f"timed: {unknown} are not among the cases")
    bad = {case: n for case, n in timed.items() if isinstance(n, bool) or not isinstance(n, int) or n < 1}
    if bad:
        raise ValueError(f"timed: expected a positive number of repeats per case, got {bad}")
    rows, layers = [], {}
    with workloads.child_inputs() as folder:
        for s, r, m in tqdm(cases, desc="peak memory", disable=not progress):
            args = (
                m,
                s,
                r,
                channels,
                counts[(s, r)],
                dtype,
                threads,
                chunk_rows if m == "im2col" else None,
                None,
                folder,
            )
            if (s, r, m) in timed:
                with measure.Bracket(threads) as block:
                    got = measured_row(*args, block=block, repeats=timed[(s, r, m)])
                layers[m] = layer_row(got, block.verdict(), threads)
            else:
                got = measured_row(*args)
            rows.append(got)
    df = pd.DataFrame(rows).drop(columns="samples")  # the first call per case: its time is `seconds`
    df.attrs["timed_rows"] = layers
    return df


def peak_claims(
    rows: pd.DataFrame, limit: float, what: str, measured: str = "measured_bytes", model: str = "model_bytes"
) -> list[measure.Claim]:
    """One `measure.peak_claim` per row of a measured table (a `measure_table` or a benchmark's rows): its
    measured peak within `limit` x of its model, named `<what> <shape> <res> <method>`."""
    return [
        measure.peak_claim(f"{what} {r['shape']} {r['res']} {r['method']}", r[measured], r[model], limit)
        for r in rows.to_dict("records")
    ]


def measure_kernel_map(shape: str, res: int, n: int, threads: int = 1) -> dict[str, Any]:
    """Peak of building the neighbour table, against the table's own size (the child reads the voxel set
    this process built)."""
    import numpy as np

    with workloads.child_inputs() as folder:
        np.save(workloads.input_files(folder, shape, res)[0], voxels.voxel_set(shape, res).numpy())
        got = measure.peak_rss_subprocess(
            workloads.KERNEL_MAP_TARGET,
            {"shape": shape, "res": res, "threads": threads, "inputs_dir": str(folder)},
        )
    table = neighbours.kernel_map_bytes(n)
    return {
        "shape": shape,
        "res": res,
        "N": n,
        "table_bytes": table,
        "measured_bytes": got["peak_bytes"],
        "measured_over_table": got["peak_bytes"] / table,
        "seconds": got["seconds"],
    }
