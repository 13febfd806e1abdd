"""Wall time the way the appendix reports it: medians of repeats, stopped early once long calls agree, and
torch's thread count set for a measurement and restored after it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


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
