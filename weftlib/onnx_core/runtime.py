"""onnxruntime sessions as the suite opens them, free of torch so the gate can run graphs too."""

from __future__ import annotations

import os
from typing import Any


def session(path: str | os.PathLike, threads: int | None = None, *, once: bool = False, optimize: bool = True) -> Any:
    """An onnxruntime CPU session that logs errors only (its warnings would clutter a published notebook).

    `threads` caps intra-op threads (None: onnxruntime's default). `once`: the session runs one call (a
    parity check, a cut proof), so it goes without onnxruntime's memory arena, whose fresh chunks are
    faulted in page by page (system time) and help only a session that runs again. A timed session keeps it,
    its later calls reusing the arena. `optimize=False` runs the graph as written (no fusions), so that a
    chain of its pieces computes the same arithmetic as the whole."""
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
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
