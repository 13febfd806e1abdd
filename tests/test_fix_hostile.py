"""`gate fix` against the hostile inputs of issue 43: a proof that non-finite values, branches the inputs never
take and wrong example inputs cannot fool, and a fixed graph offered (written as `<stem>.fixed.onnx`) only when
it is valid at the original's IR and opset and proven; the export check of the original kept; nothing written
when no rewrite applies; nothing left in the temporary folder when the proof is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_gate_fix import _batch_fold, _reshape_chain
from weftlib import gate
from weftlib.gate.__main__ import main
from weftlib.gate.fix import FixError, fix_model, prove, write_fix
from weftlib.gate.fix.base import ExactRewrite, const, ints
from weftlib.gate.fix.expand import ExpandOfConstant
from weftlib.gate.fix.proof import ProofVerdict, difference
from weftlib.gate.fix.shuffles import WrongOrderBatchFold
from weftlib.gate.graphs import Builder
from weftlib.gate.record import public_record
from weftlib.gate.run import fixing

REPO = Path(__file__).resolve().parent.parent
SHAPE = [1, 4, 8]


def _save(folder: Path, model: onnx.ModelProto, name: str) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _expand_then(after: str | None = None, name: str = "expand") -> onnx.ModelProto:
    """x * 2 + Expand(constant row) (ExpandOfConstant answers the Expand), then `after` of the sum, if any."""
    g = Builder(name)
    x = g.node("Mul", [g.input("x", SHAPE), g.const("k", 2.0)], "pre/Mul")
    row = g.node("Expand", [g.const("row", np.arange(8.0).reshape(1, 1, 8)), g.ints("shape", SHAPE)], "c/Expand")
    y = g.node("Add", [x, row], "c/Add")
    if after == "Log":
        y = g.node("Log", [y], "post/Log")
    elif after == "DivByZero":
        y = g.node("Div", [y, g.const("zero", 0.0)], "post/Div")
    g.output(y)
    return g.model()


# ---------------------------------------------------------------- 1. non-finite values count


def test_non_finite_values_are_equal_only_as_the_same_value_in_the_same_place():
    inf, nan = np.inf, np.nan
    a = np.array([1.0, inf, nan, -inf], np.float32)
    assert difference(a, a.copy()) == 0.0
    for other in ([1.0, -inf, nan, -inf], [1.0, inf, 0.0, -inf], [1.0, 5.0, nan, -inf], [1.0, inf, inf, -inf]):
        assert difference(a, np.array(other, np.float32)) == inf, other
    assert difference(np.array([1.0, 2.0], np.float32), np.array([1.0, nan], np.float32)) == inf
    assert difference(np.array([2.0, -4.0], np.float32), np.array([2.5, -4.0], np.float32)) == 0.125  # of 4
    assert difference(np.array([1, 2]), np.array([1, 3])) == inf  # exact dtypes: any difference
    assert difference(np.zeros(3, np.float32), np.zeros(4, np.float32)) == inf  # shapes differ


def _scaled(name: str, k: list[float]) -> onnx.ModelProto:
    g = Builder(name)
    g.output(g.node("Mul", [g.input("x", [1, 4]), g.const("k", np.array(k).reshape(1, 4))], "Mul"))
    return g.model()


def test_one_inf_in_an_output_does_not_make_a_different_graph_proven(tmp_path):
    original = _save(tmp_path, _scaled("a", [np.inf, 1.0, 1.0, 1.0]), "a")
    other = _save(tmp_path, _scaled("b", [np.inf, 2.0, 1.0, 1.0]), "b")
    proof = prove(original, other)
    assert proof.verdict == ProofVerdict.NOT_EQUAL and not proof.proven, proof
    assert "NOT equal" in proof.summary()


# ---------------------------------------------------------------- 2. the original's own NaN and inf prove nothing


def test_an_output_the_original_makes_non_finite_on_every_set_is_unjudged_and_not_offered(tmp_path, ops, capsys):
    path = _save(tmp_path, _expand_then("DivByZero"), "div0")
    fix = fix_model(path, ops)
    assert fix.rewrites and fix.proof.verdict == ProofVerdict.UNJUDGED and not fix.proof.proven, fix.proof
    assert fix.proof.unproven == ("post/Div",) and fix.exit_code == 3
    record = fix.proof.as_json()
    assert record["outputs_no_set_proved"] == ["post/Div"]
    assert {row["inputs"] for row in record["sets"] if row["original_not_finite"] == ["post/Div"]} == set(
        fix.proof.sets
    )
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out)]) == 3
    assert not (out / "div0.fixed.onnx").exists()
    first = capsys.readouterr().out.splitlines()[0]
    assert "not offered" in first and "->" not in first, first


def test_a_log_of_random_inputs_is_proven_on_a_set_where_the_original_is_finite_and_the_others_named(tmp_path, ops):
    fix = fix_model(_save(tmp_path, _expand_then("Log"), "log"), ops)
    assert fix.proof.proven and fix.exit_code != 1, fix.proof
    nan_sets = [row["inputs"] for row in fix.proof.as_json()["sets"] if row["original_not_finite"]]
    assert {"random seed 0", "random seed 1", "random seed 2"} <= set(nan_sets)
    assert len(fix.proof.sets) > len(nan_sets)  # a set with every input positive proved it


# ---------------------------------------------------------------- 3. every rewritten node reached


def _branch(name: str, inputs: list[onnx.ValueInfoProto], nodes: list[onnx.NodeProto], out: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, SHAPE)])


def _if_model(cond: str) -> onnx.ModelProto:
    """y = If(cond) then x*2 + Expand(row) else x*2; the Expand (refused) inside the then-branch reads the main
    graph's constants, so ExpandOfConstant folds it there. `cond`: "never" (a constant False) or "positive"
    (every element of x above zero: random normal inputs never, inputs all positive always)."""
    then = _branch(
        "then",
        [],
        [
            helper.make_node("Expand", ["row", "shape"], ["then_e"], name="then/Expand"),
            helper.make_node("Add", ["xs", "then_e"], ["then_y"], name="then/Add"),
        ],
        "then_y",
    )
    other = _branch("else", [], [helper.make_node("Identity", ["xs"], ["else_y"], name="else/Identity")], "else_y")
    nodes = [helper.make_node("Mul", ["x", "k"], ["xs"], name="pre/Mul")]
    if cond == "never":
        nodes.append(helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(False)), name="c"))
    else:
        nodes += [
            helper.make_node("ReduceMin", ["x"], ["low"], name="low", keepdims=0),
            helper.make_node("Greater", ["low", "zero"], ["c"], name="c"),
        ]
    nodes.append(helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other))
    return _model(nodes, [("x", SHAPE)])


def _loop_model() -> onnx.ModelProto:
    """y = Loop(0 trips) of v + Expand(row), from v = x*2: the body (where the Expand is folded) never runs."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body/cond"),
            helper.make_node("Expand", ["row", "shape"], ["body_e"], name="body/Expand"),
            helper.make_node("Add", ["v", "body_e"], ["v_out"], name="body/Add"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, SHAPE),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, SHAPE),
        ],
    )
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["xs"], name="pre/Mul"),
        helper.make_node("Loop", ["trips", "go", "xs"], ["y"], name="loop", body=body),
    ]
    return _model(nodes, [("x", SHAPE)], extra=[("trips", np.array(0, np.int64)), ("go", np.array(True))])


