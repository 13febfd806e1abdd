"""The proof of a fix: onnxruntime runs the original and the fixed graph on the same inputs, several sets of
them, and every output is compared, the non-finite values included.

The input sets (`sets`) are random values of each input's type and shape, one seed per set, and the run's own
example inputs where the caller has them. Float outputs may differ by rounding (`RELATIVE` of the largest
finite |value| the original gives); a NaN or an inf must be the same value in the same place (`difference`);
any other dtype must be equal. A set the original graph itself cannot run (an index input out of its range) is
named and proves nothing.

Three things are required before a fixed graph is proven, and a proof that finds no difference but misses one
of them is unjudged, not proven:
- every output is proven by some set on which the original's value is finite (a set where the original
  itself gives NaN or inf for an output can still refute, never prove, that output: `original_not_finite`);
- every rewritten node is reached: run by some set, read from onnxruntime's profile of each call (`reach`).
  A rewrite inside an If branch or a Loop body the inputs never take is unreached;
- a set was run at all.
Where the first sets leave an output unproven or a node unreached, the varied sets (`sets.varied_sets`:
inputs pushed positive, negative, zero, large, small, more seeds) are tried before giving up.

Where the fixed graph is further than the tolerance from the original on a set, and the caller gives the exact
reference (`exact.exact_reference`: the original with the replaced nodes in float64), the set is within it
when the fixed graph is within the same `RELATIVE` of the reference: the original's own float32 rounding is
then the difference (a GroupNorm over 2M elements per group rounds by 3e-5 in onnxruntime), and the fixed graph
is no further from the exact answer than the tolerance allows the original. A wrong rewrite is far from both.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...onnx_core import runtime
from ..vocabulary import ProofVerdict
from .reach import Profiled
from .sets import THE_ORIGINAL, Geometry, Plan, SetOrigin, random_sets, shapes_text, varied_sets

RELATIVE = 1e-5  # float32: a rewrite may reorder a sum, nothing more
SEEDS = (0, 1, 2)
CHUNK = 1 << 22  # elements compared at a time: an output at NAF's geometry is a gigabyte


def difference(expected: Any, actual: Any) -> float:
    """|actual - expected| over the largest finite |expected|, for one output: inf where the shapes or dtypes
    differ, where a NaN or an inf is not the same value in the same place, or (exact dtypes) any difference."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype:
        return float("inf")
    if e.dtype.kind not in "fc":
        return 0.0 if np.array_equal(e, a) else float("inf")
    e, a = e.reshape(-1), a.reshape(-1)
    diff = scale = 0.0
    for start in range(0, e.size, CHUNK):
        x, y = e[start : start + CHUNK], a[start : start + CHUNK]
        finite = np.isfinite(x)
        if not np.array_equal(finite, np.isfinite(y)):
            return float("inf")
        if not finite.all():
            xs, ys = x[~finite], y[~finite]
            nan = np.isnan(xs)
            if not np.array_equal(nan, np.isnan(ys)) or not np.array_equal(xs[~nan], ys[~nan]):
                return float("inf")
            x, y = x[finite], y[finite]
        if x.size:
            diff = max(diff, float(np.max(np.abs(np.subtract(x, y, dtype=np.float64)))))
            scale = max(scale, float(np.max(np.abs(x))))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def _not_finite(output: Any) -> bool:
    """Whether a float output holds a NaN or an inf anywhere."""
    a = np.asarray(output)
    if a.dtype.kind not in "fc":
        return False
    flat = a.reshape(-1)
    return any(not np.isfinite(flat[start : start + CHUNK]).all() for start in range(0, flat.size, CHUNK))


def _worst(expected: Sequence[Any], actual: Sequence[Any]) -> float:
    """Max over outputs of `difference`."""
    return max((difference(e, a) for e, a in zip(expected, actual, strict=True)), default=0.0)


