"""The host's side, measured here: the whole graph and each host segment of its cut run in onnxruntime (its
default optimisations and threads, as a deployment would run them; its memory plan off, `runtime.session`: with
it, the one timed call after the warm-up paid for the plan's block, 7.2 s where the steady call takes 4.2 s on
NAF's upsampler at 512²), each the median of repeats, one session at
a time (at NAF's geometry a session holds gigabytes). The CPU other work took meanwhile is read for each, and a
graph whose times met a busy machine is contended: shown, never judged (`measure.others`).

Each thing is timed once, and no call is made that could not move the verdict. The verdict is read on the
device fit's band (x/÷ 5 on the appendix): a call whose warm-up took `SETTLE_S` or more is timed once more and
not again, since a second sample could only confirm it to a tenth, and a shorter call whose samples reach
`SETTLE_S` stops at two that agree (`measure.settled`). A host segment is opened once, in the chain: its first
call on what the chain hands it is both its warm-up and the values it hands on (no session of its own beside
the chain's). A cut with no device segment is the graph itself (its one host segment is the whole, timed once),
and a cut with no host segment runs no chain (there is nothing on the host to time). At NAF's geometry a call is
seconds.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...measure.others import CONTENDED, cpu_seconds, others_cores, settled
from ...onnx_core import runtime
from ..cut.proof import run_chain
from ..cut.segments import Partition, Segment
from ..vocabulary import Side

REPEATS = 5
SETTLE_S = 1.0  # a warm-up this long takes one timed call; timed calls this long stop at two within
# `measure.AGREE` of each other: the verdict's band is the device fit's (x/÷ 5 on the appendix), beside which a
# tenth of the host's time moves nothing


@dataclass(frozen=True)
class HostTimes:
    """Medians in seconds: the graph whole, and each host segment by its file; how quiet the machine was."""

    whole: float
    segments: dict[str, float]
    repeats: int
    others_cores: float | None  # the most any one timing saw other work take, in cores
    contended: bool

    @property
    def host_segments(self) -> float:
        return sum(self.segments.values())


def _median(
    session: Any, feeds: dict[str, np.ndarray], repeats: int
) -> tuple[float, int, dict[str, Any], list[np.ndarray]]:
    """The median seconds of `repeats` runs of an open session on `feeds` (after a warm-up), the repeats it took,
    how quiet it ran, and the warm-up's outputs (what a chain hands on)."""
    start = time.perf_counter()
    outputs = session.run(None, feeds)  # the warm-up: the arena allocated, the kernels chosen
    if time.perf_counter() - start >= SETTLE_S:
        repeats = 1  # a second sample could only confirm it within the verdict's band
    samples, quiet = settled_samples(lambda: session.run(None, feeds), repeats)
    return statistics.median(samples), len(samples), quiet, outputs


def settled_samples(run: Any, repeats: int) -> tuple[list[float], dict[str, Any]]:
    """Up to `repeats` timed calls of `run`, stopping once they are settled (`measure.settled` over `SETTLE_S`),
    and how quiet the machine was meanwhile: `others_cores` and `contended` (`measure.others`)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples: list[float] = []
    start, cpu = time.perf_counter(), cpu_seconds()
    while len(samples) < repeats and not settled(samples, SETTLE_S):
        t0 = time.perf_counter()
        run()
        samples.append(time.perf_counter() - t0)
    others = others_cores(cpu, cpu_seconds(), time.perf_counter() - start)
    return samples, {"others_cores": others, "contended": bool(others is not None and others > CONTENDED)}


def host_times(
    part: Partition, model: str | os.PathLike, folder: str | os.PathLike, repeats: int = REPEATS
) -> HostTimes:
    """The graph whole (`model`) and every host segment of `part` (its files under `folder`), timed: the whole
    on random inputs, each host segment on what the chain hands it from those inputs (a segment may take a
    shape as a tensor, which no random value stands in for; a host segment hands on its warm-up's outputs,
    computed with onnxruntime's optimisations: values to time the next segments on, not a proof). A cut that
    is the graph itself (no device segment, one host segment of every node) gives its segment the whole's
    time; a cut with no host segment runs no chain."""
    # one session: its inputs give the feeds, and it is the one timed
    session = runtime.session(model, mem_pattern=False)
    feeds = runtime.random_feeds(session)
    whole, taken, quiet, _ = _median(session, feeds, repeats)
    del session  # let go before the chain runs: at NAF's geometry a session holds gigabytes
    seen = [quiet]
    segments = {}
    hosts = [s for s in part.segments if s.runs_on == Side.HOST]

    def timed(s: Segment, file: Path, inputs: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]] | None:
        if s.runs_on != Side.HOST:
            return None  # the chain runs it as written
        timing = runtime.session(file, mem_pattern=False)
        names = [o.name for o in timing.get_outputs()]
        segments[s.file], _, q, values = _median(timing, inputs, repeats)
        seen.append(q)
        return names, values

    if is_whole(part):
        segments[hosts[0].file] = whole  # the same nodes on the same inputs: timed once, above
    elif hosts:
        run_chain(part, folder, feeds, outputs=(), run=timed)
    others = [q["others_cores"] for q in seen if q["others_cores"] is not None]
    return HostTimes(
        whole=whole,
        segments=segments,
        repeats=taken,
        others_cores=max(others) if others else None,
        contended=any(q["contended"] for q in seen),
    )


def is_whole(part: Partition) -> bool:
    """Whether the cut is the graph itself: one segment, on the host, holding every node of the graph."""
    segments = part.segments
    return len(segments) == 1 and segments[0].runs_on == Side.HOST and len(segments[0].nodes) == part.coverage.nodes[1]
