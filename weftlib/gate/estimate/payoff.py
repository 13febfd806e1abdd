"""Whether a cut's device pays off: the host alone, measured here, against the cut as it would run (each device
segment's estimated time, its tensors over the link, and the host segments measured here), with the band the
device estimate's held-out error gives. Every figure is an estimate with its sources (`sources`).

The verdict is read on the band, never on its middle: *yes* when even the slow end beats the host alone, *no*
when even the fast end loses to it, *within the error* between; a cut with no device segment has nothing to pay
off, and a graph whose host times met a busy machine is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...onnx_core.walk import Graph
from ..cut.segments import Partition
from ..vocabulary import PaysOff
from .device_model import Calibration
from .figures import LINK_RATE, TRANSFER_OVERHEAD, ZOO
from .graph_figures import figures_of
from .host_time import HostTimes


@dataclass(frozen=True)
class CutEstimate:
    """One graph's cut in seconds per inference: measured, estimated, and the verdict."""

    model: str
    host_only: float  # the graph whole on the host, measured here
    host_segments: float  # the cut's host segments, measured here
    device: float  # the device segments, estimated from the zoo fit
    device_low: float
    device_high: float
    transfer: float  # the crossing bytes at the link's rate
    transfers: int  # tensors crossing, each one transfer (its fixed cost unknown: `figures.TRANSFER_OVERHEAD`)
    bytes_crossing: int
    outside: tuple[str, ...]  # device segments' figures outside the zoo's range
    verdict: PaysOff
    contended: bool

    @property
    def total(self) -> float:
        return self.host_segments + self.transfer + self.device

    @property
    def total_low(self) -> float:
        return self.host_segments + self.transfer + self.device_low

    @property
    def total_high(self) -> float:
        return self.host_segments + self.transfer + self.device_high

    @property
    def ratio(self) -> float:
        """Host alone over the cut: above 1 the cut is faster."""
        return self.host_only / self.total if self.total > 0 else float("inf")


def pays_off(host_only: float, low: float, high: float, *, device: bool = True, contended: bool = False) -> PaysOff:
    """The verdict on the band [low, high] of the cut's time against the host alone."""
    if not device:
        return PaysOff.NO_DEVICE
    if contended:
        return PaysOff.CONTENDED
    if high < host_only:
        return PaysOff.YES
    if low > host_only:
        return PaysOff.NO
    return PaysOff.WITHIN_ERROR


def estimate_cut(part: Partition, graph: Graph, calibration: Calibration, host: HostTimes) -> CutEstimate:
    """The cut of `part` (on `graph`, its shapes inferred) with its host times measured (`host_time.host_times`)."""
    device = low = high = 0.0
    outside: list[str] = []
    band = calibration.error.band
    for s in part.device_segments:
        figures = figures_of(graph, s.nodes)
        t = calibration.model.seconds(figures)
        device, low, high = device + t, low + t / band, high + t * band
        if beyond := calibration.model.outside(figures):
            outside.append(f"segment {s.index}: {', '.join(beyond)}")
    c = part.coverage
    transfer = c.bytes_crossing / LINK_RATE.value if LINK_RATE.value else 0.0
    if TRANSFER_OVERHEAD.value is not None:
        transfer += c.crossings * TRANSFER_OVERHEAD.value
    verdict = pays_off(
        host.whole,
        host.host_segments + transfer + low,
        host.host_segments + transfer + high,
        device=bool(part.device_segments),
        contended=host.contended,
    )
    return CutEstimate(
        model=part.model,
        host_only=host.whole,
        host_segments=host.host_segments,
        device=device,
        device_low=low,
        device_high=high,
        transfer=transfer,
        transfers=c.crossings,
        bytes_crossing=c.bytes_crossing,
        outside=tuple(outside),
        verdict=verdict,
        contended=host.contended,
    )


def sources(calibration: Calibration) -> list[str]:
    """What every figure of an estimate rests on, one line each."""
    e = calibration.error
    commits = sorted({r.source.rsplit("@", 1)[-1] for r in calibration.rows if "@" in r.source})
    return [
        f"device: an estimate, log FPS fitted on {calibration.chosen} over {len(calibration.rows)} networks of "
        f"{ZOO}" + (f" at commit {', '.join(commits)}" if commits else ""),
        f"band: x/÷ {e.band:.2f}, the 90th percentile of |log(predicted/published)| with each of {e.families} "
        f"families held out (median {e.median:.2f})",
        f"transfers: an estimate, {LINK_RATE.text()}",
        TRANSFER_OVERHEAD.text(),
        "host: measured here in onnxruntime (medians of repeats); contended rows not judged",
    ]
