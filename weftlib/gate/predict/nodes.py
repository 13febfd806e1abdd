"""The prediction for one graph, node by node: parse, refused or unjudged, each with its rule and evidence.

For every graph input the input rules decide; for every node, the op entry's standing and the rules that
cover the node in its context are weighed together, the strongest objection winning (refused over unjudged
over parse). An op marked `by_pattern` is judged by its rules alone: a node of it no rule covers is unjudged,
because its evidence only holds in the patterns it was seen in. Nodes are visited in graph order, so each
rule sees the formats (`weftlib.gate.predict.rules`) its inputs were left with.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ...onnx_core.walk import Graph, graph_inputs
from ..record.allowlist import DeviceOps
from ..record.standing import Standing, op_key, op_standing, rule_standing, worst
from ..vocabulary import GateVerdict, Prediction, Subject
from . import formats as F
from . import rules as R
from .shuffles import SHUFFLES


@dataclass(frozen=True)
class Finding:
    """One judgement: on a node (or a graph input, or the graph), by a rule or by the op entry itself."""

    node: str  # node name; the input's name for an input rule; "(graph)" for a graph-level rule
    op: str  # op type; "(input)" / "(graph)"
    rule: str  # a graph rule's name, or `Subject.OP` for the op entry's own standing
    prediction: Prediction
    evidence: str  # the basis in words, then the sources
    detail: str = ""  # what the rule matched
    inferred: bool = False  # the prediction rests on an inference: probe it
    cites: tuple[str, ...] = ()  # the public-record cases (or short source names) the prediction rests on
    downstream: bool = False  # a consequence of an earlier node's verdict (its input's format), not a cause

    @property
    def subject(self) -> str:
        """What made the judgement, as tables and sentences name it: the rule, or "op <type>" for an op entry."""
        return self.rule if self.rule != Subject.OP else f"op {self.op}"

    @property
    def key(self) -> str:
        """The same subject as an edit to the listing and the gate's per-rule counts key it: "op:<type>"."""
        return self.rule if self.rule != Subject.OP else op_key(self.op)

    def as_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "op": self.op,
            "rule": self.rule,
            "prediction": self.prediction,
            "evidence": self.evidence,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class GraphPrediction:
    """The graph's verdict and every judgement behind it."""

    verdict: GateVerdict
    judgements: tuple[Finding, ...]
    nodes: dict[str, Prediction]  # node name -> its prediction
    inputs: dict[str, Prediction]  # input name -> its prediction

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The judgements that stand in the way of a pass: refused and unjudged ones, in graph order."""
        return tuple(f for f in self.judgements if f.prediction != Prediction.PARSE)

    def refused(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.judgements if f.prediction == Prediction.REFUSED)


def _words(standing: Standing) -> str:
    return standing.basis + (f" ({standing.sources})" if standing.sources else "")


def _finding(node: str, op: str, rule: str, standing: Standing, detail: str = "", downstream: bool = False) -> Finding:
    return Finding(
        node, op, rule, standing.prediction, _words(standing), detail, standing.inferred, standing.citations, downstream
    )


def predict(graph: Graph, ops: DeviceOps) -> GraphPrediction:
    """Judge every input and node of `graph` against the rules and entries of `ops`."""
    ctx = F.Context(graph)
    judgements: list[Finding] = []
    inputs: dict[str, Prediction] = {}
    for rule in R.rules_for(R.GRAPH):
        if (detail := rule.match(ctx, None)) is not None:
            judgements.append(_finding(R.GRAPH, R.GRAPH, rule.name, rule_standing(rule.name, ops), detail))
    for name, _ in graph_inputs(graph):
        found = [
            _finding(name, R.INPUT, rule.name, rule_standing(rule.name, ops), detail)
            for rule in R.rules_for(R.INPUT)
            if (detail := rule.match(ctx, name)) is not None
        ]
        judgements += found
        inputs[name] = worst(f.prediction for f in found) if found else Prediction.UNJUDGED
        ctx.formats[name] = {Prediction.PARSE: F.TRACKED, Prediction.REFUSED: F.LOST, Prediction.UNJUDGED: F.UNKNOWN}[
            inputs[name]
        ]
    nodes: dict[str, Prediction] = {}
    for index, node in enumerate(graph.nodes):
        name = node.name or f"<unnamed {node.op_type} #{index}>"
        found = _judge_node(ctx, node, name, ops)
        judgements += found
        nodes[name] = worst(f.prediction for f in found)
        _leave_formats(ctx, node, nodes[name])
    everything = [f.prediction for f in judgements]
    verdict = (
        GateVerdict.FAIL
        if Prediction.REFUSED in everything
        else GateVerdict.UNJUDGED
        if Prediction.UNJUDGED in everything
        else GateVerdict.PASS
    )
    return GraphPrediction(verdict, tuple(judgements), nodes, inputs)


def _judge_node(ctx: F.Context, node: onnx.NodeProto, name: str, ops: DeviceOps) -> list[Finding]:
    op = ctx.graph.op_key(node)
    matched = [
        _finding(name, op, rule.name, rule_standing(rule.name, ops), detail, rule.downstream)
        for rule in R.rules_for(node.op_type)
        if op == node.op_type and (detail := rule.match(ctx, node)) is not None
    ]
    entry = ops.entries.get(op)
    if entry is not None and entry.by_pattern:
        if matched:
            return matched
        upstream = F.worse_format([ctx.format(n) for n in ctx.data_inputs(node)]) in (F.UNKNOWN, F.LOST)
        return [
            Finding(
                name,
                op,
                Subject.OP,
                Prediction.UNJUDGED,
                f"{op} is judged by pattern, and no pattern of the public record covers this node",
                "its input's format is unknown: an unjudged or refused node upstream" if upstream else "",
                downstream=upstream,
            )
        ]
    return [_finding(name, op, Subject.OP, op_standing(op, ops)), *matched]


def _leave_formats(ctx: F.Context, node: onnx.NodeProto, prediction: Prediction) -> None:
    """The format each output of `node` carries on (see `weftlib.gate.predict.rules`): none where no input is data
    (shape arithmetic: Shape, Size, ConstantOfShape read only parameters)."""
    fmt = F.worse_format([ctx.format(n) for n in ctx.data_inputs(node)])
    if fmt != F.NONE and prediction == Prediction.REFUSED:
        fmt = F.LOST if node.op_type in SHUFFLES else F.worse_format([fmt, F.UNKNOWN])
    elif fmt != F.NONE and prediction == Prediction.UNJUDGED:
        fmt = F.worse_format([fmt, F.UNKNOWN])
    for out in node.output:
        if out:
            ctx.formats[out] = fmt
