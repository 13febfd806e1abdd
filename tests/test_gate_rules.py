"""Each graph rule matches its own example and, as a negative control, not a neighbouring graph that holds
the same ops; the reshape kinds the rules read; the formats a refused shuffle leaves behind."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from weftlib.gate.compiler.proving import run_once
from weftlib.gate.graphs import Builder
from weftlib.gate.predict import rules as R
from weftlib.gate.predict import shuffles
from weftlib.gate.predict.nodes import predict
from weftlib.onnx_core.walk import index_model

# rule -> the rule whose example is its negative control (same ops, another pattern)
COUNTER = {
    "graph_without_input": "input_rank_3",
    "input_static_shape": "input_rank_3",
    "input_rank_1": "input_rank_2",
    "input_rank_2": "input_rank_3",
    "input_rank_3": "input_rank_4",
    "input_rank_4": "input_rank_5",
    "input_rank_5": "input_rank_4",
    "input_rank_other": "input_rank_5",
    "head_split_glued": "head_split_interrupted",
    "head_split_interrupted": "head_split_glued",
    "head_split_sliced": "head_split_interrupted",
    "head_split_unglued": "head_split_glued",
    "split_last_three": "head_split_glued",
    "head_merge_glued": "head_split_unglued",
    "image_channel_split": "image_to_tokens",
    "image_heads_flattened": "image_channel_split",
    "image_heads_unflattened": "image_channel_split",
    "image_channel_split_other": "image_channel_split",
    "image_to_tokens": "image_channel_split",
    "tokens_to_image": "head_split_glued",
    "reshape_5d_to_4d": "split_last_three",
    "batch_axis": "concat_tracked",
    "batch_axis_windows": "head_split_glued",
    "leading_unit_axis": "head_split_glued",
    "lone_transpose_0213": "head_split_glued",
    "channels_last_transpose": "tokens_to_image",
    "channels_last_transpose_nchw": "channels_last_transpose",
    "image_nhwc_to_tokens": "image_to_tokens",
    "input_channels_last": "channels_last_transpose_nchw",
    "softmax_tracked_last_axis": "softmax_untracked",
    "softmax_untracked": "softmax_tracked_last_axis",
    "softmax_not_last_axis": "softmax_tracked_last_axis",
    "layernorm_tracked": "layernorm_fed_by_concat",
    "layernorm_untracked": "layernorm_tracked",
    "layernorm_fed_by_concat": "layernorm_tracked",
    "layernorm_not_last_axis": "layernorm_tracked",
    "concat_tracked": "concat_image_height",
    "concat_image_height": "concat_tracked",
    "concat_no_format": "concat_tracked",
    "rotate_half": "rotate_half_partial",
    "rotate_half_partial": "rotate_half",
    "reduce_channel_axis": "reduce_minus2_dropped",
    "reduce_max_channel_axis": "reduce_spatial_axes",
    "reduce_minus2_dropped": "reduce_channel_axis",
    "reduce_spatial_axes": "reduce_channel_axis",
    "reduce_last_axis_rank4": "reduce_channel_axis",
    "gather_constant_index": "gather_computed_index",
    "gather_computed_index": "gather_constant_index",
    "erf_in_gelu": "erf_standalone",
    "erf_standalone": "erf_in_gelu",
    "onehot_pattern": "onehot_broken",
    "onehot_broken": "onehot_pattern",
    "conv_rank_3": "conv_rank_5",
    "conv_rank_5": "conv_rank_3",
    "tile_non_batch": "batch_axis",
}


def matched(model: onnx.ModelProto, rule: str, ops) -> list[str]:
    return [f.node for f in predict(index_model(model), ops).judgements if f.rule == rule]


def test_every_rule_has_a_negative_control():
    assert set(COUNTER) == set(R.RULES)


@pytest.mark.parametrize("name", sorted(R.RULES))
def test_rule_matches_its_example_and_not_its_counter(name, ops):
    rule = R.RULES[name]
    assert matched(rule.example(), name, ops), f"{name} does not match its own example"
    counter = R.RULES[COUNTER[name]].example()
    judged = set(rule.judges)
    present = {n.op_type for n in counter.graph.node} | ({R.INPUT} if counter.graph.input else set()) | {R.GRAPH}
    assert judged & present, f"the negative control of {name} holds none of the ops it judges"
    assert not matched(counter, name, ops), f"{name} matches its negative control {COUNTER[name]}"


@pytest.mark.parametrize("name", sorted(R.RULES))
def test_examples_are_named_checked_and_run(name):
    model = R.RULES[name].example()
    onnx.checker.check_model(model, full_check=True)
    assert all(n.name for n in model.graph.node)
    assert all(np.isfinite(o).all() for o in run_once(model) if o.dtype.kind == "f")


@pytest.mark.parametrize(
    "before, after, kinds",
    [
        ((1, 64, 64), (1, 64, 4, 16), {"split_last"}),
        ((64, 64), (64, 4, 16), {"split_last", "splits_axis_1"}),  # rank 2: axis 1 is the last
        ((1, 8, 24), (1, 8, 3, 2, 4), {"split_last"}),
        ((1, 64, 4, 16), (1, 64, 64), {"merge_last"}),
        ((1, 64, 1, 256), (1, 4, 16, 256), {"splits_axis_1"}),
        ((1, 16), (4, 2, 2), {"batch", "splits_axis_1"}),  # the view reshape folds axis 1 into the batch
        ((1, 8, 4, 4), (1, 8, 16), {"merge_last"}),
        ((1, 8, 4, 4), (1, 8, 4, 4), set()),
    ],
)
def test_reshape_kinds(before, after, kinds):
    got = {
        "split_last": shuffles.split_last(before, after),
        "merge_last": shuffles.merge_last(before, after),
        "splits_axis_1": shuffles.splits_axis(before, after, 1),
        "batch": shuffles.batch_changed(before, after),
    }
    assert {k for k, v in got.items() if v} == kinds, (before, after)


def test_axis_groups_pair_runs_of_equal_product():
    groups = shuffles.axis_groups((1, 64, 1, 256), (1, 4, 16, 256))
    assert [(g.src, g.dst) for g in groups] == [((0,), (0,)), ((1,), (1, 2)), ((2, 3), (3,))]
    assert shuffles.axis_groups((2, 3), (7,)) is None  # sizes that do not match
    assert shuffles.axis_groups((2, None), (2, 4)) is None  # an unknown dimension


def test_a_refused_shuffle_loses_the_format_for_what_follows(ops):
    """The Softmax after a refused head reshape is refused too (UnsupportedSoftmaxLayerError in the record);
    the same Softmax after an unjudged op is unjudged, never refused."""
    model = R.RULES["softmax_untracked"].example()
    prediction = predict(index_model(model), ops)
    assert prediction.nodes["probe/Reshape"] == "refused" and prediction.nodes["probe/Softmax"] == "refused"
    g = Builder("softmax_after_unlisted")
    x = g.linear(g.input("x", [1, 8, 16]), 16, 16, "pre")
    odd = g.node("Sinh", [x], "odd/Sinh")  # not listed: unjudged
    s = g.node("MatMul", [odd, g.node("Transpose", [odd], "t/Transpose", perm=[0, 2, 1])], "s/MatMul")
    g.output(g.node("Softmax", [s], "s/Softmax", axis=-1))
    prediction = predict(index_model(g.model()), ops)
    assert prediction.nodes["s/Softmax"] == "unjudged" and prediction.verdict == "unjudged"


def test_shape_arithmetic_is_no_format_and_is_not_the_batch_axis(ops):
    model = R.RULES["concat_no_format"].example()
    found = {f.rule for f in predict(index_model(model), ops).judgements if f.node == "probe/Concat"}
    assert found == {"concat_no_format"}
