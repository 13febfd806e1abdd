"""RFD 1154, Pixal3D's flow step: as exported (a rank-5 latent), with the latent made rank 4, and with every
input rank 4."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .registry import case


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


@case("pixal-flow-as-exported")
def pixal_flow_as_exported() -> onnx.ModelProto:
    return _pixal("pixal_flow_as_exported", [1, 8, 8, 8, 8], [1], False)


@case("pixal-flow-x-rank4")
def pixal_flow_x_rank4() -> onnx.ModelProto:
    return _pixal("pixal_flow_x_rank4", [1, 8, 8, 64], [1], False)


@case("pixal-flow-all-rank4")
def pixal_flow_all_rank4() -> onnx.ModelProto:
    return _pixal("pixal_flow_all_rank4", [1, 8, 8, 64], [1, 1, 1, 1], True)
