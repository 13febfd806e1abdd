"""`gate fix` on a run its exporter recorded beside the graph (`fix.recorded`, issue 44): proven once at full
geometry on the recorded inputs against the recorded outputs, and on three random sets at a reduced geometry of
the same builder; the record read only where asked (05), never trusted where it does not fit, and `fix.json`
saying per set where it came from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from weftlib.gate.fix import fix_model, write_fix
from weftlib.gate.fix import recorded as rec
from weftlib.gate.fix.loop import Applied
from weftlib.gate.fix.proof import ProofVerdict
from weftlib.gate.fix.sets import Geometry, Plan
from weftlib.gate.fix.shuffles import WrongOrderBatchFold
from weftlib.gate.graphs import Builder
from weftlib.gate.pages import fix_tables
from weftlib.gate.run import fixing
from weftlib.onnx_core.export import run_onnx


def _fold(rows: int, k2: float = 3.0) -> onnx.ModelProto:
    """The exporter's key transpose inside attention, [1, 4, rows, 8] folded to [4, rows, 8], transposed and
    unfolded: one builder, any number of rows (BatchFoldAroundTranspose answers it at every size)."""
    g = Builder("batch_fold")
    x = g.node("Mul", [g.input("x", [1, 4, rows, 8]), g.const("k", 2.0)], "pre/Mul")
    folded = g.node("Reshape", [x, g.ints("fold", [-1, rows, 8])], "fold/Reshape")
    t = g.node("Transpose", [folded], "fold/Transpose", perm=[0, 2, 1])
    back = g.node("Reshape", [t, g.ints("unfold", [1, 4, 8, rows])], "unfold/Reshape")
    g.output(g.node("Mul", [back, g.const("k2", k2)], "post/Mul"))
    return g.model()


def _tables(folded: bool) -> onnx.ModelProto:
    """x times a table: a constant, or computed from constants in the graph (as an exporter leaves a large one)."""
    g = Builder("tables")
    x = g.input("x", [1, 4, 6, 8])
    table = g.const("t", np.ones((1, 4, 6, 8)))
    if not folded:
        table = g.node("Cos", [g.const("angles", np.zeros((1, 4, 6, 8)))], "table/Cos")
    g.output(g.node("Mul", [x, table], "Mul"))
    return g.model()


def _exported(folder: Path, full: onnx.ModelProto, reduced: onnx.ModelProto | None, *, scale: float = 1.0) -> Path:
    """`full` written as an exporter does, with its run (seeded inputs, onnxruntime's outputs times `scale`) and
    `reduced` recorded beside it."""
    path = folder / "graph_lowres.onnx"
    onnx.save(full, path)
    shape = [d.dim_value for d in full.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    out = run_onnx(path, {"x": x})
    record = rec.folder_for(path)
    record.mkdir()
    names = [o.name for o in full.graph.output]
    arrays = {f"{rec.INPUT}x": x} | {f"{rec.OUTPUT}{n}": a * np.float32(scale) for n, a in zip(names, out, strict=True)}
    np.savez(record / rec.RUN, **arrays)
    if reduced is not None:
        onnx.save(reduced, record / rec.REDUCED)
    (record / rec.MANIFEST).write_text(json.dumps({"builder": "_fold", "inputs_from": "the test's seeded inputs"}))
    return path


def test_a_recorded_run_and_a_reduced_graph_prove_the_fix_and_fix_json_says_which_set_is_which(tmp_path, ops):
    path = _exported(tmp_path, _fold(6), _fold(3))
    fix = fix_model(path, ops, recorded=True)
    proof = fix.proof
    assert proof.proven and proof.plan == Plan.RECORDED, proof.summary()
    assert [o.geometry for o in proof.origins] == [Geometry.FULL] + [Geometry.REDUCED] * 3
    assert proof.sets[0] == "the test's seeded inputs" and "x [1, 4, 6, 8]" in proof.origins[0].shapes
    assert "recorded with it" in proof.origins[0].reference and "x [1, 4, 3, 8]" in proof.origins[1].shapes
    write_fix(fix, tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "fix.json").read_text())["proof"]["sets"]
    assert [r["geometry"].split(" ")[0] for r in rows] == ["full", "reduced", "reduced", "reduced"]
    assert rows[1]["inputs_from"] == "random seed 0" and rows[1]["reference"] == "the original graph in onnxruntime"


def test_the_record_is_read_only_where_asked_and_a_missing_one_is_named(tmp_path, ops):
    path = _exported(tmp_path, _fold(6), _fold(3))
    plain = fix_model(path, ops)  # `gate fix` on a user's graph: the full proof, as before
    assert plain.proof.plan == Plan.FULL and len(plain.proof.sets) == 3 and plain.proof.proven
    alone = tmp_path / "alone"
    alone.mkdir()
    onnx.save(_fold(6), alone / "graph_lowres.onnx")
    fix = fix_model(alone / "graph_lowres.onnx", ops, recorded=True)
    assert fix.proof.plan == Plan.FULL and fix.proof.proven
    assert "no run recorded beside the graph" in fix.proof.plan_note
    assert {o.geometry for o in fix.proof.origins} == {Geometry.FULL}


def test_the_fixed_graph_is_held_to_the_recorded_outputs(tmp_path, ops, monkeypatch):
    # outputs 1e-3 off what the graph gives: far from the record, so the exact reference (the original with the
    # replaced nodes in float64, run on the recorded inputs) decides, and shows the record's own distance
    path = _exported(tmp_path, _fold(6), _fold(3), scale=1.001)
    fix = fix_model(path, ops, recorded=True)
    assert fix.proof.plan == Plan.RECORDED and fix.proof.worst[0] > 1e-4 and max(fix.proof.worst[1:]) == 0.0
    assert fix.proof.exact[0] == 0.0 and fix.proof.original_exact[0] > 1e-4 and fix.proof.proven
    # without an exact reference the record alone decides: the recorded set refutes, whatever the reduced sets say
    monkeypatch.setattr("weftlib.gate.fix.exact_reference", lambda *_: None)
    fix = fix_model(path, ops, recorded=True)
    assert fix.proof.plan == Plan.RECORDED and fix.proof.verdict == ProofVerdict.NOT_EQUAL and not fix.offered


def test_a_wrong_rewrite_is_refuted_by_the_reduced_sets_and_the_recorded_one(tmp_path, ops):
    path = _exported(tmp_path, _fold(6), _fold(3))
    fix = fix_model(path, ops, library=[WrongOrderBatchFold()], recorded=True)
    assert fix.proof.plan == Plan.RECORDED and fix.proof.verdict == ProofVerdict.NOT_EQUAL
    assert all(w > 1e-5 for w in fix.proof.worst), fix.proof.worst


@pytest.mark.parametrize(
    ("reduced", "why"),
    [
        (None, "holds no reduced graph"),
        ("other ops", "the reduced graph's ops differ"),
        ("other inputs", "reduced graph's inputs and outputs"),
    ],
)
def test_a_reduced_graph_that_is_not_the_graph_at_another_size_is_refused_and_the_full_proof_runs(
    tmp_path, ops, reduced, why
):
    other = None
    if reduced == "other ops":
        other = _fold(3)
        other.graph.node[-1].op_type = "Add"  # another builder's graph: never a stand-in for this one
    elif reduced == "other inputs":
        other = _fold(3)
        other.graph.input[0].name = "y"
        other.graph.node[0].input[0] = "y"
    fix = fix_model(_exported(tmp_path, _fold(6), other), ops, recorded=True)
    assert fix.proof.plan == Plan.FULL and fix.proof.proven and len(fix.proof.sets) == 3
    assert why in fix.proof.plan_note, fix.proof.plan_note


def test_a_record_that_does_not_fit_the_graph_is_named_and_not_used(tmp_path, ops):
    path = _exported(tmp_path, _fold(6), _fold(3))
    folder = rec.folder_for(path)
    np.savez(folder / rec.RUN, **{f"{rec.INPUT}x": np.zeros((1, 4, 5, 8), np.float32), f"{rec.OUTPUT}y": np.zeros(1)})
    fix = fix_model(path, ops, recorded=True)
    assert fix.proof.plan == Plan.FULL and fix.proof.proven and "does not fit the graph" in fix.proof.plan_note
    (folder / rec.RUN).write_bytes(b"not an npz")
    fix = fix_model(path, ops, recorded=True)
    assert fix.proof.plan == Plan.FULL and "cannot be read" in fix.proof.plan_note


def test_a_reduced_graph_the_rewrites_fix_otherwise_is_not_used():
    full, small = _tables(folded=False), _tables(folded=True)
    fold = Applied("BatchFoldAroundTranspose", ("reshape_rank3",), ("a", "b", "c"), ("d", "e"), 1)
    assert rec.fixed_otherwise([fold], [fold], full, small) is None
    more_made = Applied("BatchFoldAroundTranspose", ("reshape_rank3",), ("x", "y", "z"), ("d", "e", "f"), 1)
    assert rec.fixed_otherwise([fold], [more_made], full, small) is None  # what it puts in may follow the size
    # a rewrite of what reads only constants (the table computed in the full graph): not on the inputs' path
    of_constants = Applied("TrigOfConstant_Cos", ("op:Cos",), ("table/Cos",), ("table/Cos_folded",), 1)
    assert rec.fixed_otherwise([of_constants, fold], [fold], full, small) is None
    fewer = Applied("BatchFoldAroundTranspose", ("reshape_rank3",), ("a", "b"), ("d", "e"), 1)
    later = Applied("BatchFoldAroundTranspose", ("reshape_rank3",), ("a", "b", "c"), ("d", "e"), 2)
    other_rule = Applied("ExpandOfConstant", ("reshape_rank3",), ("a", "b", "c"), ("d", "e"), 1)
    on_the_path = Applied("TrigOfConstant_Cos", ("op:Cos",), ("Mul",), (), 1)
    for other in ([fewer], [later], [other_rule], [], [fold, fold], [on_the_path, fold]):
        assert "fixed the reduced graph otherwise" in (rec.fixed_otherwise([fold], other, full, small) or ""), other


def test_05_proves_on_the_record_where_the_run_left_one(tmp_path, ops):
    path = _exported(tmp_path, _fold(6), _fold(3))
    fixes = fixing.fix_all([path], [path.stem], ops, tmp_path / "fixed")
    assert fixes[path.stem].proof.plan == Plan.RECORDED and fixes[path.stem].offered
    record = json.loads((tmp_path / "fixed" / path.stem / "fix.json").read_text())["proof"]
    assert record["plan"] == str(Plan.RECORDED) and len(record["sets"]) == 4
    (row,) = fix_tables.fix_rows(fixes)
    assert row["proof sets"].startswith(
        "1 at full geometry against the recorded outputs, 3 at reduced geometry against the original"
    )
    shutil.rmtree(rec.folder_for(path))  # the record gone (05 run alone): the full proof, and why, on the page
    (row,) = fix_tables.fix_rows(fixing.fix_all([path], [path.stem], ops, tmp_path / "again"))
    assert row["proof sets"].startswith("3 at full geometry against the original; in full: no run recorded")


def test_nodes_that_read_only_constants_may_fold_at_one_size_and_not_the_other():
    assert rec.not_the_same_graph(_tables(folded=True), _tables(folded=False)) is None
    reads_inputs = _tables(folded=True)
    reads_inputs.graph.node[0].op_type = "Add"
    assert "ops differ" in (rec.not_the_same_graph(reads_inputs, _tables(folded=False)) or "")
