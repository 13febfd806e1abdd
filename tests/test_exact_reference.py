"""weftlib.gate.fix.exact: the float64 reference a fix is held to computes the region in float64, except the
nodes that only move float32 elements, which stay as written (moving rounds nothing; onnxruntime moves float64
slowly). Checked in onnxruntime against the reference widened throughout and against numpy in float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from weftlib.gate.fix import exact
from weftlib.gate.graphs import Builder
from weftlib.onnx_core import runtime

SHAPE = [1, 6, 5, 7]


def _graph() -> onnx.ModelProto:
    """x -> Transpose -> GatherND (the nearest gather's shape) -> ReduceMean over the last axis -> Mul: two moves
    then arithmetic, the region's outputs read by a node outside it."""
    g = Builder("moves_then_sums")
    x = g.input("x", SHAPE)
    t = g.node("Transpose", [x], "t", perm=[0, 2, 3, 1])  # [1, 5, 7, 6]
    rows = g.const("rows", [[[0], [2], [2], [4]]], np.int64)  # [1, 4, 1]: rows of each batch, one repeated
    picked = g.node("GatherND", [t, rows], "pick", batch_dims=1)
    mean = g.node("ReduceMean", [picked], "mean", axes=[-1], keepdims=0)
    g.output(g.node("Mul", [mean, g.const("k", 3.0)], "after"))
    return onnx.shape_inference.infer_shapes(g.model())


def _run(model: onnx.ModelProto, tmp_path, name: str, x: np.ndarray) -> np.ndarray:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return runtime.session(path, optimize=False).run(None, {"x": x})[0]


@pytest.fixture
def x() -> np.ndarray:
    return (np.random.default_rng(3).standard_normal(SHAPE) * 1e3 + 1e4).astype(np.float32)


def test_moves_on_float32_stay_as_written_and_the_first_sum_widens(tmp_path, x):
    model = _graph()
    reference = exact.exact_reference(model, {"t", "pick", "mean"})
    assert reference is not None
    by_name = {n.name: n for n in reference.graph.node}
    assert {"t", "pick"} <= set(by_name), "a move on float32 was widened"
    assert f"mean{exact.WIDE}" in by_name and "mean" not in by_name
    assert by_name[f"pick{exact.WIDE}/cast"].input == ["pick"]  # the sum reads the moved float32, widened
    got = _run(reference, tmp_path, "reference", x)
    picked = np.transpose(x, (0, 2, 3, 1)).astype(np.float64)[:, [0, 2, 2, 4]]
    want = (picked.mean(axis=-1).astype(np.float32) * np.float32(3.0)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)


def test_keeping_moves_narrow_changes_no_value(tmp_path, x, monkeypatch):
    model = _graph()
    narrow = _run(exact.exact_reference(model, {"t", "pick", "mean"}), tmp_path, "narrow", x)
    monkeypatch.setattr(exact, "MOVES", frozenset())
    wide = exact.exact_reference(model, {"t", "pick", "mean"})
    assert f"t{exact.WIDE}" in {n.name for n in wide.graph.node}  # the control: every region node widened
    assert np.array_equal(narrow, _run(wide, tmp_path, "wide", x))


def test_a_move_after_a_widened_node_stays_float64(tmp_path, x):
    g = Builder("sum_then_move")
    s = g.node("Mul", [g.input("x", SHAPE), g.const("k", 0.5)], "half")
    g.output(g.node("Transpose", [s], "t", perm=[0, 2, 3, 1]))
    model = onnx.shape_inference.infer_shapes(g.model())
    reference = exact.exact_reference(model, {"half", "t"})
    names = {n.name for n in reference.graph.node}
    assert {f"half{exact.WIDE}", f"t{exact.WIDE}", f"t{exact.WIDE}/round"} <= names and "t" not in names
    np.testing.assert_array_equal(_run(reference, tmp_path, "r", x), np.transpose(x * np.float32(0.5), (0, 2, 3, 1)))