def _model(
    nodes: list[onnx.NodeProto], inputs: list[tuple[str, list[int]]], extra: list[tuple[str, Any]] = ()
) -> onnx.ModelProto:
    weights = [
        ("k", np.array(2.0, np.float32)),
        ("zero", np.array(0.0, np.float32)),
        ("row", np.arange(8.0, dtype=np.float32).reshape(1, 1, 8)),
        ("shape", np.array(SHAPE, np.int64)),
        *extra,
    ]
    graph = helper.make_graph(
        nodes,
        "branches",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
        [numpy_helper.from_array(v, n) for n, v in weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_rewrite_in_a_branch_no_input_takes_is_not_proven_and_not_offered(tmp_path, ops, capsys):
    path = _save(tmp_path, _if_model("never"), "never")
    fix = fix_model(path, ops)
    assert [a.replaced for a in fix.rewrites] == [("then/Expand",)], fix.rewrites
    assert fix.proof.unreached == ("then/Expand",) and fix.proof.verdict == ProofVerdict.UNJUDGED, fix.proof
    assert fix.exit_code == 3
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out)]) == 3
    record = json.loads((out / "fix.json").read_text())
    assert record["rewrites"][0]["replaced"] == ["then/Expand"] and record["fixed"] is None
    assert record["proof"]["proven"] is False and record["proof"]["rewritten_nodes_no_set_ran"] == ["then/Expand"]
    assert not (out / "never.fixed.onnx").exists()
    assert "not offered" in capsys.readouterr().out.splitlines()[0]


