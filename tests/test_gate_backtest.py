"""The public record as a test suite: every outcome rebuilt as a graph, and the gate held to it.

On the target DFC the gate must agree with every outcome (a parse predicted to parse; a refusal predicted
refused, with every node the DFC named among the refused). A refusal on another DFC 5.x must never be
predicted to parse. Negative controls: with a rule's evidence taken away, the backtest fails."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
import yaml

from weftlib.gate import parse_device_ops
from weftlib.gate.compiler.proving import run_once
from weftlib.gate.predict import backtest as B
from weftlib.gate.record import public_record as P
from weftlib.gate.record.allowlist import DEFAULT_PATH
from weftlib.gate.vocabulary import Agreement


@pytest.fixture(scope="module")
def rows(ops):
    return B.backtest(ops)


def test_every_rebuilt_case_has_a_builder_and_every_builder_a_case(ops):
    rebuilt = {name for name, case in ops.cases.items() if case.rebuilt}
    assert rebuilt == set(P.BUILDERS)
    assert {name for name, case in ops.cases.items() if not case.rebuilt} == {
        "qvl-tower-simplified",
        "rfd-isolated-window-reshape",
        "rfd-layernorm-empty-format",
        "llm-full-model-cycle",
        "wdt-swinv2-520",
        "wdt-swinv2-530",
        "lemu-efficientnet-lite0",
        "whj-whisper-encoder",
        "whj-whisper-decoder",
        "l10h-tinystories-gqa",
        "l10h-qwen25-tbt",
        "l10h-qwen25-prefill",
        "l10h-minilm-placement",
        "l10h-lm-head-152k",
        "l10h-lm-head-onnx-shards",
        "l10h-qwen25-served",
        "l10h-qwen3-translate",
        "l10h-mistral-sliding-window",
        "l10h-smollm2-135m",
        "l10h-base-scope-deep",
        "llm-qwen2-block-kv",
        "llm-distilgpt2-kv",
        "llm-mask-rank4-input",
        "llm-mask-unused-input",
        "rfd-decoder",
        "imml-cyrillic-ocr-rec",
        "axon-mnemosyne-face",
        "axon-argus-iris",
        "axon-trident-ternary",
        "axon-trident-tcn",
        "axon-mamba-ssm",
        "axon-hydra",
        "axon-chimera-moe",
        "fsor-a16-benign-conv",
        "fsor-a16-softmax",
        "fsor-a16-conv-nan",
        "fsor-a16-super-defuse",
        "lemu-a16-w4-optimize",
        "l10h-smollm2-tbt-reshape-factor",
        "l10h-defuse-too-coarse",
        "l10h-defuse-8",
        "benchy-yolo11n-det-530",
        "benchy-yolo11n-seg-pose-530",
        "benchy-obb-530",
        "benchy-yolo26n-seg-pose-530",
        "benchy-yolo26n-det-hint-cut",
        "sigb-ic-530",
        "sigb-kws-530",
        "sigb-ad-530",
        "mokt-yolo11n-640",
        "amrl-yolo26n-det-520",
        "keff-regnetx-full-530",
        "keff-mobilenetv3-full-530",
        "keff-yolo11l-full-530",
        "keff-yolo26-full-530",
        "keff-yolov7-full-530",
        "keff-classifier-prefixes-530",
        "keff-yolov7-prefixes-530",
        "keff-yolo-prefixes-built-530",
        "keff-yolo-prefixes-build-failed-530",
        "keff-yolo26-uint8-scores-530",
    }


@pytest.mark.parametrize("name", sorted(P.BUILDERS))
def test_each_rebuilt_graph_is_checked_runs_and_names_what_the_dfc_named(name, ops):
    model = P.BUILDERS[name]()
    onnx.checker.check_model(model, full_check=True)
    assert all(np.isfinite(o).all() for o in run_once(model) if o.dtype.kind == "f")
    names = {n.name for n in model.graph.node} | {i.name for i in model.graph.input}
    assert set(ops.cases[name].refused_at) <= names, "a node the DFC named is missing from the rebuild"


def test_the_gate_agrees_with_the_public_record(rows):
    assert B.held(rows) == []
    on_target = [r for r in rows if r["reach"] == "target"]
    assert len(on_target) >= 25 and all(r["agreement"] == Agreement.AGREES for r in on_target)
    refused_elsewhere = [r for r in rows if r["reach"] == "sibling" and r["outcome"] != "parsed"]
    assert refused_elsewhere and all(r["prediction"] != "pass" for r in refused_elsewhere)


def test_the_named_patterns_carry_the_refusals(rows):
    by_case = {r["case"]: r for r in rows}
    assert "head_split_interrupted @ self_attn/Reshape_1" in by_case["llm-qk-norm"]["findings"]
    assert "image_channel_split @ /attn/q/Reshape" in by_case["qvl-block-tokens-as-width"]["findings"]
    assert "softmax_untracked @ /attn/Softmax" in by_case["qvl-block-tokens-as-width"]["findings"]
    assert "input_rank_1 @ t" in by_case["pixal-flow-x-rank4"]["findings"]
    assert "input_static_shape @ attention_mask" in by_case["llm-dynamic-mask"]["findings"]


def without(rule: str, **replace) -> dict:
    data = copy.deepcopy(yaml.safe_load(DEFAULT_PATH.read_text()))
    data["graph_rules"][rule]["evidence"] = replace.get("evidence", [])
    data["graph_rules"][rule].setdefault("note", "removed by the test")
    return data


def test_negative_control_a_rule_without_its_evidence_breaks_the_backtest():
    held = B.held(B.backtest(parse_device_ops(without("head_split_interrupted"))))
    assert [r["case"] for r in held] == ["llm-qk-norm"]  # refused on the target, now only unjudged


def test_negative_control_a_parse_claimed_where_another_5x_refused_is_caught():
    claim = [{"seen": "parsed", "dfc": "5.3.0", "arch": "hailo10h", "source": "an invented parse"}]
    held = B.held(B.backtest(parse_device_ops(without("lone_transpose_0213", evidence=claim))))
    assert [r["case"] for r in held] == ["clef-lone-transpose"]
