"""graphview: layered layout of the first nodes, and netron only when someone is watching."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from weftlib import graphview, report


def _diamond() -> onnx.ModelProto:
    v = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"), helper.make_node("Neg", ["a"], ["b"], name="b"),
             helper.make_node("Abs", ["a"], ["c"], name="c"), helper.make_node("Add", ["b", "c"], ["y"], name="d")]
    return helper.make_model(helper.make_graph(nodes, "g", [v("x")], [v("y")]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_layout_depths_and_edges():
    placed, edges = graphview.layout(_diamond())
    assert placed == [("a", "Relu", 0, 0), ("b", "Neg", 1, 0), ("c", "Abs", 1, 1), ("d", "Add", 2, 0)]
    assert sorted(edges) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert len(graphview.layout(_diamond(), max_nodes=2)[0]) == 2
    with pytest.raises(ValueError, match="max_nodes"):
        graphview.layout(_diamond(), max_nodes=0)


def test_figure_draws_counts_and_graph():
    import matplotlib.pyplot as plt

    fig = graphview.figure(_diamond(), title="t")
    assert len(fig.axes) == 2 and "4 nodes, 4 op types" in fig.axes[0].get_title()
    plt.close(fig)


def test_interactive_is_off_when_headless(tmp_path, monkeypatch):
    path = tmp_path / "d.onnx"
    onnx.save(_diamond(), str(path))
    calls = []
    import netron

    monkeypatch.setattr(netron, "start", lambda *a, **k: calls.append((a, k)) or ("localhost", 1234))
    monkeypatch.setenv(report.HEADLESS_ENV, "1")
    assert graphview.interactive(path) is None and calls == []
    monkeypatch.setenv(report.HEADLESS_ENV, "0")
    frame = graphview.interactive(path)
    assert calls and calls[0][1]["browse"] is False and calls[0][1]["address"][0] == "localhost"
    assert "localhost:1234" in frame.src
    with pytest.raises(FileNotFoundError, match="path"):
        graphview.interactive(tmp_path / "missing.onnx")
