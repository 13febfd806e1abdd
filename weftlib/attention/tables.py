"""The tables notebook 02 shows, as rows built from the library's own records (a DataFrame takes them as they are).

Kept here so the notebook only calls and shows, and so each table's columns are one fact with a test."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from weftlib import gate
from weftlib.gate.vocabulary import Prediction

RESTS_ON_COLUMNS = ("rule", "prediction", "evidence", "inferred")


def export_summary_rows(summaries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per exported formulation (`onnx_core.inventory.summarise` of its file): size, versions, nodes, the
    largest tensors and the op inventory, as the compiler will see the graph."""
    return [
        {
            "method": method,
            "file_kib": s["file_bytes"] / 1024,
            "ir": s["ir_version"],
            "opset": s["opset"],
            "nodes": s["nodes"],
            "largest_intermediate_kib": s["largest_intermediate_bytes"] / 1024,
            "largest_initializer_kib": s["largest_initializer_bytes"] / 1024,
            "ops": ", ".join(f"{k} {v}" for k, v in s["ops"].items()),
        }
        for method, s in summaries.items()
    ]


def key_value_rows(values: Mapping[str, Any]) -> list[dict[str, str]]:
    """A mapping as two columns, each value spelled as text (nested records stay readable in one cell)."""
    return [{"": key, "value": str(value)} for key, value in values.items()]


def variant_export_rows(exports: Mapping[str, Any], reference: str) -> list[dict[str, Any]]:
    """One row per exported NAF graph (`naf_variants.VariantExport`): its module, inputs, size, nodes and
    both checks (onnxruntime against torch, torch against the `reference` formulation)."""
    return [
        {
            "graph": key,
            "module": e.graph,
            "inputs": ", ".join(f"{n} {s}" for n, s in e.report.input_shapes.items()),
            "onnx_kib": e.report.file_bytes / 1024,
            "nodes": e.report.node_count,
            "onnxruntime vs torch": e.report.max_abs_diff,
            f"torch vs {reference}": e.vs_reference,
        }
        for key, e in exports.items()
    ]


def export_summary_record(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The summaries as the run record keeps them: everything but the file's path (the run folder holds it)."""
    return {method: {k: v for k, v in s.items() if k != "path"} for method, s in summaries.items()}


def layer_rows(sources: Any, layer: Mapping[str, Any]) -> list[dict[str, str]]:
    """NAF's sources and the attention layer found in its forward (`naf.AttentionLayer.describe`), as two columns."""
    return key_value_rows({"sources": sources, **layer})


def outside_by_graph(exports: Mapping[str, Any], outside: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per exported NAF graph (`VariantExport.graph`), each op outside DEVICE_OPS -> the modules it comes from,
    from `naf_variants.outside_rows` (keyed by the export's key)."""
    rows = list(outside)
    return {e.graph: {r["op"]: r["from"] for r in rows if r["graph"] == key} for key, e in exports.items()}


def gate_by_graph(exports: Iterable[Any], results: Mapping[Any, gate.GateResult]) -> dict[str, dict[str, Any]]:
    """Each exported graph's prediction under its name (`exports` carry `name` and `path`): the verdict, the
    rules and ops refusing it with what they rest on, and the causes that leave it unjudged."""
    return {
        e.name: {
            "verdict": results[e.path].verdict,
            "refused_by": gate.reasons(results[e.path]),
            "unjudged_by": gate.blocking(results[e.path], Prediction.UNJUDGED, causes_only=True),
        }
        for e in exports
    }


def rests_on_rows(results: Iterable[gate.GateResult]) -> list[dict[str, Any]]:
    """Every distinct judgement the graphs' predictions rest on, once, sorted: the rule (or "op <type>" for an
    op's own standing), its prediction, its evidence and whether it rests on an inference."""
    judged = {
        (f.subject, f.prediction, f.evidence, f.inferred)
        for r in results
        if r.prediction is not None
        for f in r.prediction.judgements
    }
    return [dict(zip(RESTS_ON_COLUMNS, row)) for row in sorted(judged)]


def _by_method(methods: Iterable[str], paths: Iterable[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for method, path in zip(methods, paths):
        grouped.setdefault(method, []).append(path)
    return dict(sorted(grouped.items()))


def verdicts_by_method(
    methods: Iterable[str], paths: Iterable[str], results: Mapping[Any, gate.GateResult]
) -> dict[str, list[str]]:
    """Formulation -> the distinct verdicts of its graphs (one per geometry), sorted."""
    return {m: sorted({results[p].verdict for p in ps}) for m, ps in _by_method(methods, paths).items()}


def refusals_by_method(
    methods: Iterable[str], paths: Iterable[str], results: Mapping[Any, gate.GateResult]
) -> dict[str, list[str]]:
    """Formulation -> every rule or op that refuses any of its graphs, sorted."""
    return {
        m: sorted({r for p in ps for r in gate.reasons(results[p])}) for m, ps in _by_method(methods, paths).items()
    }


def _modules_text(modules: str) -> str:
    """ "a.b.x, a.b.y" -> "a.b: x, y": the modules' common dotted prefix said once."""
    names = [m.strip() for m in modules.split(",") if m.strip()]
    if len(names) < 2:
        return ", ".join(names)
    parts = [n.split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    if not common:
        return ", ".join(names)
    return ".".join(parts[0][:common]) + ": " + ", ".join(".".join(p[common:]) for p in parts)


def outside_text(rows: Iterable[dict[str, Any]]) -> str:
    """`naf_variants.outside_rows` as one phrase: "Cos x1 (image_encoder.rope), GatherND x2 (upsampler), ..."."""
    return ", ".join(f"{r['op']} x{r['count']} ({_modules_text(r['from'])})" for r in rows) or "none"