@dataclass(frozen=True)
class Proof:
    """The fixed graph against the original: per input set, the worst difference relative to the scale, and what
    no set proved."""

    sets: tuple[str, ...]
    worst: tuple[float, ...]  # per set: max over outputs of `difference` (inf: shape, NaN or inf not matching)
    tolerance: float
    refused: tuple[str, ...] = ()  # sets the original graph itself could not run: they prove nothing
    exact: tuple[float | None, ...] = ()  # per set: the fixed graph against the exact reference, where run
    original_exact: tuple[float | None, ...] = ()  # per set: the original against it (its own rounding)
    original_not_finite: tuple[tuple[str, ...], ...] = ()  # per set: outputs the original gave NaN or inf
    unproven: tuple[str, ...] = ()  # outputs no set proved (the original not finite on every set)
    unreached: tuple[str, ...] = ()  # rewritten nodes no set ran
    reached_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # nested rewritten node -> sets
    not_run: str = ""  # why the graphs were never run (INVALID, NO_REWRITE)
    unchanged: bool = False  # no rewrite: the fixed graph is the original
    origins: tuple[SetOrigin, ...] = ()  # per set: its geometry, where its inputs and its reference came from
    plan: Plan = Plan.FULL
    plan_note: str = ""  # why this plan (a recorded run missing or not fitting: the full proof instead)

    @classmethod
    def skipped(cls, why: str, tolerance: float = RELATIVE, *, unchanged: bool = False) -> Proof:
        """No proof run: the fixed graph is the original (`unchanged`), or it is not a valid graph (`why`)."""
        return cls((), (), tolerance, not_run=why, unchanged=unchanged)

    def _exact(self, i: int) -> float | None:
        return self.exact[i] if i < len(self.exact) else None

    def _within(self, i: int) -> bool:
        x = self._exact(i)
        return self.worst[i] <= self.tolerance or (x is not None and x <= self.tolerance)

    @property
    def verdict(self) -> ProofVerdict:
        if self.unchanged:
            return ProofVerdict.NO_REWRITE
        if self.not_run:
            return ProofVerdict.INVALID
        if not all(self._within(i) for i in range(len(self.worst))):
            return ProofVerdict.NOT_EQUAL
        if not self.sets or self.unproven or self.unreached:
            return ProofVerdict.UNJUDGED
        return ProofVerdict.PROVEN

    @property
    def proven(self) -> bool:
        """Every output proven and every rewritten node reached, no set beyond the tolerance (of the original, or
        of the exact reference where that was run)."""
        return self.verdict == ProofVerdict.PROVEN

    def summary(self) -> str:
        """In words: the verdict, the worst difference from the original, and from the exact reference where it
        was run (with the original's own distance from it), then what no set proved."""
        if self.not_run:
            return f"{self.verdict}: {self.not_run}"
        head = f"{self.verdict}, worst {max(self.worst, default=float('inf')):.3g} of the scale"
        exact = [(x, o) for x, o in zip(self.exact, self.original_exact, strict=False) if x is not None]
        if exact:
            x, o = max(e for e, _ in exact), max(o or 0.0 for _, o in exact)
            head += f" from the original, {x:.3g} from it with the replaced nodes in float64 (the original: {o:.3g})"
        notes = []
        if not self.sets:
            notes.append("no input set ran" + (f" ({self.refused[0]})" if len(self.refused) == 1 else ""))
        blind = sum(1 for outs in self.original_not_finite if outs)
        if blind:
            notes.append(f"{blind} of {len(self.sets)} sets give NaN or inf in the original and prove nothing there")
        if self.unproven:
            notes.append(f"no set proved output(s) {', '.join(self.unproven)}")
        if self.unreached:
            notes.append(f"no set ran rewritten node(s) {', '.join(self.unreached)}")
        return "; ".join([head, *notes])

    def as_json(self) -> dict[str, object]:
        def row(i: int, label: str, w: float) -> dict[str, object]:
            out: dict[str, object] = {"inputs": label, "worst_relative_diff": w}
            out |= self.origins[i].as_json() if i < len(self.origins) else {}
            out["original_not_finite"] = list(self.original_not_finite[i]) if i < len(self.original_not_finite) else []
            if self._exact(i) is not None:
                out["vs_exact_reference"] = self._exact(i)
                out["original_vs_exact_reference"] = self.original_exact[i]
            return out

        return {
            "proven": self.proven,
            "verdict": str(self.verdict),
            "plan": str(self.plan),
            "plan_note": self.plan_note,
            "tolerance": f"{self.tolerance:g} of each output's largest finite |value| (float) from the original, or "
            "from the original with the replaced nodes in float64 where the original's own rounding is larger; "
            "NaN and inf the same value in the same place; equal otherwise",
            "sets": [row(i, s, w) for i, (s, w) in enumerate(zip(self.sets, self.worst, strict=True))],
            "refused_by_the_original": list(self.refused),
            "outputs_no_set_proved": list(self.unproven),
            "rewritten_nodes_no_set_ran": list(self.unreached),
            "reached_by": {node: list(sets) for node, sets in self.reached_by.items()},
            "not_run": self.not_run,
        }


