"""What tracing costs: a traced call against a plain one and one under an empty profile hook, interleaved, so
notebook 01 can show the tracer (`calls.trace_calls`) is cheap enough to run on the real forward."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from weftlib import measure
from weftlib.console import progress

from .calls import ProfileEvent, target_prefix, trace_calls


def _empty_hook(frame: FrameType, event: ProfileEvent, arg: Any) -> None:
    """A profile function that does nothing: the floor cost of any sys.setprofile-based tracer."""


def _with_profile(hook: Callable[..., None], fn: Callable[..., Any], *args: Any) -> None:
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn(*args)
    finally:
        sys.setprofile(previous)


def tracing_overhead(fn: Callable[..., Any], *args: Any, target: str = "natten", repeats: int = 5) -> dict[str, float]:
    """Median seconds of `fn(*args)` plain, under an empty profile hook, and under `trace_calls`.

    The three are interleaved in the same run, so the ratios compare like with like on a busy machine.
    The empty hook is the floor: a profile function is called for every Python and C call whatever it does.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive int, got {repeats!r}")
    runs: dict[str, list[float]] = {"plain": [], "empty_hook": [], "traced": []}
    for _ in range(repeats):
        for name, run in (
            ("plain", lambda: fn(*args)),
            ("empty_hook", lambda: _with_profile(_empty_hook, fn, *args)),
            ("traced", lambda: trace_calls(fn, *args, target=target)),
        ):
            start = time.perf_counter()
            run()
            runs[name].append(time.perf_counter() - start)
    median = {name: statistics.median(times) for name, times in runs.items()}
    return {
        **{f"{k}_s": v for k, v in median.items()},
        "traced_over_plain": median["traced"] / median["plain"],
        "traced_over_empty_hook": median["traced"] / median["empty_hook"],
    }


def _noop() -> None:
    """Nothing: what is left of a traced call when the work is taken away."""


def _call_kept(fn: Callable[..., Any], args: tuple[Any, ...]) -> BaseException | None:
    """`fn(*args)`, returning the exception it raised instead of raising it (a forward into a backend missing
    on this machine still runs everything before it, and that is the workload)."""
    try:
        fn(*args)
    except Exception as exc:
        return exc
    return None


def _batch(fn: Callable[..., Any], args: tuple[Any, ...], calls: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(calls):
            _call_kept(fn, args)

    return run


def tracing_cost(
    fn: Callable[..., Any],
    *args: Any,
    target: str = "natten",
    repeats: int = 5,
    min_seconds: float = 0.05,
    one_call_s: float | None = None,
) -> dict[str, Any]:
    """What tracing costs, split the way it behaves, so the claim holds whatever the workload:

    - `fixed_overhead_us`: one `trace_calls` around a call that does nothing, minus that call (minima; setting up
      the hook, the import wrapper, the module snapshot): paid once per traced call, whatever `fn` does;
    - on a workload of at least `min_seconds` (`fn(*args)` repeated `calls` times inside one timed call, so
      the fixed cost no longer dominates): plain, under an empty profile hook, and traced, timed in up to
      `repeats` interleaved rounds (`rounds`: fewer once every sample set is `measure.settled`), shown as
      medians; the ratios and `overhead_us_per_call` = (traced - plain) / calls are taken on the minima
      (`measure.interleaved_ratio`: noise only adds time), and `contended` says whether the machine was
      quiet meanwhile (`measure.Bracket`), so a claim on them can be left unjudged.

    A call of a few microseconds traced once shows only the fixed cost (a ratio of 40 says nothing about
    tracing work); the ratios here are over a workload long enough to measure the per-call cost. `fn` may
    raise: the exception is kept and the call counts as run (what ran before it is the workload).

    `one_call_s`: the seconds of a call of `fn(*args)` the caller has already made in this process (01's traced
    forward of section 2), which warmed it: the warm-up call is then not repeated (at NAF's 512^2 it is a
    forward of seconds) and `calls` is sized from it. A traced call is no shorter than a plain one, so the
    workload is then at most the tracing ratio shorter than `min_seconds`; `calls` shows what ran.
    """
    _check_cost_args(fn, target, repeats, min_seconds, one_call_s)
    if one_call_s is None:
        start = time.perf_counter()
        _call_kept(fn, args)  # warm-up, and the length of one call
        one_call_s = time.perf_counter() - start
    one = max(float(one_call_s), 1e-7)
    calls = max(1, int(-(-min_seconds // one)))
    with measure.Bracket() as block:
        fixed, runs = _interleaved_rounds(_batch(fn, args, calls), target, repeats, block)
    median = {name: statistics.median(times) for name, times in runs.items()}
    quiet = block.verdict()
    return {
        "calls": calls,
        "rounds": len(runs["plain"]),
        "plain_ms": median["plain"] * 1e3,
        "empty_hook_ms": median["empty_hook"] * 1e3,
        "traced_ms": median["traced"] * 1e3,
        **{f"{name}_min_ms": min(times) * 1e3 for name, times in runs.items()},
        "fixed_overhead_us": max(0.0, min(fixed["traced"]) - min(fixed["plain"])) * 1e6,
        "overhead_us_per_call": (min(runs["traced"]) - min(runs["plain"])) / calls * 1e6,
        "traced_over_plain": measure.interleaved_ratio(runs["traced"], runs["plain"]),
        "traced_over_empty_hook": measure.interleaved_ratio(runs["traced"], runs["empty_hook"]),
        "rate_change": quiet["rate_change"],
        "others_cores": quiet["others_cores"],
        "contended": quiet["contended"],
    }


def _check_cost_args(fn: Any, target: str, repeats: Any, min_seconds: Any, one_call_s: Any) -> None:
    """`tracing_cost`'s arguments, refused in one line each before anything is timed."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive int, got {repeats!r}")
    if isinstance(min_seconds, bool) or not isinstance(min_seconds, (int, float)) or not min_seconds > 0:
        raise ValueError(f"min_seconds: expected a positive number of seconds, got {min_seconds!r}")
    if one_call_s is not None and (isinstance(one_call_s, bool) or not isinstance(one_call_s, (int, float))):
        raise ValueError(f"one_call_s: expected the seconds of one call already made, got {one_call_s!r}")
    target_prefix(target)  # a bad target fails here


def _interleaved_rounds(
    work: Callable[[], None], target: str, repeats: int, block: measure.Bracket
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Up to `repeats` rounds of: a traced and a plain no-op (the fixed cost), then `work` plain, under the
    empty hook and traced, each timed once per round (A B C A B C ...), the rounds noted in `block`."""
    fixed: dict[str, list[float]] = {"plain": [], "traced": []}
    runs: dict[str, list[float]] = {"plain": [], "empty_hook": [], "traced": []}
    begin = time.perf_counter()
    # a round at NAF's geometry takes seconds: the bar says how far, drawn between rounds, never inside a timing
    for _ in progress(range(repeats), desc="tracing cost", unit="round", disable=repeats < 2):
        for name, run in (("plain", _noop), ("traced", lambda: trace_calls(_noop, target=target))):
            start = time.perf_counter()
            run()
            fixed[name].append(time.perf_counter() - start)
        for name, run in (
            ("plain", work),
            ("empty_hook", lambda: _with_profile(_empty_hook, work)),
            ("traced", lambda: trace_calls(work, target=target)),
        ):
            start = time.perf_counter()
            run()
            runs[name].append(time.perf_counter() - start)
        if all(measure.settled(times) for times in runs.values()):
            break  # a workload of seconds: two rounds that agree settle each median
    block.note(begin, time.perf_counter())
    return fixed, runs
