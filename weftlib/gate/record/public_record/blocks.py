"""The pieces the rebuilt graphs share: a glued head split and merge, attention, an MLP, RoPE, a Conv,
and the two wrappings the record's graphs come in (an op between 1x1 Convs, a token block between Linears)."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder


def split_heads(g: Builder, x: str, s: int, h: int, d: int, name: str, perm: list[int]) -> str:
    """A glued head split of tokens [1, s, h*d]: Reshape [1, s, h, d], then its Transpose."""
    split = g.node("Reshape", [x, g.ints(f"{name}.shape", [1, s, h, d])], f"{name}/Reshape")
    return g.node("Transpose", [split], f"{name}/Transpose", perm=perm)


def merge_heads(g: Builder, o: str, s: int, c: int, name: str) -> str:
    """[1, h, s, d] -> Transpose [0, 2, 1, 3] -> Reshape [1, s, c] (the head merge, glued)."""
    t = g.node("Transpose", [o], f"{name}/Transpose", perm=[0, 2, 1, 3])
    return g.node("Reshape", [t, g.ints(f"{name}.shape", [1, s, c])], f"{name}/Reshape")


def attend(g: Builder, q: str, kt: str, v: str, scale: float, name: str, mask: np.ndarray | None = None) -> str:
    s = g.node("MatMul", [q, kt], f"{name}/MatMul")
    s = g.node("Mul", [s, g.const(f"{name}.scale", scale)], f"{name}/Mul")
    if mask is not None:
        s = g.node("Add", [s, g.const(f"{name}.mask", mask)], f"{name}/Add_mask")
    p = g.node("Softmax", [s], f"{name}/Softmax", axis=-1)
    return g.node("MatMul", [p, v], f"{name}/MatMul_1")


def mlp(g: Builder, h: str, c: int, name: str, gemm: bool = False) -> str:
    m = g.linear(g.layer_norm(h, c, f"{name}/norm"), c, 4 * c, f"{name}/fc1", gemm=gemm)
    m = g.linear(g.gelu(m, f"{name}/act"), 4 * c, c, f"{name}/fc2", gemm=gemm)
    return g.node("Add", [h, m], f"{name}/Add")


def rotate(g: Builder, t: str, d: int, s: int, name: str, partial: bool = False) -> str:
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


def sandwich(name: str) -> tuple[Builder, str]:
    """A real input and a 1x1 Conv before the op under test, as the corrected harness wraps every op."""
    g = Builder(name)
    x = g.input("x", [1, 8, 16, 16])
    return g, g.conv1x1(x, 8, 8, "/pre")


def sandwich_out(g: Builder, y: str, channels: int = 8) -> onnx.ModelProto:
    g.output(g.conv1x1(y, channels, 4, "/post"))
    return g.model()


def tokens_in(name: str, s: int, c: int) -> tuple[Builder, str]:
    g = Builder(name)
    x = g.input("x", [1, s, c])
    return g, g.linear(x, c, c, "/pre")


def tokens_out(g: Builder, y: str, c: int) -> onnx.ModelProto:
    g.output(g.linear(y, c, c, "/post"))
    return g.model()


def conv(g: Builder, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1, group: int = 1) -> str:
    w = g.const(
        f"{name}.weight", np.random.default_rng(cout).standard_normal((cout, cin // group, k, k)) / (k * k * cin)
    )
    pad = k // 2
    return g.node(
        "Conv", [x, w], f"{name}/Conv", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group
    )


def relu(g: Builder, x: str, name: str) -> str:
    return g.node("Relu", [x], f"{name}/Relu")
