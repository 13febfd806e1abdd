"""Independent chunks of one layer on every thread torch may use: `run_chunks(count, make_work)`.

Why: a layer's chunks are independent and their ops small (a few thousand rows), so torch's own intra-op
threading splits every op across the cores and waits at a barrier after it, tens of thousands of times a layer;
on a busy machine one descheduled thread stalls every barrier. Measured on this 2-core VM under load, the
compact path with 2 intra-op threads took 6 to 9 times its single-thread time; here each thread takes the
next chunk and runs its ops single-threaded (torch releases the GIL inside each op), so the threads wait for
each other once per layer.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

import torch


def workers_for(count: int, threads: int | None = None) -> int:
    """Threads `run_chunks` uses for `count` chunks: torch's thread count (or `threads`), at most `count`."""
    return max(1, min(torch.get_num_threads() if threads is None else threads, count))


def run_chunks(count: int, make_work: Callable[[], Callable[[int], None]], threads: int | None = None) -> None:
    """Run `work(c)` for every chunk c < `count`, each thread on the next unclaimed chunk, with its own
    `work = make_work()` (its buffers). torch's thread count is restored after; a thread's error is raised here."""
    workers = workers_for(count, threads)
    if workers == 1:
        work = make_work()
        for c in range(count):
            work(c)
        return
    before = torch.get_num_threads()
    claim = itertools.count()  # next() on it is atomic under the GIL
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            torch.set_num_threads(1)
            work = make_work()
            for c in iter(lambda: next(claim), None):
                if c >= count or errors:
                    return
                work(c)
        except BaseException as err:  # re-raised in the calling thread
            errors.append(err)

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    try:
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        torch.set_num_threads(before)
    if errors:
        raise errors[0]