def test_a_loop_body_that_never_runs_is_not_proven(tmp_path, ops):
    fix = fix_model(_save(tmp_path, _loop_model(), "loop"), ops)
    assert [a.replaced for a in fix.rewrites] == [("body/Expand",)], fix.rewrites
    assert fix.proof.unreached == ("body/Expand",) and not fix.proof.proven, fix.proof


def test_a_branch_the_random_sets_miss_is_fed_until_it_is_taken(tmp_path, ops):
    fix = fix_model(_save(tmp_path, _if_model("positive"), "positive"), ops)
    assert [a.replaced for a in fix.rewrites] == [("then/Expand",)]
    assert fix.proof.proven and not fix.proof.unreached, fix.proof
    assert len(fix.proof.sets) > 3 and fix.proof.reached_by["then/Expand"], fix.proof  # a set of positive inputs


def test_reach_is_read_from_the_profile_of_each_set(tmp_path):
    from weftlib.gate.fix.reach import nested_nodes

    model = _if_model("positive")
    path = _save(tmp_path, model, "positive")
    assert nested_nodes(model) == {"then/Expand", "then/Add", "else/Identity"}
    seen = prove(path, path, produced={"then/Add", "else/Identity"})
    assert seen.proven and {s for sets in seen.reached_by.values() for s in sets} > set(seen.reached_by["then/Add"])
    assert "random seed 0" in seen.reached_by["else/Identity"] and "random seed 0" not in seen.reached_by["then/Add"]
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    twin.graph.node[-1].attribute[1].g.node[0].name = "then/Add"  # two nodes, one name: onnxruntime refuses it
    blind = prove(_save(tmp_path, twin, "twin"), path, produced={"then/Add"})
    assert blind.unreached == ("then/Add",) and blind.verdict == ProofVerdict.UNJUDGED, blind


# ---------------------------------------------------------------- 4. an unproven graph is never offered


def test_a_refuted_fix_writes_its_record_and_no_graph_under_the_offered_name(tmp_path, ops):
    wrong = fix_model(_save(tmp_path, _batch_fold(), "batch_fold"), ops, library=[WrongOrderBatchFold()])
    assert wrong.proof.verdict == ProofVerdict.NOT_EQUAL and wrong.exit_code == 1
    out = tmp_path / "fixed" / "batch_fold"
    assert write_fix(wrong, out) is None
    assert sorted(p.name for p in out.iterdir()) == [".weftlib-folder.json", "fix.json"]
    assert json.loads((out / "fix.json").read_text())["fixed"] is None
    assert fixing.proven_fixed(tmp_path / "fixed") == {}


# ---------------------------------------------------------------- 5. example inputs match the graph


