"""Each backend's call on one geometry, built once and called as often as it is measured: the torch formulation
(`NA2d`), real natten (its Flex backend) and an onnxruntime session of an exported formulation."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from weftlib.onnx_core import compare, runtime
from weftlib.onnx_core import export as onnx_export

from . import neighborhood as attention
from .geometry import Geometry, method_args
from .reference import natten_reference


def torch_call(geom: Geometry, method: str, inputs: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    module = attention.NA2d(geom.kernel, geom.dilation, method=method).eval()
    args = method_args(geom, method, inputs)

    def run() -> torch.Tensor:
        with torch.no_grad():
            return module(*args)

    return run


def natten_call(geom: Geometry, inputs: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]

    def run() -> torch.Tensor:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Flex warns on every uncompiled call
            return natten_reference(q, k, v, geom.kernel, geom.dilation)

    return run


def ort_call(
    path: str | Path, geom: Geometry, method: str, inputs: dict[str, torch.Tensor], threads: int | None
) -> Callable[[], np.ndarray]:
    sess = runtime.session(path, threads=threads)
    feed = dict(zip(("q", "k", "v"), (t.numpy() for t in method_args(geom, method, inputs))))

    def run() -> np.ndarray:
        return onnx_export.run_onnx(sess, feed)[0]

    return run


def diff(out: Any, ref: torch.Tensor | None) -> float | None:
    return None if ref is None else compare.max_abs_diff([ref], [out])
