"""DFC 5.x, convolutional networks: Conv/ReLU pairs and stacks, ResNet18's and ResNet50's first blocks, the
Edge NPU Lab's three families."""

from __future__ import annotations

import numpy as np
import onnx

from ...graphs import Builder
from .blocks import conv, relu
from .registry import case


@case("ugv-conv-relu")
def ugv_conv_relu() -> onnx.ModelProto:
    g = Builder("ugv_conv_relu")
    x = g.input("x", [1, 3, 16, 16])
    w = g.const("/conv1.weight", np.full((32, 3, 3, 3), 0.05))
    y = g.node("Relu", [g.node("Conv", [x, w], "/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "/relu/Relu")
    g.output(g.conv1x1(y, 32, 16, "/conv2"))
    return g.model()


@case("ugv-conv-1x1-large")
def ugv_conv_1x1_large() -> onnx.ModelProto:
    g = Builder("ugv_conv_1x1_large")
    g.output(g.conv1x1(g.input("x", [1, 4, 64, 64]), 4, 1, "/conv"))
    return g.model()


@case("ugv-conv-stack-1x1")
def conv_stack_1x1() -> onnx.ModelProto:
    g = Builder("conv_stack_1x1")
    x = relu(g, g.conv1x1(g.input("x", [1, 256, 1, 1]), 256, 256, "/c0"), "/a0")
    g.output(relu(g, g.conv1x1(x, 256, 256, "/c1"), "/a1"))
    return g.model()


@case("lemu-conv-relu-conv")
def lemu_conv_relu_conv() -> onnx.ModelProto:
    g = Builder("lemu_conv_relu_conv")
    x = g.node("Relu", [g.conv1x1(g.input("x", [1, 256, 4, 4]), 256, 256, "/conv1")], "/relu/Relu")
    g.output(g.conv1x1(x, 256, 64, "/conv2"))
    return g.model()


def _basic_block(g: Builder, x: str, cin: int, cout: int, stride: int, name: str) -> str:
    y = conv(
        g, relu(g, conv(g, x, cin, cout, 3, f"{name}/conv1", stride), f"{name}/act1"), cout, cout, 3, f"{name}/conv2"
    )
    skip = x if stride == 1 and cin == cout else conv(g, x, cin, cout, 1, f"{name}/downsample", stride)
    return relu(g, g.node("Add", [y, skip], f"{name}/Add"), f"{name}/act2")


@case("robot-resnet18-int8", "robot-resnet18-a16")
def resnet18_stem() -> onnx.ModelProto:
    g = Builder("resnet18_stem")
    x = relu(g, conv(g, g.input("image", [1, 3, 32, 32]), 3, 16, 7, "/conv1", 2), "/act")
    x = g.node("MaxPool", [x], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.output(_basic_block(g, _basic_block(g, x, 16, 16, 1, "/layer1"), 16, 32, 2, "/layer2"))
    return g.model()


def _bottleneck(g: Builder, x: str, cin: int, mid: int, stride: int, name: str) -> str:
    """torchvision's ResNet50 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand to 4 x mid, the
    residual Add and ReLU; a 1x1 projection shortcut where the shape changes."""
    y = relu(g, conv(g, x, cin, mid, 1, f"{name}/conv1"), f"{name}/act1")
    y = conv(g, relu(g, conv(g, y, mid, mid, 3, f"{name}/conv2", stride), f"{name}/act2"), mid, 4 * mid, 1,
              f"{name}/conv3")  # fmt: skip
    skip = x if stride == 1 and cin == 4 * mid else conv(g, x, cin, 4 * mid, 1, f"{name}/downsample", stride)
    return relu(g, g.node("Add", [y, skip], f"{name}/Add"), f"{name}/act3")


@case("keff-resnet50-full-530")
def resnet50_trunk() -> onnx.ModelProto:
    """KEFF's ResNet50 at 32x32: the stem, then one bottleneck block that keeps the shape and one that
    downsamples through its projection (layer1's and layer2's first forms)."""
    g = Builder("resnet50_trunk")
    x = relu(g, conv(g, g.input("image", [1, 3, 32, 32]), 3, 16, 7, "/conv1", 2), "/act")
    x = g.node("MaxPool", [x], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = _bottleneck(g, _bottleneck(g, x, 16, 4, 1, "/layer1.0"), 16, 8, 2, "/layer2.0")
    g.output(x)
    return g.model()


def _edge_family(kind: str) -> onnx.ModelProto:
    """The Edge NPU Lab's three families: plain Convs, depthwise-separable, residual."""
    g = Builder(f"edge_{kind}")
    x = g.input("x", [1, 16, 16, 16])
    if kind == "conv":
        x = relu(g, conv(g, relu(g, conv(g, x, 16, 16, 3, "/c1"), "/a1"), 16, 32, 3, "/c2", 2), "/a2")
        g.output(conv(g, x, 32, 32, 1, "/c3"))
    elif kind == "dwpw":
        x = relu(g, conv(g, x, 16, 16, 3, "/dw", group=16), "/dw_act")
        g.output(relu(g, conv(g, x, 16, 32, 1, "/pw"), "/pw_act"))
    else:
        g.output(_basic_block(g, x, 16, 16, 1, "/block"))
    return g.model()


@case("edge-conv-family")
def edge_conv_family() -> onnx.ModelProto:
    return _edge_family("conv")


@case("edge-dwpw-family")
def edge_dwpw_family() -> onnx.ModelProto:
    return _edge_family("dwpw")


@case("edge-residual-family")
def edge_residual_family() -> onnx.ModelProto:
    return _edge_family("residual")
