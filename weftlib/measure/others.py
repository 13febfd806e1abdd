"""The CPU other work took while a block ran, read from /proc/stat, calls timed interleaved, and when timing
samples need no more repeats (`settled`), all without torch: the gate may not import torch, and it times graphs
in onnxruntime (`gate.estimate.host_time`). A block is contended, as `Bracket` judges it, when other work took
more than `CONTENDED` of a core meanwhile.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CONTENDED = 0.25  # a timed block is contended when its rates before and after differ by more than this fraction,
# or when other work took more than this share of a core while it ran
_PROC_STAT = Path("/proc/stat")


def cpu_seconds() -> tuple[float | None, float]:
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


def others_cores(before: tuple[float | None, float], after: tuple[float | None, float], wall: float) -> float | None:
    """Cores other processes and the hypervisor took between two `cpu_seconds` readings `wall` seconds apart;
    None off Linux or for an empty interval."""
    (busy0, mine0), (busy1, mine1) = before, after
    if busy0 is None or busy1 is None or not wall > 0:
        return None
    return max(0.0, (busy1 - busy0) - (mine1 - mine0)) / wall


def interleaved(
    calls: Mapping[str, Callable[[], Any]], repeats: int = 5, warmup: int = 1
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Every call timed `repeats` times in rounds (A B C, A B C, ...) after `warmup` untimed rounds, so a busy
    spell touches each alike; and how quiet the machine was meanwhile: `others_cores` and `contended`."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(max(warmup, 0)):
        for fn in calls.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    start, cpu = time.perf_counter(), cpu_seconds()
    for _ in range(repeats):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    others = others_cores(cpu, cpu_seconds(), time.perf_counter() - start)
    return samples, {"others_cores": others, "contended": bool(others is not None and others > CONTENDED)}


def medians(samples: Mapping[str, list[float]]) -> dict[str, float]:
    """The median of each call's samples."""
    return {name: statistics.median(values) for name, values in samples.items()}


LONG_CALL_S = 2.0  # a call longer than this is not repeated for a median two agreeing samples pin down
# (2 s, not 5: NAF's 512^2 rows, its forward in 01 and the 1024 layer take 2 to 5 s a call)
AGREE = 0.1  # ... agreeing within this spread ((max - min) / median); the row shows its spread and count


def settled(samples: list[float], long_seconds: float = LONG_CALL_S, agree: float = AGREE) -> bool:
    """Whether timing samples need no more repeats: two or more, every one over `long_seconds`, agreeing
    within `agree`. A third sample of calls that long would move a median of two that agree by at most
    half their spread (a median of three lies between the first two), and at NAF's geometry or the 1024 grid
    each costs seconds to a minute. Samples that disagree take every repeat."""
    width = spread(samples)
    return len(samples) >= 2 and min(samples) > long_seconds and width is not None and width <= agree


def spread(samples: list[float]) -> float | None:
    """(max - min) / median of timed samples; None for fewer than two."""
    if len(samples) < 2:
        return None
    return (max(samples) - min(samples)) / statistics.median(samples)
