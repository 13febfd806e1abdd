"""Time and peak memory, measured the way the appendix reports them.

Timings are medians of repeats (one slow repeat from a busy neighbour does not move a median). Peak memory
is measured in a fresh Python process per measurement: an allocator that kept pages from an earlier
measurement would otherwise hide the next one's peak.
"""

from __future__ import annotations

import importlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def median_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of `fn()` over `repeats` calls after `warmup` untimed calls."""
    return statistics.median(sample_seconds(fn, repeats, warmup))


def sample_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> list[float]:
    """Wall time of each of `repeats` calls of `fn()` after `warmup` untimed calls."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(max(warmup, 0)):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _status_bytes(field: str) -> int:
    """A `VmRSS`/`VmHWM` line of /proc/self/status in bytes."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not found in {_STATUS}")


def _reset_peak() -> bool:
    """Reset the kernel's high-water mark of resident memory (Linux >= 4.0); False where it cannot."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def measure_here(run: Callable[[], Any]) -> dict[str, Any]:
    """Peak extra resident memory and wall time of `run()` in this process (call it in a fresh one)."""
    import gc

    gc.collect()
    baseline = _status_bytes("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    peak = _status_bytes("VmHWM")
    return {
        "peak_bytes": max(peak - baseline, 0),
        "baseline_bytes": baseline,
        "seconds": seconds,
        "peak_reset": reset,
    }


def _child(target: str, kwargs_json: str) -> None:
    """Entry point of the measuring subprocess: build the workload, measure it, print JSON."""
    module_name, _, func_name = target.partition(":")
    setup = getattr(importlib.import_module(module_name), func_name)
    run = setup(**json.loads(kwargs_json))
    if not callable(run):
        raise TypeError(f"{target} must return a zero-argument callable, got {type(run).__name__}")
    print(json.dumps(measure_here(run)))


def peak_rss_subprocess(target: str, kwargs: dict[str, Any] | None = None, timeout: float = 900) -> dict[str, Any]:
    """Run `module:function(**kwargs)` in a fresh interpreter and measure the callable it returns.

    The function builds its inputs (not counted) and returns `run`; the result holds `peak_bytes` (extra
    resident memory at the peak of `run()` over the resident memory before it), `baseline_bytes` and
    `seconds`. A failure in the child raises RuntimeError carrying its stderr.
    """
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:function', got {target!r}")
    code = "import sys; from weftlib.measure import _child; _child(sys.argv[1], sys.argv[2])"
    proc = subprocess.run(
        [sys.executable, "-c", code, target, json.dumps(kwargs or {})],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"measurement of {target} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------- machine limits
def sgemm_gflops(threads: int | None = None, size: int = 2048, repeats: int = 5) -> float:
    """This machine's fp32 matrix-multiply rate now (GFLOP/s, median of repeats of a square `size` GEMM):
    the compute limit a benchmark's time is compared with, measured in the same run."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.randn((size, size), generator=gen) for _ in range(2))
        out = torch.empty((size, size))
        seconds = median_seconds(lambda: torch.mm(a, b, out=out), repeats=repeats, warmup=1)
    finally:
        torch.set_num_threads(before)
    return 2 * size**3 / seconds / 1e9


def copy_gbps(threads: int | None = None, nbytes: int = 256 << 20, repeats: int = 5) -> float:
    """This machine's memory copy rate now (GB/s of bytes copied, median of repeats of a `nbytes` tensor
    copy, far larger than any cache): the data-movement limit, measured in the same run."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        src = torch.ones(nbytes // 4)
        dst = torch.empty_like(src)
        seconds = median_seconds(lambda: dst.copy_(src), repeats=repeats, warmup=1)
    finally:
        torch.set_num_threads(before)
    return nbytes / seconds / 1e9


def machine_limits(threads: int | None = None, repeats: int = 5) -> dict[str, float]:
    """sgemm GFLOP/s, copy GB/s and the 1-minute load average, measured now: what a benchmark's times are
    divided by, so runs on a busy and a quiet machine can be compared."""
    import os

    return {
        "sgemm_gflops": sgemm_gflops(threads, repeats=repeats),
        "copy_gbps": copy_gbps(threads, repeats=repeats),
        "load_average": os.getloadavg()[0],
        "threads": threads,
    }


def limit_seconds(flops: float, nbytes: float, limits: dict[str, float]) -> float:
    """The least time the work can take on this machine: its FLOPs at the sgemm rate or its bytes at the
    copy rate, whichever is longer (a roofline with the two rates measured in the same run)."""
    if flops < 0 or nbytes < 0:
        raise ValueError(f"flops and bytes must be >= 0, got {flops} and {nbytes}")
    return max(flops / (limits["sgemm_gflops"] * 1e9), nbytes / (limits["copy_gbps"] * 1e9))
