"""DFC 5.3.0, single ops from the public op-test harnesses (HARN, RFS): most between 1x1 Convs, as the
corrected harness wraps every op; one with no input, a harness artefact read as a refusal."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import sandwich, sandwich_out
from .registry import case


@case("harness-no-input")
def harness_no_input() -> onnx.ModelProto:
    g = Builder("harness_no_input")
    g.output(g.node("ConstantOfShape", [g.ints("/shape", [1, 8, 16, 16])], "/ConstantOfShape"))
    return g.model()


@case("reshape-as-view")
def reshape_as_view() -> onnx.ModelProto:
    g = Builder("reshape_as_view")
    x = g.node("Mul", [g.input("x", [1, 16]), g.const("/pre.k", 2.0)], "/pre/Mul")
    pairs = g.node("Reshape", [x, g.ints("/view", [-1, 2, 4])], "/Reshape")
    pairs = g.node("Mul", [pairs, g.const("/k", 2.0)], "/Mul")
    g.output(g.node("Reshape", [pairs, g.ints("/back", [1, 16])], "/Reshape_back"))
    return g.model()


@case("expand-scaffolding")
def expand_scaffolding() -> onnx.ModelProto:
    g = Builder("expand_scaffolding")
    x = g.node("Unsqueeze", [g.input("x", [1, 8]), g.ints("/axes", [1])], "/Unsqueeze")
    wide = g.node("Expand", [x, g.ints("/shape", [1, 4, 8])], "/Expand_1")
    tent = g.node("Sub", [wide, g.const("/centres", np.arange(32, dtype=np.float32).reshape(1, 4, 8))], "/Sub")
    g.output(g.node("Mul", [tent, g.const("/k", 2.0)], "/Mul"))
    return g.model()


@case("measured-passing")
def measured_passing() -> onnx.ModelProto:
    g, x = sandwich("measured_passing")
    y = g.node("Sqrt", [g.node("Add", [g.node("Mul", [x, x], "/Mul"), g.const("/one", 1.0)], "/Add")], "/Sqrt")
    return sandwich_out(g, g.node("Sub", [y, g.const("/k", 0.5)], "/Sub"))


@case("harness-booleans")
def harness_booleans() -> onnx.ModelProto:
    g, x = sandwich("harness_booleans")
    half = g.const("/half", 0.5)
    greater = g.node("Greater", [x, half], "/Greater")
    less = g.node("Less", [x, half], "/Less")
    both = g.node("And", [g.node("Not", [greater], "/Not"), less], "/And")
    tests = [both, g.node("IsInf", [x], "/IsInf"), g.node("IsNaN", [x], "/IsNaN")]
    floats = [g.node("Cast", [t], f"/Cast_{i}", to=onnx.TensorProto.FLOAT) for i, t in enumerate(tests)]
    total = g.node("Add", [g.node("Add", floats[:2], "/Add"), floats[2]], "/Add_1")
    return sandwich_out(g, total)


@case("harness-trig")
def harness_trig() -> onnx.ModelProto:
    g, x = sandwich("harness_trig")
    return sandwich_out(g, g.node("Cos", [g.node("Sin", [x], "/Sin")], "/Cos"))


@case("cast-round-trip")
def cast_round_trip() -> onnx.ModelProto:
    g, x = sandwich("cast_round_trip")
    ints = g.node("Cast", [x], "/Cast", to=onnx.TensorProto.INT32)
    return sandwich_out(g, g.node("Cast", [ints], "/Cast_back", to=onnx.TensorProto.FLOAT))


@case("where-standalone")
def where_standalone() -> onnx.ModelProto:
    g, x = sandwich("where_standalone")
    condition = g.const("/condition", np.random.default_rng(0).random((1, 8, 16, 16)) > 0.5, np.bool_)
    return sandwich_out(g, g.node("Where", [condition, x, g.const("/zeros", np.zeros((1, 8, 16, 16)))], "/Where"))


def _onehot(name: str, cast_between: bool) -> onnx.ModelProto:
    g = Builder(name)
    index = g.input("index", [1, 1, 16, 16], onnx.TensorProto.INT64)
    hot = g.node("OneHot", [index, g.ints("/depth", [8]), g.const("/values", [0.0, 1.0])], "/OneHot", axis=-1)
    if cast_between:
        hot = g.node("Cast", [hot], "/Cast", to=onnx.TensorProto.FLOAT)
    t = g.node("Transpose", [hot], "/Transpose", perm=[0, 4, 2, 3, 1])
    return sandwich_out(g, g.node("Squeeze", [t, g.ints("/axes", [4])], "/Squeeze"))


@case("onehot-chain")
def onehot_chain() -> onnx.ModelProto:
    return _onehot("onehot_chain", False)


@case("onehot-cast-before-transpose")
def onehot_cast_before_transpose() -> onnx.ModelProto:
    return _onehot("onehot_cast_before_transpose", True)
