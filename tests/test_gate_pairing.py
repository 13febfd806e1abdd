"""The four cells of the pairing table (plus "not run" and "unrecognised"), each from a real ONNX graph built
here and DFC text in the format the DFC prints."""

from __future__ import annotations

import pytest

from tests.test_gate_graphs import attention, save, topk_head, with_op
from weftlib.gate import device_gate, pair, read_dfc_log
from weftlib.gate.__main__ import main
from weftlib.gate.compiler.pairing import UNBOUND
from weftlib.gate.vocabulary import PairVerdict

HEADER = (
    "hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException: "
    "Parsing failed. The errors found in the graph are:"
)


def success(name: str) -> str:
    return (
        f"[info] Translation started on ONNX model {name}\n"
        f"[info] Translation completed on ONNX model {name} (completion time: 00:00:00.52)\n"
        f"[info] Saved HAR to: /model/{name}.har\n"
    )


def rejection(*lines: str, tail: str = "", model: str | None = None) -> str:
    """A parser rejection as the DFC prints it; `model` adds the "Translation started" line that names it."""
    body = "\n".join(f" {line}" for line in lines)
    started = f"[info] Translation started on ONNX model {model}\n" if model else ""
    return (
        started
        + f"{HEADER}\n{body}\n"
        + (f"Please try to parse the model again, using these end node names: {tail}\n" if tail else "")
    )


def run(tmp_path, ops, model, name, text, by_hand=False):
    path = save(model, tmp_path / f"{name}.onnx")
    gate = device_gate(path, ops)
    return gate, pair(gate, read_dfc_log(text) if text is not None else None, path, by_hand=by_hand)


def test_pass_and_parses_means_the_allowlist_held(tmp_path, ops):
    gate, result = run(tmp_path, ops, attention(), "attn", success("attn"))
    assert gate.passed
    assert (result.gate, result.dfc, result.verdict, result.edits) == ("PASS", "parses", PairVerdict.HELD, ())


def test_pass_but_rejected_means_too_generous_and_resolves_the_node(tmp_path, ops):
    text = rejection(
        "UnsupportedSoftmaxLayerError in op /attn/Softmax: Unsupported softmax", tail="/attn/MatMul", model="attn"
    )
    gate, result = run(tmp_path, ops, attention(), "attn", text)
    assert gate.passed and result.verdict == PairVerdict.TOO_GENEROUS
    assert result.dfc_ops == ("Softmax",)  # the message names no op: found through the graph
    assert [(e.action, e.op) for e in result.edits] == [("move out", "Softmax")]


def test_fail_but_parsed_means_too_strict(tmp_path, ops):
    gate, result = run(tmp_path, ops, topk_head(), "head", success("head"))
    assert gate.verdict == "fail" and gate.failing_ops == ("TopK",)
    assert (result.gate, result.dfc, result.verdict) == ("FAIL", "parses", PairVerdict.TOO_STRICT)
    assert [(e.action, e.op) for e in result.edits] == [("move in", "op:TopK")]


def test_an_unjudged_prediction_the_dfc_answered_adds_evidence(tmp_path, ops):
    gate, result = run(tmp_path, ops, with_op("Sinh", "/act/Sinh"), "hs", success("hs"))
    assert gate.verdict == "unjudged" and gate.unjudged_ops == ("Sinh",)
    assert (result.gate, result.dfc, result.verdict) == ("UNJUDGED", "parses", PairVerdict.OBSERVED_NOW)
    assert [(e.action, e.op) for e in result.edits] == [("add evidence", "op:Sinh")]
    assert result.judged
    text = rejection("UnsupportedOperationError in op /act/Sinh: Sinh operation is unsupported", model="hs")
    _, refused = run(tmp_path, ops, with_op("Sinh", "/act/Sinh"), "hs", text)
    assert refused.verdict == PairVerdict.OBSERVED_NOW and [(e.action, e.op) for e in refused.edits] == [
        ("add evidence", "Sinh")
    ]


def test_a_graph_the_gate_cannot_read_is_not_paired(tmp_path, ops, capsys):
    data = attention().SerializeToString()
    cut = tmp_path / "attn.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="nothing to pair"):
        pair(device_gate(cut, ops), read_dfc_log(success("attn")), cut)
    log = tmp_path / "attn.log"
    log.write_text(success("attn"))
    assert main(["pair", str(cut), "--dfc", str(log)]) == 2
    assert "cannot be paired" in capsys.readouterr().err


def test_both_reject_on_the_same_op(tmp_path, ops):
    text = rejection("UnsupportedOperationError in op /head/TopK: TopK operation is unsupported", model="head")
    _gate, result = run(tmp_path, ops, topk_head(), "head", text)
    assert (result.verdict, result.agreement, result.gate_ops, result.dfc_ops) == (
        PairVerdict.BOTH_REJECT,
        "same ops",
        ("TopK",),
        ("TopK",),
    )
    assert result.edits == ()


