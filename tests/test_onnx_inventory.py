"""onnx_core.inventory: what a graph holds, read from the model or its file, without torch."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from weftlib.onnx_core import inventory


def _gather_model(constant_index: bool) -> onnx.ModelProto:
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 3])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])
    inputs, inits = [data], []
    if constant_index:
        inits.append(numpy_helper.from_array(np.array([3, 0], dtype=np.int64), name="idx"))
    else:
        inputs.append(helper.make_tensor_value_info("idx", TensorProto.INT64, [2]))
    node = helper.make_node("Gather", ["data", "idx"], ["out"], name="pick", axis=0)
    graph = helper.make_graph([node], "g", inputs, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_dynamic_gathers_tells_runtime_indices_from_constants():
    assert inventory.dynamic_gathers(_gather_model(constant_index=False)) == ["pick"]
    assert inventory.dynamic_gathers(_gather_model(constant_index=True)) == []


def _plumbed_model() -> onnx.ModelProto:
    """x [2, 3] fp32 -> Shape -> (a 16-byte weight) Add -> y [2, 3]: one plumbing op, one initializer."""
    weight = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), name="w")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        initializer=[weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_counts_names_domains_and_plumbing():
    model = _plumbed_model()
    ops = inventory.inventory(model)
    assert ops == {"Add": 1, "Relu": 1, "Shape": 1}
    assert inventory.node_names(model) == {"Shape": ["shape"], "Relu": ["relu"], "Add": ["add"]}
    assert inventory.domains(model) == [""] and inventory.opset_of(model) == 17
    assert inventory.plumbing(ops) == {"Shape": 1}
    assert inventory.shapes(model.graph.output) == {"y": [2, 3], "s": [2]}


def test_largest_tensors_in_bytes():
    model = _plumbed_model()
    assert inventory.largest_initializer(model) == ("w", 16) and inventory.initializer_bytes(model) == 16
    assert inventory.largest_intermediate(model) == ("r", 24)  # the first of the [2, 3] fp32 tensors
    empty = helper.make_model(helper.make_graph([], "e", [], []))
    assert inventory.largest_initializer(empty) == ("", 0) and inventory.largest_intermediate(empty) == ("", 0)


def test_summarise_reads_a_file(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_plumbed_model(), str(path))
    summary = inventory.summarise(path)
    assert summary == {
        "path": str(path),
        "file_bytes": path.stat().st_size,
        "ir_version": _plumbed_model().ir_version,
        "opset": 17,
        "nodes": 3,
        "ops": {"Add": 1, "Relu": 1, "Shape": 1},
        "domains": [""],
        "dynamic_gathers": [],
        "plumbing": {"Shape": 1},
        "largest_initializer_bytes": 16,
        "largest_intermediate_bytes": 24,
    }
    with pytest.raises(FileNotFoundError, match="no ONNX file"):
        inventory.summarise(tmp_path / "missing.onnx")
