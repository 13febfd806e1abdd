"""Malformed graphs refused before any work, in one line with exit 2, by `device` and `partition` alike
(`weftlib.gate.predict.graph_checks`), and what a cut must refuse besides; every graph is built here (issue 35)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_gate_graphs import save
from weftlib.gate.__main__ import main

X = (1, 8, 4, 4)


def vi(name: str, shape=X, dtype=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, list(shape))


def model(nodes, inputs=None, outputs=None, inits=None, *, ir=10, opset=17, domains=()) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.ones((8, 8, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        nodes, "g", inputs or [vi("x")], outputs or [vi("y")], initializer=[weight] if inits is None else inits
    )
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = ir
    return m


def conv(x: str, y: str, name: str) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, "w"], [y], name=name, kernel_shape=[1, 1])


def relu(x: str, y: str, name: str) -> onnx.NodeProto:
    return helper.make_node("Relu", [x], [y], name=name)


def outer_if(before: bool) -> onnx.ModelProto:
    """An If whose then-branch adds `r`, a tensor of the graph around it; `before`: the If comes before the node
    that makes `r` (out of order, as ONNX counts a subgraph's reads)."""
    then = helper.make_graph([helper.make_node("Add", ["x", "r"], ["t"], name="/then/Add")], "then", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="/else/Id")], "else", [], [vi("e")])
    branch = helper.make_node("If", ["cond"], ["y"], name="/If", then_branch=then, else_branch=other)
    made = [conv("x", "c", "/C"), relu("c", "r", "/R")]
    return model(
        [branch, *made] if before else [*made, branch],
        inputs=[vi("x"), vi("cond", (1,), TensorProto.BOOL)],
    )


STRUCTURE = {  # refused by both commands
    "cycle": (model([relu("b", "a", "/A"), relu("a", "b", "/B"), relu("a", "y", "/C")]), "form a cycle"),
    "unsorted": (model([relu("c", "y", "/R"), conv("x", "c", "/C")]), "not in topological order"),
    "output named like an input": (model([conv("x", "x", "/C"), relu("x", "y", "/R")]), "which is a graph input"),
    "tensor made twice": (model([conv("x", "y", "/C"), relu("x", "y", "/R")]), "made by node '/C'"),
    "read of nothing": (model([relu("q", "y", "/R")]), "which no node, input or initializer makes"),
    "If read out of order": (outer_if(before=True), "reads 'r' before node '/R' makes it"),
}
CUT_ONLY = {  # the gate judges these; a cut, which runs the graph, cannot
    "custom domain": (
        model([helper.make_node("Foo", ["x"], ["y"], name="/Foo", domain="my.ops")], inits=[], domains=["my.ops"]),
        "custom domain 'my.ops'",
    ),
    "7 TiB input": (
        model([relu("x", "y", "/R")], [vi("x", (1024,) * 4)], [vi("y", (1024,) * 4)], inits=[], ir=10),
        "tensor 'x' declares [1024, 1024, 1024, 1024] float, 4,096.0 GiB, over the memory budget",
    ),
    "If reading its graph": (outer_if(before=False), "holds a subgraph that reads 'r' from the graph around it"),
    "pass-through": (model([], outputs=[vi("x")], inits=[]), "the graph has no nodes"),
}


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("case", sorted(STRUCTURE))
def test_a_malformed_graph_is_refused_by_device_and_partition(case, tmp_path, capsys):
    graph, reason = STRUCTURE[case]
    path = save(graph, tmp_path / "m.onnx")
    assert main(["device", str(path)]) == 2
    assert reason in one_line(capsys.readouterr().err)
    assert main(["partition", str(path), "--out", str(tmp_path / "out")]) == 2
    assert reason in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # nothing written, nothing half-built


@pytest.mark.parametrize("case", sorted(CUT_ONLY))
def test_what_no_cut_can_run_is_refused_before_any_work(case, tmp_path, capsys):
    graph, reason = CUT_ONLY[case]
    path = save(graph, tmp_path / "m.onnx")
    assert main(["device", str(path)]) != 2  # the gate judges the graph: nothing in it is malformed
    capsys.readouterr()
    assert main(["partition", str(path), "--out", str(tmp_path / "out")]) == 2
    assert reason in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_missing_external_data_is_unreadable_exit_2_in_both(tmp_path, capsys):
    folder = tmp_path / "ext"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(
        model([conv("x", "c", "/C"), relu("c", "y", "/R")]),
        str(path),
        save_as_external_data=True,
        location="m.bin",
        size_threshold=0,
    )
    (folder / "m.bin").unlink()
    for command in (["device", str(path)], ["partition", str(path), "--out", str(tmp_path / "out")]):
        assert main(command) == 2
        assert "initializer 'w' keeps its data in 'm.bin', which is not a file" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_scalar_input_is_static(tmp_path, capsys):
    scale = helper.make_node("Mul", ["c", "s"], ["y"], name="/Mul")
    graph = model([conv("x", "c", "/C"), scale], inputs=[vi("x"), vi("s", ())])
    path = save(graph, tmp_path / "m.onnx")
    assert main(["partition", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err


def test_a_binary_allowlist_is_named(tmp_path, capsys):
    ops = tmp_path / "ops.yaml"
    ops.write_bytes(bytes(range(256)))
    path = save(model([conv("x", "y", "/C")]), tmp_path / "m.onnx")
    assert main(["device", str(path), "--ops", str(ops)]) == 2
    assert str(ops) in one_line(capsys.readouterr().err)


def test_an_empty_file_is_not_a_graph_without_nodes(tmp_path, capsys):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert main(["partition", str(empty), "--out", str(tmp_path / "out")]) == 2
    assert "not an ONNX model" in one_line(capsys.readouterr().err) and not (tmp_path / "out").exists()
