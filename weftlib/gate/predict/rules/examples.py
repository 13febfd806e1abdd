"""How the rules' examples start: tokens or an image behind one layer, so the node a rule judges has a producer
(and the probe a real input), as the DFC sees the pattern inside a model."""

from __future__ import annotations

from ...graphs import Builder


def tokens_graph(name: str, s: int = 8, c: int = 16) -> tuple[Builder, str]:
    """An example's start: tokens [1, s, c] through a Linear."""
    g = Builder(name)
    x = g.input("x", [1, s, c])
    return g, g.linear(x, c, c, "probe/pre")


def image_graph(name: str, c: int = 8, h: int = 1, w: int = 16) -> tuple[Builder, str]:
    """An example's start: an NCHW image [1, c, h, w] through a 1x1 Conv."""
    g = Builder(name)
    x = g.input("x", [1, c, h, w])
    return g, g.conv1x1(x, c, c, "probe/pre")
