"""`gate fix` finishes what it starts: after its rewrites every node that reads only constants is folded
(onnxscript's folding, held to constants, within `FOLD_LIMIT`), and the folded graph is proven like any
rewrite's."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxscript import ir

from tests.test_gate_fix import _save
from weftlib.gate.fix import fix_model
from weftlib.gate.fix.folding import FOLD, FOLD_LIMIT, fold_constants
from weftlib.gate.graphs import Builder


def _trig_concat() -> onnx.ModelProto:
    """A rotary table built in the graph: Cos and Sin of a Range of constants, each made [8, 1] by a Reshape
    of a Constant shape, concatenated to [8, 2] and scaled, then multiplied into the input."""
    g = Builder("trig_concat")
    x = g.input("x", [1, 8, 2])
    phase = g.node("Range", [g.const("r0", 0.0), g.const("r1", 4.0), g.const("r2", 0.5)], "table/Range")
    column = g.node("Constant", [], "table/shape", value=numpy_helper.from_array(np.array([8, 1], np.int64)))
    cos = g.node("Reshape", [g.node("Cos", [phase], "table/Cos"), column], "table/Reshape_cos")
    sin = g.node("Reshape", [g.node("Sin", [phase], "table/Sin"), column], "table/Reshape_sin")
    table = g.node("Mul", [g.node("Concat", [cos, sin], "table/Concat", axis=-1), g.const("k", 0.5)], "table/Mul")
    g.output(g.node("Mul", [x, table], "out/Mul"))
    return g.model()


def test_a_concat_of_the_trig_tables_a_rewrite_made_constant_becomes_one_constant(tmp_path, ops):
    fix = fix_model(_save(tmp_path, _trig_concat(), "trig_concat"), ops)
    kept = [n.op_type for n in fix.fixed.graph.node]
    assert kept == ["Mul"], kept  # the table is one initializer, read by the one Mul of the input
    made = ["RangeOfConstants", "TrigOfConstant_Cos", "TrigOfConstant_Sin"]
    assert [a.rewrite for a in fix.rewrites] == [*made, FOLD], fix.rewrites  # folded once the rewrites settled
    folded = fix.rewrites[-1]
    assert {"table/Reshape_cos", "table/Concat", "table/Mul", "table/shape"} <= set(folded.replaced)
    assert not folded.produced and folded.round == 3
    assert fix.after.verdict == "pass" and not fix.unanswered  # nothing left on constants for the gate to refuse
    (table,) = [t for t in fix.fixed.graph.initializer if t.name in fix.fixed.graph.node[0].input]
    phase = np.arange(0, 4, 0.5)
    expected = np.stack([np.cos(phase), np.sin(phase)], axis=-1) * 0.5
    np.testing.assert_allclose(numpy_helper.to_array(table), expected, rtol=1e-6)
    assert not table.metadata_props  # no note of onnxscript's in the fixed graph
    assert fix.proof.proven and len(fix.proof.sets) == 3, fix.proof


def test_a_graph_no_rewrite_changes_is_not_folded(tmp_path, ops):
    """Folding finishes what the rewrites start: a Concat of two constant tables alone is left as it is."""
    g = Builder("tables_only")
    table = g.node("Concat", [g.const("cos", np.ones((8, 1))), g.const("sin", np.zeros((8, 1)))], "t/Concat", axis=-1)
    g.output(g.node("Mul", [g.input("x", [1, 8, 2]), table], "out/Mul"))
    fix = fix_model(_save(tmp_path, g.model(), "tables_only"), ops)
    assert not fix.rewrites and [n.op_type for n in fix.fixed.graph.node] == ["Concat", "Mul"]


def _graph(nodes, inits, shape=(2, 3), outputs=("y",)) -> ir.Model:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return ir.serde.deserialize_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_only_nodes_that_read_constants_are_folded_and_nothing_reads_the_input_less():
    """A Reshape of the input to its own shape (onnxscript's partial evaluation would drop it), an unread node
    of the original, a quantizer and a graph output's node are left; the Add of two constants is folded."""
    model = _graph(
        [
            helper.make_node("Add", ["a", "b"], ["ab"], name="c/Add"),
            helper.make_node("Reshape", ["x", "same"], ["xr"], name="x/Reshape"),
            helper.make_node("Mul", ["xr", "ab"], ["y"], name="out/Mul"),
            helper.make_node("Neg", ["a"], ["unread"], name="dead/Neg"),
            helper.make_node("QuantizeLinear", ["a", "s"], ["q"], name="q/Quantize"),
            helper.make_node("DequantizeLinear", ["q", "s"], ["dq"], name="q/Dequantize"),
            helper.make_node("Sub", ["a", "b"], ["z"], name="out/Sub"),
        ],
        {"a": np.ones(3, np.float32), "b": np.arange(3, dtype=np.float32), "same": np.array([2, 3]), "s": 0.5},
        outputs=("y", "z"),
    )
    fold_constants(model)
    names = [n.name for n in model.graph]
    assert names == ["x/Reshape", "out/Mul", "dead/Neg", "q/Quantize", "q/Dequantize", "out/Sub"], names
    (value,) = [v for v in model.graph.node("out/Mul").inputs if v is not None and v.name != "xr"]
    np.testing.assert_array_equal(value.const_value.numpy(), np.arange(1, 4, dtype=np.float32))


def test_a_constant_is_not_folded_into_one_larger_than_the_bound_unless_it_takes_out_as_much():
    """An Expand of a [1, 1] constant to more than `FOLD_LIMIT` elements stays an Expand; a Neg of a constant of
    that size only it reads is folded (the file does not grow)."""
    side = int(np.sqrt(FOLD_LIMIT)) + 1
    model = _graph(
        [
            helper.make_node("Expand", ["one", "wide"], ["big"], name="c/Expand"),
            helper.make_node("Neg", ["table"], ["negated"], name="c/Neg"),
            helper.make_node("Add", ["big", "negated"], ["y"], name="out/Add"),
        ],
        {
            "one": np.ones((1, 1), np.float32),
            "wide": np.array([side, side]),
            "table": np.ones((side, side), np.float32),
        },
    )
    fold_constants(model)
    assert [n.name for n in model.graph] == ["c/Expand", "out/Add"]
