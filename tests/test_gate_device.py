"""The device gate on real ONNX files built here: three verdicts with their findings, graph limits, inputs
rank by rank, broken files, and the command line."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper

from tests.test_gate_graphs import (
    attention,
    gather,
    make,
    save,
    softmax_axis,
    standalone_erf,
    tensor,
    topk_head,
    with_op,
)
from weftlib.gate import device_gate, load_device_ops
from weftlib.gate.__main__ import main


def test_attention_graph_passes(tmp_path, ops):
    result = device_gate(save(attention(), tmp_path / "attn.onnx"), ops)
    assert result.passed and result.verdict == "pass", result.findings
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
    assert set(result.prediction.nodes.values()) == {"parse"} and result.findings == ()


def test_a_refused_op_is_named_with_its_node_rule_and_evidence(tmp_path, ops):
    result = device_gate(save(topk_head(), tmp_path / "head.onnx"), ops)
    assert result.verdict == "fail" and result.failing_ops == ("TopK",)
    (finding,) = [f for f in result.findings if f.prediction == "refused"]
    assert (finding.node, finding.op, finding.rule) == ("/head/TopK", "TopK", "op")
    assert finding.evidence.startswith("refused on DFC 5.3.0 (ADR ")
    assert result.outside["TopK"].nodes == ("/head/TopK",) and "data-dependent" in result.outside["TopK"].blocker


def test_an_op_the_record_is_silent_on_is_unjudged_never_a_pass(tmp_path, ops):
    result = device_gate(save(with_op("Sinh", "/act/Sinh"), tmp_path / "sinh.onnx"), ops)
    assert result.verdict == "unjudged" and not result.passed
    (finding,) = result.findings
    assert (finding.node, finding.prediction, finding.evidence) == (
        "/act/Sinh",
        "unjudged",
        "not listed in params/device_ops.yaml",
    )


def test_plain_op_names_are_an_allowlist_without_a_record(tmp_path):
    """Named ops count as documented; with no evidence for any rule, even the inputs stay unjudged."""
    path = save(topk_head(), tmp_path / "head.onnx")
    named = device_gate(path, {"Softmax"})
    assert named.verdict == "unjudged" and named.unjudged_ops == ("TopK",)
    assert named.prediction.nodes["/head/Softmax"] == "parse" and named.prediction.inputs == {"x": "unjudged"}


def test_gathers_are_judged_by_where_their_index_comes_from(tmp_path, ops):
    const = device_gate(save(gather(True), tmp_path / "c.onnx"), ops)
    assert [(f.node, f.rule) for f in const.findings] == [("/emb/Gather", "gather_constant_index")]
    dynamic = device_gate(save(gather(False), tmp_path / "d.onnx"), ops)
    rules = {f.rule for f in dynamic.findings if f.node == "/sel/Gather"}
    assert rules == {"gather_computed_index"} and "ArgMax" not in dynamic.outside  # the vendor lists ArgMax
    assert dynamic.verdict == "unjudged"  # the only refusal on record is Hailo-8L's, not the target's


def test_a_standalone_erf_is_unjudged_since_its_refusal_was_retracted(tmp_path, ops):
    erf = device_gate(save(standalone_erf(), tmp_path / "erf.onnx"), ops)
    (finding,) = erf.findings
    assert (finding.rule, finding.prediction) == ("erf_standalone", "unjudged")
    assert "retracted" in finding.evidence
    assert device_gate(save(softmax_axis(3), tmp_path / "s3.onnx"), ops).passed  # rank 4: axis 3 is the last
    s1 = device_gate(save(softmax_axis(1), tmp_path / "s1.onnx"), ops)
    assert [(f.rule, f.prediction) for f in s1.findings] == [("softmax_not_last_axis", "unjudged")]


def _relu_at(opset: int) -> onnx.ModelProto:
    """Valid ONNX at `opset` (attention's LayerNormalization is not: a graph ONNX rejects is refused, not failed)."""
    return make([helper.make_node("Relu", ["x"], ["y"], name="/relu")], [tensor("x")], [tensor("y")], opset=opset)


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda: attention(ir=11), "IR version 11 > 10"),
        (lambda: _relu_at(10), "opset 10 outside 11-23"),
    ],
)
def test_compiler_graph_limits(tmp_path, ops, build, expected):
    result = device_gate(save(build(), tmp_path / "m.onnx"), ops)
    assert result.verdict == "fail" and result.failing_ops == ()
    assert any(p.startswith(expected) for p in result.problems), result.problems


