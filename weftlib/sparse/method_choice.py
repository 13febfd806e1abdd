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
    """The fastest exact path measured here for a network's layers: 'compact', which multiplies only the taps
    that have a neighbour (0.53 of them at the 1024 bunny), on the rulebook given or, for a bare table, on the
    one `conv.rulebook_of` builds at the first layer and keeps for the table, so a network builds it once per
    voxel set (its build costs about half a layer; docs/timings.md and `benchmark.default_pipeline` hold the times).
    Under an exporter, 'im2col' unchunked: the static-shape form. `n`, `taps` and `has_rulebook` stay in the
    signature for the memory model (`memory.peak_model`) and for kernels where the choice would differ."""
    del n, taps, has_rulebook
    return "im2col" if tracing else "compact"


def auto_chunk_rows(method: str, taps: int, channels: int, itemsize: int, n: int) -> int | None:
    """Rows per chunk from the shapes and the L2 cache; None (no chunking) for small sets.

    The chunk's gathered rows (at most rows x taps x Cin: im2col's buffer, the most a rulebook chunk can
    gather) are CHUNK_L2_MULTIPLE L2 caches: the MatMul reads back from the outer caches what the gather
    just wrote, and the per-call cost of the ops stays small against the work: measured at the 1024 bunny,
    chunks of a few thousand rows beat both smaller chunks and one unchunked GEMM, for im2col and compact
    alike (docs/timings.md holds the times). `method` stays for paths whose buffer would differ.
    """
    del method
    if n < SMALL_ROWS:
        return None
    budget = CHUNK_L2_MULTIPLE * l2_cache_bytes()
    return max(256, min(65536, budget // max(taps * channels * itemsize, 1)))
