"""02's sweep exports every graph of a geometry before it times any row, and its adjacent timed rows share the
rate measurement between them (`measure.Bracket(follows=...)`), with every row still bracketed and judged."""

from __future__ import annotations

import itertools

import pytest

from weftlib import measure
from weftlib.attention import benchmark, geometry
from weftlib.onnx_core import export as onnx_export

pytestmark = pytest.mark.usefixtures("quick_rates")  # each bracket one call of each rate: tests/conftest.py


def test_every_graph_is_exported_before_any_row_is_timed(tmp_path, monkeypatch):
    events: list[str] = []
    real_export, real_enter = onnx_export.export, measure.Bracket.__enter__

    def export(*args, **kwargs):
        events.append("export")
        return real_export(*args, **kwargs)

    def enter(self):
        events.append("timed")
        return real_enter(self)

    monkeypatch.setattr(onnx_export, "export", export)
    monkeypatch.setattr(measure.Bracket, "__enter__", enter)
    g = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)
    # one worker: the exports run here, so this process sees them (two would run them in forked children)
    monkeypatch.setattr(benchmark, "export_all", _one_at_a_time(benchmark.export_all))
    rows = benchmark.measure_geometry(g, ["gather", "shift"], folder=tmp_path, repeats=1, memory=False)
    assert events == ["export", "export"] + ["timed"] * 5, events
    assert [r["status"] for r in rows] == ["ok"] * 5
    assert {r["onnx_path"] for r in rows if r["backend"] == "onnxruntime"} == {
        str(tmp_path / "t_gather.onnx"),
        str(tmp_path / "t_shift.onnx"),
    }


def _one_at_a_time(export_all):
    return lambda *args, **kwargs: export_all(*args, **{**kwargs, "workers": 1})


def test_exports_run_two_at_a_time_and_their_graphs_are_the_rows(tmp_path):
    g = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)
    rows = benchmark.measure_geometry(g, ["gather", "matmul", "shift"], folder=tmp_path, repeats=1, memory=False)
    ort = [r for r in rows if r["backend"] == "onnxruntime"]
    assert [r["status"] for r in ort] == ["ok"] * 3
    assert all(r["onnx_bytes"] == (tmp_path / f"t_{r['method']}.onnx").stat().st_size for r in ort)
    assert all(r["max_abs_diff"] <= 1e-5 for r in ort)


def test_adjacent_rows_share_the_rate_measurement_and_each_is_still_judged(tmp_path, monkeypatch):
    from weftlib.measure import bracket

    measured = []
    real = bracket.machine_limits
    monkeypatch.setattr(bracket, "machine_limits", lambda *a, **k: measured.append(1) or real(*a, **k))
    g = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)
    rows = benchmark.measure_geometry(g, ["gather", "shift"], folder=tmp_path, repeats=1, memory=False)
    timed = [r for r in rows if r["seconds"] is not None]
    assert len(timed) == 5 and all(isinstance(r["contended"], bool) for r in timed)
    assert not timed[0]["rates_shared"] and sum(r["rates_shared"] for r in timed) >= 1
    shared = [b for a, b in itertools.pairwise(timed) if b["rates_shared"]]
    assert all(b["rates_before"] == a["rates_after"] for a, b in itertools.pairwise(timed) if b["rates_shared"])
    assert len(measured) == 2 * len(timed) - len(shared)


def test_a_graph_whose_torch_call_was_refused_is_not_left_behind(tmp_path, monkeypatch):
    from weftlib.attention import formulations

    monkeypatch.setattr(formulations, "MASKED_MAX_SCORES", 10)
    g = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)
    rows = benchmark.measure_geometry(g, ["masked", "shift"], folder=tmp_path, repeats=1, memory=False)
    status = {(r["method"], r["backend"]): r["status"] for r in rows}
    assert status[("masked", "torch")].startswith("refused")
    assert status[("masked", "onnxruntime")] == "not exported: torch did not run"
    assert not list(tmp_path.glob("t_masked*")) and (tmp_path / "t_shift.onnx").exists()
