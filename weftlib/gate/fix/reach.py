"""Which nodes each run of a graph executed, read from onnxruntime's profile: how the proof knows that an input
set reached a rewritten node.

A node of the main graph runs on every call. A node inside an If branch, a Loop or a Scan body runs only when
its owner takes that branch or iterates, and an input set that never takes it proves nothing about it, however
equal the outputs. Which branch a set takes is not guessed from the inputs: onnxruntime's profiler records one
event per kernel it runs, the nodes of subgraphs included (`<node>_kernel_time`), and one `model_run` event per
call, each kernel's event lying inside the call that ran it. With the graph run as written (optimizations off,
as the proof runs it) the events carry the graph's own node names, and onnxruntime refuses a graph whose node
names repeat at any depth, so each name read off a call's profile is one node that ran. A profile that cannot
be read back, or whose calls do not match the runs made, reaches nothing.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnx

KERNEL = "_kernel_time"  # onnxruntime's suffix on a node's event


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))]


def nested_nodes(model: onnx.ModelProto) -> set[str]:
    """The names of the nodes inside a subgraph (an If branch, a Loop or Scan body), at any depth."""
    out: set[str] = set()
    stack = [sub for node in model.graph.node for sub in _subgraphs(node)]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            out.add(node.name)
            stack += _subgraphs(node)
    return out


class Profiled:
    """An onnxruntime session on `path` (as written, errors logged only) whose calls are profiled into
    `folder` when `profile`; `ran()` ends the profile and says which nodes each call ran (none, unprofiled)."""

    def __init__(self, path: str | os.PathLike, folder: str | os.PathLike, *, profile: bool = True) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.enable_cpu_mem_arena = False
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.enable_profiling = profile
        opts.profile_file_prefix = str(Path(folder) / f"profile-{Path(path).stem}")
        self.session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        self.profile = profile
        self.calls = 0

    def run(self, names: Sequence[str], feeds: dict[str, Any]) -> Any:
        """One call of the graph; counted whether it succeeds or raises (onnxruntime profiles both)."""
        self.calls += 1
        return self.session.run(list(names), feeds)

    def ran(self) -> list[set[str]]:
        """Per call, in order, the names of the nodes it ran; every set empty when the profile does not
        account for each call (nothing is then counted as reached)."""
        if not self.profile:
            return [set() for _ in range(self.calls)]
        try:
            events = json.loads(Path(self.session.end_profiling()).read_text())
        except (OSError, ValueError):
            return [set() for _ in range(self.calls)]
        runs = sorted(
            (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
        )
        if len(runs) != self.calls:
            return [set() for _ in range(self.calls)]
        starts = [start for start, _ in runs]
        out: list[set[str]] = [set() for _ in runs]
        for e in events:
            name = str(e.get("name", ""))
            if e.get("cat") != "Node" or not name.endswith(KERNEL):
                continue
            call = bisect_right(starts, e["ts"]) - 1
            if call >= 0 and e["ts"] <= runs[call][1]:
                out[call].add(name[: -len(KERNEL)])
        return out
