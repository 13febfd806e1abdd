"""The proof of a fix: onnxruntime runs the original and the fixed graph on the same inputs, several sets of
them, and the largest difference on every output is held to a tolerance relative to that output's scale.

The input sets are random values of each input's type and shape (`random_feeds`, one seed per set; a
symbolic dimension takes `SYMBOLIC`) and the run's own example inputs where the caller has them. Float
outputs may differ by rounding (`RELATIVE` of the largest |value| the original gives); any other dtype must be
equal. A set the original graph itself cannot run (an index input out of its range) is named and proves
nothing; with no set left the fix is not proven.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...onnx_core import compare, runtime

RELATIVE = 1e-5  # float32: a rewrite may reorder a sum, nothing more
SEEDS = (0, 1, 2)
SYMBOLIC = 2  # the size a symbolic dimension takes in the random sets
INDEX_RANGE = 3  # integer inputs are drawn from [0, 3): most int inputs index something small


@dataclass(frozen=True)
class Proof:
    """The fixed graph against the original: per input set, the worst difference relative to the scale."""

    sets: tuple[str, ...]
    worst: tuple[float, ...]  # per set: max over outputs of |fixed - original| / scale (inf: shape or NaN)
    tolerance: float
    refused: tuple[str, ...] = ()  # sets the original graph itself could not run: they prove nothing

    @property
    def proven(self) -> bool:
        return bool(self.worst) and max(self.worst) <= self.tolerance

    def as_json(self) -> dict[str, object]:
        return {
            "proven": self.proven,
            "tolerance": f"{self.tolerance:g} of each output's largest |value| (float); equal otherwise",
            "sets": [{"inputs": s, "worst_relative_diff": w} for s, w in zip(self.sets, self.worst, strict=True)],
            "refused_by_the_original": list(self.refused),
        }


def random_feeds(session: Any, seed: int) -> dict[str, np.ndarray]:
    """Random values for every input of `session`: floats standard normal (float16/64 cast from it), ints
    in [0, INDEX_RANGE), booleans fair."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in session.get_inputs():
        shape = [d if isinstance(d, int) else SYMBOLIC for d in info.shape]
        kind = info.type[len("tensor(") : -1]
        if kind == "bool":
            feeds[info.name] = rng.random(shape) > 0.5
        elif "int" in kind:
            feeds[info.name] = rng.integers(0, INDEX_RANGE, shape).astype(np.dtype(kind))
        else:
            feeds[info.name] = rng.standard_normal(shape).astype({"float": np.float32}.get(kind, kind))
    return feeds


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
    first = runtime.session(original, once=True, optimize=False)
    second = runtime.session(fixed, once=True, optimize=False)
    sets = {f"random seed {s}": random_feeds(first, s) for s in seeds} | dict(examples or {})
    names = [o.name for o in first.get_outputs()]
    ran, worst, refused = [], [], []
    for label, feeds in sets.items():
        try:
            expected = first.run(names, dict(feeds))
        except Exception:  # the original refuses these inputs: they prove nothing either way
            refused.append(label)
            continue
        try:
            got = second.run(names, dict(feeds))
        except Exception:  # the fixed graph cannot run what the original runs: not equal
            got = None
        ran.append(label)
        worst.append(float("inf") if got is None else _worst(expected, got))
    return Proof(tuple(ran), tuple(worst), tolerance, tuple(refused))
