"""A cut proven equal on the host: the whole graph and the chain of its segments run in onnxruntime on the same
random inputs, and the largest difference on any graph output held to a tolerance.

A cut of one segment is the graph itself when its file says so (`same_graph`: every node, weight, input and output
the same): it is proven by reading the two files, nothing run (at NAF's 512² a run is seconds per graph).

Where a run of the whole graph was already made with exactly the chain's arithmetic (onnxruntime as written, on
that very file: `Reference`, e.g. 02's recorded run of a NAF graph at 512², where one run of the graph is most
of a minute), the chain runs on that run's inputs and is held to its outputs instead: the same comparison, the
graph not run again. The partition says which reference its proof used (`Partition.held_to`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from dataclasses import replace as with_fields
from pathlib import Path

import numpy as np

from ...onnx_core import compare, runtime
from . import same_graph
from .segments import TOLERANCE, HeldTo, Partition, Segment

SegmentRun = Callable[[Segment, Path, dict[str, np.ndarray]], tuple[list[str], list[np.ndarray]] | None]


def _session(path: Path):
    return runtime.session(path, once=True, optimize=False)


def _run_once(path: Path, inputs: Mapping[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    """One segment run as written (optimisations off), its session let go at once."""
    session = _session(path)
    names = [o.name for o in session.get_outputs()]
    return names, session.run(names, dict(inputs))


def random_feeds(model_path: str | os.PathLike, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for every graph input of the file, of its type and shape (`runtime.random_feeds`)."""
    return runtime.random_feeds(_session(Path(model_path)), seed)


def run_chain(
    part: Partition,
    folder: str | os.PathLike,
    feeds: Mapping[str, np.ndarray],
    replace: Mapping[str, np.ndarray] | None = None,
    outputs: Iterable[str] | None = None,
    visit: Callable[[Segment, dict[str, np.ndarray]], None] | None = None,
    run: SegmentRun | None = None,
) -> dict[str, np.ndarray]:
    """Every tensor the chain hands on, segment by segment; `replace` overrides a handed tensor (a broken
    edge, for the negative control). Given `outputs`, only those are returned, and each other tensor is let
    go once no later segment reads it: at NAF's geometry one handed tensor is a gigabyte, and a graph cut
    into dozens of segments would otherwise hold all of them at once. `visit(segment, inputs)` sees each
    segment's inputs as the chain hands them, before it runs (a segment's timing needs real values: a shape
    handed on as a tensor cannot be random). `run(segment, file, inputs)`, where it returns (names, values),
    runs that segment instead of the chain's own session (the host timing's session, whose first call is its
    warm-up); where it returns None the chain runs the segment as written."""
    env = dict(feeds)
    segments = list(part.segments)
    keep = None if outputs is None else set(outputs)
    for i, s in enumerate(segments):
        inputs = {t: env[t] for t in s.inputs}
        if visit is not None:
            visit(s, inputs)
        ran = run(s, Path(folder) / s.file, inputs) if run is not None else None
        names, values = ran if ran is not None else _run_once(Path(folder) / s.file, inputs)
        env.update(zip(names, values))
        for t, v in (replace or {}).items():
            if t in names:
                env[t] = v
        if keep is not None:
            later = keep.union(*(later_s.inputs for later_s in segments[i + 1 :]))
            env = {t: v for t, v in env.items() if t in later}
    return env


@dataclass(frozen=True)
class Reference:
    """A run of the whole graph already made with the chain's arithmetic: the very file the cut was made of (the
    caller checks that), run by onnxruntime as written, on `inputs`, giving `outputs` (every graph output, by
    name). `source` names it in words, for the partition."""

    inputs: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    source: str


def prove(
    part: Partition,
    original: str | os.PathLike,
    folder: str | os.PathLike,
    *,
    tolerance: float = TOLERANCE,
    seed: int = 0,
    replace: Mapping[str, np.ndarray] | None = None,
    reference: Reference | None = None,
    why_fresh: str = "",
) -> Partition:
    """Run the chain of segments and the whole graph on the same random inputs, or the chain alone on the inputs
    of `reference`, held to its outputs; the largest difference on any graph output, against `tolerance`.
    `why_fresh`: why no reference was given (a record refused), kept with the fresh run's words."""
    if reference is None:
        feeds = random_feeds(original, seed)
        session = _session(Path(original))
        names = [o.name for o in session.get_outputs()]
        whole = dict(zip(names, session.run(names, feeds)))
        del session
        held, note = HeldTo.FRESH, f"seed {seed}" + (f"; no recorded run: {why_fresh}" if why_fresh else "")
    else:
        feeds, whole = dict(reference.inputs), dict(reference.outputs)
        names = list(whole)
        held, note = HeldTo.RECORDED, reference.source
    chained = run_chain(part, folder, feeds, replace, outputs=names)
    diff = compare.max_abs_diff([whole[n] for n in names], [chained[n] for n in names])
    return with_fields(part, max_abs_diff=diff, tolerance=tolerance, held_to=held, held_to_note=note)


def prove_by_reading(
    part: Partition, original: str | os.PathLike, folder: str | os.PathLike, tolerance: float = TOLERANCE
) -> Partition | None:
    """The cut proven without running it where it is one segment that is the graph itself (`same_graph`): no
    tensor crosses, so its chain is the graph; None where it has more segments or its file differs (the chain
    is then run, `prove`)."""
    if len(part.segments) != 1 or same_graph.difference(Path(folder) / part.segments[0].file, original):
        return None
    file = part.segments[0].file
    return with_fields(part, max_abs_diff=0.0, tolerance=tolerance, held_to=HeldTo.IDENTICAL, held_to_note=file)
