"""`trace.tracing_cost` given the length of a call the caller already made (01's traced forward of section 2):
no warm-up call of its own, and the workload sized from that length."""

from __future__ import annotations

import pytest

from weftlib import trace


def _counting() -> tuple[list[int], object]:
    calls: list[int] = []

    def work() -> None:
        calls.append(1)

    return calls, work


def test_a_warm_call_is_not_repeated_and_sizes_the_workload():
    calls, work = _counting()
    got = trace.tracing_cost(work, target="json", repeats=1, min_seconds=1.0, one_call_s=0.25)
    assert got["calls"] == 4  # a second of calls of a quarter second each
    assert len(calls) == 3 * got["calls"]  # plain, empty hook and traced; no warm-up


def test_without_a_warm_call_it_warms_up_once():
    calls, work = _counting()
    got = trace.tracing_cost(work, target="json", repeats=1, min_seconds=0.001)
    assert len(calls) == 1 + 3 * got["calls"]


@pytest.mark.parametrize("bad", ["1", True, [1.0]])
def test_refuses_a_call_length_that_is_not_seconds(bad):
    calls, work = _counting()
    with pytest.raises(ValueError, match="one_call_s"):
        trace.tracing_cost(work, target="json", one_call_s=bad)
    assert calls == []