def test_non_standard_domain_fails_and_a_dynamic_input_is_refused(tmp_path, ops):
    nodes = [helper.make_node("FastGelu", ["x"], ["y"], name="/ms/FastGelu", domain="com.microsoft")]
    model = make(
        nodes, [tensor("x", ("batch", 4, 8))], [tensor("y", ("batch", 4, 8))], extra_opsets=[("com.microsoft", 1)]
    )
    result = device_gate(save(model, tmp_path / "ms.onnx"), ops)
    assert "com.microsoft::FastGelu" in result.outside and result.verdict == "fail"
    assert any("non-standard op domain(s) ['com.microsoft']" in p for p in result.problems)
    assert ("x", "input_static_shape", "refused") in {(f.node, f.rule, f.prediction) for f in result.findings}


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
    assert set(result.outside) == {"If", "TopK"} and "/if/TopK" in result.prediction.nodes


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty file"),
        (b"this is not a model\n" * 20, "not a readable ONNX model (DecodeError"),
        (bytes(range(256)) * 4, "not a readable ONNX model"),
    ],
)
def test_broken_files_fail_with_a_reason_and_claim_nothing(tmp_path, ops, content, reason, capsys):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    result = device_gate(path, ops)
    assert result.verdict == "fail" and not result.read and not result.readable
    assert len(result.problems) == 1 and reason in result.problems[0] and result.findings == ()
    assert main(["device", str(path)]) == 2
    err = capsys.readouterr()
    assert reason in err.err and err.out == ""  # it says why, and claims nothing about the graph


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


def test_device_cli_exit_codes_and_json(tmp_path, capsys):
    import json

    assert main(["device", str(save(attention(), tmp_path / "a.onnx"))]) == 0
    assert main(["device", str(save(topk_head(), tmp_path / "h.onnx"))]) == 1
    assert main(["device", str(save(with_op("Sinh", "/act/Sinh"), tmp_path / "u.onnx"))]) == 3
    out = capsys.readouterr().out
    assert "PASS" in out and "refused  /head/TopK [TopK] by op TopK" in out and "UNJUDGED" in out
    assert main(["device", str(tmp_path / "h.onnx"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "fail"
    assert {"node": "/head/TopK", "op": "TopK", "rule": "op", "prediction": "refused"}.items() <= report["findings"][
        0
    ].items()
    assert set(report["findings"][0]) == {"node", "op", "rule", "prediction", "evidence", "detail"}
    assert report["sources"]["ADR"].startswith("weftspun/rf-detr-cpp docs/decisions/0005")
    assert main(["device", str(tmp_path / "a.onnx"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "verdict": "pass",
        "findings": [],
        "problems": [],
        "model": str(tmp_path / "a.onnx"),
        "nodes": 10,
        "sources": {},
    }


def test_numeric_check_beside_the_file_decides_too(tmp_path):
    """The export's torch-vs-onnxruntime check (written by weftlib.onnx_core.export) is part of the gate."""
    import json

    import torch

    from weftlib.gate import device_gate
    from weftlib.onnx_core import export as onnx_export

    rep = onnx_export.export(
        torch.nn.Conv2d(4, 3, 1),
        (torch.randn(1, 4, 2, 2),),
        tmp_path / "lin.onnx",
        input_names=["x"],
        output_names=["y"],
    )
    allow = load_device_ops()
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


def test_rfd_1154s_inputs_are_judged_rank_by_rank(tmp_path, ops):
    """x rank 5 (unjudged: the record never isolated it), t rank 1 (refused), cond rank 3 (parses)."""
    result = device_gate(save(dit_inputs(), tmp_path / "dit.onnx"), ops)
    assert result.verdict == "fail" and not result.readable
    assert result.prediction.inputs == {"x": "unjudged", "t": "refused", "cond": "parse"}
    (t,) = [f for f in result.findings if f.node == "t"]
    assert t.rule == "input_rank_1" and t.inferred and "[clef-rank1-input]" in t.evidence
    assert result.inputs == (("x", (1, 8, 8, 8, 8)), ("t", (1,)), ("cond", (1, 4, 8)))


@pytest.mark.parametrize(
    "shape, prediction",
    [
        ((1, 8), "parse"),
        ((1, 4, 8), "parse"),
        ((1, 2, 4, 8), "parse"),
        ((1, 4, 8, 8, 2), "unjudged"),
        ((8,), "refused"),
    ],
)
def test_each_input_rank_takes_its_rule(tmp_path, ops, shape, prediction):
    result = device_gate(save(relu_on(shape), tmp_path / "r.onnx"), ops)
    assert result.prediction.inputs["x"] == prediction


def relu_on(shape) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="/r/Relu")]
    return make(nodes, [tensor("x", shape)], [tensor("y", shape)])


def test_weights_listed_as_inputs_are_not_inputs(tmp_path, ops):
    import numpy as np

    model = relu_on((1, 2, 4, 8))
    model.graph.input.append(tensor("w", (3,)))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(3, np.float32), "w"))
    result = device_gate(save(model, tmp_path / "w.onnx"), ops)
    assert result.readable and result.inputs == (("x", (1, 2, 4, 8)),)
