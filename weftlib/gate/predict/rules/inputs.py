"""The rules on the graph's inputs: the parser places a tensor by its input's rank, and needs static shapes."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx

from ....onnx_core.walk import graph_inputs
from ...graphs import Builder
from ..formats import Context
from .base import Check, Fires, GraphRule, InputRule, Misses


class GraphWithoutInput(GraphRule):
    """Fires on a graph that has no graph input at all (everything it computes comes from constants)."""

    name = "graph_without_input"

    def check(self, ctx: Context) -> Check:
        return Misses("the graph has an input") if graph_inputs(ctx.graph) else Fires("no graph input")

    def example(self) -> onnx.ModelProto:
        g = Builder(self.name)
        g.node("ConstantOfShape", [g.ints("shape", [1, 8, 4, 4])], "probe/ConstantOfShape")
        g.output("probe/ConstantOfShape")
        return g.model()


class _Input(InputRule):
    """An input rule whose example is one input of `shape`, scaled by a Mul."""

    shape: ClassVar[tuple[int | str, ...]]

    def example(self) -> onnx.ModelProto:
        g = Builder(self.name)
        x = g.input("x", self.shape)
        last = self.shape[-1] if self.shape and isinstance(self.shape[-1], int) else 1
        g.output(g.node("Mul", [x, g.const("k", np.full([last], 2.0))], "probe/Mul"))
        return g.model()


class InputStaticShape(_Input):
    """Fires on a graph input without a fully static shape: no shape at all, or a dimension that is not a number."""

    name = "input_static_shape"
    shape = (1, "seq", 16)

    def check(self, ctx: Context, name: str) -> Check:
        dims = ctx.graph.shapes.get(name)
        if dims is None:
            return Fires("no shape")
        if all(isinstance(d, int) for d in dims):
            return Misses("every dimension is a number")
        return Fires(f"dimensions {list(dims)}")


class _InputRank(_Input):
    """Fires on a graph input whose shape has exactly `rank` dimensions."""

    rank: ClassVar[int]

    def check(self, ctx: Context, name: str) -> Check:
        dims = ctx.graph.shapes.get(name)
        if dims is None:
            return Misses("the input has no shape")
        if len(dims) != self.rank:
            return Misses(f"rank {len(dims)}, not {self.rank}")
        return Fires(f"rank {len(dims)} {list(dims)}")


class InputRank1(_InputRank):
    """Fires on a graph input of rank 1 (a timestep, type ids)."""

    name, rank, shape = "input_rank_1", 1, (16,)


class InputRank2(_InputRank):
    """Fires on a graph input of rank 2 ([S, C])."""

    name, rank, shape = "input_rank_2", 2, (8, 16)


class InputRank3(_InputRank):
    """Fires on a graph input of rank 3 (tokens [B, S, C])."""

    name, rank, shape = "input_rank_3", 3, (1, 8, 16)


class InputRank4(_InputRank):
    """Fires on a graph input of rank 4 (an NCHW image)."""

    name, rank, shape = "input_rank_4", 4, (1, 4, 8, 8)


class InputRank5(_InputRank):
    """Fires on a graph input of rank 5."""

    name, rank, shape = "input_rank_5", 5, (1, 4, 4, 4, 4)


class InputRankOther(_Input):
    """Fires on a graph input of rank 0, or of rank 6 and more."""

    name = "input_rank_other"
    shape = (1, 2, 2, 2, 2, 4)

    def check(self, ctx: Context, name: str) -> Check:
        dims = ctx.graph.shapes.get(name)
        if dims is None:
            return Misses("the input has no shape")
        n = len(dims)
        return Fires(f"rank {n}") if n == 0 or n >= 6 else Misses(f"rank {n}, between 1 and 5")
