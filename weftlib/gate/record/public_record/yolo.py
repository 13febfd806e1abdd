"""YOLOv8 detection exported at opset 11 (BENCHY, NE503), compiled on DFC 5.3.0."""

from __future__ import annotations

import onnx

from ...graphs import Builder
from .blocks import conv
from .registry import case


def _silu(g: Builder, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1) -> str:
    """Conv then SiLU as torch exports it (Sigmoid, Mul): Ultralytics' Conv block."""
    y = conv(g, x, cin, cout, k, f"{name}/conv", stride)
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


@case("benchy-yolov8-det-530", "ne503-yolov8-det-530")
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
            heads.append(conv(g, _silu(g, feat, 16, 16, 3, f"/model.22/{branch}.{i}/{branch}.{i}.0"), 16, out, 1,
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
