"""The probe graphs: the smallest graph that asks the DFC about one op or one graph rule, as a table.

An op probe is a rank-4 input, a 1x1 `Conv`, the op, a 1x1 `Conv` (so the compiler can neither absorb the op
into the graph's edge nor lose it); `OP_PROBES` says, per op, only what sits between the two Convs: nodes from
tensor `a` to tensor `b`, their constants, and the channels the second Conv reads. A rule probe is the rule's
own example graph (`weftlib.gate.predict.rules`). Every node is named (weftspun/rf-detr-cpp scripts/gen_op_tests.py
records why: an unnamed or unwrapped op reads like a refusal when it is not).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET, index_model
from ..predict import rules as R
from ..predict.nodes import predict
from ..record.allowlist import DeviceOps
from ..vocabulary import Subject

C, H, W = 8, 8, 8  # the probe input [1, C, H, W]: small, image-shaped, H == W so a transpose keeps the shape


@dataclass(frozen=True)
class Probe:
    """One probe graph: the op or rule it asks about (`subject`), why, and the nodes of the
    probe that the question is about (a refusal naming any other node is not an answer about it).

    The manifest holds it as `dataclasses.asdict`; `from_entry` reads it back."""

    subject: Subject
    name: str
    file: str
    why: str
    nodes: tuple[str, ...] = ()
    note: str = ""

    @property
    def stem(self) -> str:
        return Path(self.file).stem

    @property
    def label(self) -> str:
        return self.name if self.subject == Subject.RULE else f"op {self.name}"

    @classmethod
    def from_entry(cls, entry: Any, where: Path) -> Probe:
        """A manifest's probe entry, checked: a malformed one is a ValueError naming the file, never a traceback."""
        try:
            probe = cls(**{**entry, "nodes": tuple(entry.get("nodes", ()))})
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"{where}: a probe entry is malformed ({exc}); write the pack again") from exc
        fields = (probe.subject, probe.name, probe.file, probe.why, *probe.nodes)
        if probe.subject not in tuple(Subject) or not all(isinstance(v, str) for v in fields):
            raise ValueError(f"{where}: a probe entry is malformed ({entry!r}); write the pack again")
        probe = replace(probe, subject=Subject(probe.subject))
        if Path(probe.file).name != probe.file or not probe.file.endswith(".onnx"):
            raise ValueError(f"{where}: probe file {probe.file!r} is not a graph of the pack folder")
        return probe


# ------------------------------------------------------------------------------------------ the op table


@dataclass(frozen=True)
class Const:
    """A constant of a probe: an initializer, or the `value` attribute of a Constant-like node."""

    name: str
    values: Any
    dtype: npt.DTypeLike = np.float32

    def proto(self) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(self.values, dtype=self.dtype), self.name)


