"""Independent jobs on every core: `map_forked(fn, items)` runs `fn(item)` in forked processes, results in order.

Why: exporting a graph is mostly torch.export and the ONNX translation, single-threaded Python, so on the
appendix's two cores one export leaves a core idle; sections that export a handful of independent graphs
(NAF's rewrites, the image-layout geometries, the DiT variants) finish sooner two at a time (docs/timings.md
holds the figures).
Forked, not spawned: a job reads the parent's modules and tensors as they are (a model loaded from a hub
checkout has no import path a fresh interpreter could follow), and only its result is pickled back. Never
for timed work: two jobs at once contend for the cores and the memory bus.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class WorkerError(RuntimeError):
    """A job failed in its worker (the worker's traceback is the message) or its worker died."""


def pid_alive(pid: int) -> bool:
    """Whether a process of this id exists on this machine (one owned by another user counts): a folder or run
    whose writer is gone was interrupted, not still in progress."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def map_forked(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int | None = None,
    progress: Callable[[T], Any] | None = None,
) -> list[R]:
    """`[fn(item) for item in items]`, up to `workers` (default: `default_workers()`) at a time in forked
    processes; one worker, or one item, runs here with nothing forked (its exception raised as it is).
    `progress(item)` is called here as each job ends. An exception in a worker is raised here as a
    `WorkerError` carrying the worker's traceback, after the other running jobs end; jobs not yet started
    are not started.

    A worker runs torch on one thread: GNU OpenMP's thread pool does not survive a fork, and a forked child
    that enters it with the parent's thread count hangs (two workers on two cores use both anyway)."""
    todo: Sequence[T] = list(items)
    workers = default_workers() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if workers == 1 or len(todo) <= 1:
        out = []
        for item in todo:
            out.append(fn(item))
            if progress is not None:
                progress(item)
        return out
    import multiprocessing.connection  # binds multiprocessing too

    ctx = multiprocessing.get_context("fork")
    results: dict[int, R] = {}
    running: dict[Any, tuple[int, Any]] = {}  # result pipe -> (job index, process)
    failure: str | None = None
    next_job = 0
    while running or (next_job < len(todo) and failure is None):
        while failure is None and next_job < len(todo) and len(running) < workers:
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_work, args=(fn, todo[next_job], send), daemon=True)
            proc.start()
            send.close()
            running[receive] = (next_job, proc)
            next_job += 1
        ready = set(multiprocessing.connection.wait(list(running)))
        for receive in [r for r in list(running) if r in ready]:
            index, proc = running.pop(receive)
            try:
                ok, payload = receive.recv()
            except EOFError:
                ok, payload = False, None
            receive.close()
            proc.join()
            if not ok:
                failure = failure or (
                    payload if payload is not None else f"the worker of job {index} died (exit {proc.exitcode})"
                )
                continue
            results[index] = payload
            if progress is not None:
                progress(todo[index])
    if failure is not None:
        raise WorkerError(failure)
    return [results[i] for i in range(len(todo))]


def _work(fn: Callable[[Any], Any], item: Any, send: Any) -> None:
    """A worker's whole life: one thread for torch, the job, its result (or traceback) sent back."""
    try:
        torch = sys.modules.get("torch")  # only if the parent uses it: importing it here costs a second
        if torch is not None:
            torch.set_num_threads(1)
        send.send((True, fn(item)))
    except BaseException:
        send.send((False, traceback.format_exc()))
    finally:
        send.close()