@pytest.mark.parametrize(
    ("arrays", "named"),
    [
        ({"y": np.zeros(SHAPE, np.float32)}, "'y'"),
        ({"x": np.zeros(SHAPE, np.float32), "extra": np.zeros(2, np.float32)}, "'extra'"),
        ({"x": np.zeros([1, 4, 4], np.float32)}, "shape"),
        ({"x": np.zeros(SHAPE, np.float64)}, "float64"),
        ({"x": np.full(SHAPE, np.nan, np.float32)}, "not finite"),
    ],
    ids=["name", "extra", "shape", "dtype", "nan"],
)
def test_example_inputs_that_do_not_match_the_graph_are_refused_in_one_line(tmp_path, capsys, arrays, named):
    path = _save(tmp_path, _expand_then(), "expand")
    np.savez(tmp_path / "inputs.npz", **arrays)
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out), "--inputs", str(tmp_path / "inputs.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and named in err, err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["string", "sequence"])
def test_an_input_the_proof_cannot_feed_is_refused_in_one_line(tmp_path, capsys, kind):
    model = _expand_then()
    if kind == "string":
        model.graph.input.append(helper.make_tensor_value_info("s", TensorProto.STRING, [2]))
    else:
        model.graph.input.append(helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None))
    out = tmp_path / "out"
    assert main(["fix", str(_save(tmp_path, model, kind)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'s'" in err and not out.exists(), err


def test_example_inputs_that_match_are_a_proof_set(tmp_path, ops):
    path = _save(tmp_path, _expand_then(), "expand")
    with pytest.raises(FixError, match="'x'"):
        fix_model(path, ops, examples={"wrong": {"y": np.zeros(SHAPE, np.float32)}})
    fix = fix_model(path, ops, examples={"mine": {"x": np.ones(SHAPE, np.float32)}})
    assert fix.proof.sets[-1] == "mine" and fix.proof.proven


# ---------------------------------------------------------------- 6. the export check of the original is kept


def _failed_export_check(path: Path) -> None:
    path.with_suffix(".parity.json").write_text(json.dumps({"parity_ok": False, "max_abs_diff": 0.5, "atol": 1e-4}))


def test_a_failed_export_check_beside_the_model_stays_a_failure(tmp_path, ops, capsys):
    rewritten = _save(tmp_path, public_record.BUILDERS["clef-expand"](), "clef_expand")
    _failed_export_check(rewritten)
    fix = fix_model(rewritten, ops)
    assert fix.rewrites and fix.after.verdict == "fail" and fix.exit_code == 1
    assert any("export check" in p for p in fix.after.problems)
    fixed = write_fix(fix, tmp_path / "fixed")  # offered (proven): the check goes along
    assert fixed is not None and gate.device_gate(fixed, ops).verdict == "fail"
    untouched = _save(tmp_path, public_record.BUILDERS["measured-passing"](), "passing")
    _failed_export_check(untouched)
    assert main(["fix", str(untouched), "--out", str(tmp_path / "out")]) == 1
    assert "pass" not in capsys.readouterr().out.split(":")[0]


# ---------------------------------------------------------------- 7. checker-clean at the original's IR and opset


def _old(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` at opset 7 and IR 3 (where every initializer is also a graph input)."""
    model.opset_import[0].version, model.ir_version = 7, 3
    del model.graph.value_info[:]
    for t in model.graph.initializer:
        model.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_fixed_graph_of_an_ir3_opset7_model_passes_the_checker_there(tmp_path):
    path = _save(tmp_path, _old(_reshape_chain()), "old")
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out)]) == 1  # offered; the gate still fails opset 7
    fixed = onnx.load(out / "old.fixed.onnx")
    assert (fixed.ir_version, [(o.domain, o.version) for o in fixed.opset_import]) == (3, [("", 7)])
    onnx.checker.check_model(fixed, full_check=True)


class ExpandToGelu(ExactRewrite):
    """A broken rewrite for the test: folds the Expand of a constant, then applies Gelu (opset 20) to it."""

    answers = ("op:Expand",)

    def pattern(self, op: Any, x: Any, shape: Any) -> Any:
        return op.Expand(x, shape)

    def holds(self, x: Any, shape: Any) -> str | None:
        return None if const(x) is not None and ints(shape) is not None else "not constant"

    def rewrite(self, op: Any, x: Any, shape: Any) -> Any:
        array, target = const(x), ints(shape)
        return op.Gelu(self.constant(op, np.broadcast_to(array, np.broadcast_shapes(array.shape, target)).copy()))


def test_a_fixed_graph_the_checker_refuses_at_the_originals_opset_is_not_offered(tmp_path, ops):
    path = _save(tmp_path, _expand_then(), "expand")
    assert fix_model(path, ops, library=[ExpandOfConstant()]).proof.proven  # the control
    fix = fix_model(path, ops, library=[ExpandToGelu()])
    assert fix.rewrites and not fix.proof.proven and fix.exit_code == 1, fix.proof
    assert "checker" in fix.proof.summary() and "Gelu" in fix.proof.summary()
    assert write_fix(fix, tmp_path / "out") is None and not (tmp_path / "out" / "expand.fixed.onnx").exists()


# ---------------------------------------------------------------- 8. no rewrite: nothing written


def test_no_rewrite_writes_nothing_and_says_so_in_one_line(tmp_path, capsys):
    g = Builder("expand_kept")
    x = g.node("Mul", [g.input("x", [1, 4, 1]), g.const("k", 2.0)], "pre/Mul")
    g.output(g.node("Expand", [x, g.ints("shape", [1, 4, 8])], "keep/Expand"))
    path = _save(tmp_path, g.model(), "kept")
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out)]) == 1
    first, *closing = capsys.readouterr().out.strip().splitlines()
    assert "no rewrite" in first and "nothing written" in first, first
    # what follows is only the command's closing: the totals and the next step (issue 45), no rewrite or proof line
    assert closing and all(c.lstrip().startswith(("totals", "refused", "unjudged", "next:", "then:")) for c in closing)
    assert not any("proof" in c or "rewrite(s)" in c for c in closing), closing
    assert not out.exists()
    passing = _save(tmp_path, public_record.BUILDERS["measured-passing"](), "passing")
    assert main(["fix", str(passing), "--out", str(out)]) == 0 and not out.exists()


# ---------------------------------------------------------------- 9. an interrupted proof leaves nothing


def test_an_interrupt_mid_proof_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch, capsys):
    import tempfile

    from weftlib.onnx_core import runtime

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    opened = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        opened.append(sorted(p.name for p in scratch.rglob("*")))
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(runtime, "session", interrupted)
    path = _save(tmp_path, _expand_then(), "expand")
    out = tmp_path / "out"
    assert main(["fix", str(path), "--out", str(out)]) == 130
    assert opened and any(name.endswith(".onnx") for name in opened[0])  # the proof had its graphs there
    assert not list(scratch.iterdir()) and not out.exists()


SIGTERM_AS_SIGINT = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.default_int_handler)  # as `weftlib.gate.__main__` handles it (issue 43)
from pathlib import Path
from weftlib.gate.fix import proof
real = proof.prove
def slow(*args, **kwargs):
    Path(sys.argv[1]).write_text("proving")
    time.sleep(120)
    return real(*args, **kwargs)
proof.prove = slow
import weftlib.gate.fix as fix
fix.prove = slow
from weftlib.gate.__main__ import main
sys.exit(main(["fix", sys.argv[2], "--out", sys.argv[3]]))
"""


def test_sigterm_mid_proof_leaves_no_graph_in_tmpdir(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    path = _save(tmp_path, _expand_then(), "expand")
    marker, out = tmp_path / "proving", tmp_path / "out"
    env = {**os.environ, "TMPDIR": str(scratch)}
    child = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_AS_SIGINT, str(marker), str(path), str(out)], env=env, cwd=REPO
    )
    try:
        while not marker.exists() and child.poll() is None:
            time.sleep(0.1)
        assert child.poll() is None, "the command ended before its proof"
        assert list(scratch.iterdir())  # the proof's graphs, mid-proof
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == 130
    finally:
        if child.poll() is None:
            child.kill()
    assert not list(scratch.iterdir()) and not out.exists()
