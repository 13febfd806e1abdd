"""Wall time the way the appendix reports it: medians of repeats, stopped early once long calls agree, and
torch's thread count set for a measurement and restored after it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .others import AGREE, LONG_CALL_S, settled


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
