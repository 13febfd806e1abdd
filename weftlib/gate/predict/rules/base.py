"""What a graph rule is: an evidence key, what it judges, a check that says why it fires or why not, an example.

A rule is one class. `name` is its key in `params/device_ops.yaml` (`graph_rules`), where its evidence is;
`judges` is what it looks at: op types, or `INPUT` (each graph input) or `GRAPH` (the graph as a whole);
`check` returns `Fires` with the finding's detail or `Misses` with the reason; `example` builds the smallest
graph it fires on, which is also the probe the DFC pack carries for it. The three kinds type what `check` reads:
a `GraphRule` the graph, an `InputRule` an input's name, a `NodeRule` a node. A class that names no rule is a
family: the check and example its named subclasses share.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import onnx

from ..formats import Context

INPUT, GRAPH = "(input)", "(graph)"  # what an input rule / the graph-level rule judges instead of an op


@dataclass(frozen=True)
class Fires:
    """The rule covers its subject; `detail` says how (the finding's detail)."""

    detail: str


@dataclass(frozen=True)
class Misses:
    """The rule does not cover its subject; `reason` says why."""

    reason: str


Check = Fires | Misses


def _detail(check: Check) -> str | None:
    return check.detail if isinstance(check, Fires) else None


class Rule(ABC):
    """A detector: its evidence key, what it judges, its check and the smallest graph it fires on."""

    name: ClassVar[str]
    judges: ClassVar[tuple[str, ...]]
    downstream: ClassVar[bool] = False  # it fires only where an earlier refusal left no format: a consequence

    @abstractmethod
    def match(self, ctx: Context, subject: onnx.NodeProto | str | None) -> str | None:
        """The finding's detail when the rule covers `subject` (a node, an input's name, None: the graph)."""

    @abstractmethod
    def example(self) -> onnx.ModelProto:
        """The smallest graph the rule fires on (also its probe)."""

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class GraphRule(Rule):
    """A rule on the graph as a whole."""

    judges = (GRAPH,)

    @abstractmethod
    def check(self, ctx: Context) -> Check: ...

    def match(self, ctx: Context, subject: onnx.NodeProto | str | None = None) -> str | None:
        return _detail(self.check(ctx))


class InputRule(Rule):
    """A rule on each graph input, by name."""

    judges = (INPUT,)

    @abstractmethod
    def check(self, ctx: Context, name: str) -> Check: ...

    def match(self, ctx: Context, subject: onnx.NodeProto | str | None) -> str | None:
        if not isinstance(subject, str):
            raise TypeError(f"rule {self.name} judges a graph input by its name, not {type(subject).__name__}")
        return _detail(self.check(ctx, subject))


class NodeRule(Rule):
    """A rule on each node of the op types it judges."""

    @abstractmethod
    def check(self, ctx: Context, node: onnx.NodeProto) -> Check: ...

    def match(self, ctx: Context, subject: onnx.NodeProto | str | None) -> str | None:
        if not isinstance(subject, onnx.NodeProto):
            raise TypeError(f"rule {self.name} judges a node, not {type(subject).__name__}")
        return _detail(self.check(ctx, subject))

    def fires(self, ctx: Context, node: onnx.NodeProto) -> bool:
        """Whether the rule covers `node` (for the rules that defer to another)."""
        return isinstance(self.check(ctx, node), Fires)
