"""Time and peak memory, measured the way the appendix reports them.

Timings are medians of repeats (one slow repeat from a busy neighbour does not move a median). Peak memory
is measured in a fresh Python process per measurement: an allocator that kept pages from an earlier
measurement would otherwise hide the next one's peak. The processes are forked from a server that has only
imported the workload's module (multiprocessing's forkserver), so each starts in milliseconds with the
allocator state of a new interpreter, instead of importing torch again. A time is compared with a lower bound (`limit_seconds`:
compulsory bytes at the copy rate or FLOPs at the sgemm rate, both measured in the same run) that it must not
beat (`check_bound`), and every timed block is bracketed by those rates (`Bracket`) so a row says whether
the machine was quiet while it ran.
"""

from __future__ import annotations

import importlib
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict
from collections.abc import Callable

# Transparent huge pages for large buffers, asked for by torch's CPU allocator (its own switch) and by glibc's
# malloc (numpy, onnxruntime): the suite's large calls (natten's dense scores, onnxruntime's cut proofs) spend
# much of their time faulting in fresh 4 KiB pages, and huge pages fault in 512 times fewer; the sparse peaks
# measured do not move with it (the README holds the figures). The runner gives these to every kernel it
# starts (a value already set wins).
ALLOCATOR_ENV = {"THP_MEM_ALLOC_ENABLE": "1", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")
_PROC_STAT = Path("/proc/stat")


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to `threads` (unchanged when None or 0) for the block, and restored
    after it, so a measurement's thread count never leaks into the caller's."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


def measure_here(run: Callable[[], Any], repeats: int = 1, save: str | None = None) -> dict[str, Any]:
    """Peak extra resident memory and wall time of `run()` in this process (call it in a fresh one).

    With `repeats` > 1 the measured call is also the first timing sample and more calls follow
    (`sample_adaptive`: a call of seconds stops at two samples that agree), so peak and time come from the
    same calls; `window` holds their perf_counter span (CLOCK_MONOTONIC, comparable across processes on
    Linux). `save` writes the first call's result there as a .npy file (the parent's reference output)."""
    import gc

    gc.collect()
    baseline = _status_bytes("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    peak = _status_bytes("VmHWM")
    if save:
        import numpy as np

        np.save(save, np.asarray(result))
    del result
    samples = sample_adaptive(run, repeats, first=seconds) if repeats > 1 else [seconds]
    own = os.times()
    return {
        "peak_bytes": max(peak - baseline, 0),
        "baseline_bytes": baseline,
        "seconds": seconds,
        "samples": samples,
        "window": [start, time.perf_counter()],
        "cpu_seconds": own.user + own.system,  # the whole process's, setup included (`Bracket.note`)
        "peak_reset": reset,
    }


def _child(target: str, kwargs: dict[str, Any], repeats: int, save: str | None, conn: Any) -> None:
    """Entry point of the measuring process: build the workload, measure it, send (True, result) back, or
    (False, the traceback) when anything fails."""
    try:
        module_name, _, func_name = target.partition(":")
        setup = getattr(importlib.import_module(module_name), func_name)
        run = setup(**kwargs)
        if not callable(run):
            raise TypeError(f"{target} must return a zero-argument callable, got {type(run).__name__}")
        conn.send((True, measure_here(run, repeats, save)))
    except BaseException:
        import traceback

        conn.send((False, traceback.format_exc()))
    finally:
        conn.close()


_SERVER: dict[str, Any] = {}


def _forkserver(module: str) -> Any:
    """multiprocessing's forkserver context, its server preloading `module` (and this one) when this is the
    first measurement of the process; later targets in other modules import them in the child."""
    import multiprocessing

    if "ctx" not in _SERVER:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["weftlib.measure", module])
        _SERVER["ctx"] = ctx
    return _SERVER["ctx"]


def peak_rss_subprocess(
    target: str,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 900,
    repeats: int = 1,
    save: str | Path | None = None,
) -> dict[str, Any]:
    """Run `module:function(**kwargs)` in a fresh process and measure the callable it returns.

    The function builds its inputs (not counted) and returns `run`; the result holds `peak_bytes` (extra
    resident memory at the peak of `run()` over the resident memory before it), `baseline_bytes` and
    `seconds`, and with `repeats` > 1 the timing `samples` of the same process (`measure_here`); `save` a
    .npy path for the first call's result. A failure in the child raises RuntimeError carrying its
    traceback; a child killed outright (the kernel's OOM killer) or out of time raises one naming that.
    """
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:function', got {target!r}")
    ctx = _forkserver(target.partition(":")[0])
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child, args=(target, dict(kwargs or {}), int(repeats), str(save) if save else None, send)
    )
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout):
            proc.kill()
            raise RuntimeError(f"measurement of {target} took over {timeout:g} s; stopped")
        ok, payload = receive.recv()
    except EOFError:
        ok, payload = False, "the measuring process ended without a result"
    finally:
        receive.close()
        proc.join()
    if not ok:
        raise RuntimeError(f"measurement of {target} failed (exit {proc.exitcode}):\n{payload[-4000:]}")
    return payload


