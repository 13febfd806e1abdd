"""A prediction as the gate's commands print it: the findings, with constants and shape arithmetic grouped
into one line, and the totals by prediction, rule and op.

A TorchScript export holds a Constant for every literal and a Shape/Gather/Concat chain for every `x.shape`; the
record is silent on most of them, so listed node by node they bury the few refusals that matter. No data
passes through them (the format `none` of `formats`): at fixed shapes they are values to fold, not layers (though
the record holds a DFC refusing a Concat of shapes, `concat_no_format`, so a refusal among them is never grouped).
Grouping is presentation only: the verdict and `device --json` keep every finding. A refused node is always
listed on its own, and when the grouped nodes alone decide the verdict the grouped line says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...onnx_core.walk import Graph, read_graph
from ..vocabulary import GateVerdict, Prediction
from . import formats as F
from .device import GateResult
from .nodes import Finding, GraphPrediction

NOT_NODES = ("(input)", "(graph)")  # what a finding on a graph input or on the whole graph names as its op
FOLDED = "constants and shape arithmetic"


def static_nodes(graph: Graph) -> frozenset[str]:
    """The nodes no data passes through (Constant, Shape, arithmetic on shapes and constants), named as the
    prediction names them: the format `none` carried exactly as `nodes._leave_formats` carries it."""
    ctx = F.Context(graph)
    out: set[str] = set()
    for index, node in enumerate(graph.nodes):
        fmt = F.worse_format([ctx.format(n) for n in ctx.data_inputs(node)])
        if fmt == F.NONE:
            out.add(node.name or f"<unnamed {node.op_type} #{index}>")
        for name in node.output:
            if name:
                ctx.formats[name] = fmt
    return frozenset(out)


def static_nodes_of(path: str) -> frozenset[str]:
    """`static_nodes` of the file at `path` (none when it cannot be read: then nothing is grouped)."""
    graph, _ = read_graph(path)
    return static_nodes(graph) if graph is not None else frozenset()


@dataclass(frozen=True)
class Split:
    """A prediction's findings, split for printing: those listed one by one and those grouped."""

    listed: tuple[Finding, ...]
    folded: tuple[Finding, ...]

    @classmethod
    def of(cls, findings: Iterable[Finding], static: frozenset[str]) -> Split:
        """Unjudged findings on nodes no data passes through are grouped; every other finding is listed."""
        listed: list[Finding] = []
        folded: list[Finding] = []
        for f in findings:
            grouped = f.prediction == Prediction.UNJUDGED and f.op not in NOT_NODES and f.node in static
            (folded if grouped else listed).append(f)
        return cls(tuple(listed), tuple(folded))


def finding_line(f: Finding) -> str:
    """One finding as `gate device` lists it."""
    return f"  {f.prediction:8s} {f.node} [{f.op}] by {f.subject}: {f.detail or f.evidence}"


def by_subject(findings: Iterable[Finding]) -> str:
    """Rule or op -> how many findings, most first (ties in graph order), each rule with the op types it judged:
    "op Constant x17, lone_transpose_0213 x2 [Transpose]"."""
    counts: dict[str, int] = {}
    ops: dict[str, list[str]] = {}
    for f in findings:
        counts[f.subject] = counts.get(f.subject, 0) + 1
        seen = ops.setdefault(f.subject, [])
        if f.op not in seen and not f.subject.startswith("op "):
            seen.append(f.op)
    order = sorted(counts, key=lambda k: -counts[k])
    return ", ".join(f"{k} x{counts[k]}" + (f" [{', '.join(ops[k])}]" if ops[k] else "") for k in order)


def verdict_of(predictions: Iterable[Prediction], problems: Sequence[str] = ()) -> GateVerdict:
    """The graph's verdict from these judgements, as `nodes.predict` and `device._gate` take it."""
    seen = set(predictions)
    if problems or Prediction.REFUSED in seen:
        return GateVerdict.FAIL
    return GateVerdict.UNJUDGED if Prediction.UNJUDGED in seen else GateVerdict.PASS


def folded_line(split: Split, verdict: GateVerdict, problems: Sequence[str] = ()) -> str | None:
    """The one line for the grouped findings, saying whether they decide the verdict; None when none are."""
    if not split.folded:
        return None
    nodes = len({f.node for f in split.folded})
    line = (
        f"  {Prediction.UNJUDGED:8s} {nodes} node(s) of {FOLDED}, grouped ({by_subject(split.folded)}): no data "
        "passes through them (values to fold at fixed shapes), and the record never saw them alone"
    )
    without = verdict_of((f.prediction for f in split.listed), problems)
    if without != verdict:
        return line + (
            f". THEY DECIDE THE VERDICT: the graph is {verdict.upper()} only because of them (judged to parse, "
            f"it would {without.upper()}); `probes` asks the DFC about them"
        )
    return line + f"; the verdict does not rest on them ({verdict.upper()} without them)"


def finding_lines(result: GateResult, static: frozenset[str] | None = None) -> list[str]:
    """`gate device`'s finding lines: each refusal and each unjudged node that carries data, then one line for
    the constants and shape arithmetic (`static`: read from `result.path` when not given)."""
    static = static_nodes_of(result.path) if static is None else static
    split = Split.of(result.findings, static)
    lines = [finding_line(f) for f in split.listed]
    folded = folded_line(split, result.verdict, result.problems)
    return [*lines, folded] if folded else lines


def totals_lines(
    prediction: GraphPrediction, static: frozenset[str], problems: Sequence[str] = (), label: str = "totals"
) -> list[str]:
    """The totals of a prediction: nodes by prediction (the grouped share said), then the refused and the
    unjudged findings by rule and op, indented under `label`'s line."""
    counts = {p: 0 for p in (Prediction.REFUSED, Prediction.UNJUDGED, Prediction.PARSE)}
    for p in prediction.nodes.values():
        counts[p] += 1
    split = Split.of(prediction.findings, static)
    grouped = len({f.node for f in split.folded})
    unjudged = f"{counts[Prediction.UNJUDGED]} unjudged" + (f" ({grouped} of them {FOLDED})" if grouped else "")
    head = (
        f"{label}: {len(prediction.nodes)} nodes: {counts[Prediction.REFUSED]} refused, {unjudged}, "
        f"{counts[Prediction.PARSE]} parse"
    )
    inputs = [p for p in prediction.inputs.values() if p != Prediction.PARSE]
    if inputs:
        head += f"; {len(inputs)} graph input(s) not predicted to parse"
    if problems:
        head += f"; {len(problems)} problem(s) of the file itself"
    lines = [head]
    for p in (Prediction.REFUSED, Prediction.UNJUDGED):
        of = [f for f in prediction.findings if f.prediction == p]
        if of:
            lines.append(f"{' ' * (len(label) - len(label.lstrip()) + 2)}{p} by {by_subject(of)}")
    return lines


def gate_totals(result: GateResult, static: frozenset[str] | None = None, label: str = "totals") -> list[str]:
    """`totals_lines` of a device gate's result (one line for a file it could not read)."""
    if result.prediction is None:
        return [f"{label}: the file was not read as a graph ({len(result.problems)} problem(s))"]
    static = static_nodes_of(result.path) if static is None else static
    return totals_lines(result.prediction, static, result.problems, label)
