"""03's 1024 im2col layer is both a peak case of section 3 and a timed row of section 5's bench, the same fresh
process each time: `measure_table(timed=...)` measures it once, with the bench's repeats in a bracket, and the
bench takes that row instead of starting the process again."""

from __future__ import annotations

import pytest

from weftlib.sparse import benchmark, memory, voxels

N16 = len(voxels.voxel_set("sphere", 16))
CASES = [("sphere", 16, "accumulate"), ("sphere", 16, "im2col")]


def _counted(monkeypatch):
    spawned = []
    real = memory.measure.peak_rss_subprocess

    def counted(target, kwargs, **rest):
        spawned.append((kwargs.get("method"), rest.get("repeats", 1)))
        return real(target, kwargs, **rest)

    monkeypatch.setattr(memory.measure, "peak_rss_subprocess", counted)
    return spawned


def test_a_timed_case_is_one_process_giving_the_table_row_and_the_bench_row(monkeypatch):
    spawned = _counted(monkeypatch)
    table = memory.measure_table(
        CASES, {("sphere", 16): N16}, 8, threads=1, chunk_rows=64, progress=False, timed={CASES[1]: 3}
    )
    assert spawned == [("accumulate", 1), ("im2col", 3)]  # one process per case, the timed one with its repeats
    assert "samples" not in table.columns and list(table["method"]) == ["accumulate", "im2col"]
    row = table.attrs["timed_rows"]["im2col"]
    im2col = table.set_index("method").loc["im2col"]
    assert row["peak_bytes"] == im2col["measured_bytes"] and row["seconds"][0] == im2col["seconds"]
    assert row["repeats"] == len(row["seconds"]) == 3 and "contended" in row and row["chunk_rows"] == 64
    assert memory.measure_table(CASES[:1], {("sphere", 16): N16}, 8, progress=False).attrs["timed_rows"] == {}


def test_the_bench_takes_a_measured_row_and_starts_no_process_for_it(monkeypatch):
    table = memory.measure_table(
        CASES[1:], {("sphere", 16): N16}, 8, threads=1, chunk_rows=64, progress=False, timed={CASES[1]: 2}
    )
    spawned = _counted(monkeypatch)
    got = benchmark.benchmark_against_limits(
        "sphere",
        16,
        8,
        ["accumulate", "im2col"],
        threads=1,
        repeats=2,
        chunk_rows={"im2col": 64},
        spconv_threads=None,
        progress=False,
        measured=table.attrs["timed_rows"],
    )
    assert [m for m, _ in spawned] == ["accumulate"]  # im2col's process ran once, in the table
    rows = {r["method"]: r for r in got["rows"]}
    assert rows["im2col"]["peak_bytes"] == table.attrs["timed_rows"]["im2col"]["peak_bytes"]
    assert rows["im2col"]["of_limit"] > 0 and rows["accumulate"]["of_limit"] > 0  # both judged against the bound


@pytest.mark.parametrize(
    ("asked", "why"),
    [
        ({"channels": 16}, "another layer"),
        ({"chunk_rows": {"im2col": 32}}, "another layer"),
        ({"repeats": 1}, "samples"),
    ],
)
def test_a_row_of_another_layer_is_refused(asked, why):
    table = memory.measure_table(
        CASES[1:], {("sphere", 16): N16}, 8, threads=1, chunk_rows=64, progress=False, timed={CASES[1]: 2}
    )
    kwargs = {"channels": 8, "chunk_rows": {"im2col": 64}, "repeats": 2} | asked
    with pytest.raises(ValueError, match=why):
        benchmark.benchmark_against_limits(
            "sphere",
            16,
            methods=["im2col"],
            threads=1,
            spconv_threads=None,
            progress=False,
            measured=table.attrs["timed_rows"],
            **kwargs,
        )


@pytest.mark.parametrize(
    ("timed", "why"), [({("sphere", 32, "im2col"): 2}, "not among the cases"), ({CASES[1]: 0}, "positive number")]
)
def test_a_timed_case_outside_the_table_or_without_repeats_is_refused(timed, why):
    with pytest.raises(ValueError, match=why):
        memory.measure_table(CASES, {("sphere", 16): N16}, 8, progress=False, timed=timed)
