"""The device's time per inference, fitted to the vendor's figures: log FPS at batch 1 on hailo10h, least
squares on the logs of what the zoo publishes for each network and the suite computes for any graph.

Log-linear, because the figures span four orders of magnitude and their errors are relative (a network twice
as large is not 1 ms slower but some factor slower): a power law in each figure is a straight line in the logs.
The candidates nest (operations; then parameters, which the chip must bring in from its DDR when they do not
fit its on-chip memory; then the input's size, which it must receive), and a richer one is taken only when it
lowers the held-out error (each model family predicted from the others) by `EARNS` or more: a term the other
families do not confirm is noise fitted. Layer counts by kind are not a candidate: the zoo's rows do not give
them. The band of a prediction is the held-out error's 90th percentile on either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .graph_figures import GraphFigures

CANDIDATES: dict[str, tuple[str, ...]] = {
    "operations": ("gops",),
    "operations, parameters": ("gops", "params_m"),
    "operations, parameters, input": ("gops", "params_m", "input_elements"),
}
EARNS = 0.05  # a richer candidate must lower the held-out median |log error| by this much (5 % in time)
BAND_QUANTILE = 0.9


class CalibrationError(ValueError):
    """Calibration rows the fit cannot use (too few, a figure not positive); the message says which."""


@dataclass(frozen=True)
class CalibrationRow:
    """One zoo network: its published FPS at batch 1 and figures, and where they were read."""

    network: str
    family: str
    fps: float
    gops: float
    params_m: float
    input_elements: int
    source: str = ""

    def figure(self, name: str) -> float:
        return float(getattr(self, name))


@dataclass(frozen=True)
class DeviceModel:
    """log FPS = intercept + sum(slope x log figure), with the figures' calibration range."""

    terms: tuple[str, ...]
    coefficients: tuple[float, ...]  # intercept first
    low: dict[str, float] = field(default_factory=dict)  # the smallest value of each figure in the calibration
    high: dict[str, float] = field(default_factory=dict)

    def log_fps(self, values: dict[str, float]) -> float:
        """A figure below the calibration's smallest is read at it: nothing below the zoo's smallest network
        says how the time falls further, and a fixed cost per network does not."""
        logs = [math.log(max(values[t], self.low[t])) for t in self.terms]
        return self.coefficients[0] + sum(c * v for c, v in zip(self.coefficients[1:], logs))

    def seconds(self, figures: GraphFigures | CalibrationRow) -> float:
        """Seconds per inference at batch 1 (1 / FPS)."""
        return math.exp(-self.log_fps({t: float(getattr(figures, t)) for t in self.terms}))

    def outside(self, figures: GraphFigures) -> list[str]:
        """The figures outside the zoo's range (an extrapolation above it; below it, read at its floor)."""
        return [
            f"{t} {getattr(figures, t):.3g} {'below' if getattr(figures, t) < self.low[t] else 'above'} "
            f"{self.low[t]:.3g} to {self.high[t]:.3g}"
            for t in self.terms
            if not self.low[t] <= getattr(figures, t) <= self.high[t]
        ]


def _check(rows: Sequence[CalibrationRow], terms: tuple[str, ...]) -> None:
    if len(rows) <= len(terms) + 1:
        raise CalibrationError(f"{len(rows)} calibration rows cannot fit {len(terms) + 1} coefficients")
    for r in rows:
        bad = [n for n in ("fps", *terms) if not r.figure(n) > 0]
        if bad:
            raise CalibrationError(f"{r.network}: {', '.join(bad)} must be positive to take its log")


def fit(rows: Sequence[CalibrationRow], terms: tuple[str, ...]) -> DeviceModel:
    """Least squares of log FPS on the logs of `terms` over `rows`."""
    _check(rows, terms)
    x = np.column_stack([np.ones(len(rows)), *[[math.log(r.figure(t)) for r in rows] for t in terms]])
    y = np.array([math.log(r.fps) for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return DeviceModel(
        terms=terms,
        coefficients=tuple(float(c) for c in coef),
        low={t: min(r.figure(t) for r in rows) for t in terms},
        high={t: max(r.figure(t) for r in rows) for t in terms},
    )


@dataclass(frozen=True)
class HeldOut:
    """Each row predicted by the fit on every other family: |log(predicted / published)|, and its summary."""

    terms: tuple[str, ...]
    errors: dict[str, float]  # network -> |log(predicted FPS / published FPS)|
    families: int

    @property
    def median(self) -> float:
        return float(np.median(list(self.errors.values())))

    @property
    def p90(self) -> float:
        return float(np.quantile(list(self.errors.values()), BAND_QUANTILE))

    @property
    def band(self) -> float:
        """The factor a prediction is read within, either way: exp of the 90th percentile."""
        return math.exp(self.p90)


def held_out(rows: Sequence[CalibrationRow], terms: tuple[str, ...]) -> HeldOut:
    """Each model family left out in turn, fitted on the others, its networks predicted."""
    families = sorted({r.family for r in rows})
    if len(families) < 2:
        raise CalibrationError(f"held out by family needs two families or more, got {families}")
    errors = {}
    for family in families:
        model = fit([r for r in rows if r.family != family], terms)
        for r in rows:
            if r.family == family:
                errors[r.network] = abs(model.log_fps({t: r.figure(t) for t in terms}) - math.log(r.fps))
    return HeldOut(terms, errors, len(families))


@dataclass(frozen=True)
class Calibration:
    """The chosen fit on every row, its held-out error, and every candidate's held-out error beside it."""

    model: DeviceModel
    error: HeldOut
    candidates: dict[str, HeldOut]
    chosen: str
    rows: tuple[CalibrationRow, ...]


def calibrate(rows: Sequence[CalibrationRow]) -> Calibration:
    """Every candidate held out by family; the simplest whose richer successors do not earn their terms
    (`EARNS`), fitted on all rows."""
    errors = {name: held_out(rows, terms) for name, terms in CANDIDATES.items()}
    chosen = next(iter(CANDIDATES))
    for name in list(CANDIDATES)[1:]:
        if errors[name].median <= errors[chosen].median - EARNS:
            chosen = name
    return Calibration(fit(rows, CANDIDATES[chosen]), errors[chosen], errors, chosen, tuple(rows))
