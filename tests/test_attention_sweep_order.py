"""02's sweep exports every graph of a geometry before it times any row, and its adjacent timed rows share the
rate measurement between them (`measure.Bracket(follows=...)`), with every row still bracketed and judged."""

from __future__ import annotations

import itertools

import pytest

from weftlib import measure
from weftlib.attention import benchmark, geometry
from weftlib.onnx_core import export as onnx_export

pytestmark = pytest.mark.usefixtures("quick_rates")  # each bracket one call of each rate: tests/conftest.py

# Each sweep below exports and times a geometry (seconds apiece), so the tests share two, built once per module:
# one with its exports in this process and every export, timed row and rate measurement watched, and one with
# its exports in forked children (two at a time) and the masked formulation refused.
SMALL = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)


@pytest.fixture(scope="module")
def watched(tmp_path_factory, quick_rates):
    """gather and shift, exported here one at a time: (the rows, their folder, the exports and timed brackets in
    the order they happened, the rate measurements made)."""
    from weftlib.measure import bracket

    folder = tmp_path_factory.mktemp("watched")
    events: list[str] = []
    measured: list[int] = []
    real_export, real_enter, real_limits = onnx_export.export, measure.Bracket.__enter__, bracket.machine_limits

    def export(*args, **kwargs):
        events.append("export")
        return real_export(*args, **kwargs)

    def enter(self):
        events.append("timed")
        return real_enter(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_export, "export", export)
        patch.setattr(measure.Bracket, "__enter__", enter)
        patch.setattr(bracket, "machine_limits", lambda *a, **k: measured.append(1) or real_limits(*a, **k))
        # one worker: the exports run here, so this process sees them (two would run them in forked children)
        patch.setattr(benchmark, "export_all", _one_at_a_time(benchmark.export_all))
        rows = benchmark.measure_geometry(SMALL, ["gather", "shift"], folder=folder, repeats=1, memory=False)
    return rows, folder, events, measured


def _one_at_a_time(export_all):
    return lambda *args, **kwargs: export_all(*args, **{**kwargs, "workers": 1})


@pytest.fixture(scope="module")
def forked(tmp_path_factory, quick_rates):
    """masked (refused by torch: its score limit set to 10), gather, matmul and shift, exported two at a time in
    forked children: (the rows, their folder)."""
    from weftlib.attention import formulations

    folder = tmp_path_factory.mktemp("forked")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formulations, "MASKED_MAX_SCORES", 10)
        methods = ["masked", "gather", "matmul", "shift"]
        rows = benchmark.measure_geometry(SMALL, methods, folder=folder, repeats=1, memory=False)
    return rows, folder


def test_every_graph_is_exported_before_any_row_is_timed(watched):
    rows, folder, events, _ = watched
    assert events == ["export", "export"] + ["timed"] * 5, events
    assert [r["status"] for r in rows] == ["ok"] * 5
    assert {r["onnx_path"] for r in rows if r["backend"] == "onnxruntime"} == {
        str(folder / "t_gather.onnx"),
        str(folder / "t_shift.onnx"),
    }


def test_exports_run_two_at_a_time_and_their_graphs_are_the_rows(forked):
    rows, folder = forked
    ort = [r for r in rows if r["backend"] == "onnxruntime" and r["method"] != "masked"]
    assert [r["method"] for r in ort] == ["gather", "matmul", "shift"]
    assert [r["status"] for r in ort] == ["ok"] * 3
    assert all(r["onnx_bytes"] == (folder / f"t_{r['method']}.onnx").stat().st_size for r in ort)
    assert all(r["max_abs_diff"] <= 1e-5 for r in ort)


def test_adjacent_rows_share_the_rate_measurement_and_each_is_still_judged(watched):
    rows, _, _, measured = watched
    timed = [r for r in rows if r["seconds"] is not None]
    assert len(timed) == 5 and all(isinstance(r["contended"], bool) for r in timed)
    assert not timed[0]["rates_shared"] and sum(r["rates_shared"] for r in timed) >= 1
    shared = [b for a, b in itertools.pairwise(timed) if b["rates_shared"]]
    assert all(b["rates_before"] == a["rates_after"] for a, b in itertools.pairwise(timed) if b["rates_shared"])
    assert len(measured) == 2 * len(timed) - len(shared)


def test_a_graph_whose_torch_call_was_refused_is_not_left_behind(forked):
    rows, folder = forked
    status = {(r["method"], r["backend"]): r["status"] for r in rows}
    assert status[("masked", "torch")].startswith("refused")
    assert status[("masked", "onnxruntime")] == "not exported: torch did not run"
    assert not list(folder.glob("t_masked*")) and (folder / "t_shift.onnx").exists()