def _reference_session(reference: str | os.PathLike | None) -> Any:
    """onnxruntime on the exact reference, None without one or where an op has no float64 kernel there."""
    if reference is None:
        return None
    try:
        return runtime.session(reference, once=True, optimize=False)
    except Exception:  # NOT_IMPLEMENTED for a float64 op: no reference, the original alone decides
        return None


@dataclass
class _Run:
    """What the proof has found so far, set by set."""

    names: list[str]
    tolerance: float
    reference: str | os.PathLike | None
    sets: list[str] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    exact: list[float | None] = field(default_factory=list)
    own: list[float | None] = field(default_factory=list)
    blind: list[tuple[str, ...]] = field(default_factory=list)
    reached: dict[str, list[str]] = field(default_factory=dict)
    exact_session: Any = False  # opened on the first set that needs it
    origins: list[SetOrigin] = field(default_factory=list)

    def judge(
        self, label: str, expected: list[Any], got: list[Any] | None, feeds: dict[str, Any], origin: SetOrigin
    ) -> None:
        self.sets.append(label)
        self.origins.append(origin)
        self.worst.append(float("inf") if got is None else _worst(expected, got))
        self.blind.append(tuple(n for n, e in zip(self.names, expected, strict=True) if _not_finite(e)))
        far = got is not None and self.worst[-1] > self.tolerance
        if far and self.exact_session is False:
            self.exact_session = _reference_session(self.reference)
        if far and self.exact_session:
            truth = self.exact_session.run(self.names, feeds)
            self.exact.append(_worst(truth, got or []))
            self.own.append(_worst(truth, expected))
        else:
            self.exact.append(None)
            self.own.append(None)

    def unproven(self) -> list[str]:
        return [n for n in self.names if all(n in blind for blind in self.blind)]

    def refuted(self) -> bool:
        proof = Proof(tuple(self.sets), tuple(self.worst), self.tolerance, exact=tuple(self.exact))
        return proof.verdict == ProofVerdict.NOT_EQUAL

    def proof(self, wanted: Collection[str]) -> Proof:
        """The record of what was found, with the rewritten nodes `wanted` reached or not."""
        return Proof(
            tuple(self.sets),
            tuple(self.worst),
            self.tolerance,
            tuple(self.refused),
            tuple(self.exact),
            tuple(self.own),
            tuple(self.blind),
            tuple(self.unproven()),
            tuple(sorted(set(wanted) - set(self.reached))),
            {node: tuple(self.reached.get(node, ())) for node in sorted(wanted)},
            origins=tuple(self.origins),
        )


def _open(path: str | os.PathLike, folder: Path, profile: bool) -> Profiled | None:
    """A session on `path`, profiled when `profile`; None where onnxruntime cannot open it."""
    try:
        return Profiled(path, folder, profile=profile)
    except Exception:  # onnxruntime refuses the graph (a kernel it has not got)
        return None


