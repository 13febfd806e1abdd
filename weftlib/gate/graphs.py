"""Small ONNX graphs built node by node: the rules' examples (which are also their probes) and the public
record's outcomes rebuilt as graphs.

Every node is named and every graph has a real input, is `onnx.checker`-clean at opset 17 / IR 10 and is
shape-inferred: the harness artefacts in the public record (unnamed nodes, graphs with no input) read like
refusals when they are not (weftspun/rf-detr-cpp scripts/gen_op_tests.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET

FLOAT = TensorProto.FLOAT


class Builder:
    """Collects inputs, constants and named nodes; `model()` makes the checked, shape-inferred graph.

    Each node's output tensor is named after the node (`<name>` for one output, `<name>_<i>` for more), so
    a DFC line naming the node and the tensor it made are easy to tell apart.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def input(self, name: str, shape: Sequence[int | str], dtype: int = FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        return name

    def const(self, name: str, values: Any, dtype: Any = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def ints(self, name: str, values: Sequence[int]) -> str:
        return self.const(name, list(values), np.int64)

    def node(self, op: str, inputs: Sequence[str], name: str, *, outputs: int = 1, **attrs: Any) -> Any:
        """Add `op` named `name`; returns its output tensor name (a tuple when `outputs` > 1)."""
        outs = [name] if outputs == 1 else [f"{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs[0] if outputs == 1 else tuple(outs)

    def output(self, *names: str, dtype: int = FLOAT) -> None:
        self.outputs += [helper.make_tensor_value_info(n, dtype, None) for n in names]

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, initializer=self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", WRITTEN_OPSET)], producer_name="weftlib.gate"
        )
        model.ir_version = WRITTEN_IR_VERSION
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        onnx.checker.check_model(model, full_check=True)
        return model

    # ------------------------------------------------------------------ the blocks the record is made of

    def linear(self, x: str, cin: int, cout: int, name: str, *, gemm: bool = False, seed: int = 0) -> str:
        """x @ W + b (MatMul + Add, as torch exports a Linear at rank >= 3; Gemm at rank 2)."""
        rng = np.random.default_rng(seed)
        w = self.const(f"{name}.weight", rng.standard_normal((cin, cout)) / np.sqrt(cin))
        b = self.const(f"{name}.bias", np.zeros(cout))
        if gemm:
            return self.node("Gemm", [x, w, b], f"{name}/Gemm")
        return self.node("Add", [self.node("MatMul", [x, w], f"{name}/MatMul"), b], f"{name}/Add")

    def conv1x1(self, x: str, cin: int, cout: int, name: str, *, seed: int = 0) -> str:
        rng = np.random.default_rng(seed)
        w = self.const(f"{name}.weight", rng.standard_normal((cout, cin, 1, 1)) / np.sqrt(cin))
        return self.node("Conv", [x, w], f"{name}/Conv", kernel_shape=[1, 1])

    def layer_norm(self, x: str, c: int, name: str) -> str:
        return self.node(
            "LayerNormalization",
            [x, self.const(f"{name}.weight", np.ones(c)), self.const(f"{name}.bias", np.zeros(c))],
            f"{name}/LayerNormalization",
            axis=-1,
        )

    def gelu(self, x: str, name: str) -> str:
        """Exact GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt 2))."""
        d = self.node("Div", [x, self.const(f"{name}.sqrt2", 2**0.5)], f"{name}/Div")
        e = self.node("Erf", [d], f"{name}/Erf")
        a = self.node("Add", [e, self.const(f"{name}.one", 1.0)], f"{name}/Add")
        m = self.node("Mul", [x, a], f"{name}/Mul")
        return self.node("Mul", [m, self.const(f"{name}.half", 0.5)], f"{name}/Mul_1")
