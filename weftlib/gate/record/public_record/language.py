"""DFC 5.3.0, language models: the LLM probes (a dynamic mask, GQA's repeated KV, the QK norm, a Qwen2 block),
the BERT layer the MiniLM encoders export, and the toy single head."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import attend, merge_heads, rotate, split_heads, tokens_in, tokens_out
from .registry import case


@case("llm-dynamic-mask")
def llm_dynamic_mask() -> onnx.ModelProto:
    g = Builder("llm_dynamic_mask")
    x = g.linear(g.input("inputs_embeds", [1, 8, 16]), 16, 16, "/embed")
    mask = g.input("attention_mask", [1, 1, "seq"])
    g.output(g.node("Add", [x, g.node("Mul", [mask, g.const("/k", -1e4)], "/mask/Mul")], "/Add"))
    return g.model()


def _rms(g: Builder, x: str, c: int, name: str) -> str:
    ms = g.node(
        "ReduceMean",
        [g.node("Pow", [x, g.const(f"{name}.two", 2.0)], f"{name}/Pow")],
        f"{name}/ReduceMean",
        axes=[-1],
        keepdims=1,
    )
    std = g.node("Sqrt", [g.node("Add", [ms, g.const(f"{name}.eps", 1e-6)], f"{name}/Add")], f"{name}/Sqrt")
    return g.node("Mul", [g.node("Div", [x, std], f"{name}/Div"), g.const(f"{name}.weight", np.ones(c))], f"{name}/Mul")


@case("llm-gqa-repeat-kv")
def llm_gqa_repeat_kv() -> onnx.ModelProto:
    s, c, h, kv, d = 8, 32, 4, 2, 8
    g, x = tokens_in("llm_gqa_repeat_kv", s, c)
    q = split_heads(g, g.linear(x, c, c, "self_attn/q_proj"), s, h, d, "self_attn/q", [0, 2, 1, 3])

    def repeat(t: str, n: str, suffix: str) -> str:
        heads = split_heads(g, g.linear(x, c, kv * d, f"self_attn/{n}_proj"), s, kv, d, f"self_attn/{n}", [0, 2, 1, 3])
        wide = g.node("Unsqueeze", [heads, g.ints(f"self_attn/{n}.axes", [2])], f"self_attn/Unsqueeze{suffix}")
        wide = g.node(
            "Expand", [wide, g.ints(f"self_attn/{n}.rep", [1, kv, h // kv, s, d])], f"self_attn/Expand{suffix}"
        )
        return g.node(
            "Reshape", [wide, g.ints(f"self_attn/{n}.merge", [1, h, s, d])], f"self_attn/Reshape_{3 if n == 'k' else 4}"
        )

    k = g.node("Transpose", [repeat(x, "k", "")], "self_attn/k/Transpose_1", perm=[0, 1, 3, 2])
    o = merge_heads(g, attend(g, q, k, repeat(x, "v", "_1"), d**-0.5, "self_attn"), s, c, "self_attn/out")
    return tokens_out(g, o, c)


@case("llm-qk-norm")
def llm_qk_norm() -> onnx.ModelProto:
    s, c, h, d = 8, 32, 4, 8
    g, x = tokens_in("llm_qk_norm", s, c)
    split = g.node(
        "Reshape",
        [g.linear(x, c, c, "self_attn/q_proj"), g.ints("self_attn/q.shape", [1, s, h, d])],
        "self_attn/Reshape_1",
    )
    q = g.node("Transpose", [_rms(g, split, d, "self_attn/q_norm")], "self_attn/Transpose", perm=[0, 2, 1, 3])
    kt = g.node("Transpose", [q], "self_attn/Transpose_1", perm=[0, 1, 3, 2])
    return tokens_out(g, merge_heads(g, attend(g, q, kt, q, d**-0.5, "self_attn"), s, c, "self_attn/out"), c)


@case("llm-qwen2-block")
def llm_qwen2_block() -> onnx.ModelProto:
    s, c, h, d = 8, 32, 4, 8
    g = Builder("llm_qwen2_block")
    x = g.input("x", [1, s, c])
    n = _rms(g, x, c, "/input_layernorm")
    q = split_heads(g, g.linear(n, c, c, "/self_attn/q_proj"), s, h, d, "/self_attn/q", [0, 2, 1, 3])
    q = rotate(g, q, d, s, "/rope/q")
    k = split_heads(g, g.linear(n, c, c, "/self_attn/k_proj"), s, h, d, "/self_attn/k", [0, 2, 1, 3])
    k = rotate(g, k, d, s, "/rope/k")
    v = split_heads(g, g.linear(n, c, c, "/self_attn/v_proj"), s, h, d, "/self_attn/v", [0, 2, 1, 3])
    kt = g.node("Transpose", [k], "/self_attn/k/Transpose_1", perm=[0, 1, 3, 2])
    causal = np.triu(np.full((1, 1, s, s), -1e4), 1)
    o = merge_heads(g, attend(g, q, kt, v, d**-0.5, "/self_attn", causal), s, c, "/self_attn/out")
    x = g.node("Add", [x, g.linear(o, c, c, "/self_attn/o_proj")], "/Add")
    n = _rms(g, x, c, "/post_attention_layernorm")
    gate = g.linear(n, c, 2 * c, "/mlp/gate_proj")
    act = g.node("Mul", [gate, g.node("Sigmoid", [gate], "/mlp/Sigmoid")], "/mlp/Mul")
    up = g.node("Mul", [act, g.linear(n, c, 2 * c, "/mlp/up_proj")], "/mlp/Mul_1")
    g.output(g.node("Add", [x, g.linear(up, 2 * c, c, "/mlp/down_proj")], "/Add_1"))
    return g.model()


@case("l10h-minilm-encoder", "fsor-minilm-l12-parse")
def bert_layer() -> onnx.ModelProto:
    """One post-LN BERT layer on the embedding sum [1, s, c]: attention, Add, LayerNorm, GELU MLP, Add,
    LayerNorm (the HF BertLayer export at reduced size)."""
    s, c, h = 8, 32, 4
    d = c // h
    g = Builder("bert_layer")
    x = g.input("embeddings", [1, s, c])
    q = split_heads(g, g.linear(x, c, c, "/attention/query"), s, h, d, "/attention/q", [0, 2, 1, 3])
    k = split_heads(g, g.linear(x, c, c, "/attention/key"), s, h, d, "/attention/k", [0, 2, 1, 3])
    k = g.node("Transpose", [k], "/attention/k/Transpose_1", perm=[0, 1, 3, 2])
    v = split_heads(g, g.linear(x, c, c, "/attention/value"), s, h, d, "/attention/v", [0, 2, 1, 3])
    o = g.linear(
        merge_heads(g, attend(g, q, k, v, d**-0.5, "/attention"), s, c, "/attention/out"), c, c, "/attention/dense"
    )
    x = g.layer_norm(g.node("Add", [x, o], "/attention/Add"), c, "/attention/norm")
    m = g.linear(g.gelu(g.linear(x, c, 4 * c, "/intermediate"), "/intermediate/act"), 4 * c, c, "/output/dense")
    g.output(g.layer_norm(g.node("Add", [x, m], "/output/Add"), c, "/output/norm"))
    return g.model()


@case("llm-toy-single-head")
def single_head() -> onnx.ModelProto:
    g, x = tokens_in("single_head", 8, 16)
    q, v = g.linear(x, 16, 16, "/q_proj"), g.linear(x, 16, 16, "/v_proj")
    kt = g.node("Transpose", [g.linear(x, 16, 16, "/k_proj")], "/k/Transpose", perm=[0, 2, 1])
    return tokens_out(g, attend(g, q, kt, v, 0.25, "/attn"), 16)