def test_both_reject_with_an_extra_op_the_gate_allowed(tmp_path, ops):
    text = rejection(
        "UnsupportedSoftmaxLayerError in op /head/Softmax: Unsupported softmax",
        "UnsupportedOperationError in op /head/TopK: TopK operation is unsupported",
        model="head",
    )
    _, result = run(tmp_path, ops, topk_head(), "head", text)
    assert (result.verdict, result.agreement) == (PairVerdict.BOTH_REJECT, "overlap")
    assert [(e.action, e.op) for e in result.edits] == [("move out", "Softmax")]


def test_rejection_naming_a_node_not_in_the_graph_is_inconclusive_and_left_for_review(tmp_path, ops):
    text = rejection(
        "UnsupportedShuffleLayerError in op /elsewhere/Reshape: Failed to determine type of layer", model="attn"
    )
    _, result = run(tmp_path, ops, attention(), "attn", text)
    assert result.verdict == PairVerdict.UNJUDGED_INCONCLUSIVE and result.unresolved_nodes == ("/elsewhere/Reshape",)
    assert [(e.action, e.op) for e in result.edits] == [("review", "/elsewhere/Reshape")]


def test_not_run_and_unrecognised_are_never_a_pass(tmp_path, ops):
    _, not_run = run(tmp_path, ops, attention(), "attn", None)
    _, unknown = run(tmp_path, ops, attention(), "attn", "[info] Translation started on ONNX model attn\n")
    assert (not_run.verdict, not_run.dfc) == (PairVerdict.NOT_RUN, "not run")
    assert (unknown.verdict, unknown.dfc) == (PairVerdict.UNRECOGNISED, "unrecognised")
    assert PairVerdict.HELD not in (not_run.verdict, unknown.verdict)


def test_pair_argument_checks(tmp_path, ops):
    path = save(attention(), tmp_path / "a.onnx")
    with pytest.raises(TypeError, match="gate"):
        pair(None, None, path)
    with pytest.raises(TypeError, match="dfc"):
        pair(device_gate(path, ops), "parsed", path)


def test_pair_cli(tmp_path, capsys):
    path = save(topk_head(), tmp_path / "head.onnx")
    log = tmp_path / "head.dfc.log"
    log.write_text(rejection("UnsupportedOperationError in op /head/TopK: TopK operation is unsupported", model="head"))
    assert main(["pair", str(path), "--dfc", str(log)]) == 1
    assert "both reject" in capsys.readouterr().out
    good = save(attention(), tmp_path / "attn.onnx")
    (tmp_path / "attn.log").write_text(success("attn"))
    assert main(["pair", str(good), "--dfc", str(tmp_path / "attn.log")]) == 0


# The three failure classes, each from a graph built here and DFC text in the format the DFC prints
# (the "[info]" lines and the exception header as in tests/fixtures/dfc-logs; the traceback frame shape of
# fixture 13; the input-layer message RFD 1154 records).


def input_layers_failure(model: str) -> str:
    return (
        f"[info] Translation started on ONNX model {model}\n"
        f"[info] Restored ONNX model {model} (completion time: 00:00:00.02)\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/dfc/lib/python3.10/site-packages/hailo_sdk_client/sdk_backend/parser/parser.py", '
        "line 220, in translate_onnx_model\n"
        "    parsing_results = self._parse_onnx_model_to_hn(\n"
        '  File "/opt/dfc/lib/python3.10/site-packages/hailo_sdk_client/model_translator/onnx_translator/'
        'onnx_graph.py", line 412, in _add_input_layers\n'
        "    raise UnsupportedModelError(\n"
        "hailo_sdk_common.hailo_nn.exceptions.UnsupportedModelError: _add_input_layers: output_format is None\n"
    )


def test_a_operator_rejection_compares_the_ops(tmp_path, ops):
    text = rejection("UnsupportedOperationError in op /head/TopK: TopK operation is unsupported", model="head")
    _, result = run(tmp_path, ops, topk_head(), "head", text)
    assert (result.cause, result.verdict, result.dfc_ops, result.matched) == (
        "operator",
        PairVerdict.BOTH_REJECT,
        ("TopK",),
        UNBOUND,
    )
    assert result.judged


def test_b_failure_before_any_operator_leaves_the_ops_unjudged(tmp_path, ops):
    from tests.test_gate_device import dit_inputs

    gate, result = run(tmp_path, ops, dit_inputs(), "dit", input_layers_failure("dit"))
    assert not gate.readable
    assert (result.cause, result.verdict, result.agreement) == (
        "before operators",
        PairVerdict.UNJUDGED_INPUTS,
        "same cause (an input the parser refuses)",
    )
    assert result.verdict not in (PairVerdict.BOTH_REJECT, PairVerdict.HELD) and not result.judged
    assert result.edits == ()  # never "move an op out" on a failure that read no operator
    assert "unjudged" in result.meaning


