"""Layouts beyond attention, predicted from the record: channels-last graphs, head splits on image maps,
reductions and norms on the last axis after a token reshape. Where the record is silent, unjudged."""

from __future__ import annotations

import numpy as np

from weftlib.gate.graphs import Builder
from weftlib.gate.predict import backtest as B
from weftlib.gate.predict import rules as R
from weftlib.gate.predict.nodes import predict
from weftlib.gate.vocabulary import GateVerdict, Prediction
from weftlib.onnx_core.walk import index_model


def _judged(model, ops):
    prediction = predict(index_model(model), ops)
    return prediction, {f.node: (f.rule, f.prediction) for f in prediction.judgements if f.rule != "op"}


def test_a_transpose_pair_around_a_conv_is_refused_on_the_wd_tagger_record(ops):
    prediction, found = _judged(R.RULES["channels_last_transpose"].example(), ops)
    assert prediction.verdict == GateVerdict.FAIL
    assert found["probe/Transpose"] == ("channels_last_transpose", "refused")
    assert found["probe/Transpose_back"] == ("channels_last_transpose", "refused")


def test_channels_last_flattened_to_tokens_is_refused_and_its_norm_follows(ops):
    g = Builder("nhwc_tokens_norm")
    x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "pre")
    t = g.node("Reshape", [g.node("Transpose", [x], "t", perm=[0, 2, 3, 1]), g.ints("s", [1, 16, 8])], "flat")
    g.output(g.layer_norm(t, 8, "norm"))
    _, found = _judged(g.model(), ops)
    assert found["t"][0] == found["flat"][0] == "image_nhwc_to_tokens"
    assert found["norm/LayerNormalization"] == ("layernorm_untracked", "refused")


def test_a_reduction_on_the_last_axis_after_that_reshape_is_unjudged_the_record_is_silent(ops):
    g = Builder("nhwc_tokens_reduce")
    x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "pre")
    t = g.node("Reshape", [g.node("Transpose", [x], "t", perm=[0, 2, 3, 1]), g.ints("s", [1, 16, 8])], "flat")
    g.output(g.node("ReduceMean", [t], "mean", axes=[-1], keepdims=1))
    prediction, _ = _judged(g.model(), ops)
    assert prediction.nodes["mean"] == Prediction.UNJUDGED


def test_the_tokens_flattened_channels_first_are_not_the_channels_last_form(ops):
    """[B, C, H*W] then Transpose [0, 2, 1] (rf-detr's one-window backbone, parsed) is image_to_tokens."""
    g = Builder("nchw_tokens")
    x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "pre")
    t = g.node("Transpose", [g.node("Reshape", [x, g.ints("s", [1, 8, 16])], "flat")], "t", perm=[0, 2, 1])
    g.output(g.layer_norm(t, 8, "norm"))
    _, found = _judged(g.model(), ops)
    assert found["t"][0] == found["flat"][0] == "image_to_tokens"
    assert found["norm/LayerNormalization"] == ("layernorm_tracked", "parse")


def test_a_channels_last_input_put_channels_first_is_unjudged_with_a_probe(ops):
    prediction, found = _judged(R.RULES["input_channels_last"].example(), ops)
    assert found["probe/Transpose"] == ("input_channels_last", "unjudged")
    assert prediction.verdict == GateVerdict.UNJUDGED


def _image_heads(ops, image: list[int], heads: list[int]) -> tuple[str, str]:
    g = Builder("image_heads")
    x = g.conv1x1(g.input("x", image), image[1], image[1], "pre")
    split = g.node("Reshape", [x, g.ints("h", heads)], "heads")
    g.output(g.node("Mul", [split, g.const("k", np.full([heads[-1]], 2.0))], "post"))
    return _judged(g.model(), ops)[1]["heads"]


def test_a_head_split_of_an_image_is_judged_by_its_form(ops):
    """Tokens held as the width ([1, C, 1, S] -> [1, H, d, S]) were refused (qvl-block-tokens-as-width); the
    spatial axes merged into the last ([1, C, H, W] -> [1, h, c', H*W], YOLO11's attention) parsed
    (benchy-yolo11n-det-530); a split into rank 5 (NAF's) is in neither form, unjudged."""
    assert _image_heads(ops, [1, 8, 1, 16], [1, 2, 4, 16]) == ("image_channel_split", "refused")
    assert _image_heads(ops, [1, 8, 4, 4], [1, 2, 4, 16]) == ("image_heads_flattened", "parse")
    assert _image_heads(ops, [1, 8, 4, 4], [1, 2, 4, 4, 4]) == ("image_channel_split_other", "unjudged")


def test_qk_norm_after_the_head_transpose_is_unjudged_the_probe_that_separates_the_split(ops):
    """Refused with the norm between the head split and its Transpose (llm-qk-norm); a Qwen3 export of
    undescribed form translated (l10h-qwen3-translate). The other form is unjudged, and its own probe."""
    assert "head_split_interrupted" in B.NEAREST_PARSES
    prediction, found = _judged(R.RULES["reduce_last_axis_rank4"].example(), ops)
    assert found["probe/ReduceMean"] == ("reduce_last_axis_rank4", "unjudged")
    assert found["probe/Reshape"] == ("head_split_glued", "parse")
    assert prediction.verdict == GateVerdict.UNJUDGED
