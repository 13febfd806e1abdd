"""The public record of DFC runs, each outcome rebuilt as a small graph (`backtest` holds the gate to them).

Every `public_record` entry of `params/device_ops.yaml` with `rebuilt: true` has a builder here (`BUILDERS`):
the graph the record describes (at reduced size where the record's is large), its nodes named as
`refused_at` names them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from ..graphs import Builder

# ------------------------------------------------------------------------------------------ the blocks


def _heads(g: Builder, x: str, s: int, h: int, d: int, name: str, perm: list[int]) -> str:
    """A glued head split of tokens [1, s, h*d]: Reshape [1, s, h, d], then its Transpose."""
    split = g.node("Reshape", [x, g.ints(f"{name}.shape", [1, s, h, d])], f"{name}/Reshape")
    return g.node("Transpose", [split], f"{name}/Transpose", perm=perm)


def _merge(g: Builder, o: str, s: int, c: int, name: str) -> str:
    """[1, h, s, d] -> Transpose [0, 2, 1, 3] -> Reshape [1, s, c] (the head merge, glued)."""
    t = g.node("Transpose", [o], f"{name}/Transpose", perm=[0, 2, 1, 3])
    return g.node("Reshape", [t, g.ints(f"{name}.shape", [1, s, c])], f"{name}/Reshape")


def _attend(g: Builder, q: str, kt: str, v: str, scale: float, name: str, mask: np.ndarray | None = None) -> str:
    s = g.node("MatMul", [q, kt], f"{name}/MatMul")
    s = g.node("Mul", [s, g.const(f"{name}.scale", scale)], f"{name}/Mul")
    if mask is not None:
        s = g.node("Add", [s, g.const(f"{name}.mask", mask)], f"{name}/Add_mask")
    p = g.node("Softmax", [s], f"{name}/Softmax", axis=-1)
    return g.node("MatMul", [p, v], f"{name}/MatMul_1")


def _mlp(g: Builder, h: str, c: int, name: str, gemm: bool = False) -> str:
    m = g.linear(g.layer_norm(h, c, f"{name}/norm"), c, 4 * c, f"{name}/fc1", gemm=gemm)
    m = g.linear(g.gelu(m, f"{name}/act"), 4 * c, c, f"{name}/fc2", gemm=gemm)
    return g.node("Add", [h, m], f"{name}/Add")


def _sandwich(name: str) -> tuple[Builder, str]:
    """A real input and a 1x1 Conv before the op under test, as the corrected harness wraps every op."""
    g = Builder(name)
    x = g.input("x", [1, 8, 16, 16])
    return g, g.conv1x1(x, 8, 8, "/pre")


def _close(g: Builder, y: str, channels: int = 8) -> onnx.ModelProto:
    g.output(g.conv1x1(y, channels, 4, "/post"))
    return g.model()


def _tokens(name: str, s: int, c: int) -> tuple[Builder, str]:
    g = Builder(name)
    x = g.input("x", [1, s, c])
    return g, g.linear(x, c, c, "/pre")


def _end(g: Builder, y: str, c: int) -> onnx.ModelProto:
    g.output(g.linear(y, c, c, "/post"))
    return g.model()


# ------------------------------------------------------------------------------------ DFC 5.3.0: QVL


def qvl_block_tokens() -> onnx.ModelProto:
    s, c, h, d = 64, 64, 4, 16
    g = Builder("qvl_block_tokens")
    x = g.input("x", [1, s, c])
    qkv = g.linear(g.layer_norm(x, c, "/attn/norm"), c, 3 * c, "/attn/qkv")
    q, k, v = g.node("Split", [qkv, g.ints("/attn/split", [c, c, c])], "/attn/Split", outputs=3, axis=-1)
    q = _heads(g, q, s, h, d, "/attn/q", [0, 2, 1, 3])
    k = _heads(g, k, s, h, d, "/attn/k", [0, 2, 3, 1])
    v = _heads(g, v, s, h, d, "/attn/v", [0, 2, 1, 3])
    o = _merge(g, _attend(g, q, k, v, 0.25, "/attn"), s, c, "/attn/out")
    x = g.node("Add", [x, g.linear(o, c, c, "/attn/proj")], "/attn/Add")
    g.output(_mlp(g, x, c, "/mlp"))
    return g.model()


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
    o = g.node("Transpose", [_attend(g, q, k, v, 0.25, "/attn")], "/attn/out/Transpose", perm=[1, 0, 2])
    o = g.node("Reshape", [o, g.ints("/attn/out.shape", [s, c])], "/attn/out/Reshape")
    x = g.node("Add", [x, g.linear(o, c, c, "/attn/proj", gemm=True)], "/attn/Add")
    g.output(_mlp(g, x, c, "/mlp", gemm=True))
    return g.model()


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
    return _end(g, n, 64)


def qvl_layernorm_fused() -> onnx.ModelProto:
    g, x = _layernorm_input("qvl_layernorm_fused")
    return _end(g, g.layer_norm(x, 64, "/ln"), 64)


def qvl_tower_raw() -> onnx.ModelProto:
    g = Builder("qvl_tower_raw")
    x = g.conv1x1(g.input("image", [1, 3, 8, 8]), 3, 4, "/embed")
    batch = g.node(
        "Gather", [g.node("Shape", [x], "/shape/Shape"), g.ints("/shape.first", [0])], "/shape/Gather", axis=0
    )
    target = g.node("Concat", [batch, g.ints("/shape.rest", [4, 64])], "/shape/Concat", axis=0)
    tokens = g.node("Reshape", [x, target], "/shape/Reshape")
    return _end(g, tokens, 64)


def ugv_conv_relu() -> onnx.ModelProto:
    g = Builder("ugv_conv_relu")
    x = g.input("x", [1, 3, 16, 16])
    w = g.const("/conv1.weight", np.full((32, 3, 3, 3), 0.05))
    y = g.node("Relu", [g.node("Conv", [x, w], "/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "/relu/Relu")
    g.output(g.conv1x1(y, 32, 16, "/conv2"))
    return g.model()


def ugv_conv_1x1_large() -> onnx.ModelProto:
    g = Builder("ugv_conv_1x1_large")
    g.output(g.conv1x1(g.input("x", [1, 4, 64, 64]), 4, 1, "/conv"))
    return g.model()


# ----------------------------------------------------------------------------------- DFC 5.3.0: rf-detr


def _dinov2(name: str, windows: int, tile: bool | None) -> onnx.ModelProto:
    """One HF-DINOv2-like block at reduced size; `windows` > 1 stacks the windows as a batch (the CLS token
    Tiled per window, or already folded to a constant when `tile` is False)."""
    c, h = 32, 4
    d = c // h
    g = Builder(name)
    image = g.input("image", [1, 3, 28, 28])
    w = g.const("/embeddings/patch.weight", np.random.default_rng(0).standard_normal((c, 3, 14, 14)) / 24)
    patches = g.node("Conv", [image, w], "/embeddings/patch/Conv", kernel_shape=[14, 14], strides=[14, 14])
    flat = g.node("Reshape", [patches, g.ints("/embeddings.flat", [1, c, 4])], "/embeddings/Reshape")
    tokens = g.node("Transpose", [flat], "/embeddings/Transpose", perm=[0, 2, 1])
    if windows > 1:
        tokens = g.node(
            "Reshape",
            [tokens, g.ints("/windows", [windows, 4 // windows, c])],
            "/encoder/encoder/embeddings/window_Reshape",
        )
        if tile:
            cls = g.node(
                "Tile",
                [g.const("cls", np.zeros((1, 1, c))), g.ints("/tile", [windows, 1, 1])],
                "/encoder/encoder/embeddings/Tile",
            )
        else:
            cls = g.const("cls_folded", np.zeros((windows, 1, c)))
        x = g.node("Concat", [cls, tokens], "/encoder/encoder/embeddings/Concat_1", axis=1)
        g.output(g.layer_norm(x, c, "/encoder/layernorm"))
        return g.model()
    s = 5
    x = g.node("Concat", [g.const("cls", np.zeros((1, 1, c))), tokens], "/embeddings/Concat", axis=1)
    x = g.node("Add", [x, g.const("/embeddings.position", np.zeros((1, s, c)))], "/embeddings/Add")
    n = g.layer_norm(x, c, "/layer/norm1")
    q = _heads(g, g.linear(n, c, c, "/attn/query"), s, h, d, "/attn/q", [0, 2, 1, 3])
    k = _heads(g, g.linear(n, c, c, "/attn/key"), s, h, d, "/attn/k", [0, 2, 1, 3])
    k = g.node("Transpose", [k], "/attn/k/Transpose_1", perm=[0, 1, 3, 2])
    v = _heads(g, g.linear(n, c, c, "/attn/value"), s, h, d, "/attn/v", [0, 2, 1, 3])
    o = _merge(g, _attend(g, q, k, v, d**-0.5, "/attn"), s, c, "/attn/out")
    o = g.node("Mul", [g.linear(o, c, c, "/attn/dense"), g.const("/layer.scale1", np.ones(c))], "/layer/Mul")
    x = _mlp(g, g.node("Add", [x, o], "/layer/Add"), c, "/layer/mlp")
    x = g.layer_norm(x, c, "/layernorm")
    patches = g.node("Slice", [x, g.ints("/out.st", [1]), g.ints("/out.en", [s]), g.ints("/out.ax", [1])], "/out/Slice")
    grid = g.node("Reshape", [patches, g.ints("/out.grid", [1, 2, 2, c])], "/out/Reshape")
    g.output(g.node("Transpose", [grid], "/out/Transpose", perm=[0, 3, 1, 2]))
    return g.model()


def rfd_isolated_cls_concat() -> onnx.ModelProto:
    g = Builder("rfd_isolated_cls_concat")
    x = g.input("x", [1, 576, 384])
    joined = g.node("Concat", [g.const("cls", np.zeros((1, 1, 384))), x], "/Concat", axis=1)
    g.output(g.node("Mul", [joined, g.const("/k", 2.0)], "/Mul"))
    return g.model()


def rfd_isolated_layernorm() -> onnx.ModelProto:
    g = Builder("rfd_isolated_layernorm")
    n = g.layer_norm(g.input("x", [1, 577, 384]), 384, "/ln")
    g.output(g.node("Mul", [n, g.const("/k", 2.0)], "/Mul"))
    return g.model()


def harness_no_input() -> onnx.ModelProto:
    g = Builder("harness_no_input")
    g.output(g.node("ConstantOfShape", [g.ints("/shape", [1, 8, 16, 16])], "/ConstantOfShape"))
    return g.model()


def reshape_as_view() -> onnx.ModelProto:
    g = Builder("reshape_as_view")
    x = g.node("Mul", [g.input("x", [1, 16]), g.const("/pre.k", 2.0)], "/pre/Mul")
    pairs = g.node("Reshape", [x, g.ints("/view", [-1, 2, 4])], "/Reshape")
    pairs = g.node("Mul", [pairs, g.const("/k", 2.0)], "/Mul")
    g.output(g.node("Reshape", [pairs, g.ints("/back", [1, 16])], "/Reshape_back"))
    return g.model()


def expand_scaffolding() -> onnx.ModelProto:
    g = Builder("expand_scaffolding")
    x = g.node("Unsqueeze", [g.input("x", [1, 8]), g.ints("/axes", [1])], "/Unsqueeze")
    wide = g.node("Expand", [x, g.ints("/shape", [1, 4, 8])], "/Expand_1")
    tent = g.node("Sub", [wide, g.const("/centres", np.arange(32, dtype=np.float32).reshape(1, 4, 8))], "/Sub")
    g.output(g.node("Mul", [tent, g.const("/k", 2.0)], "/Mul"))
    return g.model()


def measured_passing() -> onnx.ModelProto:
    g, x = _sandwich("measured_passing")
    y = g.node("Sqrt", [g.node("Add", [g.node("Mul", [x, x], "/Mul"), g.const("/one", 1.0)], "/Add")], "/Sqrt")
    return _close(g, g.node("Sub", [y, g.const("/k", 0.5)], "/Sub"))


def harness_booleans() -> onnx.ModelProto:
    g, x = _sandwich("harness_booleans")
    half = g.const("/half", 0.5)
    greater = g.node("Greater", [x, half], "/Greater")
    less = g.node("Less", [x, half], "/Less")
    both = g.node("And", [g.node("Not", [greater], "/Not"), less], "/And")
    tests = [both, g.node("IsInf", [x], "/IsInf"), g.node("IsNaN", [x], "/IsNaN")]
    floats = [g.node("Cast", [t], f"/Cast_{i}", to=onnx.TensorProto.FLOAT) for i, t in enumerate(tests)]
    total = g.node("Add", [g.node("Add", floats[:2], "/Add"), floats[2]], "/Add_1")
    return _close(g, total)


def harness_trig() -> onnx.ModelProto:
    g, x = _sandwich("harness_trig")
    return _close(g, g.node("Cos", [g.node("Sin", [x], "/Sin")], "/Cos"))


def cast_round_trip() -> onnx.ModelProto:
    g, x = _sandwich("cast_round_trip")
    ints = g.node("Cast", [x], "/Cast", to=onnx.TensorProto.INT32)
    return _close(g, g.node("Cast", [ints], "/Cast_back", to=onnx.TensorProto.FLOAT))


def where_standalone() -> onnx.ModelProto:
    g, x = _sandwich("where_standalone")
    condition = g.const("/condition", np.random.default_rng(0).random((1, 8, 16, 16)) > 0.5, np.bool_)
    return _close(g, g.node("Where", [condition, x, g.const("/zeros", np.zeros((1, 8, 16, 16)))], "/Where"))


def _onehot(name: str, cast_between: bool) -> onnx.ModelProto:
    g = Builder(name)
    index = g.input("index", [1, 1, 16, 16], onnx.TensorProto.INT64)
    hot = g.node("OneHot", [index, g.ints("/depth", [8]), g.const("/values", [0.0, 1.0])], "/OneHot", axis=-1)
    if cast_between:
        hot = g.node("Cast", [hot], "/Cast", to=onnx.TensorProto.FLOAT)
    t = g.node("Transpose", [hot], "/Transpose", perm=[0, 4, 2, 3, 1])
    return _close(g, g.node("Squeeze", [t, g.ints("/axes", [4])], "/Squeeze"))


# -------------------------------------------------------------------------------- DFC 5.3.0: the LLM


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


def llm_gqa_repeat_kv() -> onnx.ModelProto:
    s, c, h, kv, d = 8, 32, 4, 2, 8
    g, x = _tokens("llm_gqa_repeat_kv", s, c)
    q = _heads(g, g.linear(x, c, c, "self_attn/q_proj"), s, h, d, "self_attn/q", [0, 2, 1, 3])

    def repeat(t: str, n: str, suffix: str) -> str:
        heads = _heads(g, g.linear(x, c, kv * d, f"self_attn/{n}_proj"), s, kv, d, f"self_attn/{n}", [0, 2, 1, 3])
        wide = g.node("Unsqueeze", [heads, g.ints(f"self_attn/{n}.axes", [2])], f"self_attn/Unsqueeze{suffix}")
        wide = g.node(
            "Expand", [wide, g.ints(f"self_attn/{n}.rep", [1, kv, h // kv, s, d])], f"self_attn/Expand{suffix}"
        )
        return g.node(
            "Reshape", [wide, g.ints(f"self_attn/{n}.merge", [1, h, s, d])], f"self_attn/Reshape_{3 if n == 'k' else 4}"
        )

    k = g.node("Transpose", [repeat(x, "k", "")], "self_attn/k/Transpose_1", perm=[0, 1, 3, 2])
    o = _merge(g, _attend(g, q, k, repeat(x, "v", "_1"), d**-0.5, "self_attn"), s, c, "self_attn/out")
    return _end(g, o, c)


def llm_qk_norm() -> onnx.ModelProto:
    s, c, h, d = 8, 32, 4, 8
    g, x = _tokens("llm_qk_norm", s, c)
    split = g.node(
        "Reshape",
        [g.linear(x, c, c, "self_attn/q_proj"), g.ints("self_attn/q.shape", [1, s, h, d])],
        "self_attn/Reshape_1",
    )
    q = g.node("Transpose", [_rms(g, split, d, "self_attn/q_norm")], "self_attn/Transpose", perm=[0, 2, 1, 3])
    kt = g.node("Transpose", [q], "self_attn/Transpose_1", perm=[0, 1, 3, 2])
    return _end(g, _merge(g, _attend(g, q, kt, q, d**-0.5, "self_attn"), s, c, "self_attn/out"), c)


def _rotate(g: Builder, t: str, d: int, s: int, name: str, partial: bool = False) -> str:
    """t * cos + rotate_half(t) * sin over the last axis, rotate_half being Concat(-t2, t1); `partial`
    rotates only the first `d` features of `t` (a slice of the head dim, as partial rotary does)."""
    half, ax = d // 2, g.ints(f"{name}.ax", [-1])
    source = t
    if partial:
        source = g.node("Slice", [t, g.ints(f"{name}.r0", [0]), g.ints(f"{name}.r1", [d]), ax], f"{name}/Slice_rot")
    t1 = g.node("Slice", [source, g.ints(f"{name}.a0", [0]), g.ints(f"{name}.a1", [half]), ax], f"{name}/Slice")
    t2 = g.node("Slice", [source, g.ints(f"{name}.b0", [half]), g.ints(f"{name}.b1", [d]), ax], f"{name}/Slice_1")
    rot = g.node("Concat", [g.node("Neg", [t2], f"{name}/Neg"), t1], f"{name}/Concat", axis=-1)
    angles = np.outer(np.arange(s), 1.0 / 10000 ** (np.arange(half) * 2 / d))
    cos = g.const(f"{name}.cos", np.tile(np.cos(angles), 2))
    sin = g.const(f"{name}.sin", np.tile(np.sin(angles), 2))
    return g.node(
        "Add", [g.node("Mul", [source, cos], f"{name}/Mul"), g.node("Mul", [rot, sin], f"{name}/Mul_1")], f"{name}/Add"
    )


def llm_qwen2_block() -> onnx.ModelProto:
    s, c, h, d = 8, 32, 4, 8
    g = Builder("llm_qwen2_block")
    x = g.input("x", [1, s, c])
    n = _rms(g, x, c, "/input_layernorm")
    q = _rotate(
        g, _heads(g, g.linear(n, c, c, "/self_attn/q_proj"), s, h, d, "/self_attn/q", [0, 2, 1, 3]), d, s, "/rope/q"
    )
    k = _rotate(
        g, _heads(g, g.linear(n, c, c, "/self_attn/k_proj"), s, h, d, "/self_attn/k", [0, 2, 1, 3]), d, s, "/rope/k"
    )
    v = _heads(g, g.linear(n, c, c, "/self_attn/v_proj"), s, h, d, "/self_attn/v", [0, 2, 1, 3])
    kt = g.node("Transpose", [k], "/self_attn/k/Transpose_1", perm=[0, 1, 3, 2])
    causal = np.triu(np.full((1, 1, s, s), -1e4), 1)
    o = _merge(g, _attend(g, q, kt, v, d**-0.5, "/self_attn", causal), s, c, "/self_attn/out")
    x = g.node("Add", [x, g.linear(o, c, c, "/self_attn/o_proj")], "/Add")
    n = _rms(g, x, c, "/post_attention_layernorm")
    gate = g.linear(n, c, 2 * c, "/mlp/gate_proj")
    act = g.node("Mul", [gate, g.node("Sigmoid", [gate], "/mlp/Sigmoid")], "/mlp/Mul")
    up = g.node("Mul", [act, g.linear(n, c, 2 * c, "/mlp/up_proj")], "/mlp/Mul_1")
    g.output(g.node("Add", [x, g.linear(up, 2 * c, c, "/mlp/down_proj")], "/Add_1"))
    return g.model()


# ------------------------------------------------------------------------------------ RFD 1154: Pixal3D


def _pixal(name: str, x_shape: list[int], t_shape: list[int], cond_rank4: bool) -> onnx.ModelProto:
    g = Builder(name)
    x = g.input("x", x_shape)
    t = g.input("t", t_shape)
    conds = [
        g.input(n, [1, 16, 1, length] if cond_rank4 else [1, length, 16])
        for n, length in (("cond_global", 5), ("cond_proj", 8))
    ]
    tokens = g.node("Reshape", [x, g.ints("/x.tokens", [1, 8, 512])], "/x/Reshape")
    freqs = g.const("/t_embedder.freqs", np.linspace(0.1, 1, 8).reshape([1, 8, 1, 1] if cond_rank4 else [8]))
    angle = g.node("Mul", [t, freqs], "/t_embedder/Mul")
    embedding = g.node(
        "Concat",
        [g.node("Cos", [angle], "/t_embedder/Cos"), g.node("Sin", [angle], "/t_embedder/Sin")],
        "/t_embedder/Concat",
        axis=0 if not cond_rank4 else 1,
    )
    summary = g.node(
        "ReduceSum", [embedding, g.ints("/t.axes", [0 if not cond_rank4 else 1])], "/t_embedder/ReduceSum", keepdims=1
    )
    pooled = [g.node("ReduceMean", [cnd], f"/{cnd}/ReduceMean", keepdims=1) for cnd in conds]
    y = g.node("Add", [g.node("Mul", [tokens, summary], "/Mul"), g.node("Mul", pooled, "/cond/Mul")], "/Add")
    g.output(y)
    return g.model()


# ----------------------------------------------------------------------------------- DFC 5.4.0: Clef


def clef_rank1_input() -> onnx.ModelProto:
    g = Builder("clef_rank1_input")
    ids = g.input("type_ids", [2], onnx.TensorProto.INT64)
    rows = g.node("Gather", [g.const("/type_embedding", np.eye(3, 16)), ids], "/Gather", axis=0)
    tokens = g.node("Unsqueeze", [rows, g.ints("/axes", [0])], "/Unsqueeze")
    return _end(g, tokens, 16)


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


def clef_two_attention_blocks() -> onnx.ModelProto:
    s, c, h, kv, d = 8, 32, 4, 2, 8
    g, x = _tokens("clef_two_attention_blocks", s, c)
    for block in range(2):
        name = f"/block{block}"
        q = _heads(g, g.linear(x, c, c, f"{name}/q_proj"), s, h, d, f"{name}/q", [0, 2, 1, 3])
        k, v = (
            g.node("Tile", [_heads(g, g.linear(x, c, kv * d, f"{name}/{n}_proj"), s, kv, d, f"{name}/{n}", [0, 2, 1, 3]), g.ints(f"{name}/{n}.rep", [1, h // kv, 1, 1])], f"{name}/{n}/Tile")
            for n in "kv"
        )  # fmt: skip
        kt = g.node("Transpose", [k], f"{name}/k/Transpose_1", perm=[0, 1, 3, 2])
        x = g.node(
            "Add",
            [x, g.linear(_merge(g, _attend(g, q, kt, v, d**-0.5, name), s, c, f"{name}/out"), c, c, f"{name}/o_proj")],
            f"{name}/Add",
        )
    return _end(g, x, c)


def _partial_rope(name: str, swap_sign: bool) -> onnx.ModelProto:
    s, c, rot = 8, 32, 16
    g, x = _tokens(name, s, c)
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
        rotated = _rotate(g, x, rot, s, "/rope", partial=True)
    return _end(g, g.node("Concat", [rotated, passthrough], "/rope/Concat_out", axis=-1), c)


def clef_reshape_5d_to_4d() -> onnx.ModelProto:
    g, x = _tokens("clef_reshape_5d_to_4d", 8, 256)
    five = g.node(
        "Mul", [g.node("Reshape", [x, g.ints("/five", [1, 8, 16, 2, 8])], "/Reshape"), g.const("/k", 2.0)], "/Mul"
    )
    four = g.node("Reshape", [five, g.ints("/four", [1, 8, 32, 8])], "node_view_1")
    back = g.node(
        "Reshape", [g.node("Mul", [four, g.const("/k2", 2.0)], "/Mul_1"), g.ints("/back", [1, 8, 256])], "/Reshape_back"
    )
    return _end(g, back, 256)


def clef_lone_transpose() -> onnx.ModelProto:
    g = Builder("clef_lone_transpose")
    x = g.node("Mul", [g.input("x", [1, 8, 4, 16]), g.const("/k", 2.0)], "/Mul")
    g.output(
        g.node("Mul", [g.node("Transpose", [x], "node_transpose_2", perm=[0, 2, 1, 3]), g.const("/k2", 2.0)], "/Mul_1")
    )
    return g.model()


def clef_reducesum_minus2() -> onnx.ModelProto:
    g, x = _tokens("clef_reducesum_minus2", 8, 16)
    total = g.node("ReduceSum", [x, g.ints("/axes", [-2])], "node_sum_4", keepdims=0)
    g.output(g.node("Mul", [total, g.const("/k", 2.0)], "/Mul"))
    return g.model()


def clef_reducesum_channels() -> onnx.ModelProto:
    g, x = _sandwich("clef_reducesum_channels")
    return _close(g, g.node("ReduceSum", [x, g.ints("/axes", [1])], "/ReduceSum", keepdims=1), channels=1)


def clef_expand() -> onnx.ModelProto:
    g, x = _sandwich("clef_expand")
    mean = g.node("ReduceMean", [x], "/ReduceMean", axes=[1], keepdims=1)
    return _close(g, g.node("Expand", [mean, g.ints("/shape", [1, 8, 16, 16])], "node_Expand_61"))


def clef_constant_of_shape() -> onnx.ModelProto:
    g, x = _tokens("clef_constant_of_shape", 8, 16)
    state = g.node("ConstantOfShape", [g.ints("/shape", [1, 8, 16])], "node_ConstantOfShape")
    return _end(g, g.node("Add", [x, state], "/Add"), 16)


def clef_head_axis_shortcut() -> onnx.ModelProto:
    g, x = _tokens("clef_head_axis_shortcut", 8, 64)
    heads = g.node(
        "Mul", [g.node("Reshape", [x, g.ints("/heads", [1, 8, 4, 16])], "node_view"), g.const("/k", 2.0)], "/Mul"
    )
    return _end(g, g.node("Reshape", [heads, g.ints("/back", [1, 8, 64])], "/Reshape_back"), 64)


def clef_conv1d() -> onnx.ModelProto:
    g, x = _tokens("clef_conv1d", 8, 16)
    channels = g.node("Transpose", [x], "/Transpose", perm=[0, 2, 1])
    w = g.const("/conv.weight", np.full((16, 1, 4), 0.25))
    conv = g.node("Conv", [channels, w], "node_conv1d", kernel_shape=[4], group=16, pads=[3, 0])
    return _end(g, g.node("Transpose", [conv], "/Transpose_back", perm=[0, 2, 1]), 16)


def clef_swiglu() -> onnx.ModelProto:
    g = Builder("clef_swiglu")
    x = g.input("x", [1, 8, 64])
    gate = g.linear(x, 64, 128, "/gate_proj")
    act = g.node("Mul", [gate, g.node("Sigmoid", [gate], "/Sigmoid")], "/Mul")
    g.output(g.linear(g.node("Mul", [act, g.linear(x, 64, 128, "/up_proj")], "/Mul_1"), 128, 64, "/down_proj"))
    return g.model()


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
    g.output(_attend(g, q, kt, v, 0.25, "/attn", causal))
    return g.model()


# --------------------------------------------------------------- DFC 5.2.0 / 5.3.0: the WD-Tagger report


def _nhwc_stem(g: Builder, c: int, patch: int) -> str:
    """An NHWC image [1, 16, 16, 3] put channels-first, then the patch Conv: [1, c, 16/patch, 16/patch]."""
    x = g.node("Transpose", [g.input("input_1", [1, 16, 16, 3])], "/stem/Transpose", perm=[0, 3, 1, 2])
    w = g.const("/stem.weight", np.random.default_rng(0).standard_normal((c, 3, patch, patch)) / (3 * patch))
    return g.node("Conv", [x, w], "/stem/Conv", kernel_shape=[patch, patch], strides=[patch, patch])


def wdt_vit() -> onnx.ModelProto:
    c = 32
    g = Builder("wdt_vit")
    nhwc = g.node("Transpose", [_nhwc_stem(g, c, 4)], "/stem/Transpose_1", perm=[0, 2, 3, 1])
    tokens = g.node("Reshape", [nhwc, g.ints("/stem.tokens", [1, 16, c])], "/stem/Reshape")
    return _end(g, g.layer_norm(tokens, c, "/encoder/norm1"), c)


def wdt_convnext() -> onnx.ModelProto:
    c = 32
    g = Builder("wdt_convnext")
    stem = _nhwc_stem(g, c, 4)
    n = g.layer_norm(g.node("Transpose", [stem], "token_5", perm=[0, 2, 3, 1]), c, "/stem/norm")
    x = g.node("Transpose", [n], "token_6", perm=[0, 3, 1, 2])
    w = g.const("/block/dw.weight", np.full((c, 1, 7, 7), 1 / 49))
    dw = g.node("Conv", [x, w], "/block/dw/Conv", kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c)
    m = g.layer_norm(g.node("Transpose", [dw], "token_7", perm=[0, 2, 3, 1]), c, "/block/norm")
    m = g.linear(g.gelu(g.linear(m, c, 4 * c, "/block/fc1"), "/block/act"), 4 * c, c, "/block/fc2")
    m = g.node("Mul", [m, g.const("/block.gamma", np.full(c, 0.1))], "/block/Mul")
    y = g.node("Add", [x, g.node("Transpose", [m], "token_8", perm=[0, 3, 1, 2])], "/block/Add")
    return _close(g, y, channels=c)


def lemu_conv_relu_conv() -> onnx.ModelProto:
    g = Builder("lemu_conv_relu_conv")
    x = g.node("Relu", [g.conv1x1(g.input("x", [1, 256, 4, 4]), 256, 256, "/conv1")], "/relu/Relu")
    g.output(g.conv1x1(x, 256, 64, "/conv2"))
    return g.model()


# --------------------------------------------------------------------- DFC 5.3.0: encoders and heads


def bert_layer() -> onnx.ModelProto:
    """One post-LN BERT layer on the embedding sum [1, s, c]: attention, Add, LayerNorm, GELU MLP, Add,
    LayerNorm (the HF BertLayer export at reduced size)."""
    s, c, h = 8, 32, 4
    d = c // h
    g = Builder("bert_layer")
    x = g.input("embeddings", [1, s, c])
    q = _heads(g, g.linear(x, c, c, "/attention/query"), s, h, d, "/attention/q", [0, 2, 1, 3])
    k = _heads(g, g.linear(x, c, c, "/attention/key"), s, h, d, "/attention/k", [0, 2, 1, 3])
    k = g.node("Transpose", [k], "/attention/k/Transpose_1", perm=[0, 1, 3, 2])
    v = _heads(g, g.linear(x, c, c, "/attention/value"), s, h, d, "/attention/v", [0, 2, 1, 3])
    o = g.linear(
        _merge(g, _attend(g, q, k, v, d**-0.5, "/attention"), s, c, "/attention/out"), c, c, "/attention/dense"
    )
    x = g.layer_norm(g.node("Add", [x, o], "/attention/Add"), c, "/attention/norm")
    m = g.linear(g.gelu(g.linear(x, c, 4 * c, "/intermediate"), "/intermediate/act"), 4 * c, c, "/output/dense")
    g.output(g.layer_norm(g.node("Add", [x, m], "/output/Add"), c, "/output/norm"))
    return g.model()


def single_head() -> onnx.ModelProto:
    g, x = _tokens("single_head", 8, 16)
    q, v = g.linear(x, 16, 16, "/q_proj"), g.linear(x, 16, 16, "/v_proj")
    kt = g.node("Transpose", [g.linear(x, 16, 16, "/k_proj")], "/k/Transpose", perm=[0, 2, 1])
    return _end(g, _attend(g, q, kt, v, 0.25, "/attn"), 16)


# ------------------------------------------------------------------------------ DFC 5.x: CNNs


def _conv(g: Builder, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1, group: int = 1) -> str:
    w = g.const(
        f"{name}.weight", np.random.default_rng(cout).standard_normal((cout, cin // group, k, k)) / (k * k * cin)
    )
    pad = k // 2
    return g.node(
        "Conv", [x, w], f"{name}/Conv", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group
    )


def _relu(g: Builder, x: str, name: str) -> str:
    return g.node("Relu", [x], f"{name}/Relu")


def _basic_block(g: Builder, x: str, cin: int, cout: int, stride: int, name: str) -> str:
    y = _conv(
        g, _relu(g, _conv(g, x, cin, cout, 3, f"{name}/conv1", stride), f"{name}/act1"), cout, cout, 3, f"{name}/conv2"
    )
    skip = x if stride == 1 and cin == cout else _conv(g, x, cin, cout, 1, f"{name}/downsample", stride)
    return _relu(g, g.node("Add", [y, skip], f"{name}/Add"), f"{name}/act2")


def resnet18_stem() -> onnx.ModelProto:
    g = Builder("resnet18_stem")
    x = _relu(g, _conv(g, g.input("image", [1, 3, 32, 32]), 3, 16, 7, "/conv1", 2), "/act")
    x = g.node("MaxPool", [x], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.output(_basic_block(g, _basic_block(g, x, 16, 16, 1, "/layer1"), 16, 32, 2, "/layer2"))
    return g.model()


def _bottleneck(g: Builder, x: str, cin: int, mid: int, stride: int, name: str) -> str:
    """torchvision's ResNet50 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand to 4 x mid, the
    residual Add and ReLU; a 1x1 projection shortcut where the shape changes."""
    y = _relu(g, _conv(g, x, cin, mid, 1, f"{name}/conv1"), f"{name}/act1")
    y = _conv(g, _relu(g, _conv(g, y, mid, mid, 3, f"{name}/conv2", stride), f"{name}/act2"), mid, 4 * mid, 1,
              f"{name}/conv3")  # fmt: skip
    skip = x if stride == 1 and cin == 4 * mid else _conv(g, x, cin, 4 * mid, 1, f"{name}/downsample", stride)
    return _relu(g, g.node("Add", [y, skip], f"{name}/Add"), f"{name}/act3")


def resnet50_trunk() -> onnx.ModelProto:
    """KEFF's ResNet50 at 32x32: the stem, then one bottleneck block that keeps the shape and one that
    downsamples through its projection (layer1's and layer2's first forms)."""
    g = Builder("resnet50_trunk")
    x = _relu(g, _conv(g, g.input("image", [1, 3, 32, 32]), 3, 16, 7, "/conv1", 2), "/act")
    x = g.node("MaxPool", [x], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = _bottleneck(g, _bottleneck(g, x, 16, 4, 1, "/layer1.0"), 16, 8, 2, "/layer2.0")
    g.output(x)
    return g.model()


def cnn_family(kind: str) -> Callable[[], onnx.ModelProto]:
    """The Edge NPU Lab's three families: plain Convs, depthwise-separable, residual."""

    def build() -> onnx.ModelProto:
        g = Builder(f"edge_{kind}")
        x = g.input("x", [1, 16, 16, 16])
        if kind == "conv":
            x = _relu(g, _conv(g, _relu(g, _conv(g, x, 16, 16, 3, "/c1"), "/a1"), 16, 32, 3, "/c2", 2), "/a2")
            g.output(_conv(g, x, 32, 32, 1, "/c3"))
        elif kind == "dwpw":
            x = _relu(g, _conv(g, x, 16, 16, 3, "/dw", group=16), "/dw_act")
            g.output(_relu(g, _conv(g, x, 16, 32, 1, "/pw"), "/pw_act"))
        else:
            g.output(_basic_block(g, x, 16, 16, 1, "/block"))
        return g.model()

    return build


