"""The device gate on real ONNX files built here: ops outside, conditions, graph limits, broken files."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper

from tests.test_gate_graphs import attention, gather, make, save, softmax_axis, standalone_erf, tensor, topk_head
from weftlib.gate import DeviceOps, device_gate, load_device_ops
from weftlib.gate.__main__ import main


@pytest.fixture(scope="module")
def ops() -> DeviceOps:
    return load_device_ops()


def test_attention_graph_passes(tmp_path, ops):
    result = device_gate(save(attention(), tmp_path / "attn.onnx"), ops)
    assert result.passed, result.problems
    assert result.ops == {
        "Add": 1,
        "Div": 1,
        "Erf": 1,
        "LayerNormalization": 1,
        "MatMul": 2,
        "Mul": 2,
        "Softmax": 1,
        "Transpose": 1,
    }
    assert (result.nodes, result.ir_version, result.opset) == (10, 10, 17)


def test_ops_outside_are_named_with_counts_and_nodes(tmp_path, ops):
    result = device_gate(save(topk_head(), tmp_path / "head.onnx"), ops)
    assert not result.passed
    assert set(result.outside) == {"TopK"}
    assert result.outside["TopK"].count == 1 and result.outside["TopK"].nodes == ("/head/TopK",)
    assert "data-dependent" in result.outside["TopK"].blocker
    assert result.failing_ops == ("TopK",)


def test_plain_op_names_work_as_an_allowlist(tmp_path):
    path = save(topk_head(), tmp_path / "head.onnx")
    assert device_gate(path, ["Softmax", "TopK"]).passed
    assert device_gate(path, {"Softmax"}).failing_ops == ("TopK",)


def test_non_constant_gather_is_a_problem_even_though_gather_is_allowlisted(tmp_path, ops):
    assert "Gather" in ops.allowed
    assert device_gate(save(gather(True), tmp_path / "c.onnx"), ops).passed
    result = device_gate(save(gather(False), tmp_path / "d.onnx"), ops)
    assert not result.passed and "ArgMax" in result.outside
    (failure,) = result.conditions
    assert (failure.op, failure.node, failure.condition) == ("Gather", "/sel/Gather", "constant_index")
    assert "ArgMax" in failure.reason
    assert result.failing_ops == ("ArgMax", "Gather")


def test_gather_index_from_constant_node_counts_as_constant(tmp_path, ops):
    nodes = [
        helper.make_node(
            "Constant", [], ["idx"], name="/c", value=helper.make_tensor("v", onnx.TensorProto.INT64, [2], [0, 1])
        ),
        helper.make_node("Gather", ["x", "idx"], ["y"], name="/g", axis=1),
    ]
    model = make(nodes, [tensor("x")], [tensor("y", (1, 2, 8))])
    assert device_gate(save(model, tmp_path / "g.onnx"), ops).passed


def test_standalone_erf_and_non_last_axis_softmax_break_their_conditions(tmp_path, ops):
    erf = device_gate(save(standalone_erf(), tmp_path / "erf.onnx"), ops)
    assert [(c.op, c.condition) for c in erf.conditions] == [("Erf", "gelu_pattern")]
    assert device_gate(save(softmax_axis(3), tmp_path / "s2.onnx"), ops).passed  # rank 4: axis 3 is last
    s1 = device_gate(save(softmax_axis(1), tmp_path / "s1.onnx"), ops)
    assert [(c.op, c.condition) for c in s1.conditions] == [("Softmax", "last_axis")]


@pytest.mark.parametrize(
    "change, expected",
    [
        (dict(ir=11), "IR version 11 > 10"),
        (dict(opset=11), "opset 11 outside 13-23"),
    ],
)
def test_compiler_graph_limits(tmp_path, ops, change, expected):
    result = device_gate(save(attention(**change), tmp_path / "m.onnx"), ops)
    assert not result.passed and result.failing_ops == ()
    assert any(p.startswith(expected) for p in result.problems), result.problems


def test_non_standard_domain_and_dynamic_input_are_problems(tmp_path, ops):
    nodes = [helper.make_node("FastGelu", ["x"], ["y"], name="/ms/FastGelu", domain="com.microsoft")]
    model = make(
        nodes, [tensor("x", ("batch", 4, 8))], [tensor("y", ("batch", 4, 8))], extra_opsets=[("com.microsoft", 1)]
    )
    result = device_gate(save(model, tmp_path / "ms.onnx"), ops)
    assert "com.microsoft::FastGelu" in result.outside
    assert any("non-standard op domain(s) ['com.microsoft']" in p for p in result.problems)
    assert any("non-static input shape(s): x ['batch', 4, 8]" in p for p in result.problems)


def test_ops_inside_subgraphs_are_counted(tmp_path, ops):
    branch = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="/if/TopK", axis=-1)],
        "then",
        [],
        [tensor("v", (1, 1, 4, 2)), helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [1, 4, 2])],
    )
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["w"], name="/else/Id")], "else", [], [tensor("w")])
    nodes = [helper.make_node("If", ["c"], ["out"], name="/If", then_branch=branch, else_branch=other)]
    model = make(
        nodes,
        [tensor("x"), helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [tensor("out", (1, 1, 4, 2))],
        [onnx.numpy_helper.from_array(__import__("numpy").array([2]), "k")],
    )
    result = device_gate(save(model, tmp_path / "if.onnx"), ops)
    assert set(result.outside) == {"If", "TopK"}


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty file"),
        (b"this is not a model\n" * 20, "not a readable ONNX model (DecodeError"),
        (bytes(range(256)) * 4, "not a readable ONNX model"),
    ],
)
def test_broken_files_fail_with_a_reason(tmp_path, ops, content, reason):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    result = device_gate(path, ops)
    assert not result.passed and len(result.problems) == 1 and reason in result.problems[0]


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9, 0.99])
def test_truncated_file_fails_with_a_reason(tmp_path, ops, fraction):
    data = attention().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * fraction)])
    result = device_gate(path, ops)
    assert not result.passed and result.problems and result.ops == {}


def test_missing_file_and_bad_arguments(tmp_path, ops):
    assert "no such file" in device_gate(tmp_path / "nope.onnx", ops).problems[0]
    with pytest.raises(TypeError, match="onnx_path"):
        device_gate(None, ops)
    with pytest.raises(TypeError, match="allow"):
        device_gate(tmp_path / "x.onnx", "Softmax")


def test_device_cli_exit_codes(tmp_path, capsys):
    assert main(["device", str(save(attention(), tmp_path / "a.onnx"))]) == 0
    assert main(["device", str(save(topk_head(), tmp_path / "h.onnx"))]) == 1
    out = capsys.readouterr().out
    assert "PASS" in out and "outside DEVICE_OPS: TopK x1" in out


def test_numeric_check_beside_the_file_decides_too(tmp_path):
    """The export's torch-vs-onnxruntime check (written by weftlib.onnx_core.export) is part of the gate."""
    import json

    import torch

    from weftlib.onnx_core import export as onnx_export
    from weftlib.gate import device_gate

    rep = onnx_export.export(
        torch.nn.Conv2d(4, 3, 1),
        (torch.randn(1, 4, 2, 2),),
        tmp_path / "lin.onnx",
        input_names=["x"],
        output_names=["y"],
    )
    allow = ["Conv"]
    good = device_gate(rep.path, allow)
    assert good.passed and good.parity["parity_ok"] and good.parity["max_abs_diff"] <= 1e-4
    onnx_export.parity_path(rep.path).write_text(json.dumps({"max_abs_diff": 0.5, "atol": 1e-4, "parity_ok": False}))
    bad = device_gate(rep.path, allow)
    assert not bad.passed and any("differs from torch by 0.5" in p for p in bad.problems)
    onnx_export.parity_path(rep.path).write_text("{not json")
    assert not device_gate(rep.path, allow).passed


