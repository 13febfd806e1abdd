"""Rewrites that fold ops of constants into constant tables: what the gate refuses or leaves unjudged as an
op (Cos, Sin, Range, CastLike) needs no op at all when every input is known when the graph is written.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, numpy_dtype

TRIG = {"Cos": np.cos, "Sin": np.sin}


class TrigOfConstant(ExactRewrite):
    """Fires on Cos or Sin of a constant (a RoPE or timestep frequency table built in the graph). The table
    is computed in float64 and rounded once to the input's dtype: the correctly rounded value, which any
    onnxruntime kernel's result is within an ulp or two of."""

    answers = ("op:Cos", "op:Sin")

    def __init__(self, op_type: str) -> None:
        self.op_type = op_type
        super().__init__()
        self.name = f"TrigOfConstant_{op_type}"

    def pattern(self, op: Any, x: ir.Value) -> Any:
        return getattr(op, self.op_type)(x)

    def holds(self, x: ir.Value) -> str | None:
        return None if const(x) is not None else f"the input of {self.op_type} is not a constant"

    def rewrite(self, op: Any, x: ir.Value) -> Any:
        array = const(x)
        assert array is not None
        return self.constant(op, TRIG[self.op_type](array.astype(np.float64)).astype(array.dtype))


class RangeOfConstants(ExactRewrite):
    """Fires on Range(start, limit, delta) with all three constant (positions, frequencies): the ONNX
    definition `start + i * delta` for i below ceil((limit - start) / delta), written as that table."""

    answers = ("op:Range",)

    def pattern(self, op: Any, start: ir.Value, limit: ir.Value, delta: ir.Value) -> Any:
        return op.Range(start, limit, delta)

    def holds(self, start: ir.Value, limit: ir.Value, delta: ir.Value) -> str | None:
        values = [const(v) for v in (start, limit, delta)]
        if any(v is None for v in values):
            return "an input of Range is not a constant"
        return None if float(np.ravel(np.asarray(values[2]))[0]) != 0 else "Range with a zero delta"

    def rewrite(self, op: Any, start: ir.Value, limit: ir.Value, delta: ir.Value) -> Any:
        s, lim, d = (const(v) for v in (start, limit, delta))
        assert s is not None and lim is not None and d is not None
        count = max(int(np.ceil((lim.item() - s.item()) / d.item())), 0)
        table = s.item() + np.arange(count, dtype=np.float64 if s.dtype.kind == "f" else np.int64) * d.item()
        return self.constant(op, table.astype(s.dtype))


class CastLikeOfConstant(ExactRewrite):
    """Fires on CastLike(constant, like) where the constant already has `like`'s dtype (how the exporter
    writes GroupNorm's and attention's scale constants): the cast returns its input, so the constant
    itself is the output."""

    answers = ("op:CastLike",)

    def pattern(self, op: Any, x: ir.Value, like: ir.Value) -> Any:
        return op.CastLike(x, like)

    def holds(self, x: ir.Value, like: ir.Value) -> str | None:
        array, target = const(x), numpy_dtype(like)
        if array is None:
            return "the input of CastLike is not a constant"
        return None if target is not None and array.dtype == target else "the constant's dtype differs from like's"

    def rewrite(self, op: Any, x: ir.Value, like: ir.Value) -> Any:
        array = const(x)
        assert array is not None
        return self.constant(op, array)