def test_b_the_trap_of_rfd_1154_a_predicted_op_rejection_meets_an_input_failure(tmp_path, ops):
    """The gate fails on an op (TopK), the DFC fails in the input layers: not agreement, not 'both reject'."""
    gate, result = run(tmp_path, ops, topk_head(), "head", input_layers_failure("head"))
    assert gate.readable and gate.failing_ops == ("TopK",)
    assert result.verdict == PairVerdict.UNJUDGED_INPUTS and result.agreement.startswith("different causes")
    assert "TopK" in result.meaning and result.edits == ()


@pytest.mark.parametrize(
    "line",
    [
        "hailo_sdk_client.model_translator.exceptions.InvalidHNError: The original node name Y in end_node_names is "
        "missing in the HN",
        "hailo_sdk_common.hailo_nn.exceptions.UnsupportedModelError: Unexpected failure naming nothing",
        # RFD 1154 with every input rank 4: "IndexError, further into the parse" (frame shape of fixture 13)
        'Traceback (most recent call last):\n  File "/opt/dfc/lib/python3.10/site-packages/hailo_sdk_client/'
        'sdk_backend/parser/parser.py", line 220, in translate_onnx_model\nIndexError: list index out of range',
    ],
)
def test_c_inconclusive_failure_leaves_the_ops_unjudged(tmp_path, ops, line):
    text = f"[info] Translation started on ONNX model attn\n{line}\n"
    gate, result = run(tmp_path, ops, attention(), "attn", text)
    assert gate.passed
    assert (result.cause, result.verdict) == ("inconclusive", PairVerdict.UNJUDGED_INCONCLUSIVE)
    assert result.verdict not in (PairVerdict.TOO_GENEROUS, PairVerdict.HELD) and not any(
        e.action == "move out" for e in result.edits
    )


def test_c_inputs_found_zero_is_a_failure_before_operators(tmp_path, ops):
    text = (
        "[info] Translation started on ONNX model attn\n"
        "hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException: Parsing failed. "
        "Number of expected inputs: 1, Inputs found: 0\n"
    )
    _, result = run(tmp_path, ops, attention(), "attn", text)
    assert (result.cause, result.verdict) == ("before operators", PairVerdict.UNJUDGED_INPUTS)


def test_a_result_about_another_model_is_refused(tmp_path, ops, capsys):
    _, result = run(tmp_path, ops, with_op("Relu", "/x/Relu"), "clean_relu", success("full"))
    assert result.verdict == PairVerdict.FOREIGN_RESULT and "'full'" in result.meaning and not result.judged
    log = tmp_path / "full.log"
    log.write_text(success("full"))
    assert main(["pair", str(tmp_path / "clean_relu.onnx"), "--dfc", str(log)]) == 2
    assert "about model 'full'" in capsys.readouterr().err


def test_a_result_naming_no_model_pairs_only_by_hand(tmp_path, ops, capsys):
    model = save(with_op("Relu", "/x/Relu"), tmp_path / "clean_relu.onnx")
    bare = tmp_path / "bare.dfc.json"
    bare.write_text('{"kind": "weftlib.gate/dfc-result", "verdict": "parsed"}')
    assert main(["pair", str(model), "--dfc", str(bare)]) == 2
    assert "names no model" in capsys.readouterr().err
    assert main(["pair", str(model), "--dfc", str(bare), "--matched-by-hand"]) == 0
    assert "matched by hand" in capsys.readouterr().out
    (tmp_path / "kindless.json").write_text('{"verdict": "parsed"}')  # not even a result this tool wrote
    assert main(["pair", str(model), "--dfc", str(tmp_path / "kindless.json")]) == 2
    _, result = run(tmp_path, ops, with_op("Relu", "/x/Relu"), "r2", "[info] Translation completed on ONNX model\n")
    assert result.verdict in (PairVerdict.UNMATCHED, PairVerdict.UNRECOGNISED)


def test_cli_bad_paths_are_clear_errors(tmp_path, capsys):
    model = save(attention(), tmp_path / "attn.onnx")
    assert main(["pair", str(model), "--dfc", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["pair", str(tmp_path / "missing.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["device", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "field, value", [("model", 5), ("end_nodes", "x"), ("end_nodes", [1]), ("reason", ["a"]), ("errors", [{"cls": 1}])]
)
def test_a_result_with_a_field_of_the_wrong_type_is_refused_cleanly(tmp_path, capsys, field, value):
    import json

    path = save(attention(), tmp_path / "attn.onnx")
    body = {"kind": "weftlib.gate/dfc-result", "verdict": "parsed", "model": "attn", field: value}
    result = tmp_path / "attn.dfc.json"
    result.write_text(json.dumps(body))
    assert main(["pair", str(path), "--dfc", str(result)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