def dit_inputs() -> onnx.ModelProto:
    """RFD 1154's input layer case: x [1,8,8,8,8] (rank 5), a rank-1 timestep, a rank-3 conditioning."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["xm"], name="/x/ReduceMean", axes=[4], keepdims=0),
        helper.make_node("Add", ["xm", "t"], ["xt"], name="/t/Add"),
        helper.make_node("ReduceMean", ["cond"], ["cm"], name="/c/ReduceMean", axes=[1], keepdims=0),
        helper.make_node("Relu", ["xt"], ["y"], name="/y/Relu"),
    ]
    return make(
        nodes,
        [tensor("x", (1, 8, 8, 8, 8)), tensor("t", (1,)), tensor("cond", (1, 4, 8))],
        [tensor("y", (1, 8, 8, 8)), tensor("cm", (1, 8))],
    )


def test_inputs_not_rank_4_fail_the_gate_with_the_input_layers_reason(tmp_path, ops):
    result = device_gate(save(dit_inputs(), tmp_path / "dit.onnx"), ops)
    assert not result.passed and not result.readable
    assert result.ops_passed  # every op is allowlisted: the failure is the input regime alone
    assert len(result.input_problems) == 3
    x, t, cond = result.input_problems
    assert "'x' [1, 8, 8, 8, 8] is rank 5" in x and "_add_input_layers" in x and "before reading any operator" in x
    assert "'t' [1] is rank 1" in t and "'cond' [1, 4, 8] is rank 3" in cond
    assert result.inputs == (("x", (1, 8, 8, 8, 8)), ("t", (1,)), ("cond", (1, 4, 8)))


@pytest.mark.parametrize("shape", [(1, 8), (1, 4, 8, 8, 2)])
def test_rank_2_and_rank_5_fail_rank_4_does_not(tmp_path, ops, shape):
    bad = device_gate(save(softmax_like(shape), tmp_path / "bad.onnx"), ops)
    assert not bad.readable and any("_add_input_layers" in p for p in bad.problems)
    good = device_gate(save(softmax_like((1, 2, 4, 8)), tmp_path / "good.onnx"), ops)
    assert good.readable and good.passed, good.problems


def softmax_like(shape) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="/r/Relu")]
    return make(nodes, [tensor("x", shape)], [tensor("y", shape)])


def test_weights_listed_as_inputs_are_not_inputs(tmp_path, ops):
    import numpy as np

    model = softmax_like((1, 2, 4, 8))
    model.graph.input.append(tensor("w", (3,)))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(3, np.float32), "w"))
    result = device_gate(save(model, tmp_path / "w.onnx"), ops)
    assert result.readable and result.inputs == (("x", (1, 2, 4, 8)),)
