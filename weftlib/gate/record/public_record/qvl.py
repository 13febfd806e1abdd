"""DFC 5.3.0, the Qwen3-VL logbook and its probes: the vision block's three layouts, LayerNorm decomposed and
fused, the tower's raw shape arithmetic."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import attend, merge_heads, mlp, split_heads, tokens_out
from .registry import case


@case("qvl-block-tokens")
def qvl_block_tokens() -> onnx.ModelProto:
    s, c, h, d = 64, 64, 4, 16
    g = Builder("qvl_block_tokens")
    x = g.input("x", [1, s, c])
    qkv = g.linear(g.layer_norm(x, c, "/attn/norm"), c, 3 * c, "/attn/qkv")
    q, k, v = g.node("Split", [qkv, g.ints("/attn/split", [c, c, c])], "/attn/Split", outputs=3, axis=-1)
    q = split_heads(g, q, s, h, d, "/attn/q", [0, 2, 1, 3])
    k = split_heads(g, k, s, h, d, "/attn/k", [0, 2, 3, 1])
    v = split_heads(g, v, s, h, d, "/attn/v", [0, 2, 1, 3])
    o = merge_heads(g, attend(g, q, k, v, 0.25, "/attn"), s, c, "/attn/out")
    x = g.node("Add", [x, g.linear(o, c, c, "/attn/proj")], "/attn/Add")
    g.output(mlp(g, x, c, "/mlp"))
    return g.model()


@case("qvl-block-unbatched")
def qvl_block_unbatched() -> onnx.ModelProto:
    s, c, h, d = 64, 64, 4, 16
    g = Builder("qvl_block_unbatched")
    x = g.input("x", [s, c])
    qkv = g.linear(g.layer_norm(x, c, "/attn/norm"), c, 3 * c, "/attn/qkv", gemm=True)
    parts = g.node("Split", [qkv, g.ints("/attn/split", [c, c, c])], "/attn/Split", outputs=3, axis=-1)
    q, k, v = (
        g.node("Transpose", [g.node("Reshape", [t, g.ints(f"/attn/{n}.shape", [s, h, d])], f"/attn/{n}/Reshape")],
               f"/attn/{n}/Transpose", perm=perm)
        for t, n, perm in zip(parts, "qkv", ([1, 0, 2], [1, 2, 0], [1, 0, 2]))
    )  # fmt: skip
    o = g.node("Transpose", [attend(g, q, k, v, 0.25, "/attn")], "/attn/out/Transpose", perm=[1, 0, 2])
    o = g.node("Reshape", [o, g.ints("/attn/out.shape", [s, c])], "/attn/out/Reshape")
    x = g.node("Add", [x, g.linear(o, c, c, "/attn/proj", gemm=True)], "/attn/Add")
    g.output(mlp(g, x, c, "/mlp", gemm=True))
    return g.model()


@case("qvl-block-tokens-as-width")
def qvl_block_tokens_as_width() -> onnx.ModelProto:
    s, c, h, d = 256, 64, 4, 16
    g = Builder("qvl_block_tokens_as_width")
    x = g.input("x", [1, c, 1, s])
    n = g.node("Reshape", [x, g.ints("/norm.group", [1, 1, c * s])], "/norm/Reshape")
    n = g.node(
        "InstanceNormalization", [n, g.const("/norm.one", [1.0]), g.const("/norm.zero", [0.0])], "/norm/InstanceNorm"
    )
    n = g.node("Reshape", [n, g.ints("/norm.back", [1, c, 1, s])], "/norm/Reshape_1")
    qkv = g.conv1x1(n, c, 3 * c, "/attn/qkv")
    q, k, v = g.node("Split", [qkv, g.ints("/attn/split", [c, c, c])], "/attn/Split", outputs=3, axis=1)
    heads = {
        n: g.node("Reshape", [t, g.ints(f"/attn/{n}.shape", [1, h, d, s])], f"/attn/{n}/Reshape")
        for t, n in zip((q, k, v), "qkv")
    }
    q = g.node("Transpose", [heads["q"]], "/attn/q/Transpose", perm=[0, 1, 3, 2])
    v = g.node("Transpose", [heads["v"]], "/attn/v/Transpose", perm=[0, 1, 3, 2])
    scores = g.node("Div", [g.node("MatMul", [q, heads["k"]], "/attn/MatMul"), g.const("/attn.d", 4.0)], "/attn/Div")
    o = g.node("MatMul", [g.node("Softmax", [scores], "/attn/Softmax", axis=-1), v], "/attn/MatMul_1")
    o = g.node("Transpose", [o], "/attn/out/Transpose", perm=[0, 1, 3, 2])
    o = g.node("Reshape", [o, g.ints("/attn/out.shape", [1, c, 1, s])], "/attn/out/Reshape")
    g.output(g.node("Add", [x, g.conv1x1(o, c, c, "/attn/proj")], "/attn/Add"))
    return g.model()


def _layernorm_input(name: str) -> tuple[Builder, str]:
    g = Builder(name)
    return g, g.input("x", [1, 197, 64])


@case("qvl-layernorm-decomposed")
def qvl_layernorm_decomposed() -> onnx.ModelProto:
    g, x = _layernorm_input("qvl_layernorm_decomposed")
    mean = g.node("ReduceMean", [x], "/ln/ReduceMean", axes=[-1], keepdims=1)
    centred = g.node("Sub", [x, mean], "/ln/Sub")
    var = g.node(
        "ReduceMean",
        [g.node("Pow", [centred, g.const("/ln.two", 2.0)], "/ln/Pow")],
        "/ln/ReduceMean_1",
        axes=[-1],
        keepdims=1,
    )
    std = g.node("Sqrt", [g.node("Add", [var, g.const("/ln.eps", 1e-5)], "/ln/Add")], "/ln/Sqrt")
    n = g.node("Div", [centred, std], "/ln/Div")
    n = g.node(
        "Add",
        [g.node("Mul", [n, g.const("/ln.weight", np.ones(64))], "/ln/Mul"), g.const("/ln.bias", np.zeros(64))],
        "/ln/Add_1",
    )
    return tokens_out(g, n, 64)


@case("qvl-layernorm-fused")
def qvl_layernorm_fused() -> onnx.ModelProto:
    g, x = _layernorm_input("qvl_layernorm_fused")
    return tokens_out(g, g.layer_norm(x, 64, "/ln"), 64)


@case("qvl-tower-raw", "qvl-tower-raw-op16")
def qvl_tower_raw() -> onnx.ModelProto:
    g = Builder("qvl_tower_raw")
    x = g.conv1x1(g.input("image", [1, 3, 8, 8]), 3, 4, "/embed")
    batch = g.node(
        "Gather", [g.node("Shape", [x], "/shape/Shape"), g.ints("/shape.first", [0])], "/shape/Gather", axis=0
    )
    target = g.node("Concat", [batch, g.ints("/shape.rest", [4, 64])], "/shape/Concat", axis=0)
    tokens = g.node("Reshape", [x, target], "/shape/Reshape")
    return tokens_out(g, tokens, 64)
