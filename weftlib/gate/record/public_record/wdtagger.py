"""DFC 5.2.0 and 5.3.0, the WD-Tagger report: the ViT and ConvNeXt stems from an NHWC image (the same graph
for both DFC versions' outcomes)."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import sandwich_out, tokens_out
from .registry import case


def _nhwc_stem(g: Builder, c: int, patch: int) -> str:
    """An NHWC image [1, 16, 16, 3] put channels-first, then the patch Conv: [1, c, 16/patch, 16/patch]."""
    x = g.node("Transpose", [g.input("input_1", [1, 16, 16, 3])], "/stem/Transpose", perm=[0, 3, 1, 2])
    w = g.const("/stem.weight", np.random.default_rng(0).standard_normal((c, 3, patch, patch)) / (3 * patch))
    return g.node("Conv", [x, w], "/stem/Conv", kernel_shape=[patch, patch], strides=[patch, patch])


@case("wdt-vit-520", "wdt-vit-530")
def wdt_vit() -> onnx.ModelProto:
    c = 32
    g = Builder("wdt_vit")
    nhwc = g.node("Transpose", [_nhwc_stem(g, c, 4)], "/stem/Transpose_1", perm=[0, 2, 3, 1])
    tokens = g.node("Reshape", [nhwc, g.ints("/stem.tokens", [1, 16, c])], "/stem/Reshape")
    return tokens_out(g, g.layer_norm(tokens, c, "/encoder/norm1"), c)


@case("wdt-convnext-520", "wdt-convnext-530")
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
    return sandwich_out(g, y, channels=c)
