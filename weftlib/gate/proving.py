"""A small graph proven before anyone reads a verdict off it: checker-clean, and run once in onnxruntime
with every float output finite.

A broken probe handed to the DFC would read as a refusal (weftspun/rf-detr-cpp scripts/gen_op_tests.py), and a
rule's example or a rebuilt public-record graph that does not run proves nothing. The run goes through the
suite's one session maker (`onnx_core.runtime.session`) on the cut proof's random inputs
(`cut_proof.random_feeds`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx

from ..onnx_core import runtime
from .cut_proof import random_feeds


def run_once(model: onnx.ModelProto, seed: int = 1) -> list[np.ndarray]:
    """Run `model` once in onnxruntime on random inputs of its input shapes (a dimension that is not a
    positive number reads 1); its outputs."""
    with tempfile.TemporaryDirectory(prefix="weftlib-run-once-") as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        static = _static_inputs(model)
        shapes = path if static is None else Path(tmp) / "static_inputs.onnx"
        if static is not None:
            onnx.save(static, str(shapes))
        feeds = random_feeds(shapes, seed)
        return list(runtime.session(path, once=True).run(None, feeds))


def _static_inputs(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of `model` whose inputs' symbolic, unknown or zero dimensions read 1, for `random_feeds`, which
    takes static shapes only; None when every input dimension is a positive number already."""
    dims = [d for i in model.graph.input for d in i.type.tensor_type.shape.dim]
    if all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return None
    static = onnx.ModelProto()
    static.CopyFrom(model)
    for info in static.graph.input:
        for d in info.type.tensor_type.shape.dim:
            if not (d.HasField("dim_value") and d.dim_value > 0):
                d.dim_value = 1
    return static


def prove(model: onnx.ModelProto) -> None:
    """Checker-clean and run once in onnxruntime with finite float outputs, or an error."""
    onnx.checker.check_model(model, full_check=True)
    if not all(np.isfinite(o).all() for o in run_once(model) if np.issubdtype(o.dtype, np.floating)):
        raise ValueError("non-finite output in onnxruntime")
