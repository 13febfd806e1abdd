"""The device gate: is every node of an ONNX graph inside DEVICE_OPS, and inside the DFC's graph limits?

It runs on any laptop and blocks early; it is allowed to be wrong in the direction of caution, and the
pairing with the DFC is what says when it was wrong.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from .allowlist import DeviceOps, DeviceOpsError
from .conditions import CHECKS
from ..onnx_core.walk import STANDARD_DOMAINS, Graph, dynamic_inputs, read_graph


@dataclass(frozen=True)
class OpUse:
    """How often an op outside the allowlist occurs, and where (node names, for the DFC's error lines)."""

    count: int
    nodes: tuple[str, ...]
    blocker: str = ""  # the KNOWN_BLOCKERS reason, when the op is a named blocker


@dataclass(frozen=True)
class ConditionFailure:
    """An allowlisted op on a node that breaks the condition it was seen to parse under."""

    op: str
    node: str
    condition: str
    reason: str


@dataclass(frozen=True)
class GateResult:
    """The device gate's verdict on one file. `passed` only when nothing at all is wrong."""

    path: str
    passed: bool
    ops: dict[str, int] = field(default_factory=dict)
    outside: dict[str, OpUse] = field(default_factory=dict)
    conditions: tuple[ConditionFailure, ...] = ()
    problems: tuple[str, ...] = ()
    ir_version: int | None = None
    opset: int | None = None
    nodes: int = 0
    parity: dict | None = None  # the export's torch-vs-onnxruntime check, when the exporter left one
    input_problems: tuple[str, ...] = ()  # inputs the DFC's parser cannot lay out (see `input_regime`)
    inputs: tuple[tuple[str, tuple[int | str, ...]], ...] = ()  # graph inputs (name, shape), weights excluded

    @property
    def readable(self) -> bool:
        """Whether the DFC's parser can read the graph's inputs at all (every input image-shaped, rank 4).

        A graph it cannot read judges none of its ops: the parser stops before the first operator.
        """
        return not self.input_problems

    @property
    def ops_passed(self) -> bool:
        """Every op inside DEVICE_OPS and meeting its condition (said apart from `readable`)."""
        return not self.outside and not self.conditions

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def failing_ops(self) -> tuple[str, ...]:
        """The ops the gate failed on (outside the allowlist, or breaking their condition)."""
        return tuple(sorted(set(self.outside) | {c.op for c in self.conditions}))


def device_gate(onnx_path: str | os.PathLike, allow: DeviceOps | Iterable[str]) -> GateResult:
    """Check one ONNX file against the allowlist `allow` (a `DeviceOps`, or plain op names)."""
    ops = _check_args(onnx_path, allow)
    graph, complaint = read_graph(onnx_path)
    if graph is None:
        return GateResult(path=str(onnx_path), passed=False, problems=(complaint,))
    return _with_parity(_gate(graph, ops, str(onnx_path), complaint))


def _with_parity(result: GateResult) -> GateResult:
    """Add the numeric check `weftlib.onnx_core.export` wrote beside the file (`<stem>.parity.json`), if any:
    a graph whose onnxruntime output left torch's tolerance fails the gate whatever its ops."""
    import json

    sidecar = Path(result.path).with_suffix(".parity.json")
    if not sidecar.exists():
        return result
    try:
        parity = json.loads(sidecar.read_text())
        ok, diff, atol = bool(parity["parity_ok"]), float(parity["max_abs_diff"]), float(parity["atol"])
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"unreadable numeric check {sidecar.name}: {exc}"
        return replace(result, passed=False, problems=result.problems + (problem,))
    if ok:
        return replace(result, parity=parity)
    problem = f"onnxruntime differs from torch by {diff:.3g} > {atol:.3g} (export check)"
    return replace(result, passed=False, parity=parity, problems=result.problems + (problem,))


def _check_args(onnx_path: object, allow: object) -> DeviceOps:
    if not isinstance(onnx_path, (str, os.PathLike)) or str(onnx_path) == "":
        raise TypeError(f"onnx_path: expected a file path, got {onnx_path!r}")
    if isinstance(allow, DeviceOps):
        return allow
    if isinstance(allow, (str, bytes)):
        raise TypeError(f"allow: expected DeviceOps or an iterable of op names, got the string {allow!r}")
    try:
        return DeviceOps.from_names(list(allow))  # type: ignore[arg-type]
    except (TypeError, DeviceOpsError) as exc:
        raise TypeError(f"allow: expected DeviceOps or an iterable of op names ({exc})") from exc


def _gate(graph: Graph, ops: DeviceOps, path: str, complaint: str | None) -> GateResult:
    counts = Counter(graph.op_key(n) for n in graph.nodes)
    where: dict[str, list[str]] = {}
    failures = []
    for node in graph.nodes:
        key = graph.op_key(node)
        if key not in ops.allowed:
            where.setdefault(key, []).append(node.name or f"<unnamed {key}>")
        elif (condition := ops.condition(key)) is not None:
            why = CHECKS[condition](node, graph)
            if why is not None:
                failures.append(ConditionFailure(key, node.name or f"<unnamed {key}>", condition, why))
    outside = {
        op: OpUse(counts[op], tuple(names), ops.entries[op].note if op in ops.blockers else "")
        for op, names in sorted(where.items())
    }
    regime = input_regime(graph)
    problems = ([complaint] if complaint else []) + _graph_problems(graph, ops) + regime
    problems += [
        f"{op} x{use.count} outside DEVICE_OPS" + (f" (known blocker: {use.blocker})" if use.blocker else "")
        for op, use in outside.items()
    ]
    problems += [f"{f.op} {f.node!r} breaks {f.condition}: {f.reason}" for f in failures]
    return GateResult(
        path=path,
        passed=not problems,
        ops=dict(sorted(counts.items())),
        outside=outside,
        conditions=tuple(failures),
        problems=tuple(problems),
        ir_version=graph.model.ir_version,
        opset=graph.opset,
        nodes=len(graph.nodes),
        input_problems=tuple(regime),
        inputs=tuple(graph_inputs(graph)),
    )


IMAGE_RANK = 4
INPUT_LAYERS = (
    "the DFC's parser stops in `_add_input_layers` (output_format is None) before reading any "
    "operator; it takes image-shaped inputs only (RFD 1154 details)"
)


def graph_inputs(graph: Graph) -> list[tuple[str, tuple[int | str, ...]]]:
    """(name, shape) of every real graph input (initializers listed as inputs are weights, not inputs)."""
    out = []
    for info in graph.model.graph.input:
        if info.name in graph.constants:
            continue
        tensor = info.type.tensor_type
        dims = (
            tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim)
            if tensor.HasField("shape")
            else ()
        )
        out.append((info.name, dims))
    return out


