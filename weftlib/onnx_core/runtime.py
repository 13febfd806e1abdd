"""onnxruntime sessions as the suite opens them, free of torch so the gate can run graphs too."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def session(
    path: str | os.PathLike,
    threads: int | None = None,
    *,
    once: bool = False,
    optimize: bool = True,
    mem_pattern: bool = True,
) -> Any:
    """An onnxruntime CPU session that logs errors only (its warnings would clutter a published notebook).

    `threads` caps intra-op threads (None: onnxruntime's default). `once`: the session runs one call (a
    parity check, a cut proof), so it goes without onnxruntime's memory arena, whose fresh chunks are
    faulted in page by page (system time) and help only a session that runs again. A timed session keeps it,
    its later calls reusing the arena. `optimize=False` runs the graph as written (no fusions), so that a
    chain of its pieces computes the same arithmetic as the whole. `mem_pattern=False`: no memory plan recorded on
    the first call and allocated as one block on the second, so a timed call after one warm-up meets no fresh
    pages (at NAF's 512² that second call took 1.7 to 2.5 times the steady state with the plan, docs/timings.md)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads is not None:
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
    if once:
        opts.enable_cpu_mem_arena = False
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.enable_mem_pattern = mem_pattern
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def random_feeds(session: Any, seed: int = 0, *, symbolic: int = 1, index_range: int = 3) -> dict[str, np.ndarray]:
    """Random values for every input of an onnxruntime `session`, of its type and shape: floats standard normal
    (float16/64 cast from it), integers in [0, `index_range`) (most int inputs index something small), booleans
    fair. A dimension that is not a positive number (symbolic, unknown) takes `symbolic`. An input of another
    type (a string, a sequence, a map) has no random value: ValueError, naming it."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else symbolic for d in info.shape]
        kind = info.type[len("tensor(") : -1]
        if not info.type.startswith("tensor(") or kind == "string":
            raise ValueError(f"input {info.name!r} is {info.type}: no random values of it (numbers or booleans only)")
        if kind == "bool":
            feeds[info.name] = rng.random(shape) > 0.5
        elif "int" in kind:
            feeds[info.name] = rng.integers(0, index_range, shape).astype(np.dtype(kind))
        else:
            feeds[info.name] = rng.standard_normal(shape).astype({"float": np.float32}.get(kind, kind))
    return feeds
