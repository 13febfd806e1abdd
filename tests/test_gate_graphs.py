"""Small real ONNX graphs the gate tests share, built with onnx.helper, and a check that each one runs.

Running every builder's graph in onnxruntime makes sure the gate tests exercise valid models, not
protobufs that only look like one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def make(nodes, inputs, outputs, inits=(), *, opset=17, ir=10, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = ir
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def tensor(name, shape=(1, 1, 4, 8)):  # image-shaped (rank 4): the DFC's input regime
    return helper.make_tensor_value_info(name, F, list(shape))


def const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def attention(**kw) -> onnx.ModelProto:
    """Attention + LayerNorm + exact GELU: only allowlisted ops, each under its condition."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="/attn/MatMul"),
        helper.make_node("Softmax", ["s"], ["p"], name="/attn/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="/attn/MatMul_1"),
        helper.make_node("LayerNormalization", ["o", "ln_w", "ln_b"], ["n"], name="/norm/LayerNorm", axis=-1),
        helper.make_node("Div", ["n", "sqrt2"], ["d"], name="/mlp/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/mlp/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="/mlp/act/Add"),
        helper.make_node("Mul", ["n", "e1"], ["g"], name="/mlp/act/Mul"),
        helper.make_node("Mul", ["g", "half"], ["y"], name="/mlp/act/Mul_1"),
    ]
    inits = [
        const("ln_w", np.ones(8)),
        const("ln_b", np.zeros(8)),
        const("sqrt2", 2**0.5),
        const("one", 1.0),
        const("half", 0.5),
    ]
    return make(nodes, [tensor("q"), tensor("k"), tensor("v")], [tensor("y")], inits, **kw)


def with_op(op: str, name: str, **attrs) -> onnx.ModelProto:
    """x -> Relu -> <op> -> y, for an elementwise op outside (or inside) the allowlist."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/pre/Relu"),
        helper.make_node(op, ["r"], ["y"], name=name, **attrs),
    ]
    return make(nodes, [tensor("x")], [tensor("y")])


def topk_head(extra_softmax: bool = False) -> onnx.ModelProto:
    """A detection-head-like selection: Softmax then TopK (a known blocker)."""
    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], name="/head/Softmax", axis=-1),
        helper.make_node("TopK", ["p", "k"], ["vals", "idx"], name="/head/TopK", axis=-1),
    ]
    return make(
        nodes,
        [tensor("x")],
        [tensor("vals", (1, 1, 4, 2)), helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1, 4, 2])],
        [const("k", [2], np.int64)],
    )


def gather(constant_index: bool) -> onnx.ModelProto:
    """Gather rows of x with an index that is an initializer, or one computed from another input."""
    if constant_index:
        nodes = [helper.make_node("Gather", ["x", "idx"], ["y"], name="/emb/Gather", axis=2)]
        return make(nodes, [tensor("x")], [tensor("y", (1, 1, 2, 8))], [const("idx", [0, 3], np.int64)])
    nodes = [
        helper.make_node("ArgMax", ["s"], ["i"], name="/sel/ArgMax", axis=3, keepdims=0),
        helper.make_node("Gather", ["x", "i"], ["y"], name="/sel/Gather", axis=2),
    ]
    return make(nodes, [tensor("x"), tensor("s", (1, 1, 1, 4))], [tensor("y", (1, 1, 1, 1, 1, 8))])


def standalone_erf() -> onnx.ModelProto:
    nodes = [helper.make_node("Erf", ["x"], ["y"], name="/f/Erf")]
    return make(nodes, [tensor("x")], [tensor("y")])


def softmax_axis(axis: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="/s/Softmax", axis=axis)]
    return make(nodes, [tensor("x")], [tensor("y")])


BUILDERS = {
    "attention": attention,
    "topk_head": topk_head,
    "standalone_erf": standalone_erf,
    "gather_const": lambda: gather(True),
    "gather_dynamic": lambda: gather(False),
    "softmax_axis1": lambda: softmax_axis(1),
    "sinh": lambda: with_op("Sinh", "/act/Sinh"),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_graphs_are_valid_and_run(name, tmp_path):
    model = BUILDERS[name]()
    onnx.checker.check_model(model, full_check=True)
    path = save(model, tmp_path / f"{name}.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    }
    outputs = session.run(None, feeds)
    assert all(np.all(np.isfinite(o)) for o in outputs if o.dtype.kind == "f")


def test_attention_builder_computes_attention_then_gelu(tmp_path):
    """The attention graph is what its name says: checked against a numpy reference (atol 1e-5)."""
    from math import erf

    path = save(attention(), tmp_path / "a.onnx")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 1, 4, 8)).astype(np.float32) for _ in range(3))
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"q": q, "k": k, "v": v})
    s = q @ k.transpose(0, 1, 3, 2)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v
    n = (o - o.mean(-1, keepdims=True)) / np.sqrt(o.var(-1, keepdims=True) + 1e-5)
    want = 0.5 * n * (1 + np.vectorize(erf)(n / 2**0.5))
    np.testing.assert_allclose(got, want, atol=1e-5)
