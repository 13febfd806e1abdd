"""Adjacent `measure.Bracket`s share one rate measurement: the "after" of one block is the "before" of the next
when nothing ran between them, and the verdict is the one a fresh block entered at that instant would give."""

from __future__ import annotations

import time

import pytest

from weftlib import measure
from weftlib.measure import bracket


def _rates(sgemm, copy):
    return {"sgemm_gflops": sgemm, "copy_gbps": copy, "load_average": 1.0, "threads": 2}


class _Machine:
    """A fake clock, fake rates and fake CPU readings, counting the rate measurements made."""

    def __init__(self, monkeypatch, rates):
        self.now, self.busy, self.mine, self.measured = 0.0, 100.0, 50.0, 0
        self.rates = iter(rates)
        monkeypatch.setattr(bracket, "machine_limits", self._limits)
        monkeypatch.setattr(time, "perf_counter", lambda: self.now)
        monkeypatch.setattr(bracket, "_cpu_seconds", lambda: (self.busy, self.mine))

    def _limits(self, threads=None, repeats=9):
        self.measured += 1
        self.now += 0.5  # a rate measurement takes half a second of this process's CPU
        self.busy += 0.5
        self.mine += 0.5
        return dict(next(self.rates))

    def work(self, seconds, others=0.0):
        self.now += seconds
        self.busy += seconds + others * seconds
        self.mine += seconds


def test_adjacent_blocks_share_the_rate_measurement_between_them(monkeypatch):
    machine = _Machine(monkeypatch, [_rates(200, 30), _rates(190, 29), _rates(100, 15)])
    with measure.Bracket(2) as first:
        machine.work(2.0)
        first.note(0.6, 2.4)
    with measure.Bracket(2, follows=first) as second:
        machine.work(1.0, others=1.0)  # another process took a whole core meanwhile
        second.note(3.1, 3.9)
    assert machine.measured == 3, "the second block measured its own 'before'"
    a, b = first.verdict(), second.verdict()
    assert a["contended"] is False and not a["rates_shared"]
    assert b["rates_shared"] and b["rates_before"] == a["rates_after"]
    # the second block's rates moved from 190 to 100 and others took a core: contended, as a fresh block would be
    assert b["contended"] is True and b["rate_change"] == pytest.approx(29 / 15 - 1)
    assert b["others_cores"] == pytest.approx(1.0 / 2.0)  # a core for 1 s of its 2 s: the shared sample and the work


def test_a_block_measures_its_own_rates_when_anything_ran_after_the_one_it_follows(monkeypatch):
    machine = _Machine(monkeypatch, [_rates(200, 30), _rates(190, 29)] * 3)
    with measure.Bracket(2) as first:
        machine.work(1.0)
    machine.work(3.0)  # e.g. an export between the two timed rows
    with measure.Bracket(2, follows=first) as second:
        machine.work(1.0)
    assert machine.measured == 4 and not second.verdict()["rates_shared"]
    with measure.Bracket(3, follows=second) as third:  # another thread count: its own rates
        machine.work(1.0)
    assert not third.verdict()["rates_shared"]
