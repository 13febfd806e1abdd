"""The four cells of the pairing table (plus "not run" and "unrecognised"), each from a real ONNX graph built
here and DFC text in the format the DFC prints."""

from __future__ import annotations

import pytest

from tests.test_gate_graphs import attention, save, topk_head, with_op
from weftlib.gate import device_gate, load_device_ops, pair, read_dfc_log
from weftlib.gate import pairing as P
from weftlib.gate.__main__ import main

HEADER = ("hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException: "
          "Parsing failed. The errors found in the graph are:")


def success(name: str) -> str:
    return (f"[info] Translation started on ONNX model {name}\n"
            f"[info] Translation completed on ONNX model {name} (completion time: 00:00:00.52)\n"
            f"[info] Saved HAR to: /model/{name}.har\n")


def rejection(*lines: str, tail: str = "") -> str:
    body = "\n".join(f" {line}" for line in lines)
    return f"{HEADER}\n{body}\n" + (f"Please try to parse the model again, using these end node names: {tail}\n" if tail else "")


@pytest.fixture(scope="module")
def ops():
    return load_device_ops()


def run(tmp_path, ops, model, name, text):
    path = save(model, tmp_path / f"{name}.onnx")
    gate = device_gate(path, ops)
    return gate, pair(gate, read_dfc_log(text) if text is not None else None, path)


def test_pass_and_parses_means_the_allowlist_held(tmp_path, ops):
    gate, result = run(tmp_path, ops, attention(), "attn", success("attn"))
    assert gate.passed
    assert (result.gate, result.dfc, result.verdict, result.edits) == ("PASS", "parses", P.HELD, ())


def test_pass_but_rejected_means_too_generous_and_resolves_the_node(tmp_path, ops):
    text = rejection("UnsupportedSoftmaxLayerError in op /attn/Softmax: Unsupported softmax", tail="/attn/MatMul")
    gate, result = run(tmp_path, ops, attention(), "attn", text)
    assert gate.passed and result.verdict == P.TOO_GENEROUS
    assert result.dfc_ops == ("Softmax",)  # the message names no op: found through the graph
    assert [(e.action, e.op) for e in result.edits] == [("move out", "Softmax")]


def test_fail_but_parsed_means_too_strict(tmp_path, ops):
    gate, result = run(tmp_path, ops, with_op("HardSwish", "/act/HardSwish"), "hs", success("hs"))
    assert not gate.passed and gate.failing_ops == ("HardSwish",)
    assert (result.gate, result.dfc, result.verdict) == ("FAIL", "parses", P.TOO_STRICT)
    assert [(e.action, e.op) for e in result.edits] == [("move in", "HardSwish")]


def test_both_reject_on_the_same_op(tmp_path, ops):
    text = rejection("UnsupportedOperationError in op /head/TopK: TopK operation is unsupported")
    gate, result = run(tmp_path, ops, topk_head(), "head", text)
    assert (result.verdict, result.agreement, result.gate_ops, result.dfc_ops) == (
        P.BOTH_REJECT, "same ops", ("TopK",), ("TopK",))
    assert result.edits == ()


def test_both_reject_with_an_extra_op_the_gate_allowed(tmp_path, ops):
    text = rejection("UnsupportedSoftmaxLayerError in op /head/Softmax: Unsupported softmax",
                     "UnsupportedOperationError in op /head/TopK: TopK operation is unsupported")
    _, result = run(tmp_path, ops, topk_head(), "head", text)
    assert (result.verdict, result.agreement) == (P.BOTH_REJECT, "overlap")
    assert [(e.action, e.op) for e in result.edits] == [("move out", "Softmax")]


def test_rejection_naming_a_node_not_in_the_graph_is_left_for_review(tmp_path, ops):
    text = rejection("UnsupportedShuffleLayerError in op /elsewhere/Reshape: Failed to determine type of layer")
    _, result = run(tmp_path, ops, attention(), "attn", text)
    assert result.verdict == P.TOO_GENEROUS and result.unresolved_nodes == ("/elsewhere/Reshape",)
    assert [(e.action, e.op) for e in result.edits] == [("review", "/elsewhere/Reshape")]


def test_not_run_and_unrecognised_are_never_a_pass(tmp_path, ops):
    _, not_run = run(tmp_path, ops, attention(), "attn", None)
    _, unknown = run(tmp_path, ops, attention(), "attn", "[info] Translation started on ONNX model attn\n")
    assert (not_run.verdict, not_run.dfc) == (P.NOT_RUN, "not run")
    assert (unknown.verdict, unknown.dfc) == (P.UNRECOGNISED, "unrecognised")
    assert P.HELD not in (not_run.verdict, unknown.verdict)


def test_pair_argument_checks(tmp_path, ops):
    path = save(attention(), tmp_path / "a.onnx")
    with pytest.raises(TypeError, match="gate"):
        pair(None, None, path)
    with pytest.raises(TypeError, match="dfc"):
        pair(device_gate(path, ops), "parsed", path)


def test_pair_cli(tmp_path, capsys):
    path = save(topk_head(), tmp_path / "head.onnx")
    log = tmp_path / "head.dfc.log"
    log.write_text(rejection("UnsupportedOperationError in op /head/TopK: TopK operation is unsupported"))
    assert main(["pair", str(path), "--dfc", str(log)]) == 1
    assert "both reject" in capsys.readouterr().out
    good = save(attention(), tmp_path / "attn.onnx")
    (tmp_path / "attn.log").write_text(success("attn"))
    assert main(["pair", str(good), "--dfc", str(tmp_path / "attn.log")]) == 0
