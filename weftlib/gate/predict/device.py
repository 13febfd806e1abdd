"""The device gate: what the DFC's parser is predicted to do with an ONNX graph, node by node.

It runs on any laptop and decides from the public record (`params/device_ops.yaml`): each node and each
input is predicted to parse, predicted refused (with the rule, the node and the evidence), or unjudged (the
record is silent or split), and the graph takes the strongest objection. An unjudged graph is never a pass.
The pairing with the DFC is what says when a prediction was wrong.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...onnx_core.walk import STANDARD_DOMAINS, Graph, graph_inputs, read_graph
from ..record.allowlist import DeviceOps, DeviceOpsError
from ..vocabulary import GateVerdict, Prediction
from .graph_checks import structure_problem
from .nodes import Finding, GraphPrediction, predict

EXIT_CODES = {GateVerdict.PASS: 0, GateVerdict.FAIL: 1, GateVerdict.UNJUDGED: 3}


@dataclass(frozen=True)
class OpUse:
    """How often an op outside the DEVICE_OPS listing occurs, and where (node names, for the DFC's lines)."""

    count: int
    nodes: tuple[str, ...]
    blocker: str = ""  # the KNOWN_BLOCKERS reason, when the op is a named blocker


@dataclass(frozen=True)
class GateResult:
    """The device gate's word on one file: `verdict` pass / fail / unjudged, and the findings behind it.

    `readable` is False for a file the gate could not read at all (then nothing else is claimed), and for a
    graph with an input the parser is predicted to refuse before reading any operator.
    """

    path: str
    verdict: GateVerdict
    findings: tuple[Finding, ...] = ()  # refused and unjudged judgements (the parses are in `prediction`)
    prediction: GraphPrediction | None = None  # None: the file could not be read as ONNX
    ops: dict[str, int] = field(default_factory=dict)
    outside: dict[str, OpUse] = field(default_factory=dict)  # ops outside the DEVICE_OPS listing
    problems: tuple[str, ...] = ()  # limits of the file itself (IR, opset, domains), a failed export check
    ir_version: int | None = None
    opset: int | None = None
    nodes: int = 0
    parity: dict | None = None  # the export's torch-vs-onnxruntime check, when the exporter left one
    inputs: tuple[tuple[str, tuple[int | str, ...]], ...] = ()  # graph inputs (name, shape), weights excluded

    @property
    def passed(self) -> bool:
        return self.verdict == GateVerdict.PASS

    @property
    def read(self) -> bool:
        """Whether the file was read as an ONNX graph at all."""
        return self.prediction is not None

    @property
    def readable(self) -> bool:
        """Read, and no input is predicted refused (the parser stops at its input layers before any op)."""
        return self.prediction is not None and Prediction.REFUSED not in self.prediction.inputs.values()

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def refused_ops(self) -> tuple[str, ...]:
        """Op types of the nodes predicted refused."""
        return self._ops_with(Prediction.REFUSED)

    @property
    def unjudged_ops(self) -> tuple[str, ...]:
        return self._ops_with(Prediction.UNJUDGED)

    @property
    def failing_ops(self) -> tuple[str, ...]:
        """The op types the gate holds against the graph: refused ones (what the DFC should name)."""
        return self.refused_ops

    @property
    def rules(self) -> dict[str, Prediction]:
        """Rule (or "op:<type>") -> the strongest prediction it made here, for the findings only."""
        out: dict[str, Prediction] = {}
        for f in self.findings:
            key = f.key
            out[key] = Prediction.REFUSED if Prediction.REFUSED in (out.get(key), f.prediction) else f.prediction
        return out

    def _ops_with(self, prediction: Prediction) -> tuple[str, ...]:
        if self.prediction is None:
            return ()
        names = {f.node: f.op for f in self.prediction.judgements if f.op not in ("(input)", "(graph)")}
        return tuple(sorted({names[n] for n, p in self.prediction.nodes.items() if p == prediction and n in names}))

    def as_json(self) -> dict[str, object]:
        """`python -m weftlib.gate device MODEL --json`: the verdict and the refused and unjudged findings."""
        return {
            "verdict": self.verdict,
            "findings": [f.as_json() for f in self.findings],
            "problems": list(self.problems),
            "model": self.path,
            "nodes": self.nodes,
        }


def device_gate(onnx_path: str | os.PathLike, allow: DeviceOps | Iterable[str]) -> GateResult:
    """Predict the DFC's parse of one ONNX file from `allow` (a `DeviceOps`, or plain op names)."""
    ops = _check_args(onnx_path, allow)
    graph, complaint = read_graph(onnx_path)
    if graph is None:
        return GateResult(path=str(onnx_path), verdict=GateVerdict.FAIL, problems=(complaint or "unreadable",))
    malformed = structure_problem(graph.model, Path(onnx_path).parent) or complaint
    if malformed:  # not a graph at all (or one ONNX rejects): refused, as an unreadable file is; nothing claimed
        return GateResult(path=str(onnx_path), verdict=GateVerdict.FAIL, problems=(f"{onnx_path}: {malformed}",))
    return _gate(graph, ops, str(onnx_path))


def _parity(path: Path) -> tuple[dict | None, str | None]:
    """The numeric check `weftlib.onnx_core.export` wrote beside the file (`<stem>.parity.json`), if any, and
    the objection it raises: a graph whose onnxruntime output left torch's tolerance fails the gate whatever
    its ops."""
    sidecar = path.with_suffix(".parity.json")
    try:
        if not sidecar.exists():
            return None, None
    except OSError:  # a name too long for a sidecar beside it (a 250-character model name): none was written
        return None, None
    try:
        parity = json.loads(sidecar.read_text())
        if isinstance(parity, dict) and not {"parity_ok", "max_abs_diff", "atol"} & set(parity):
            return None, None  # an identity alone (`gate fix`'s graph of a user's ONNX): no export check was made
        ok, diff, atol = bool(parity["parity_ok"]), float(parity["max_abs_diff"]), float(parity["atol"])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        return None, f"unreadable numeric check {sidecar.name}: {type(exc).__name__}"
    return parity, None if ok else f"onnxruntime differs from torch by {diff:.3g} > {atol:.3g} (export check)"


def file_problems(graph: Graph, ops: DeviceOps, path: str | os.PathLike) -> list[str]:
    """Everything the gate holds against the file as a whole, whatever its nodes, each one failing it: the
    compiler's graph-level limits (`graph_limits`), a failed export check beside it. A cut keeps such a file
    off the device entirely (`partition`). (A file the ONNX checker rejects is never read: `read_graph`.)"""
    parity_problem = _parity(Path(path))[1]
    return [p for p in (*graph_limits(graph, ops), parity_problem) if p]


def _check_args(onnx_path: object, allow: object) -> DeviceOps:
    if not isinstance(onnx_path, (str, os.PathLike)) or str(onnx_path) == "":
        raise TypeError(f"onnx_path: expected a file path, got {onnx_path!r}")
    if isinstance(allow, DeviceOps):
        return allow
    if isinstance(allow, (str, bytes)):
        raise TypeError(f"allow: expected DeviceOps or an iterable of op names, got the string {allow!r}")
    if not isinstance(allow, Iterable):
        raise TypeError(f"allow: expected DeviceOps or an iterable of op names, got {allow!r}")
    try:
        return DeviceOps.from_names(list(allow))
    except (TypeError, DeviceOpsError) as exc:
        raise TypeError(f"allow: expected DeviceOps or an iterable of op names ({exc})") from exc


def _gate(graph: Graph, ops: DeviceOps, path: str) -> GateResult:
    counts = Counter(graph.op_key(n) for n in graph.nodes)
    where: dict[str, list[str]] = {}
    for node in graph.nodes:
        key = graph.op_key(node)
        if key not in ops.allowed:
            where.setdefault(key, []).append(node.name or f"<unnamed {key}>")
    outside = {
        op: OpUse(counts[op], tuple(names), ops.entries[op].note if op in ops.blockers else "")
        for op, names in sorted(where.items())
    }
    prediction = predict(graph, ops)
    problems = file_problems(graph, ops, path)
    verdict = GateVerdict.FAIL if problems else prediction.verdict
    return GateResult(
        path=path,
        verdict=verdict,
        findings=prediction.findings,
        prediction=prediction,
        ops=dict(sorted(counts.items())),
        outside=outside,
        problems=tuple(problems),
        ir_version=graph.model.ir_version,
        opset=graph.opset,
        nodes=len(graph.nodes),
        inputs=tuple(graph_inputs(graph)),
        parity=_parity(Path(path))[0],
    )


def graph_limits(graph: Graph, ops: DeviceOps) -> list[str]:
    """Limits of the compiler that are about the file, not about a node: each one fails the graph."""
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
    if not graph.nodes:
        problems.append("the graph has no nodes")
    return problems


__all__ = ["EXIT_CODES", "GateResult", "OpUse", "device_gate", "file_problems", "graph_limits"]
