"""Whether the machine was quiet while a block was timed: its rates measured right before and right after the
block, and the CPU other work took meanwhile (`Bracket`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from .limits import MachineLimits, Rates, machine_limits
from .others import CONTENDED
from .others import cpu_seconds as _cpu_seconds
from .timing import sample_adaptive, sample_seconds

RATE_KEYS: tuple[Literal["sgemm_gflops", "copy_gbps"], ...] = ("sgemm_gflops", "copy_gbps")  # `limits.Rates`, judged
ADJACENT_S = 0.05  # a block entered this soon after the one it follows shares that block's "after" as its "before"


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

    A block given a `reference` (the best rates the same run measured on the same threads, `best_rates`) is
    also contended when either of its samples sits more than `CONTENDED` below it: the rates can dip for the
    whole block, before and after alike, when the host's other tenants load its memory bus (03's 1024 layer,
    2.04x its bound with the copy rate at 31 to 33 GB/s, where the same run's earlier blocks measured 50; quiet,
    1.6 to 1.7x), and two samples that agree do not say the block ran as fast as the machine can.

    Adjacent blocks share a measurement (`follows`): when a block is entered within `ADJACENT_S` of the end of
    the block it follows, on the same thread count and repeats, that block's "after" is its "before", taken from
    the same instant and with the CPU readings from that instant, so its verdict is the one a fresh block entered
    at that moment would give: nothing but the measurement itself ran in between. Otherwise it measures its own.
    """

    def __init__(
        self,
        threads: int | None = None,
        repeats: int = 9,
        follows: Bracket | None = None,
        reference: Rates | None = None,
    ) -> None:
        self.threads, self.repeats, self.follows, self.reference = threads, repeats, follows, reference
        self.shared = False  # whether "before" is the "after" of the block it follows
        self.before: MachineLimits | None = None
        self.after: MachineLimits | None = None
        self.window: tuple[float, float] | None = None
        self._marks: dict[str, float] = {}
        self._forked_cpu = 0.0
        self._after_cpu: tuple[float | None, float] | None = None
        self._cpu: tuple[tuple[float | None, float], tuple[float | None, float]] | None = None

    def __enter__(self) -> Bracket:
        prev = self.follows
        if prev is not None and prev.after is not None and prev._after_cpu is not None:
            same = (prev.threads, prev.repeats) == (self.threads, self.repeats)
            if same and time.perf_counter() - prev._marks["end"] <= ADJACENT_S:
                self.shared, self.before, self._cpu = True, prev.after, (prev._after_cpu, prev._after_cpu)
                self._marks["start"], self._marks["before_end"] = prev._marks["after_start"], prev._marks["end"]
                return self
        cpu = _cpu_seconds()
        self._marks["start"] = time.perf_counter()
        self.before = machine_limits(self.threads, self.repeats)
        self._marks["before_end"] = time.perf_counter()
        self._cpu = (cpu, cpu)
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            return
        self._after_cpu = _cpu_seconds()  # where a block that follows this one starts its CPU count
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

    def timed(self, fn: Callable[[], Any], repeats: int = 5, warmup: int = 0, settle: bool = False) -> list[float]:
        """`sample_seconds` inside the block, its timed calls (not the warm-up) noted as the window; with
        `settle`, up to `repeats` calls stopping once two agree (`sample_adaptive`: for calls of seconds)."""
        for _ in range(max(warmup, 0)):
            fn()
        start = time.perf_counter()
        samples = sample_adaptive(fn, repeats) if settle else sample_seconds(fn, repeats, 0)
        self.note(start, time.perf_counter())
        return samples

    def verdict(self) -> dict[str, Any]:
        """The row's rates and how quiet the block was: `sgemm_gflops`, `copy_gbps`, `load_average` from the
        nearer sample (`rates_from`), both samples, `rate_change` (largest relative change of a rate),
        `others_cores` (CPU other processes and the hypervisor took, in cores; None off Linux), `below_reference`
        (how far the slower sample sits below `reference`, as `rate_change` measures; None without one) and
        `contended`."""
        if self.before is None or self.after is None:
            raise RuntimeError("verdict: the block has not finished (use `with Bracket(...) as block:`)")
        lo, hi = self.window or (self._marks["before_end"], self._marks["after_start"])
        nearer = "before" if lo - self._marks["before_end"] < self._marks["after_start"] - hi else "after"
        chosen = self.before if nearer == "before" else self.after
        slower = {k: min(self.before[k], self.after[k]) for k in RATE_KEYS}
        change = max(max(self.before[k], self.after[k]) / slower[k] - 1 for k in RATE_KEYS)
        ref = self.reference
        below = None if ref is None else max(0.0, *(ref[k] / slower[k] - 1 for k in RATE_KEYS))
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
            "rates_shared": self.shared,
            "rates_before": _rates(self.before),
            "rates_after": _rates(self.after),
            "rate_change": change,
            "others_cores": others,
            "below_reference": below,
            "contended": bool(
                change > CONTENDED
                or (others is not None and others > CONTENDED)
                or (below is not None and below > CONTENDED)
            ),
        }


class BracketChain:
    """Brackets of blocks timed one after another, each made to follow the last (`Bracket(follows=...)`), so a
    run of back-to-back rows measures the machine's rates once between two rows instead of twice."""

    def __init__(self) -> None:
        self.last: Bracket | None = None

    def next(self, threads: int | None = None, repeats: int = 9) -> Bracket:
        self.last = Bracket(threads, repeats, follows=self.last)
        return self.last


def best_rates(rows: Iterable[Mapping[str, Any]], threads: int | None) -> Rates | None:
    """The fastest sgemm and copy rates any quiet row of `rows` (`Bracket.verdict` records, not contended) was
    bracketed by on `threads`, each rate on its own: a later block's `reference`. A contended row's samples are
    left out: rates that moved by more than a quarter within one block include a spike no later block is held
    to. None when no quiet row was timed on those threads."""
    samples = [
        row[side]
        for row in rows
        if row.get("threads") == threads and row.get("contended") is False
        for side in ("rates_before", "rates_after")
        if row.get(side)
    ]
    if not samples:
        return None
    return {
        "sgemm_gflops": max(float(s["sgemm_gflops"]) for s in samples),
        "copy_gbps": max(float(s["copy_gbps"]) for s in samples),
    }


def _rates(limits: MachineLimits) -> dict[str, float]:
    return {k: round(float(limits[k]), 3) for k in ("sgemm_gflops", "copy_gbps", "load_average")}
