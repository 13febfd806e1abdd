"""A run's graphs worked on two at a time where they are small, one at a time where they are large: 05's fixes
and 06's cuts time nothing (06's estimate runs after its cuts, alone), so the many small graphs (under a second
each: Python, shape inference, files, onnxruntime sessions) share the cores, while a graph at NAF's 512² (a
faithful cut proof peaks at ~11 GB on a 24 GB machine) or one of DiT's upstream graphs (a quarter GB of weights,
copied a few times on the way) runs alone. Large is read from the file's size first and, under `LARGE_FILE`, from
its graph's declared inputs and outputs (such a file loads in well under a second), never from running it."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import onnx

from ...workers import map_forked

LARGE_TENSOR = 1 << 22  # elements in a graph input or output (16 MB of float): NAF's 512² graphs have 9.4 M and up
LARGE_FILE = 100 << 20  # bytes of the graph file: DiT's upstream graphs are 245 MB and up
PAIRED = 2  # small graphs at a time (the appendix machine has 2 cores)

T = TypeVar("T")


def is_large(model: str | os.PathLike) -> bool:
    """Whether `model` runs alone: a graph input or output of `LARGE_TENSOR` elements or more (a symbolic
    dimension counts as 1), or a file of `LARGE_FILE` bytes or more."""
    if Path(model).stat().st_size >= LARGE_FILE:
        return True
    graph = onnx.load(str(model), load_external_data=False).graph
    for value in [*graph.input, *graph.output]:
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in value.type.tensor_type.shape.dim]
        if math.prod(dims) >= LARGE_TENSOR:
            return True
    return False


def map_by_size(
    fn: Callable[[Path], T],
    models: Sequence[Path],
    progress: Callable[[Path], object] | None = None,
    workers: int = PAIRED,
) -> list[T]:
    """`[fn(m) for m in models]`: the small ones `workers` at a time in forked processes (`workers.map_forked`,
    an error raised as a `WorkerError` carrying the worker's traceback), then the large ones here, one at a time
    (`is_large`); the results in the models' order."""
    large = [is_large(m) for m in models]
    small = [m for m, big in zip(models, large, strict=True) if not big]
    done = dict(zip(small, map_forked(fn, small, workers=workers, progress=progress), strict=True))
    for model, big in zip(models, large, strict=True):
        if big:
            done[model] = fn(model)
            if progress is not None:
                progress(model)
    return [done[m] for m in models]
