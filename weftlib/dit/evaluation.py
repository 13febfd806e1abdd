"""The pipeline each variant goes through before notebook 04 judges it: its torch output compared with the
model as written, its export, the device gate on the file and the ranks its inputs ended with. Kept apart from
building the variants (`variants`) so that one call answers "what does each graph leave outside DEVICE_OPS".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from weftlib import console
from weftlib.onnx_core import compare
from weftlib.onnx_core import export as onnx_export

from .graph_reading import input_ranks
from .variants import Variant, export_variant


@dataclass
class VariantResult:
    """One exported variant: its equality with the model as written, the export, the gate, the input ranks."""

    name: str
    changes: tuple[str, ...]
    layout: str
    max_abs_diff: float  # against the unpatched model's output (complex RoPE, sdpa), in torch
    report: onnx_export.ExportReport
    verdict: Any  # weftlib.gate.GateResult
    ranks: dict[str, int]

    @property
    def outside(self) -> list[str]:
        return sorted(self.verdict.outside)


def evaluate(
    variants: Sequence[Variant],
    folder: str | Path,
    reference: torch.Tensor,
    ops: Any,
    *,
    opset: int = 17,
    atol: float = 1e-4,
    prefix: str = "dit",
    workers: int | None = None,
) -> list[VariantResult]:
    """Export each variant into `folder` (files `onnx_name(variant.name, prefix)`), compare its torch output
    with `reference`, run the device gate (`ops`: a `weftlib.gate.DeviceOps`) and read its input ranks; the
    variants run `workers` at a time (`onnx_export.in_forks`; default: one per CPU), each export being
    mostly single-threaded tracing."""
    from weftlib import gate

    # here, on the reference's threads: a variant that only moves values must equal it bit for bit, and a
    # worker's single thread would sum the same products in another order
    diffs = {v.name: compare.max_abs_diff([v.output()], [reference], strict=True) for v in variants}

    def one(variant: Variant) -> VariantResult:
        report = export_variant(variant, folder, prefix=prefix, opset=opset, atol=atol)
        return VariantResult(
            variant.name,
            variant.changes,
            variant.layout,
            diffs[variant.name],
            report,
            gate.device_gate(report.path, ops),
            input_ranks(report.path),
        )

    bar = console.progress(None, total=len(variants), desc="DiT variants", unit="graph")
    results = onnx_export.in_forks(one, list(variants), workers, progress=lambda _: bar.update(1))
    bar.close()
    return results