def _phase(
    run: _Run,
    first: Any,
    paths: Sequence[str | os.PathLike],
    sets: Mapping[str, Mapping[str, Any]],
    nested: Sequence[Collection[str]],
    folder: Path,
    origin: Callable[[str, Mapping[str, Any]], SetOrigin] | None = None,
    keep: dict[str, list[Any]] | None = None,
) -> None:
    """Run `sets` through the original (`first`) and the graphs at `paths` (the fixed graph, then the named
    original where nested replaced nodes need reaching), profiled; record each set, where it came from (`origin`,
    by default a set at full geometry held to the original), and which nodes of `nested` (one collection per
    path) each set ran; `keep`, where given, takes the fixed graph's outputs per set label. A fixed graph
    onnxruntime cannot open differs on every set the original runs; a graph that cannot be opened reaches
    nothing."""
    origin = origin or (lambda label, feeds: SetOrigin(Geometry.FULL, shapes_text(feeds), label))
    sessions = [_open(p, folder, bool(wanted)) for p, wanted in zip(paths, nested, strict=True)]
    calls: list[list[str]] = [[] for _ in paths]  # per profiled session: the label of each call
    for label, given in sets.items():
        feeds = dict(given)
        try:
            expected = first.run(run.names, feeds)
        except Exception:  # the original refuses these inputs: they prove nothing either way
            run.refused.append(label)
            continue
        got = None
        for i, session in enumerate(sessions):
            if session is None:
                continue
            calls[i].append(label)
            try:
                outputs = session.run(run.names, feeds)
            except Exception:  # the fixed graph cannot run what the original runs: not equal
                outputs = None
            got = outputs if i == 0 else got
        if keep is not None and got is not None:
            keep[label] = got
        run.judge(label, expected, got, feeds, origin(label, feeds))
    for session, labels, wanted in zip(sessions, calls, nested, strict=True):
        for label, ran in zip(labels, session.ran() if session else [], strict=True):
            for node in set(wanted) & ran:
                run.reached.setdefault(node, []).append(label)


def prove(
    original: str | os.PathLike,
    fixed: str | os.PathLike,
    examples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    *,
    seeds: Sequence[int] = SEEDS,
    tolerance: float = RELATIVE,
    reference: str | os.PathLike | None = None,
    produced: Collection[str] = (),
    replaced: Collection[str] = (),
    named: str | os.PathLike | None = None,
    scratch: str | os.PathLike | None = None,
) -> Proof:
    """Run both graphs (as written, no onnxruntime fusions) on each input set; `examples` names more sets (held
    to the graph's inputs by the caller: `sets.mismatch`); `reference`: the exact reference, run only on a set
    where the fixed graph is not within `tolerance`.

    The rewritten nodes to reach: `produced`, nodes of `fixed` inside a subgraph, and `replaced`, nodes of
    `named` (the original with its nodes named, as the rewrites read it) inside a subgraph; a node of the main
    graph runs on every call. Profiles go to `scratch` (a temporary folder of its own when None, removed on
    return or interrupt)."""
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="weftlib-proof-") as folder:
            return prove(
                original,
                fixed,
                examples,
                seeds=seeds,
                tolerance=tolerance,
                reference=reference,
                produced=produced,
                replaced=replaced,
                named=named,
                scratch=folder,
            )
    wanted = set(produced) | set(replaced)
    try:
        first = runtime.session(original, once=True, optimize=False)
    except Exception as exc:  # onnxruntime cannot open the original: no set runs, nothing is judged
        why = next(iter(str(exc).splitlines()), type(exc).__name__)[:300]
        refused = (f"every set: onnxruntime cannot open the original ({why})",)
        return Proof((), (), tolerance, refused, unreached=tuple(sorted(wanted)))
    run = _Run([o.name for o in first.get_outputs()], tolerance, reference)
    paths: list[str | os.PathLike] = [fixed, *([named] if replaced and named is not None else [])]
    nested = [set(produced), set(replaced)][: len(paths)]
    first_sets = random_sets(first, list(seeds)) | dict(examples or {})
    _phase(run, first, paths, first_sets, nested, Path(scratch))
    if not run.refuted() and (run.unproven() or wanted - set(run.reached) or not run.sets):
        _phase(run, first, paths, varied_sets(first), nested, Path(scratch))
    return run.proof(wanted)


