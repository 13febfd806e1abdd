"""The sweep's graph at NAF's geometry records the run its export made, with the same builder's graph at the
reduced geometry (`naf_records`), so 05's `gate fix` proves a fix of it on that record (`Plan.RECORDED`) instead
of running the original in full on three random sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weftlib.attention import benchmark, geometry, sweep_exports
from weftlib.gate.fix import recorded
from weftlib.gate.fix.sets import Plan
from weftlib.gate.run import fixing

pytestmark = pytest.mark.usefixtures("quick_rates")  # each bracket one call of each rate: tests/conftest.py


def _naf(**kw):
    return geometry.naf_geometry(size=24, low=6, dim=8, v_dim=16, kernel=3, methods=["lowres"], repeats=1, **kw)


def test_the_reduced_geometry_is_nafs_call_at_the_smallest_grid_with_the_same_nodes():
    small = sweep_exports.reduced_geometry(_naf())
    assert small is not None and small.low == (4, 4) and small.size == (16, 16) and small.dilation == 4
    assert (small.heads, small.dim, small.v_dim, small.kernel) == (4, 8, 16, 3)
    assert sweep_exports.reduced_geometry(geometry.grid([16], kernel=3)[0]) is None  # no coarse grid
    assert sweep_exports.reduced_geometry(geometry.naf_geometry(size=16, low=4, kernel=3)) is None  # no smaller


def test_05_proves_the_sweeps_naf_graph_on_the_run_its_export_recorded(tmp_path, ops):
    rows = benchmark.measure_geometry(_naf(), folder=tmp_path, repeats=1, memory=False, record_from=0)
    (graph,) = [r["onnx_path"] for r in rows if r["onnx_path"]]
    folder = recorded.folder_for(graph)
    record, why = recorded.read(graph)
    assert record is not None, why
    assert set(record.inputs) == {"q", "k", "v"} and record.inputs["q"].shape[1:3] == (24, 24)
    assert json.loads((folder / recorded.MANIFEST).read_text())["reduced_inputs"]["q"][1:3] == [16, 16]
    fixes = fixing.fix_all([Path(graph)], [Path(graph).stem], ops, tmp_path / "fixed")
    (fix,) = fixes.values()
    assert fix.proof.plan == Plan.RECORDED, fix.proof.plan_note


def test_below_record_from_the_sweep_records_nothing(tmp_path):
    rows = benchmark.measure_geometry(_naf(), folder=tmp_path, repeats=1, memory=False)  # 2^24 elements: far above
    (graph,) = [r["onnx_path"] for r in rows if r["onnx_path"]]
    assert not recorded.folder_for(graph).exists()