def input_regime(graph: Graph) -> list[str]:
    """The graph-level input rule: every input rank 4 (NCHW). One problem per input that breaks it, naming it.

    Evidence: RFD 1154 details (a rank-5 `x [1,8,8,8,8]`, a rank-1 timestep and a rank-3 conditioning stop
    the parser in `_add_input_layers` before any operator is read); every graph the DFC parsed in the public
    record (RFD 1167's 825-node keypoint half) had image inputs.
    """
    problems = []
    for name, dims in graph_inputs(graph):
        if len(dims) != IMAGE_RANK:
            problems.append(
                f"input {name!r} {list(dims)} is rank {len(dims)}, not image-shaped (rank {IMAGE_RANK}): {INPUT_LAYERS}"
            )
    if not graph_inputs(graph):
        problems.append(
            "the graph has no input: the DFC's parser reports 'Inputs found: 0' before reading any "
            "operator (weftspun/rf-detr-cpp scripts/gen_op_tests.py)"
        )
    return problems


def _graph_problems(graph: Graph, ops: DeviceOps) -> list[str]:
    """Limits of the compiler that are about the file, not about one op."""
    problems = []
    ir = graph.model.ir_version
    if ir > ops.max_ir_version:
        problems.append(f"IR version {ir} > {ops.max_ir_version}: the DFC's bundled checker refuses it")
    low, high = ops.opsets
    if graph.opset is None:
        problems.append("no default-domain opset import")
    elif not low <= graph.opset <= high:
        problems.append(f"opset {graph.opset} outside {low}-{high}, the opsets the DFC parsed in practice")
    domains = sorted({n.domain for n in graph.nodes if n.domain not in STANDARD_DOMAINS})
    if domains:
        problems.append(f"non-standard op domain(s) {domains}: the DFC parses standard ONNX ops only")
    dynamic = dynamic_inputs(graph)
    if dynamic:
        problems.append(f"non-static input shape(s): {', '.join(dynamic)}")
    if not graph.nodes:
        problems.append("the graph has no nodes")
    return problems
