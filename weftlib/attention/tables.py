"""The tables notebook 02 shows, as rows built from the library's own records (a DataFrame takes them as they are).

Kept here so the notebook only calls and shows, and so each table's columns are one fact with a test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def export_summary_rows(summaries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per exported formulation (`onnx_core.export.summarise` of its file): size, versions, nodes, the
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
