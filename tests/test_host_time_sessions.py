"""06's host timing spends no call that cannot move its verdict: each host segment of a mixed cut is opened
once (its chain run is its timed session's warm-up), the chain opens sessions for the device segments only,
and a call whose warm-up takes `SETTLE_S` or more is timed once. No assertion here is on a measured time."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.test_gate_partition import chain, cut_of
from weftlib.gate.cut import proof
from weftlib.gate.estimate import host_time


def test_a_mixed_cut_opens_each_host_segment_once_and_the_chain_only_its_device_segments(ops, tmp_path, monkeypatch):
    part, path, folder = cut_of(chain("mixed", ["conv", "sin", "conv", "sin"]), ops, tmp_path)
    hosts = [s.file for s in part.segments if s not in part.device_segments]
    devices = [s.file for s in part.device_segments]
    assert hosts and devices and not host_time.is_whole(part)
    opened: list[tuple[str, bool]] = []  # (file, with onnxruntime's optimisations: a timed session)
    real = host_time.runtime.session

    def session(p, *a, **k):
        opened.append((str(p), k.get("optimize", True)))
        return real(p, *a, **k)

    monkeypatch.setattr(host_time.runtime, "session", session)  # the chain's module is the same `runtime`
    host = host_time.host_times(part, path, folder, repeats=2)
    assert [f for f, timed in opened if timed] == [str(path), *(str(folder / f) for f in hosts)]
    assert [f for f, timed in opened if not timed] == [str(folder / f) for f in devices]
    assert list(host.segments) == hosts and all(t > 0 for t in host.segments.values())


def test_the_chain_runs_the_same_with_the_timing_sessions_as_without(ops, tmp_path):
    """The values handed on through a timed host segment are what the chain computes as written, to float
    rounding (they feed the later segments' timing; a shape handed on must be exact)."""
    part, path, folder = cut_of(chain("mixed", ["conv", "sin", "conv", "sin"]), ops, tmp_path)
    feeds = proof.random_feeds(path)
    names = [o.name for o in onnx.load(str(path)).graph.output]
    plain = proof.run_chain(part, folder, feeds, outputs=names)

    def timed(s, file, inputs):
        if s in part.device_segments:
            return None
        session = host_time.runtime.session(file)
        return [o.name for o in session.get_outputs()], host_time._median(session, inputs, 1)[3]

    through = proof.run_chain(part, folder, feeds, outputs=names, run=timed)
    np.testing.assert_allclose(through[names[0]], plain[names[0]], rtol=1e-5, atol=1e-5)


class _Slow:
    """A session whose every call takes `seconds` on the fake clock."""

    def __init__(self, clock: list[float], seconds: float):
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def run(self, names, feeds):
        self.calls += 1
        self.clock[0] += self.seconds
        return [np.zeros(1)]


@pytest.mark.parametrize(("seconds", "calls"), [(1.5, 2), (0.2, 6)])
def test_a_call_of_settle_s_or_more_is_timed_once_after_its_warm_up(monkeypatch, seconds, calls):
    """1.5 s a call: the warm-up and one sample (it took the warm-up and two agreeing samples); 0.2 s: every
    repeat."""
    clock = [0.0]
    monkeypatch.setattr(host_time.time, "perf_counter", lambda: clock[0])
    session = _Slow(clock, seconds)
    median, taken, quiet, outputs = host_time._median(session, {}, 5)
    assert session.calls == calls and taken == calls - 1 and median == pytest.approx(seconds)
    assert "contended" in quiet and len(outputs) == 1
