"""A small graph proven before anyone reads a verdict off it: checker-clean, and run once in onnxruntime
with every float output finite.

A broken probe handed to the DFC would read as a refusal (weftspun/rf-detr-cpp scripts/gen_op_tests.py), and a
rule's example or a rebuilt public-record graph that does not run proves nothing. The run goes through the
suite's one session maker (`onnx_core.runtime.session`) on its random inputs
(`onnx_core.runtime.random_feeds`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx

from ...onnx_core import runtime


def run_once(model: onnx.ModelProto, seed: int = 1) -> list[np.ndarray]:
    """Run `model` once in onnxruntime on random inputs of its input shapes (a dimension that is not a
    positive number reads 1); its outputs."""
    with tempfile.TemporaryDirectory(prefix="weftlib-run-once-") as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        session = runtime.session(path, once=True)
        return list(session.run(None, runtime.random_feeds(session, seed)))


def prove(model: onnx.ModelProto) -> None:
    """Checker-clean and run once in onnxruntime with finite float outputs, or an error."""
    onnx.checker.check_model(model, full_check=True)
    if not all(np.isfinite(o).all() for o in run_once(model) if np.issubdtype(o.dtype, np.floating)):
        raise ValueError("non-finite output in onnxruntime")
