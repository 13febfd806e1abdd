"""A cut of one segment that is the graph itself is proven by reading both files (`cut.same_graph`), nothing run and
no recorded run read; any difference between the segment file and the graph is named, and the chain is then run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from weftlib.gate.cut import partition as cut_partition
from weftlib.gate.cut import proof as cut_proof
from weftlib.gate.cut import same_graph
from weftlib.gate.cut.segments import HeldTo
from weftlib.gate.graphs import Builder
from weftlib.gate.pages import cut_tables
from weftlib.gate.run import cutting
from weftlib.gate.vocabulary import Side


def _model(op: str) -> onnx.ModelProto:
    """Conv then Relu (every node predicted to parse: one device segment) or Conv then Sin (refused: with `host`
    naming the Conv, one host segment)."""
    g = Builder(f"one_{op.lower()}")
    x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "/l0", seed=0)
    g.output(g.node(op, [x], f"/l1/{op}"))
    return g.model()


def _refuse_runs(monkeypatch) -> list[str]:
    """Every way a cut proof runs a graph or reads a recorded run, refused; what was asked is listed."""
    asked: list[str] = []

    def refuse(what):
        def call(*_a, **_k):
            asked.append(what)
            raise AssertionError(f"{what} was asked for")

        return call

    monkeypatch.setattr(cut_proof, "random_feeds", refuse("a fresh run"))
    monkeypatch.setattr(cut_proof, "_run_once", refuse("a chain run"))
    monkeypatch.setattr(cutting, "held_to", refuse("the recorded run"))
    return asked


@pytest.mark.parametrize(("op", "host", "side"), [("Relu", set(), Side.DEVICE), ("Relu", {"/l0/Conv"}, Side.HOST)])
def test_a_one_segment_cut_is_proven_by_reading_with_nothing_run(tmp_path, ops, monkeypatch, op, host, side):
    path = tmp_path / "one.onnx"
    onnx.save(_model(op), path)
    asked = _refuse_runs(monkeypatch)
    reference_for = cutting.held_to  # refused above: never asked when the cut is proven by reading
    part = cut_partition.write_partition(
        path, ops, tmp_path / "cut", host=host | ({"/l1/Relu"} if host else set()), reference_for=reference_for
    )
    assert [s.runs_on for s in part.segments] == [side] and not asked
    assert part.proven and part.held_to == HeldTo.IDENTICAL and part.max_abs_diff == 0.0
    written = json.loads((tmp_path / "cut" / "partition.json").read_text())
    assert written["chain_held_to"]["reference"] == str(HeldTo.IDENTICAL) and written["proven"]
    assert cut_tables.coverage_table({path: part}, tmp_path)["graph run"].tolist() == ["none: the graph itself"]


def test_a_cut_of_several_segments_still_runs_its_chain(tmp_path, ops):
    path = tmp_path / "two.onnx"
    onnx.save(_model("Sin"), path)
    part = cut_partition.write_partition(path, ops, tmp_path / "cut")
    assert len(part.segments) == 2 and part.held_to == HeldTo.FRESH and part.proven


def test_where_the_segment_file_differs_the_chain_is_run(tmp_path, ops, monkeypatch):
    path = tmp_path / "one.onnx"
    onnx.save(_model("Relu"), path)
    monkeypatch.setattr(same_graph, "difference", lambda *_a: "its weights differ from the graph's")
    part = cut_partition.write_partition(path, ops, tmp_path / "cut")
    assert len(part.segments) == 1 and part.held_to == HeldTo.FRESH and part.proven


def _changed(model: onnx.ModelProto, how: str) -> onnx.ModelProto:
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    g = changed.graph
    if how == "weight":
        w = numpy_helper.to_array(g.initializer[0]).copy()
        w.flat[0] = np.nextafter(w.flat[0], np.float32(np.inf))
        g.initializer[0].CopyFrom(numpy_helper.from_array(w, g.initializer[0].name))
    elif how == "node":
        g.node[-1].op_type = "Sigmoid"
    elif how == "attribute":
        g.node[0].attribute.append(helper.make_attribute("group", 1))
    elif how == "input type":
        g.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    elif how == "opset":
        changed.opset_import[0].version -= 1
    return changed


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("weight", "weights"),
        ("node", "nodes"),
        ("attribute", "nodes"),
        ("input type", "graph inputs"),
        ("opset", "operator sets"),
    ],
)
def test_same_graph_names_each_difference(tmp_path, how, named):
    model = _model("Relu")
    onnx.save(model, tmp_path / "a.onnx")
    onnx.save(_changed(model, how), tmp_path / "b.onnx")
    assert same_graph.difference(tmp_path / "b.onnx", tmp_path / "a.onnx") == f"its {named} differ from the graph's"


def test_same_graph_reads_past_node_order_names_and_shapes(tmp_path):
    model = _model("Relu")
    onnx.save(model, tmp_path / "a.onnx")
    other = onnx.shape_inference.infer_shapes(model)  # value_info added, as the extractor's segment files have it
    other.graph.name = "renamed"
    nodes = list(other.graph.node)
    del other.graph.node[:]
    other.graph.node.extend(reversed(nodes))
    onnx.save(other, tmp_path / "b.onnx")
    assert len(other.graph.value_info) > 0
    assert same_graph.difference(tmp_path / "b.onnx", tmp_path / "a.onnx") == ""


def test_a_one_segment_cut_of_a_real_export_is_the_graph_itself(tmp_path, ops):
    """On a graph the suite exports (the stand-in NAF's attention layer on images, one device segment): the
    extractor's segment file reads as the graph itself."""
    from weftlib import standins
    from weftlib.attention import naf, naf_variants

    hub = naf.load_hub(standins.NAF_HUB_DIR, "naf", dim=32, kernel_size=3)
    prepared = naf_variants.prepare_at(hub, 6, 4, 16, seed=1)
    (exported,) = naf_variants.export_variants(
        prepared,
        tmp_path,
        method="lowres",
        reference="shift",
        atol=1e-4,
        upsampler_variants=[],
        layer_variants=["image"],
    ).values()
    part = cutting.cut_all([Path(exported.path)], ops, tmp_path / "cuts")[Path(exported.path)]
    assert len(part.segments) == 1 and part.held_to == HeldTo.IDENTICAL and part.proven
