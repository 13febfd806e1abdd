"""What a measuring child process runs: the workloads `measure.peak_rss_subprocess` imports by name, and
the inputs the parent saves once for them.

A workload is built in a fresh Python process from the voxel set and neighbour table the parent built once
and saved (`child_inputs`, `save_inputs`), warmed up on a tiny problem so library initialisation is not
counted, and returned as the one call whose extra peak resident memory the kernel reports.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from weftlib import measure

from . import conv, neighbours, pairs, voxels
from .footprint import DTYPES, itemsize

TARGET = "weftlib.sparse.workloads:conv_workload"
KERNEL_MAP_TARGET = "weftlib.sparse.workloads:kernel_map_workload"


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
    last asked for (03's appendix asks for six; at 1024 a table is about 1 GB and slow to build on a
    few cores). Shared: do not modify."""
    return neighbours.kernel_map(voxels.voxel_set(shape, res))


SHM_FREE = 4 << 30  # the 1024 bunny's voxel set and table are about 1.1 GB: /dev/shm when it has this free


@contextlib.contextmanager
def child_inputs() -> Iterator[Path]:
    """A temporary folder (memory-backed where `measure.scratch_root` finds room) where `save_inputs` leaves voxel sets
    and tables for measuring children, removed on exit: a child loads them instead of building them again."""
    with tempfile.TemporaryDirectory(prefix="weftlib-voxels-", dir=measure.scratch_root(SHM_FREE)) as folder:
        yield Path(folder)


def save_inputs(folder: Path, shape: str, res: int) -> Path:
    """Save (once) the voxel set of (shape, res) and its table into `folder` (`child_inputs`); return it."""
    import numpy as np

    coords, table = input_files(folder, shape, res)
    if not table.exists():
        np.save(coords, voxels.voxel_set(shape, res).numpy())
        np.save(table, kernel_map_of(shape, res).numpy())
    return folder


def input_files(folder: str | Path, shape: str, res: int) -> tuple[Path, Path]:
    """Where `save_inputs` leaves the voxel set and the table of (shape, res) in `folder`."""
    return Path(folder) / f"{shape}_{res}_coords.npy", Path(folder) / f"{shape}_{res}_table.npy"


def _voxels_and_table(
    shape: str, res: int, kernel_size: int = 3, inputs_dir: str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Voxel set and neighbour table: read from `inputs_dir` where the parent saved them, else built."""
    if inputs_dir is not None and kernel_size == 3:
        import numpy as np

        coords_file, table_file = input_files(inputs_dir, shape, res)
        return torch.from_numpy(np.load(coords_file)), torch.from_numpy(np.load(table_file))
    coords = voxels.voxel_set(shape, res)
    return coords, neighbours.kernel_map(coords, kernel_size)


def _inputs(
    shape: str, res: int, channels: int, dtype: str, seed: int, kernel_size: int = 3, inputs_dir: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Voxel set, neighbour table, random features and a Conv3d-layout weight scaled to unit gain. Drawn
    uniform with unit variance: faster than normal draws at the 1024 grid, and what a peak or a time measures
    does not depend on the values."""
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
    kernel: Any = conv.rulebook(nbr, 64, channels, feats.element_size()) if given_rulebook(method) else nbr
    chunk_rows = None if given_rulebook(method) else 64
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
    network builds once per voxel set and reuses in every layer (`benchmark.default_pipeline` times the build). The
    voxel set and table come from `inputs_dir` when the parent saved them there (`save_inputs`)."""
    _rss_tracks_tensors()
    torch.set_num_threads(threads)
    _warm_up(method, channels, dtype)
    coords, nbr, feats, weight = _inputs(shape, res, channels, dtype, seed, inputs_dir=inputs_dir)
    kernel: Any = nbr
    if given_rulebook(method):
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


def given_rulebook(method: str) -> bool:
    """Whether a measured layer of `method` is handed the rulebook (the fast path's input) or the table."""
    return method in (conv.AUTO, "compact")


def most_chunk_pairs(
    shape: str, res: int, channels: int, dtype: str, chunk_rows: int | None, threads: int | None = None
) -> int:
    """The pairs a compact layer's buffers hold on (shape, res), chunked as `conv.rulebook` chunks it for this
    layer, on `threads` threads (torch's count when None): the fullest chunk's, once per thread
    (`pairs.buffer_pairs`), what the memory model's `chunk_pairs` counts."""
    nbr = kernel_map_of(shape, res)
    rows = chunk_rows or conv.rulebook_rows(len(nbr), nbr.shape[1], channels, itemsize(dtype), threads)
    return pairs.buffer_pairs(nbr, rows, threads)


def kernel_map_workload(
    shape: str, res: int, threads: int = 1, inputs_dir: str | None = None
) -> Callable[[], torch.Tensor]:
    """Measurement target for `neighbours.kernel_map` itself (its table is part of what it allocates); the voxel
    set is read from `inputs_dir` when the parent saved it there."""
    _rss_tracks_tensors()
    torch.set_num_threads(threads)
    neighbours.kernel_map(voxels.voxel_set("sphere", 8))
    if inputs_dir is None:
        coords = voxels.voxel_set(shape, res)
    else:
        import numpy as np

        coords = torch.from_numpy(np.load(input_files(inputs_dir, shape, res)[0]))
    return lambda: neighbours.kernel_map(coords)
