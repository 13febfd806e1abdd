"""DFC 5.3.0, rf-detr and the DINOv2 backbones: one HF-DINOv2-like block whole or windowed, and the two ops
isolated."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import attend, merge_heads, mlp, split_heads
from .registry import case


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
    q = split_heads(g, g.linear(n, c, c, "/attn/query"), s, h, d, "/attn/q", [0, 2, 1, 3])
    k = split_heads(g, g.linear(n, c, c, "/attn/key"), s, h, d, "/attn/k", [0, 2, 1, 3])
    k = g.node("Transpose", [k], "/attn/k/Transpose_1", perm=[0, 1, 3, 2])
    v = split_heads(g, g.linear(n, c, c, "/attn/value"), s, h, d, "/attn/v", [0, 2, 1, 3])
    o = merge_heads(g, attend(g, q, k, v, d**-0.5, "/attn"), s, c, "/attn/out")
    o = g.node("Mul", [g.linear(o, c, c, "/attn/dense"), g.const("/layer.scale1", np.ones(c))], "/layer/Mul")
    x = mlp(g, g.node("Add", [x, o], "/layer/Add"), c, "/layer/mlp")
    x = g.layer_norm(x, c, "/layernorm")
    patches = g.node("Slice", [x, g.ints("/out.st", [1]), g.ints("/out.en", [s]), g.ints("/out.ax", [1])], "/out/Slice")
    grid = g.node("Reshape", [patches, g.ints("/out.grid", [1, 2, 2, c])], "/out/Reshape")
    g.output(g.node("Transpose", [grid], "/out/Transpose", perm=[0, 3, 1, 2]))
    return g.model()


@case("rfd-backbone-one-window")
def rfd_backbone_one_window() -> onnx.ModelProto:
    return _dinov2("rfd_backbone_one_window", 1, None)


@case("rfd-backbone-two-windows")
def rfd_backbone_two_windows() -> onnx.ModelProto:
    return _dinov2("rfd_backbone_two_windows", 2, True)


@case("rfd-backbone-tile-folded")
def rfd_backbone_tile_folded() -> onnx.ModelProto:
    return _dinov2("rfd_backbone_tile_folded", 2, False)


@case("rbn-vit-base-zoo")
def rbn_vit_base_zoo() -> onnx.ModelProto:
    return _dinov2("rbn_vit_base", 1, None)


@case("rfd-isolated-cls-concat")
def rfd_isolated_cls_concat() -> onnx.ModelProto:
    g = Builder("rfd_isolated_cls_concat")
    x = g.input("x", [1, 576, 384])
    joined = g.node("Concat", [g.const("cls", np.zeros((1, 1, 384))), x], "/Concat", axis=1)
    g.output(g.node("Mul", [joined, g.const("/k", 2.0)], "/Mul"))
    return g.model()


@case("rfd-isolated-layernorm")
def rfd_isolated_layernorm() -> onnx.ModelProto:
    g = Builder("rfd_isolated_layernorm")
    n = g.layer_norm(g.input("x", [1, 577, 384]), 384, "/ln")
    g.output(g.node("Mul", [n, g.const("/k", 2.0)], "/Mul"))
    return g.model()
