"""The op-probe table builds a proven probe for every row, and `run_once` runs what the gate builds."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from weftlib.gate.compiler.probe_graphs import OP_PROBES, op_probe, op_probe_nodes
from weftlib.gate.compiler.proving import prove, run_once
from weftlib.gate.cut.proof import random_feeds


@pytest.mark.parametrize("op", sorted(OP_PROBES))
def test_every_row_of_the_table_is_a_proven_probe_between_two_convs(op):
    model, _ = op_probe(op)
    prove(model)
    nodes = model.graph.node
    assert (nodes[0].name, nodes[-1].name) == ("probe/pre_Conv", "probe/post_Conv")
    asked = op_probe_nodes(model, op)
    assert asked and all(n.op_type == op for n in nodes if n.name in asked)


def identity(shape, dtype=TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="i")],
        "g",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("y", dtype, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def test_run_once_feeds_the_cut_proofs_random_inputs_a_symbolic_dimension_reading_one(tmp_path):
    onnx.save(identity([2, 3]), str(tmp_path / "static.onnx"))
    (out,) = run_once(identity([2, "seq", 3]))
    assert out.shape == (2, 1, 3)
    (static,) = run_once(identity([2, 1, 3]))
    np.testing.assert_array_equal(out, static)
    expected = random_feeds(tmp_path / "static.onnx", seed=1)["x"]
    np.testing.assert_array_equal(run_once(identity([2, 3]))[0], expected)


def test_prove_refuses_a_graph_with_a_non_finite_output():
    model = identity([1, 4])
    model.graph.node[0].op_type = "Log"  # a standard normal input has negative values: NaN
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    with pytest.raises(ValueError, match="non-finite"):
        prove(model)