class _Recorded:
    """The original's outputs as its exporter recorded them, answering the one call on the recorded inputs in
    place of a session on the original (at full geometry that run is the proof's largest cost)."""

    def __init__(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        self.inputs, self.outputs = inputs, outputs

    def run(self, names: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        if set(feeds) != set(self.inputs) or any(feeds[n] is not self.inputs[n] for n in feeds):
            raise ValueError("the recorded outputs answer the recorded inputs only")
        return [self.outputs[n] for n in names]


def prove_on_record(
    fixed: str | os.PathLike,
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray],
    origin: SetOrigin,
    *,
    tolerance: float = RELATIVE,
    reference: str | os.PathLike | None = None,
    produced: Collection[str] = (),
    replaced: Collection[str] = (),
    named: str | os.PathLike | None = None,
    scratch: str | os.PathLike,
    keep: dict[str, np.ndarray] | None = None,
) -> Proof:
    """The fixed graph on one recorded set (`inputs`), held to the original's recorded `outputs` (every output of
    the graph, by name) as `prove` holds it to the original's run: the same tolerance, the same exact reference
    where it is further, the same nested nodes to reach. The original itself is run only where replaced nodes
    inside a subgraph must be reached (`named`). `keep`, where given, takes the fixed graph's outputs there, by
    name (run as written: what 06 holds the fixed graph's cut to, `recorded.write_run`)."""
    run = _Run(list(outputs), tolerance, reference)
    wanted = set(produced) | set(replaced)
    paths: list[str | os.PathLike] = [fixed, *([named] if replaced and named is not None else [])]
    nested = [set(produced), set(replaced)][: len(paths)]
    got: dict[str, list[Any]] = {}
    recorded = {origin.inputs: inputs}
    _phase(run, _Recorded(inputs, outputs), paths, recorded, nested, Path(scratch), lambda *_: origin, got)
    if keep is not None and origin.inputs in got:
        keep.update(zip(run.names, got[origin.inputs], strict=True))
    return run.proof(wanted)


def joined(full: Proof, reduced: Proof, note: str) -> Proof:
    """One proof of `Plan.RECORDED` from the recorded set at full geometry and the sets at the reduced one: every
    set of both, an output unproven only where no set of either proved it, a rewritten node unreached where
    either graph's sets left its own unreached."""
    reduced_origins = tuple(
        SetOrigin(Geometry.REDUCED, o.shapes, o.inputs, o.reference) for o in reduced.origins
    ) or tuple(SetOrigin(Geometry.REDUCED, "", s, THE_ORIGINAL) for s in reduced.sets)
    reached = {f"{node} (full)": sets for node, sets in full.reached_by.items()}
    reached |= {f"{node} (reduced)": sets for node, sets in reduced.reached_by.items()}
    return Proof(
        full.sets + reduced.sets,
        full.worst + reduced.worst,
        full.tolerance,
        full.refused + reduced.refused,
        _padded(full.exact, full.sets) + _padded(reduced.exact, reduced.sets),
        _padded(full.original_exact, full.sets) + _padded(reduced.original_exact, reduced.sets),
        _padded(full.original_not_finite, full.sets, ()) + _padded(reduced.original_not_finite, reduced.sets, ()),
        tuple(sorted(set(full.unproven) & set(reduced.unproven))),
        tuple(sorted({*full.unreached, *reduced.unreached})),
        reached,
        origins=full.origins + reduced_origins,
        plan=Plan.RECORDED,
        plan_note=note,
    )


def _padded(values: tuple[Any, ...], sets: tuple[str, ...], fill: Any = None) -> tuple[Any, ...]:
    """`values` one per set (a proof's per-set tuples may stop short where nothing was run)."""
    return values + (fill,) * (len(sets) - len(values))
