"""The proof of a fix: onnxruntime runs the original and the fixed graph on the same inputs, several sets of
them, and the largest difference on every output is held to a tolerance relative to that output's scale.

The input sets are random values of each input's type and static shape (`cut_proof.random_feeds`, one seed
per set) and the run's own example inputs where the caller has them. Float outputs may differ by rounding
(`RELATIVE` of the largest |value| the original gives); any other dtype must be equal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...onnx_core import compare, runtime
from ..cut_proof import random_feeds

RELATIVE = 1e-5  # float32: a rewrite may reorder a sum, nothing more
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Proof:
    """The fixed graph against the original: per input set, the worst difference relative to the scale."""

    sets: tuple[str, ...]
    worst: tuple[float, ...]  # per set: max over outputs of |fixed - original| / scale (inf: shape or NaN)
    tolerance: float

    @property
    def proven(self) -> bool:
        return bool(self.worst) and max(self.worst) <= self.tolerance

    def as_json(self) -> dict[str, object]:
        return {
            "proven": self.proven,
            "tolerance": f"{self.tolerance:g} of each output's largest |value| (float); equal otherwise",
            "sets": [{"inputs": s, "worst_relative_diff": w} for s, w in zip(self.sets, self.worst, strict=True)],
        }


def _worst(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> float:
    """Max over outputs of the difference over the output's scale; exact dtypes count any difference as inf."""
    worst = 0.0
    for e, a in zip(expected, actual, strict=True):
        diff = compare.max_abs_diff([e], [a])
        if np.asarray(e).dtype.kind != "f":
            worst = max(worst, 0.0 if diff == 0 else float("inf"))
            continue
        scale = float(np.max(np.abs(e))) if np.size(e) else 0.0
        worst = max(worst, diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")))
    return worst


def prove(
    original: str | os.PathLike,
    fixed: str | os.PathLike,
    examples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    *,
    seeds: Sequence[int] = SEEDS,
    tolerance: float = RELATIVE,
) -> Proof:
    """Run both graphs (as written, no onnxruntime fusions) on each input set; `examples` names more sets."""
    sets = {f"random seed {s}": random_feeds(original, s) for s in seeds} | dict(examples or {})
    first = runtime.session(original, once=True, optimize=False)
    second = runtime.session(fixed, once=True, optimize=False)
    names = [o.name for o in first.get_outputs()]
    worst = []
    for feeds in sets.values():
        try:
            got = second.run(names, dict(feeds))
        except Exception:  # a fixed graph onnxruntime cannot run proves nothing
            worst.append(float("inf"))
            continue
        worst.append(_worst(first.run(names, dict(feeds)), got))
    return Proof(tuple(sets), tuple(worst), tolerance)
