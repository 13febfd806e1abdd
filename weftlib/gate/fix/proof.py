"""The proof of a fix: onnxruntime runs the original and the fixed graph on the same inputs, several sets of
them, and the largest difference on every output is held to a tolerance relative to that output's scale.

The input sets are random values of each input's type and shape (`random_feeds`, one seed per set; a
symbolic dimension takes `SYMBOLIC`) and the run's own example inputs where the caller has them. Float
outputs may differ by rounding (`RELATIVE` of the largest |value| the original gives); any other dtype must be
equal. A set the original graph itself cannot run (an index input out of its range) is named and proves
nothing; with no set left the fix is not proven.

Where the fixed graph is further than that from the original on a set, and the caller gives the exact
reference (`exact.exact_reference`: the original with the replaced nodes in float64), the set is proven when
the fixed graph is within the same `RELATIVE` of the reference: the original's own float32 rounding is then
the difference (a GroupNorm over 2M elements per group rounds by 3e-5 in onnxruntime), and the fixed graph
is no further from the exact answer than the tolerance allows the original. A wrong rewrite is far from both.
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
    exact: tuple[float | None, ...] = ()  # per set: the fixed graph against the exact reference, where run
    original_exact: tuple[float | None, ...] = ()  # per set: the original against it (its own rounding)

    def _exact(self, i: int) -> float | None:
        return self.exact[i] if i < len(self.exact) else None

    @property
    def proven(self) -> bool:
        """Every set within the tolerance of the original, or of the exact reference where that was run."""
        return bool(self.worst) and all(
            w <= self.tolerance or ((x := self._exact(i)) is not None and x <= self.tolerance)
            for i, w in enumerate(self.worst)
        )

    def summary(self) -> str:
        """In words: proven or not, the worst difference from the original, and from the exact reference
        where it was run (with the original's own distance from it)."""
        head = f"{'proven' if self.proven else 'NOT equal'}, worst {max(self.worst, default=float('inf')):.3g} of the scale"
        exact = [(x, o) for x, o in zip(self.exact, self.original_exact, strict=False) if x is not None]
        if not exact:
            return head
        x, o = max(e for e, _ in exact), max(o or 0.0 for _, o in exact)
        return f"{head} from the original, {x:.3g} from it with the replaced nodes in float64 (the original: {o:.3g})"

    def as_json(self) -> dict[str, object]:
        def row(i: int, label: str, w: float) -> dict[str, object]:
            out: dict[str, object] = {"inputs": label, "worst_relative_diff": w}
            if self._exact(i) is not None:
                out["vs_exact_reference"] = self._exact(i)
                out["original_vs_exact_reference"] = self.original_exact[i]
            return out

        return {
            "proven": self.proven,
            "tolerance": f"{self.tolerance:g} of each output's largest |value| (float) from the original, or from "
            "the original with the replaced nodes in float64 where the original's own rounding is larger; "
            "equal otherwise",
            "sets": [row(i, s, w) for i, (s, w) in enumerate(zip(self.sets, self.worst, strict=True))],
            "refused_by_the_original": list(self.refused),
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


def _reference_session(reference: str | os.PathLike | None) -> Any:
    """onnxruntime on the exact reference, None without one or where an op has no float64 kernel there."""
    if reference is None:
        return None
    try:
        return runtime.session(reference, once=True, optimize=False)
    except Exception:  # NOT_IMPLEMENTED for a float64 op: no reference, the original alone decides
        return None


def prove(
    original: str | os.PathLike,
    fixed: str | os.PathLike,
    examples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    *,
    seeds: Sequence[int] = SEEDS,
    tolerance: float = RELATIVE,
    reference: str | os.PathLike | None = None,
) -> Proof:
    """Run both graphs (as written, no onnxruntime fusions) on each input set; `examples` names more sets;
    `reference`: the exact reference, run only on a set where the fixed graph is not within `tolerance`."""
    first = runtime.session(original, once=True, optimize=False)
    second = runtime.session(fixed, once=True, optimize=False)
    exact_session: Any = False  # opened on the first set that needs it
    sets = {
        f"random seed {s}": runtime.random_feeds(first, s, symbolic=SYMBOLIC, index_range=INDEX_RANGE) for s in seeds
    } | dict(examples or {})
    names = [o.name for o in first.get_outputs()]
    ran, worst, refused = [], [], []
    exact: list[float | None] = []
    own: list[float | None] = []
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
        exact_session = (
            _reference_session(reference) if exact_session is False and worst[-1] > tolerance else exact_session
        )
        if got is not None and worst[-1] > tolerance and exact_session:
            truth = exact_session.run(names, dict(feeds))
            exact.append(_worst(truth, got))
            own.append(_worst(truth, expected))
        else:
            exact.append(None)
            own.append(None)
    return Proof(tuple(ran), tuple(worst), tolerance, tuple(refused), tuple(exact), tuple(own))