@dataclass(frozen=True)
class Node:
    """One node of a probe; named `probe/<op>` unless `name` says otherwise (a second node of the same op,
    or a helper node around the op asked about)."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ("b",)
    name: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def proto(self) -> onnx.NodeProto:
        attrs = {k: v.proto() if isinstance(v, Const) else v for k, v in self.attrs.items()}
        return helper.make_node(
            self.op, list(self.inputs), list(self.outputs), name=self.name or f"probe/{self.op}", **attrs
        )


@dataclass(frozen=True)
class OpProbe:
    """What sits between an op probe's two Convs: `nodes` from tensor `a` to tensor `b`, their constants,
    the channels of `b`, the note the manifest carries, and any more graph outputs (a Split's other half)."""

    nodes: tuple[Node, ...]
    consts: tuple[Const, ...] = ()
    channels: int = C
    note: str = ""
    outputs: tuple[str, ...] = ()


def _unary(op: str) -> OpProbe:
    return OpProbe((Node(op, ("a",)),))


def _binary(op: str, value: float = 1.5) -> OpProbe:
    return OpProbe((Node(op, ("a", "k")),), (Const("k", np.full((1, C, 1, 1), value)),))


def _in_domain(op: str) -> OpProbe:
    """An op kept inside its domain by an Abs and a constant offset (Sqrt, Log, Reciprocal)."""
    return OpProbe(
        (
            Node("Abs", ("a",), ("p",), "probe/domain_Abs"),
            Node("Add", ("p", "eps"), ("q",), "probe/domain_Add"),
            Node(op, ("q",)),
        ),
        (Const("eps", 0.5),),
        note="after Abs + 0.5 (its domain)",
    )


def _over_features(op: str) -> OpProbe:
    """A reduction over the features axis, kept."""
    return OpProbe(
        (Node(op, ("a",), attrs={"axes": [1], "keepdims": 1}),), channels=1, note="over the features axis, keepdims=1"
    )


def _pool(op: str) -> OpProbe:
    return OpProbe((Node(op, ("a",), attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),), note="3x3, stride 1")


def _ints(name: str, values: list[int]) -> Const:
    return Const(name, values, np.int64)


UNARY = (
    "Relu", "Sigmoid", "Tanh", "Exp", "Sin", "Cos", "Abs", "Neg", "Identity", "Softplus", "Softsign", "Elu",
    "LeakyRelu", "HardSigmoid", "Floor", "Ceil", "Round",
)  # fmt: skip
IMAGE_SHAPE = [1, C, H, W]
OP_PROBES: dict[str, OpProbe] = {
    **{op: _unary(op) for op in UNARY},
    **{op: _in_domain(op) for op in ("Sqrt", "Log", "Reciprocal")},
    **{op: _binary(op) for op in ("Add", "Sub", "Mul", "Div", "Max", "Min")},
    "Pow": _binary("Pow", 2.0),
    "Mod": OpProbe(
        (Node("Mod", ("a", "k"), attrs={"fmod": 1}),), (Const("k", np.full((1, C, 1, 1), 1.5)),), note="fmod=1"
    ),
    "Clip": OpProbe((Node("Clip", ("a", "lo", "hi")),), (Const("lo", -1.0), Const("hi", 1.0))),
    "Cast": OpProbe(
        (
            Node("Cast", ("a",), ("s",), attrs={"to": TensorProto.INT32}),
            Node("Cast", ("s",), ("b",), "probe/Cast_back", {"to": TensorProto.FLOAT}),
        ),
        note="f32 -> s32 -> f32, the round trip the DFC was seen not to perform",
    ),
    **{op: _over_features(op) for op in ("ReduceL2", "ReduceSumSquare", "ReduceMin")},
    "Transpose": OpProbe((Node("Transpose", ("a",), attrs={"perm": [0, 1, 3, 2]}),), note="swaps H and W"),
    "Flatten": OpProbe(
        (
            Node("Flatten", ("a",), ("f",), attrs={"axis": 1}),
            Node("Reshape", ("f", "shp"), ("b",), "probe/back_Reshape"),
        ),
        (_ints("shp", IMAGE_SHAPE),),
        note="then a Reshape back to rank 4",
    ),
    "Unsqueeze": OpProbe(
        (Node("Unsqueeze", ("a", "ax"), ("u",)), Node("Squeeze", ("u", "ax"))),
        (_ints("ax", [4]),),
        note="Unsqueeze then Squeeze on a new last axis",
    ),
    "Split": OpProbe(
        (Node("Split", ("a", "sp"), ("b", "b2"), attrs={"axis": 1}),),
        (_ints("sp", [C // 2, C // 2]),),
        C // 2,
        "the second half is a graph output",
        outputs=("b2",),
    ),
    "Slice": OpProbe(
        (Node("Slice", ("a", "st", "en", "ax")),),
        (_ints("st", [0]), _ints("en", [C // 2]), _ints("ax", [1])),
        C // 2,
        "over channels",
    ),
    "Pad": OpProbe(
        (Node("Pad", ("a", "pads"), attrs={"mode": "constant"}),),
        (_ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),),
        note="constant, 1 pixel",
    ),
    "Resize": OpProbe(
        (Node("Resize", ("a", "", "scales"), attrs={"mode": "nearest"}),),
        (Const("scales", [1, 1, 2, 2]),),
        note="nearest, x2",
    ),
    "MatMul": OpProbe((Node("MatMul", ("a", "a")),), note="two activation inputs"),
    "AveragePool": _pool("AveragePool"),
    "MaxPool": _pool("MaxPool"),
    "Conv": OpProbe(
        (Node("Conv", ("a", "w"), attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),),
        (Const("w", np.full((C, C, 3, 3), 0.01)),),
        note="3x3",
    ),
    "Constant": OpProbe(
        (
            Node("Constant", (), ("k",), attrs={"value": Const("kv", np.ones((1, C, 1, 1)))}),
            Node("Add", ("a", "k"), ("b",), "probe/const_Add"),
        ),
        note="feeding an Add",
    ),
    "Expand": OpProbe(
        (
            Node("ReduceMean", ("a",), ("m",), "probe/pre_ReduceMean", {"axes": [1], "keepdims": 1}),
            Node("Expand", ("m", "shp")),
        ),
        (_ints("shp", IMAGE_SHAPE),),
        note="[1,1,H,W] -> [1,C,H,W] (after a ReduceMean)",
    ),
    "InstanceNormalization": OpProbe(
        (Node("InstanceNormalization", ("a", "s", "z")),),
        (Const("s", np.ones(C)), Const("z", np.zeros(C))),
        note="per channel",
    ),
    "ConstantOfShape": OpProbe(
        (
            Node("ConstantOfShape", ("shp",), ("z",), attrs={"value": Const("zv", [1.0])}),
            Node("Add", ("a", "z"), ("b",), "probe/const_Add"),
        ),
        (_ints("shp", IMAGE_SHAPE),),
        note="added to the activation",
    ),
}


# ------------------------------------------------------------------------------------------ the graphs


def op_probe(op: str) -> tuple[onnx.ModelProto, str]:
    """The probe for `op` (a KeyError when the table has no row for it): pre Conv -> op -> post Conv, all
    named, shape-inferred; and the row's note."""
    row = OP_PROBES[op]
    rng = np.random.default_rng(0)
    pre = helper.make_node("Conv", ["x", "probe_w_pre"], ["a"], name="probe/pre_Conv", kernel_shape=[1, 1])
    post = helper.make_node("Conv", ["b", "probe_w_post"], ["y"], name="probe/post_Conv", kernel_shape=[1, 1])
    weights = [
        Const("probe_w_pre", rng.standard_normal((C, C, 1, 1)) / C),
        Const("probe_w_post", rng.standard_normal((4, row.channels, 1, 1)) / row.channels),
    ]
    graph = helper.make_graph(
        [pre, *(n.proto() for n in row.nodes), post],
        f"probe_{op}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, None) for t in ("y", *row.outputs)],
        initializer=[c.proto() for c in (*weights, *row.consts)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", WRITTEN_OPSET)], producer_name="weftlib.gate"
    )
    model.ir_version = WRITTEN_IR_VERSION
    return onnx.shape_inference.infer_shapes(model, strict_mode=True), row.note


def op_probe_nodes(model: onnx.ModelProto, op: str) -> tuple[str, ...]:
    """The nodes of an op probe that the question is about: the op's own (`probe/<op>...`), not the Convs
    around it nor the helper nodes."""
    return tuple(n.name for n in model.graph.node if n.name.startswith(f"probe/{op}"))


def rule_probe(rule: str, ops: DeviceOps) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """The rule's example graph and the nodes (or inputs) the rule covers in it; a ValueError when the
    example does not exhibit its own rule (a probe that asks nothing)."""
    model = R.RULES[rule].example()
    matched = tuple(f.node for f in predict(index_model(model), ops).judgements if f.rule == rule)
    if not matched:
        raise ValueError(f"the example of rule {rule} does not match it")
    return model, matched