# ----------------------------------------------------------------------------------------------- machine limits
CONTENDED = 0.25  # a timed block is contended when its rates before and after differ by more than this fraction,
# or when other work took more than this share of a core while it ran


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


class MachineLimits(TypedDict):
    """The machine's rates as `machine_limits` measures them, with the thread count they were taken at."""

    sgemm_gflops: float
    copy_gbps: float
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


def limit_seconds(flops: float, nbytes: float, limits: MachineLimits) -> float:
    """The least time the work can take on this machine: its FLOPs at the sgemm rate or its compulsory bytes
    (each input read once, each output written once) at the copy rate, whichever is longer; the two rates
    measured in the same run. Only a count of compulsory bytes makes this a lower bound: traffic a formulation
    may avoid by reusing what it read is no bound."""
    if flops < 0 or nbytes < 0:
        raise ValueError(f"flops and bytes must be >= 0, got {flops} and {nbytes}")
    return max(flops / (limits["sgemm_gflops"] * 1e9), nbytes / (limits["copy_gbps"] * 1e9))


def bound_of(flops: float, nbytes: float, limits: MachineLimits) -> tuple[float, str]:
    """`limit_seconds` and which side sets it: "flops" (the sgemm rate) or "bytes" (the copy rate)."""
    seconds = limit_seconds(flops, nbytes, limits)
    return seconds, "flops" if flops / (limits["sgemm_gflops"] * 1e9) >= nbytes / (
        limits["copy_gbps"] * 1e9
    ) else "bytes"


def check_bound(seconds: float, bound_seconds: float, what: str) -> float:
    """time / lower bound (>= 1) of one timed row; BoundBeaten when the row ran faster than its bound, since
    then the bound is no lower bound and any fraction of it would mislead."""
    if not bound_seconds > 0:
        raise ValueError(f"{what}: the bound must be positive, got {bound_seconds}")
    if seconds < bound_seconds:
        raise BoundBeaten(
            f"{what}: {seconds:.4g} s is below its lower bound {bound_seconds:.4g} s: the bound counts more work "
            "than the row must do, or the rates were measured under other load"
        )
    return seconds / bound_seconds


def _cpu_seconds() -> tuple[float | None, float]:
    """(CPU seconds every core of the machine has been busy, hypervisor steal included, or None where
    /proc/stat cannot be read; CPU seconds of this process and its reaped children)."""
    own = os.times()
    mine = own.user + own.system + own.children_user + own.children_system
    try:
        fields = _PROC_STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None, mine
    if not fields or fields[0] != "cpu":
        return None, mine
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK"), mine


