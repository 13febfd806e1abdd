"""The automatic choice: which method `submanifold_conv3d(method="auto")` runs, and in chunks of how many rows.

Kept apart from the methods because it is a rule about the machine (its L2 cache) and the shapes, read by
the entry and by the memory model (`memory`), which predicts what "auto" will allocate.
"""

from __future__ import annotations

from pathlib import Path

SMALL_ROWS = 4096  # below this many voxels one unchunked im2col GEMM is as fast as anything
CHUNK_L2_MULTIPLE = 14  # a chunk's working set in L2 caches: im2col, C = 64 fp32 -> about 4,200 rows
_L2_FALLBACK = 1 << 20


def l2_cache_bytes() -> int:
    """Per-core L2 size from sysfs (Linux); 1 MiB where it cannot be read."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
                return int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    return _L2_FALLBACK


def choose_method(n: int, taps: int, tracing: bool = False, has_rulebook: bool = False) -> str:
    """The fastest exact path measured here for what the caller holds.

    With a rulebook (`rulebook`), 'compact': it multiplies only the taps that have a neighbour (about half
    the FLOPs of a surface voxel set), so a layer given the rulebook is faster than chunked im2col (the
    README and `scripts/bench_sparse.py` hold the times). With only the table, 'im2col', chunked by
    `auto_chunk_rows` for real voxel sets (one unchunked GEMM for small ones and under an exporter, where it
    is the static-shape form): building the rulebook inside one call would cost more than it saves. `n` and `taps`
    stay in the signature for kernels where the choice would differ."""
    del n, taps
    return "compact" if has_rulebook and not tracing else "im2col"


def auto_chunk_rows(method: str, taps: int, channels: int, itemsize: int, n: int) -> int | None:
    """Rows per chunk from the shapes and the L2 cache; None (no chunking) for small sets.

    The chunk's gathered rows (at most rows x taps x Cin: im2col's buffer, the most a rulebook chunk can
    gather) are CHUNK_L2_MULTIPLE L2 caches: the MatMul reads back from the outer caches what the gather
    just wrote, and the per-call cost of the ops stays small against the work: measured at the 1024 bunny,
    chunks of a few thousand rows beat both smaller chunks and one unchunked GEMM, for im2col and compact
    alike (the README holds the times). `method` stays for paths whose buffer would differ.
    """
    del method
    if n < SMALL_ROWS:
        return None
    budget = CHUNK_L2_MULTIPLE * l2_cache_bytes()
    return max(256, min(65536, budget // max(taps * channels * itemsize, 1)))
