"""Peak memory of one call, measured in a fresh Python process per measurement: an allocator that kept pages
from an earlier measurement would otherwise hide the next one's peak. The processes are forked from a server
that has only imported the workload's module (multiprocessing's forkserver), so each starts in milliseconds
with the allocator state of a new interpreter, instead of importing torch again.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .timing import sample_adaptive

# Transparent huge pages for large buffers, asked for by torch's CPU allocator (its own switch) and by glibc's
# malloc (numpy, onnxruntime): the suite's large calls (natten's dense scores, onnxruntime's cut proofs) spend
# much of their time faulting in fresh 4 KiB pages, and huge pages fault in 512 times fewer; the sparse peaks
# measured do not move with it (the README holds the figures). The runner gives these to every kernel it
# starts (a value already set wins).
ALLOCATOR_ENV = {"THP_MEM_ALLOC_ENABLE": "1", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


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


def measure_here(
    run: Callable[[], Any],
    repeats: int = 1,
    save: str | None = None,
    check: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """Peak extra resident memory and wall time of `run()` in this process (call it in a fresh one).

    With `repeats` > 1 the measured call is also the first timing sample and more calls follow
    (`sample_adaptive`: a call of seconds stops at two samples that agree), so peak and time come from the
    same calls; `window` holds their perf_counter span (CLOCK_MONOTONIC, comparable across processes on
    Linux). `save` writes the first call's result there as a .npy file (the parent's reference output);
    `check(result)` is that result judged here, its answer `checked` (e.g. its largest difference from a
    reference): at NAF's geometry a result is a gigabyte, and sending it to the parent cost seconds."""
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
    checked = check(result) if check is not None else None
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
        "checked": checked,
    }


def _function(target: str) -> Callable[..., Any]:
    """`package.module:function`, imported."""
    module_name, _, func_name = target.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module_name), func_name)
    return function


def _child(
    target: str,
    kwargs: dict[str, Any],
    repeats: int,
    save: str | None,
    check: tuple[str, dict[str, Any]] | None,
    conn: Any,
) -> None:
    """Entry point of the measuring process: build the workload, measure it, send (True, result) back, or
    (False, the traceback) when anything fails."""
    try:
        run = _function(target)(**kwargs)
        if not callable(run):
            raise TypeError(f"{target} must return a zero-argument callable, got {type(run).__name__}")
        judge = None
        if check is not None:
            judge = functools.partial(_function(check[0]), **check[1])
        conn.send((True, measure_here(run, repeats, save, judge)))
    except BaseException:
        import traceback

        conn.send((False, traceback.format_exc()))
    finally:
        conn.close()


_SERVER: dict[str, Any] = {}


class MeasurementStopped(RuntimeError):
    """A measuring process stopped for running past its timeout. It carries the wall window it ran in
    (`time.perf_counter` values) and the CPU it had used, so the caller's `Bracket` can say whether other work
    slowed it: a stop on a busy machine is not judged, a stop on a quiet one is a failure."""

    def __init__(self, target: str, timeout: float, window: tuple[float, float], cpu_seconds: float) -> None:
        super().__init__(f"measurement of {target} took over {timeout:g} s; stopped")
        self.window, self.cpu_seconds = window, cpu_seconds


def _process_cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) process `pid` has used so far; 0 where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


def _forkserver(module: str) -> Any:
    """multiprocessing's forkserver context, its server preloading `module` (and this one) when this is the
    first measurement of the process; later targets in other modules import them in the child."""
    import multiprocessing

    if "ctx" not in _SERVER:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["weftlib.measure.peak", module])
        _SERVER["ctx"] = ctx
    return _SERVER["ctx"]


SHM = Path("/dev/shm")  # memory-backed scratch for what measuring processes hand each other


def scratch_root(free: int, root: Path = SHM) -> str | None:
    """`root` when it is writable with `free` bytes free, else None (the default temporary folder): measuring
    processes hand each other gigabytes (02's reference output at NAF's 512², 03's 1024 voxel table), and
    writing one to the disk-backed /tmp took four times as long as to /dev/shm on the appendix VM
    (docs/timings.md)."""
    try:
        return str(root) if os.access(root, os.W_OK) and shutil.disk_usage(root).free >= free else None
    except OSError:
        return None


def peak_rss_subprocess(
    target: str,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 900,
    repeats: int = 1,
    save: str | Path | None = None,
    check: str | None = None,
    check_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run `module:function(**kwargs)` in a fresh process and measure the callable it returns.

    The function builds its inputs (not counted) and returns `run`; the result holds `peak_bytes` (extra
    resident memory at the peak of `run()` over the resident memory before it), `baseline_bytes` and
    `seconds`, and with `repeats` > 1 the timing `samples` of the same process (`measure_here`); `save` a
    .npy path for the first call's result; `check` a `module:function` the child calls on that result (with
    `check_kwargs`), its answer sent back as `checked` instead of the result itself. A failure in the child
    raises RuntimeError carrying its traceback; a child killed outright (the kernel's OOM killer) or out of
    time raises one naming that.
    """
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:function', got {target!r}")
    ctx = _forkserver(target.partition(":")[0])
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child,
        args=(
            target,
            dict(kwargs or {}),
            int(repeats),
            str(save) if save else None,
            (check, dict(check_kwargs or {})) if check else None,
            send,
        ),
    )
    start = time.perf_counter()
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout):
            cpu = _process_cpu_seconds(proc.pid)
            proc.kill()
            raise MeasurementStopped(target, timeout, (start, time.perf_counter()), cpu)
        ok, payload = receive.recv()
    except EOFError:
        ok, payload = False, "the measuring process ended without a result"
    finally:
        receive.close()
        proc.join()
    if not ok:
        raise RuntimeError(f"measurement of {target} failed (exit {proc.exitcode}):\n{payload[-4000:]}")
    return payload