class Bracket:
    """The machine's rates (`machine_limits`) measured right before and right after one timed block, and the
    CPU other work took while it ran, so a timed row says how quiet the machine was:

        with measure.Bracket(threads) as block:
            samples = block.timed(call, repeats=3)
        row.update(block.verdict())

    `verdict` keeps the rates taken nearer the timed calls (never the better of the two) and marks the block
    contended when the two differ by more than `CONTENDED` or other work took more than `CONTENDED` of a core.
    Each rate is the fastest of `repeats` calls (a fraction of a second for both): on a virtual machine whose host
    lends its cores to others, the rates dip for tenths of a second with no process of its own to blame, and a
    dip that outlasts a sample is interference the timed row may have met too, so it marks the row.
    Work timed elsewhere (a child process) is placed with `note(start, end)` (`time.perf_counter` values).
    """

    def __init__(self, threads: int | None = None, repeats: int = 9) -> None:
        self.threads, self.repeats = threads, repeats
        self.before: MachineLimits | None = None
        self.after: MachineLimits | None = None
        self.window: tuple[float, float] | None = None
        self._marks: dict[str, float] = {}
        self._forked_cpu = 0.0
        self._cpu: tuple[tuple[float | None, float], tuple[float | None, float]] | None = None

    def __enter__(self) -> Bracket:
        cpu = _cpu_seconds()
        self._marks["start"] = time.perf_counter()
        self.before = machine_limits(self.threads, self.repeats)
        self._marks["before_end"] = time.perf_counter()
        self._cpu = (cpu, cpu)
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            return
        self._marks["after_start"] = time.perf_counter()
        self.after = machine_limits(self.threads, self.repeats)
        self._marks["end"] = time.perf_counter()
        self._cpu = (self._cpu[0], _cpu_seconds()) if self._cpu else None

    def note(self, start: float, end: float, cpu_seconds: float = 0.0) -> None:
        """Add [start, end] (perf_counter seconds) to the block's timed window, and the CPU seconds of a
        measuring process that ran for it (forked by the forkserver, not this process's child, so its CPU
        would otherwise count as other work)."""
        lo, hi = self.window or (start, end)
        self.window = (min(lo, start), max(hi, end))
        self._forked_cpu += cpu_seconds

    def timed(self, fn: Callable[[], Any], repeats: int = 5, warmup: int = 0) -> list[float]:
        """`sample_seconds` inside the block, its timed calls (not the warm-up) noted as the window."""
        for _ in range(max(warmup, 0)):
            fn()
        start = time.perf_counter()
        samples = sample_seconds(fn, repeats, 0)
        self.note(start, time.perf_counter())
        return samples

    def verdict(self) -> dict[str, Any]:
        """The row's rates and how quiet the block was: `sgemm_gflops`, `copy_gbps`, `load_average` from the
        nearer sample (`rates_from`), both samples, `rate_change` (largest relative change of a rate),
        `others_cores` (CPU other processes and the hypervisor took, in cores; None off Linux) and `contended`."""
        if self.before is None or self.after is None:
            raise RuntimeError("verdict: the block has not finished (use `with Bracket(...) as block:`)")
        lo, hi = self.window or (self._marks["before_end"], self._marks["after_start"])
        nearer = "before" if lo - self._marks["before_end"] < self._marks["after_start"] - hi else "after"
        chosen = self.before if nearer == "before" else self.after
        change = max(
            max(self.before[k], self.after[k]) / min(self.before[k], self.after[k]) - 1
            for k in ("sgemm_gflops", "copy_gbps")
        )
        others = None
        if self._cpu is None:
            raise RuntimeError("Bracket: verdict() before the block ended")
        (busy0, mine0), (busy1, mine1) = self._cpu
        wall = self._marks["end"] - self._marks["start"]
        if busy0 is not None and busy1 is not None and wall > 0:
            others = max(0.0, (busy1 - busy0) - (mine1 - mine0) - self._forked_cpu) / wall
        return {
            "sgemm_gflops": chosen["sgemm_gflops"],
            "copy_gbps": chosen["copy_gbps"],
            "load_average": chosen["load_average"],
            "rates_from": nearer,
            "rates_before": _rates(self.before),
            "rates_after": _rates(self.after),
            "rate_change": change,
            "others_cores": others,
            "contended": bool(change > CONTENDED or (others is not None and others > CONTENDED)),
        }


def _rates(limits: MachineLimits) -> dict[str, float]:
    return {k: round(float(limits[k]), 3) for k in ("sgemm_gflops", "copy_gbps", "load_average")}


LONG_CALL_S = 5.0  # a call longer than this is not repeated for a median two agreeing samples pin down
AGREE = 0.1  # ... agreeing within this spread ((max - min) / median); the row shows its spread and count


def settled(samples: list[float], long_seconds: float = LONG_CALL_S, agree: float = AGREE) -> bool:
    """Whether timing samples need no more repeats: two or more, every one over `long_seconds`, agreeing
    within `agree`. A third sample of calls that long would move a median of two that agree by at most
    half their spread, and at NAF's geometry or the 1024 grid each one costs seconds to a minute."""
    width = spread(samples)
    return len(samples) >= 2 and min(samples) > long_seconds and width is not None and width <= agree


def sample_adaptive(
    fn: Callable[[], Any],
    repeats: int,
    *,
    first: float | None = None,
    long_seconds: float = LONG_CALL_S,
    agree: float = AGREE,
) -> list[float]:
    """Up to `repeats` timed calls of `fn` (after its warm-up elsewhere), `first` counting as one when given,
    stopping early once the samples are `settled`. The caller shows the spread and the count."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples = [] if first is None else [first]
    while len(samples) < repeats:
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
        if settled(samples, long_seconds, agree):
            break
    return samples


def spread(samples: list[float]) -> float | None:
    """(max - min) / median of timed samples; None for fewer than two."""
    if len(samples) < 2:
        return None
    return (max(samples) - min(samples)) / statistics.median(samples)
