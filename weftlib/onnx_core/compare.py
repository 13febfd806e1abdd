"""The largest difference between two sets of outputs, the one comparison every proof of equality in the
suite reports (torch against natten, onnxruntime against torch, a chain of segments against its graph).
Free of torch, so the gate can use it; a CPU tensor is read as the array it holds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def max_abs_diff(expected: Sequence[Any], actual: Sequence[Any], *, strict: bool = False) -> float:
    """Largest absolute difference over matching outputs (inf on a count or shape mismatch or a non-finite
    value), in float64. `strict` raises ValueError instead of answering inf: a claim that two outputs differ
    (a control) must not be met by a wrong shape or a NaN. Arrays (or CPU tensors) are compared in blocks of
    about `DIFF_CHUNK` elements (`_blocks`): an output at NAF's geometry is a gigabyte, and whole float64
    copies of two of them cost more in page faults than the arithmetic."""

    def mismatch(why: str) -> float:
        if strict:
            raise ValueError(why)
        return float("inf")

    if len(expected) != len(actual):
        return mismatch(f"{len(expected)} outputs against {len(actual)}")
    worst = 0.0
    for exp, act in zip(expected, actual, strict=True):
        e, a = _array(exp), _array(act)
        if e.shape != a.shape:
            return mismatch(f"shapes differ: {e.shape} vs {a.shape}")
        if not e.size:
            continue
        for block in _blocks(e, a):
            diff = np.atleast_1d(np.subtract(e[block], a[block], dtype=np.float64))
            np.abs(diff, out=diff)
            if not np.all(np.isfinite(diff)):
                return mismatch("a difference is not finite (NaN or inf in an output)")
            worst = max(worst, float(diff.max()))
    return worst


DIFF_CHUNK = 1 << 22  # elements: 32 MiB of float64 per operand


def _blocks(*arrays: np.ndarray) -> Iterator[tuple[Any, ...]]:
    """Index blocks of about `DIFF_CHUNK` elements covering arrays of one shape, each a slice of the axis
    that is outermost in memory for the arrays that are not C-ordered (the first axis when all are), so a
    block of a transposed view (NAF's output is a permuted `[B, H, W, C]`) is read in long runs, not one
    element per cache line."""
    shape = arrays[0].shape
    if not shape:
        yield (Ellipsis,)  # a 0-d array stays an array
        return
    strided = [x for x in arrays if not x.flags.c_contiguous] or list(arrays)
    axis = max(range(len(shape)), key=lambda i: (shape[i] > 1, max(abs(x.strides[i]) for x in strided), -i))
    inner = int(np.prod(shape)) // max(shape[axis], 1)
    step = max(1, DIFF_CHUNK // max(inner, 1))
    before = (slice(None),) * axis
    for start in range(0, shape[axis], step):
        yield (*before, slice(start, start + step))


def _array(x: Any) -> np.ndarray:
    """An array or a CPU tensor as an array, without a copy."""
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
