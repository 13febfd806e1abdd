"""The largest difference between two sets of outputs, the one comparison every proof of equality in the
suite reports (torch against natten, onnxruntime against torch, a chain of segments against its graph).
Free of torch, so the gate can use it; a CPU tensor is read as the array it holds."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def max_abs_diff(expected: Sequence[Any], actual: Sequence[Any]) -> float:
    """Largest absolute difference over matching outputs (inf on a shape mismatch or non-finite value), in
    float64. Arrays (or CPU tensors) are compared in chunks of `DIFF_CHUNK` elements: an output at NAF's
    geometry is a gigabyte, and whole float64 copies of two of them cost more in page faults than the
    arithmetic."""
    if len(expected) != len(actual):
        return float("inf")
    worst = 0.0
    for e, a in zip(expected, actual):
        e, a = _array(e), _array(a)
        if e.shape != a.shape:
            return float("inf")
        e, a = e.reshape(-1), a.reshape(-1)
        for start in range(0, e.size, DIFF_CHUNK):
            chunk = slice(start, start + DIFF_CHUNK)
            diff = np.abs(e[chunk].astype(np.float64) - a[chunk].astype(np.float64))
            if not np.all(np.isfinite(diff)):
                return float("inf")
            worst = max(worst, float(diff.max()))
    return worst


DIFF_CHUNK = 1 << 22  # elements: 32 MiB of float64 per operand


def _array(x: Any) -> np.ndarray:
    """An array or a CPU tensor as an array, without a copy."""
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
