"""The flow model exported exactly as written, by each exporter torch offers (dynamo, TorchScript): the first
question RFD 1129 asks of the block, answered before any patch or rewrite. A refusal is the finding, so it is
kept as data (its first error line, of the innermost cause), never raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from weftlib.onnx_core import export as onnx_export

from .model import FlatInputs, flat


@dataclass(frozen=True)
class ExportAttempt:
    exporter: str
    ok: bool
    error: str
    seconds: float


EXPORTERS = {"dynamo": True, "torchscript": False}


def try_exports(model: nn.Module, inputs: Sequence[Any], *, opset: int = 17) -> dict[str, ExportAttempt]:
    """Each exporter torch offers (dynamo, TorchScript) on the model exactly as written; a refusal is kept as
    its first error line (of the innermost cause), never raised."""
    module, args = FlatInputs(model).eval(), flat(inputs)
    attempts = {}
    for name, dynamo in EXPORTERS.items():
        ok, error, seconds = onnx_export.attempt(module, args, dynamo=dynamo, opset=opset)
        attempts[name] = ExportAttempt(name, ok, error, seconds)
    return attempts
