"""What every exact rewrite of `gate fix` shares: the gate findings it answers, the nodes it is aimed at, and
the precondition checks (static shapes, constant inputs) written once.

A rewrite is an onnxscript rewrite rule (`RewriteRuleClassBase`: a pattern, a check, a replacement). It
answers some of the gate's keys (a rule name, or "op:<type>" for an op entry); the fix loop aims it at the
nodes the gate found under those keys (`aim`), so it fires only where it answers a finding, never elsewhere
in the graph. Its `holds` checks each precondition that makes the replacement compute exactly the matched
nodes' values; a check that cannot be decided (a shape unknown, an input not constant) fails the match.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
from onnxscript import ir
from onnxscript.rewriter import MatchResult, RewriteRule, RewriteRuleClassBase, RewriteRuleSet


class ExactRewrite(RewriteRuleClassBase):
    """An exact rewrite: subclasses give `answers`, `pattern`, `holds` and `rewrite`, and say in their
    docstring when they fire and why the replacement is exact."""

    answers: ClassVar[tuple[str, ...]] = ()  # the gate keys (rule names, "op:<type>") it answers

    def __init__(self) -> None:
        super().__init__(name=type(self).__name__)
        self.targets: frozenset[str] = frozenset()
        self.declined: dict[str, str] = {}  # aimed-at node -> the precondition that failed there
        self.touched: set[str] = set()  # findings answered without replacing their node (a graph input)
        self._made = 0

    def apply_to(self, model: ir.Model) -> int:
        """Apply the rule where it is aimed (`aim`); how many places it rewrote."""
        rule = RewriteRule(self.pattern, self.rewrite, self.check, name=self.name)
        return RewriteRuleSet([rule]).apply_to_model(model)

    def aim(self, nodes: Iterable[str]) -> ExactRewrite:
        """Fire only on matches that include one of `nodes` (the gate's findings under `answers`)."""
        self.targets = frozenset(nodes)
        return self

    def check(self, op: Any, *args: Any, **kwargs: Any) -> MatchResult:
        """onnxscript calls it with the match's context (as `op`) and the pattern's bindings."""
        result = MatchResult()
        if not any(node.name in self.targets for node in op.nodes):
            return result.fail("no node of this match is a finding the rewrite answers")
        why = self.holds(*args, **kwargs)
        if why:
            self.declined.update({n.name: f"{self.name}: {why}" for n in op.nodes if n.name in self.targets})
            return result.fail(why)
        return result

    def holds(self, *args: Any, **bindings: Any) -> str | None:
        """None when every precondition holds; else which one fails, in words."""
        raise NotImplementedError

    def constant(self, op: Any, array: np.ndarray) -> ir.Value:
        """`array` as a new initializer of the rewritten graph, named after this rewrite."""
        self._made += 1
        name = f"fix.{self.name}.{self._made}"
        return op.initializer(ir.tensor(np.ascontiguousarray(array), name=name), name=name)


def const(value: ir.Value | None) -> np.ndarray | None:
    """The value's array when it is a constant (an initializer or a Constant's output), else None."""
    if value is None or value.const_value is None:
        return None
    return np.asarray(value.const_value.numpy())


def static_shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """The value's shape when every dimension is a known integer, else None."""
    if value is None or value.shape is None:
        return None
    dims = [d for d in value.shape.dims if isinstance(d, int)]
    return tuple(dims) if len(dims) == len(value.shape.dims) else None


def ints(value: ir.Value | None) -> list[int] | None:
    """A constant integer vector (a Reshape's shape, axes) as a list, else None."""
    array = const(value)
    return None if array is None or array.dtype.kind not in "iu" else [int(v) for v in np.ravel(array)]


def numpy_dtype(value: ir.Value) -> np.dtype | None:
    """The numpy dtype of a tensor value, None when its type is unknown."""
    if value.dtype is None:
        return None
    return np.dtype(value.dtype.numpy())


def reshaped(before: tuple[int, ...] | None, target: list[int] | None) -> list[int] | None:
    """The shape Reshape(allowzero=0) gives a tensor of shape `before` for `target`: a 0 copies the input's
    dimension, one -1 takes what is left. None when it cannot be resolved (unknown shapes, no fit)."""
    if before is None or target is None or target.count(-1) > 1:
        return None
    dims = [before[i] if d == 0 and i < len(before) else d for i, d in enumerate(target)]
    total, known = int(np.prod(before)), int(np.prod([d for d in dims if d != -1]))
    if -1 in dims:
        if known == 0 or total % known:
            return None
        dims[dims.index(-1)] = total // known
    return dims if int(np.prod(dims)) == total and all(d >= 0 for d in dims) else None
