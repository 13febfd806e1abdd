"""DFC 5.4.0, the Clef report: each node it named, rebuilt in its smallest context under the name the report
quotes."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import attend, merge_heads, rotate, sandwich, sandwich_out, split_heads, tokens_in, tokens_out
from .registry import case


@case("clef-rank1-input")
def clef_rank1_input() -> onnx.ModelProto:
    g = Builder("clef_rank1_input")
    ids = g.input("type_ids", [2], onnx.TensorProto.INT64)
    rows = g.node("Gather", [g.const("/type_embedding", np.eye(3, 16)), ids], "/Gather", axis=0)
    tokens = g.node("Unsqueeze", [rows, g.ints("/axes", [0])], "/Unsqueeze")
    return tokens_out(g, tokens, 16)


@case("clef-layernorm-after-concat")
def clef_layernorm_after_concat() -> onnx.ModelProto:
    g = Builder("clef_layernorm_after_concat")
    a, b = g.input("question", [1, 16]), g.input("options", [1, 16])
    stack = g.node("Concat", [a, b], "node_stack_2", axis=0)
    n = g.node(
        "LayerNormalization",
        [stack, g.const("ln.w", np.ones(16)), g.const("ln.b", np.zeros(16))],
        "node_layer_norm_9",
        axis=-1,
    )
    g.output(g.node("Mul", [n, g.const("/k", 2.0)], "/Mul"))
    return g.model()


@case("clef-two-attention-blocks")
def clef_two_attention_blocks() -> onnx.ModelProto:
    s, c, h, kv, d = 8, 32, 4, 2, 8
    g, x = tokens_in("clef_two_attention_blocks", s, c)
    for block in range(2):
        name = f"/block{block}"
        q = split_heads(g, g.linear(x, c, c, f"{name}/q_proj"), s, h, d, f"{name}/q", [0, 2, 1, 3])
        k, v = (
            g.node("Tile", [split_heads(g, g.linear(x, c, kv * d, f"{name}/{n}_proj"), s, kv, d, f"{name}/{n}", [0, 2, 1, 3]), g.ints(f"{name}/{n}.rep", [1, h // kv, 1, 1])], f"{name}/{n}/Tile")
            for n in "kv"
        )  # fmt: skip
        kt = g.node("Transpose", [k], f"{name}/k/Transpose_1", perm=[0, 1, 3, 2])
        o = merge_heads(g, attend(g, q, kt, v, d**-0.5, name), s, c, f"{name}/out")
        x = g.node("Add", [x, g.linear(o, c, c, f"{name}/o_proj")], f"{name}/Add")
    return tokens_out(g, x, c)


def _partial_rope(name: str, swap_sign: bool) -> onnx.ModelProto:
    s, c, rot = 8, 32, 16
    g, x = tokens_in(name, s, c)
    ax = g.ints("/ax", [-1])
    passthrough = g.node("Slice", [x, g.ints("/p0", [rot]), g.ints("/p1", [c]), ax], "/rope/Slice_pass")
    if swap_sign:
        part = g.node("Slice", [x, g.ints("/r0", [0]), g.ints("/r1", [rot]), ax], "/rope/Slice_rot")
        t1 = g.node("Slice", [part, g.ints("/a0", [0]), g.ints("/a1", [rot // 2]), ax], "/rope/Slice_1")
        t2 = g.node("Slice", [part, g.ints("/b0", [rot // 2]), g.ints("/b1", [rot]), ax], "/rope/Slice_2")
        swapped = g.node("Concat", [t2, t1], "/rope/Concat_swap", axis=-1)
        sign = g.const("/rope.sign", np.r_[-np.ones(rot // 2), np.ones(rot // 2)])
        rotated = g.node("Add", [part, g.node("Mul", [swapped, sign], "/rope/Mul_sign")], "/rope/Add")
    else:
        rotated = rotate(g, x, rot, s, "/rope", partial=True)
    return tokens_out(g, g.node("Concat", [rotated, passthrough], "/rope/Concat_out", axis=-1), c)


@case("clef-rope-partial")
def clef_rope_partial() -> onnx.ModelProto:
    return _partial_rope("clef_rope_partial", False)


@case("clef-rope-swap-sign")
def clef_rope_swap_sign() -> onnx.ModelProto:
    return _partial_rope("clef_rope_swap_sign", True)


@case("clef-reshape-5d-to-4d")
def clef_reshape_5d_to_4d() -> onnx.ModelProto:
    g, x = tokens_in("clef_reshape_5d_to_4d", 8, 256)
    five = g.node(
        "Mul", [g.node("Reshape", [x, g.ints("/five", [1, 8, 16, 2, 8])], "/Reshape"), g.const("/k", 2.0)], "/Mul"
    )
    four = g.node("Reshape", [five, g.ints("/four", [1, 8, 32, 8])], "node_view_1")
    back = g.node(
        "Reshape", [g.node("Mul", [four, g.const("/k2", 2.0)], "/Mul_1"), g.ints("/back", [1, 8, 256])], "/Reshape_back"
    )
    return tokens_out(g, back, 256)


@case("clef-lone-transpose")
def clef_lone_transpose() -> onnx.ModelProto:
    g = Builder("clef_lone_transpose")
    x = g.node("Mul", [g.input("x", [1, 8, 4, 16]), g.const("/k", 2.0)], "/Mul")
    g.output(
        g.node("Mul", [g.node("Transpose", [x], "node_transpose_2", perm=[0, 2, 1, 3]), g.const("/k2", 2.0)], "/Mul_1")
    )
    return g.model()


@case("clef-reducesum-minus2")
def clef_reducesum_minus2() -> onnx.ModelProto:
    g, x = tokens_in("clef_reducesum_minus2", 8, 16)
    total = g.node("ReduceSum", [x, g.ints("/axes", [-2])], "node_sum_4", keepdims=0)
    g.output(g.node("Mul", [total, g.const("/k", 2.0)], "/Mul"))
    return g.model()


@case("clef-reducesum-channels")
def clef_reducesum_channels() -> onnx.ModelProto:
    g, x = sandwich("clef_reducesum_channels")
    return sandwich_out(g, g.node("ReduceSum", [x, g.ints("/axes", [1])], "/ReduceSum", keepdims=1), channels=1)


@case("clef-expand")
def clef_expand() -> onnx.ModelProto:
    g, x = sandwich("clef_expand")
    mean = g.node("ReduceMean", [x], "/ReduceMean", axes=[1], keepdims=1)
    return sandwich_out(g, g.node("Expand", [mean, g.ints("/shape", [1, 8, 16, 16])], "node_Expand_61"))


@case("clef-constant-of-shape")
def clef_constant_of_shape() -> onnx.ModelProto:
    g, x = tokens_in("clef_constant_of_shape", 8, 16)
    state = g.node("ConstantOfShape", [g.ints("/shape", [1, 8, 16])], "node_ConstantOfShape")
    return tokens_out(g, g.node("Add", [x, state], "/Add"), 16)


@case("clef-head-axis-shortcut")
def clef_head_axis_shortcut() -> onnx.ModelProto:
    g, x = tokens_in("clef_head_axis_shortcut", 8, 64)
    heads = g.node(
        "Mul", [g.node("Reshape", [x, g.ints("/heads", [1, 8, 4, 16])], "node_view"), g.const("/k", 2.0)], "/Mul"
    )
    return tokens_out(g, g.node("Reshape", [heads, g.ints("/back", [1, 8, 64])], "/Reshape_back"), 64)


@case("clef-conv1d")
def clef_conv1d() -> onnx.ModelProto:
    g, x = tokens_in("clef_conv1d", 8, 16)
    channels = g.node("Transpose", [x], "/Transpose", perm=[0, 2, 1])
    w = g.const("/conv.weight", np.full((16, 1, 4), 0.25))
    conv = g.node("Conv", [channels, w], "node_conv1d", kernel_shape=[4], group=16, pads=[3, 0])
    return tokens_out(g, g.node("Transpose", [conv], "/Transpose_back", perm=[0, 2, 1]), 16)


@case("clef-swiglu")
def clef_swiglu() -> onnx.ModelProto:
    g = Builder("clef_swiglu")
    x = g.input("x", [1, 8, 64])
    gate = g.linear(x, 64, 128, "/gate_proj")
    act = g.node("Mul", [gate, g.node("Sigmoid", [gate], "/Sigmoid")], "/Mul")
    g.output(g.linear(g.node("Mul", [act, g.linear(x, 64, 128, "/up_proj")], "/Mul_1"), 128, 64, "/down_proj"))
    return g.model()


@case("clef-attention-core")
def clef_attention_core() -> onnx.ModelProto:
    g = Builder("clef_attention_core")
    x = g.input("qkv", [1, 8, 48])
    ax = g.ints("/ax", [-1])
    q, k, v = (
        g.node("Slice", [x, g.ints(f"/{n}0", [i * 16]), g.ints(f"/{n}1", [i * 16 + 16]), ax], f"/{n}/Slice")
        for i, n in enumerate("qkv")
    )
    kt = g.node("Transpose", [k], "/k/Transpose", perm=[0, 2, 1])
    causal = np.triu(np.full((1, 8, 8), -1e4), 1)
    g.output(attend(g, q, kt, v, 0.25, "/attn", causal))
    return g.model()
