"""The machine's limits, measured in the same run as the times they bound: the sgemm rate, the copy rate, and
the least time a piece of work can take at them (`limit_seconds`), which a timed row must not beat.
"""

from __future__ import annotations

import os
from typing import TypedDict

from .timing import sample_seconds, torch_threads


class BoundBeaten(ValueError):
    """A timed row ran faster than its lower bound: the bound is wrong, so no fraction of it may be shown."""


def sgemm_gflops(threads: int | None = None, size: int = 1024, repeats: int = 5) -> float:
    """This machine's fp32 matrix-multiply rate now (GFLOP/s, the fastest of `repeats` square `size` GEMMs,
    which run at the cores' FMA peak here): the compute rate a time is bounded with, measured in the same run.
    The fastest, not the median: a bound from below must use the highest rate the machine reaches."""
    import torch

    with torch_threads(threads):
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.randn((size, size), generator=gen) for _ in range(2))
        out = torch.empty((size, size))
        seconds = min(sample_seconds(lambda: torch.mm(a, b, out=out), repeats=repeats, warmup=1))
    return 2 * size**3 / seconds / 1e9


def copy_gbps(threads: int | None = None, nbytes: int = 64 << 20, repeats: int = 5) -> float:
    """This machine's memory traffic rate now (GB/s read plus written, the fastest of `repeats` copies of a
    `nbytes` tensor of distinct values, twice the last-level cache with its copy): each copied byte is read once
    and written once, as STREAM's Copy counts it. Compulsory bytes (inputs read once, outputs written once) at
    this rate bound a time from below; a pure read stream runs at about this rate on the appendix machine, a
    pure write slower. Distinct values: pages of one repeated value may be merged by the host and read faster."""
    import torch

    with torch_threads(threads):
        src = torch.arange(nbytes // 4, dtype=torch.float32)
        dst = torch.empty_like(src)
        seconds = min(sample_seconds(lambda: dst.copy_(src), repeats=repeats, warmup=1))
    return 2 * nbytes / seconds / 1e9


class Rates(TypedDict):
    """The two rates a time is bounded with: fp32 GEMM GFLOP/s and copy GB/s (read plus written)."""

    sgemm_gflops: float
    copy_gbps: float


class MachineLimits(Rates):
    """The machine's rates as `machine_limits` measures them, with the load and thread count they were taken at."""

    load_average: float
    threads: int | None


def machine_limits(threads: int | None = None, repeats: int = 5) -> MachineLimits:
    """sgemm GFLOP/s, copy GB/s (read + written) and the 1-minute load average, measured now (well under a
    second): what a benchmark's times are bounded with, so runs on a busy and a quiet machine can be compared."""
    return {
        "sgemm_gflops": sgemm_gflops(threads, repeats=repeats),
        "copy_gbps": copy_gbps(threads, repeats=repeats),
        "load_average": os.getloadavg()[0],
        "threads": threads,
    }


def limit_seconds(flops: float, nbytes: float, limits: Rates) -> float:
    """The least time the work can take on this machine: its FLOPs at the sgemm rate or its compulsory bytes
    (each input read once, each output written once) at the copy rate, whichever is longer; the two rates
    measured in the same run. Only a count of compulsory bytes makes this a lower bound: traffic a formulation
    may avoid by reusing what it read is no bound."""
    if flops < 0 or nbytes < 0:
        raise ValueError(f"flops and bytes must be >= 0, got {flops} and {nbytes}")
    return max(flops / (limits["sgemm_gflops"] * 1e9), nbytes / (limits["copy_gbps"] * 1e9))


def bound_of(flops: float, nbytes: float, limits: Rates) -> tuple[float, str]:
    """`limit_seconds` and which side sets it: "flops" (the sgemm rate) or "bytes" (the copy rate)."""
    seconds = limit_seconds(flops, nbytes, limits)
    return seconds, "flops" if flops / (limits["sgemm_gflops"] * 1e9) >= nbytes / (
        limits["copy_gbps"] * 1e9
    ) else "bytes"


def check_bound(seconds: float, bound_seconds: float, what: str, *, contended: bool = False) -> float:
    """time / lower bound (>= 1) of one timed row; BoundBeaten when the row ran faster than its bound, since
    then the bound is no lower bound and any fraction of it would mislead. A `contended` row (`Bracket`) is
    not judged: its rates were measured under other load, so a bound from them may exceed the true one; its
    ratio is returned as measured, below 1 or not, and the row says it was contended."""
    if not bound_seconds > 0:
        raise ValueError(f"{what}: the bound must be positive, got {bound_seconds}")
    if seconds < bound_seconds and not contended:
        raise BoundBeaten(
            f"{what}: {seconds:.4g} s is below its lower bound {bound_seconds:.4g} s: the bound counts more work "
            "than the row must do, or the rates were measured under other load"
        )
    return seconds / bound_seconds
