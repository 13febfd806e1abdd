"""A graph input of a rank the parser has no format for (rank 1, 5, 0 or 6 and more: the gate's input rules),
read through one Reshape at the start of the graph, so the cut (notebook 06) moves that Reshape to the host
and the device half starts from a layout with a format.

The fixed graph keeps the original's inputs (same names, shapes and meaning), so the input's own finding
stays: it is named as unanswered, with what was done about it. The finding is on an input, not on a node,
so this rewrite is not an onnxscript pattern: it edits the onnxscript IR graph at the input (`apply_to`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, static_shape

SHAPE_OPS = {"Reshape", "Unsqueeze", "Squeeze", "Flatten"}  # a reader that only reshapes the input
FORMATTED = {2, 3, 4}  # ranks the record shows parsed as inputs ([S, C], tokens [B, S, C], images NCHW)


def formatted_shape(shape: tuple[int, ...]) -> list[int]:
    """The shape the input is read as: rank 0 or 1 [n] as [1, n]; rank 5 and more as tokens [B, S, C], the
    last two axes folded into the channels and the ones between into the sequence ([B, H, W, heads, D] ->
    [B, H*W, heads*D]). Same elements, same order. Tokens, not an image: a Reshape from rank 5 to rank 4 is a
    refusal of its own on the record (`reshape_5d_to_4d`, Clef), one to rank 3 is not."""
    if len(shape) <= 1:
        return [1, int(np.prod(shape))]
    return [shape[0], int(np.prod(shape[1:-2])), shape[-2] * shape[-1]]


class InputReshapedAtStart(ExactRewrite):
    """Fires on a graph input the gate finds by an input rule of a rank with no format, when the graph reads
    it in a node other than one shape op into a rank with a format (that would already be the Reshape the
    cut moves): the input is read as Reshape(Reshape(x, `formatted_shape`), its own shape), and every node
    that read x reads that. Exact: two Reshapes keep the elements in row-major order, and the second gives
    back x's shape, so every reader sees the same tensor."""

    answers = ("input_rank_1", "input_rank_5", "input_rank_other")

    def __init__(self) -> None:
        super().__init__()
        self.done: set[str] = set()  # the inputs reshaped at the start, once each

    def pattern(self, op: Any, x: ir.Value) -> Any:  # never matched: `apply_to` does the work
        return op.Identity(x)

    def holds(self, *args: Any, **bindings: Any) -> str | None:
        return "an input rewrite (apply_to), never a pattern match"

    def rewrite(self, op: Any, x: ir.Value) -> Any:
        return op.Identity(x)

    def _why_not(self, x: ir.Value, shape: tuple[int, ...] | None) -> str | None:
        """None when x is to be reshaped at the start, else why not, in words."""
        if shape is None:
            return "its shape is not static"
        uses = list(x.uses())
        if not uses or x.is_graph_output():
            return "the graph hands it on as an output"
        if len(uses) == 1 and uses[0][0].op_type in SHAPE_OPS:
            out = static_shape(uses[0][0].outputs[0])
            if out is not None and len(out) in FORMATTED:
                return f"the graph reads it through one {uses[0][0].op_type} to rank {len(out)} at the start already"
        return None

    def apply_to(self, model: ir.Model) -> int:
        made = 0
        for x in model.graph.inputs:
            name = x.name or ""
            if name not in self.targets or name in self.done:
                continue
            shape = static_shape(x)
            why = self._why_not(x, shape)
            host = "the cut (06) moves it to the host"
            if why is not None:
                self.declined[name] = f"{self.name}: {why}" + (f"; {host}" if "already" in why else "")
                continue
            assert shape is not None
            target = formatted_shape(shape)
            uses = list(x.uses())
            first = ir.node("Reshape", [x, self._shape(model, target)], name=f"{name}/{self.name}/Reshape")
            back = ir.node(
                "Reshape", [first.outputs[0], self._shape(model, list(shape))], name=f"{name}/{self.name}/back"
            )
            for node, index in uses:
                node.replace_input_with(index, back.outputs[0])
            model.graph.insert_before(model.graph.node(0), [first, back])
            self.done.add(name)
            self.touched.add(name)
            self.declined[first.name or ""] = (
                f"{self.name}: the Reshape at the start that reads graph input {name!r}: {host}"
            )
            self.declined[name] = (
                f"{self.name}: a graph input keeps its layout (the fixed graph keeps the original's inputs); "
                f"the graph reads it through one Reshape to {target} at the start, and {host}"
            )
            made += 1
        return made

    def _shape(self, model: ir.Model, dims: list[int]) -> ir.Value:
        self._made += 1
        name = f"fix.{self.name}.{self._made}"
        value = ir.Value(name=name, const_value=ir.tensor(np.array(dims, dtype=np.int64), name=name))
        model.graph.register_initializer(value)
        return value