def conv_stack_1x1() -> onnx.ModelProto:
    g = Builder("conv_stack_1x1")
    x = _relu(g, g.conv1x1(g.input("x", [1, 256, 1, 1]), 256, 256, "/c0"), "/a0")
    g.output(_relu(g, g.conv1x1(x, 256, 256, "/c1"), "/a1"))
    return g.model()


# -------------------------------------------------------- YOLOv8 detection exported at opset 11 (BENCHY, NE503)


def _silu(g: Builder, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1) -> str:
    """Conv then SiLU as torch exports it (Sigmoid, Mul): Ultralytics' Conv block."""
    y = _conv(g, x, cin, cout, k, f"{name}/conv", stride)
    return g.node("Mul", [y, g.node("Sigmoid", [y], f"{name}/act/Sigmoid")], f"{name}/act/Mul")


def _c2f(g: Builder, x: str, c: int, name: str) -> str:
    """C2f with one bottleneck: Conv, Split of the channels in two, two 3x3 Convs with a residual Add, Concat.
    (The Split's sizes are an attribute, as opset 11 writes them.)"""
    y = _silu(g, x, c, c, 1, f"{name}/cv1")
    a, b = g.node("Split", [y], f"{name}/Split", outputs=2, axis=1, split=[c // 2, c // 2])
    m = _silu(g, _silu(g, b, c // 2, c // 2, 3, f"{name}/m.0/cv1"), c // 2, c // 2, 3, f"{name}/m.0/cv2")
    m = g.node("Add", [b, m], f"{name}/m.0/Add")
    return _silu(g, g.node("Concat", [a, b, m], f"{name}/Concat", axis=1), 3 * c // 2, c, 1, f"{name}/cv2")


def _sppf(g: Builder, x: str, c: int, name: str) -> str:
    """SPPF: Conv, three chained 5x5 MaxPools (stride 1), Concat of all four, Conv."""
    pools = [_silu(g, x, c, c // 2, 1, f"{name}/cv1")]
    for i in range(3):
        pool = g.node("MaxPool", [pools[-1]], f"{name}/m_{i}/MaxPool", kernel_shape=[5, 5], pads=[2] * 4)
        pools.append(pool)
    return _silu(g, g.node("Concat", pools, f"{name}/Concat", axis=1), 2 * c, c, 1, f"{name}/cv2")


def yolov8_opset11() -> onnx.ModelProto:
    """YOLOv8 detection at reduced width (64x64 input, 8/16 channels, two scales), cut at the raw head Convs
    as both records cut it, and written at opset 11 as both exported it (the ONNX version converter)."""
    g = Builder("yolov8_opset11")
    p1 = _silu(g, g.input("images", [1, 3, 64, 64]), 3, 8, 3, "/model.0", 2)
    p2 = _sppf(g, _c2f(g, _silu(g, p1, 8, 16, 3, "/model.1", 2), 16, "/model.2"), 16, "/model.9")
    up = g.node("Resize", [p2, g.const("/model.10.roi", []), g.const("/model.10.scales", [1, 1, 2, 2])],
                "/model.10/Resize", mode="nearest")  # fmt: skip
    p1 = _c2f(
        g, _silu(g, g.node("Concat", [up, p1], "/model.11/Concat", axis=1), 24, 16, 1, "/model.12"), 16, "/model.15"
    )
    heads = []
    for i, feat in enumerate((p1, p2)):
        for branch, out in (("cv2", 4), ("cv3", 2)):
            heads.append(_conv(g, _silu(g, feat, 16, 16, 3, f"/model.22/{branch}.{i}/{branch}.{i}.0"), 16, out, 1,
                               f"/model.22/{branch}.{i}/{branch}.{i}.2"))  # fmt: skip
    g.output(*heads)
    return _at_opset(g, 11)


def _at_opset(g: Builder, opset: int) -> onnx.ModelProto:
    """`g` as a checked, shape-inferred model importing an older default-domain opset than `Builder` writes."""
    graph = onnx.helper.make_graph(g.nodes, g.name, g.inputs, g.outputs, initializer=g.inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)], producer_name=g.name)
    model.ir_version = 6  # the IR that opset 11 was written with (onnx 1.6)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    onnx.checker.check_model(model, full_check=True)
    return model


BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "qvl-block-tokens": qvl_block_tokens,
    "qvl-block-unbatched": qvl_block_unbatched,
    "qvl-block-tokens-as-width": qvl_block_tokens_as_width,
    "qvl-layernorm-decomposed": qvl_layernorm_decomposed,
    "qvl-layernorm-fused": qvl_layernorm_fused,
    "qvl-tower-raw": qvl_tower_raw,
    "ugv-conv-relu": ugv_conv_relu,
    "ugv-conv-1x1-large": ugv_conv_1x1_large,
    "rfd-backbone-one-window": lambda: _dinov2("rfd_backbone_one_window", 1, None),
    "rfd-backbone-two-windows": lambda: _dinov2("rfd_backbone_two_windows", 2, True),
    "rfd-backbone-tile-folded": lambda: _dinov2("rfd_backbone_tile_folded", 2, False),
    "rfd-isolated-cls-concat": rfd_isolated_cls_concat,
    "rfd-isolated-layernorm": rfd_isolated_layernorm,
    "harness-no-input": harness_no_input,
    "reshape-as-view": reshape_as_view,
    "expand-scaffolding": expand_scaffolding,
    "measured-passing": measured_passing,
    "harness-booleans": harness_booleans,
    "harness-trig": harness_trig,
    "cast-round-trip": cast_round_trip,
    "where-standalone": where_standalone,
    "onehot-chain": lambda: _onehot("onehot_chain", False),
    "onehot-cast-before-transpose": lambda: _onehot("onehot_cast_before_transpose", True),
    "llm-dynamic-mask": llm_dynamic_mask,
    "llm-gqa-repeat-kv": llm_gqa_repeat_kv,
    "llm-qk-norm": llm_qk_norm,
    "llm-qwen2-block": llm_qwen2_block,
    "pixal-flow-as-exported": lambda: _pixal("pixal_flow_as_exported", [1, 8, 8, 8, 8], [1], False),
    "pixal-flow-x-rank4": lambda: _pixal("pixal_flow_x_rank4", [1, 8, 8, 64], [1], False),
    "pixal-flow-all-rank4": lambda: _pixal("pixal_flow_all_rank4", [1, 8, 8, 64], [1, 1, 1, 1], True),
    "clef-rank1-input": clef_rank1_input,
    "clef-layernorm-after-concat": clef_layernorm_after_concat,
    "clef-two-attention-blocks": clef_two_attention_blocks,
    "clef-rope-partial": lambda: _partial_rope("clef_rope_partial", False),
    "clef-rope-swap-sign": lambda: _partial_rope("clef_rope_swap_sign", True),
    "clef-reshape-5d-to-4d": clef_reshape_5d_to_4d,
    "clef-lone-transpose": clef_lone_transpose,
    "clef-reducesum-minus2": clef_reducesum_minus2,
    "clef-reducesum-channels": clef_reducesum_channels,
    "clef-expand": clef_expand,
    "clef-constant-of-shape": clef_constant_of_shape,
    "clef-head-axis-shortcut": clef_head_axis_shortcut,
    "clef-conv1d": clef_conv1d,
    "clef-swiglu": clef_swiglu,
    "clef-attention-core": clef_attention_core,
    "wdt-vit-520": wdt_vit,
    "wdt-vit-530": wdt_vit,
    "wdt-convnext-520": wdt_convnext,
    "wdt-convnext-530": wdt_convnext,
    "lemu-conv-relu-conv": lemu_conv_relu_conv,
    "l10h-minilm-encoder": bert_layer,
    "fsor-minilm-l12-parse": bert_layer,
    "llm-toy-single-head": single_head,
    "ugv-conv-stack-1x1": conv_stack_1x1,
    "qvl-tower-raw-op16": qvl_tower_raw,
    "rbn-vit-base-zoo": lambda: _dinov2("rbn_vit_base", 1, None),
    "robot-resnet18-int8": resnet18_stem,
    "robot-resnet18-a16": resnet18_stem,
    "edge-conv-family": cnn_family("conv"),
    "edge-dwpw-family": cnn_family("dwpw"),
    "edge-residual-family": cnn_family("residual"),
    "benchy-yolov8-det-530": yolov8_opset11,
    "ne503-yolov8-det-530": yolov8_opset11,
    "keff-resnet50-full-530": resnet50_trunk,
}


__all__ = ["BUILDERS"]
