"""The graph rules: patterns and layouts the public record shows the DFC deciding by, each one class.

A rule judges the nodes of some op types (or the graph's inputs, or the graph) in their context: a Reshape is a
glued head split or a view, a Softmax runs in a layout whose format the parser tracks or not. Its `check` says
why it fires (the finding's detail) or why not; `match` gives the detail or None. The evidence for each rule is
in `params/device_ops.yaml` (`graph_rules`, keyed by the rule's `name`), weighed by
`weftlib.gate.record.standing`; `example` builds the smallest graph the rule fires on, which is also the probe
the DFC pack carries for it (`base` says what a rule is).

The rules live one topic a module; `RULES` is collected from them: every class there that names a rule, in the
order of `TOPICS`, then of definition (the order findings are listed in).
"""

from __future__ import annotations

from types import ModuleType

from . import axis_norms, concat, heads, inputs, layouts, operators, reductions
from .base import GRAPH, INPUT, Check, Fires, GraphRule, InputRule, Misses, NodeRule, Rule

__all__ = [
    "GRAPH",
    "INPUT",
    "RULES",
    "TOPICS",
    "Check",
    "Fires",
    "GraphRule",
    "InputRule",
    "Misses",
    "NodeRule",
    "Rule",
    "collect",
    "rule_classes",
    "rules_for",
]

TOPICS: tuple[ModuleType, ...] = (inputs, heads, layouts, axis_norms, concat, reductions, operators)


def rule_classes(module: ModuleType) -> list[type[Rule]]:
    """The rules `module` defines: its `Rule` subclasses that name one (a family base names none), in order."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Rule)
        and value.__module__ == module.__name__
        and "name" in vars(value)
    ]


def collect(topics: tuple[ModuleType, ...]) -> dict[str, Rule]:
    """One instance of every rule the topic modules define, by name; a ValueError on a name defined twice."""
    found: dict[str, Rule] = {}
    for module in topics:
        for cls in rule_classes(module):
            if cls.name in found:
                raise ValueError(
                    f"rule {cls.name!r} is defined twice: {type(found[cls.name]).__qualname__} and {cls.__qualname__}"
                )
            found[cls.name] = cls()
    return found


RULES: dict[str, Rule] = collect(TOPICS)


def rules_for(op: str) -> list[Rule]:
    """The rules that judge nodes of `op` (INPUT and GRAPH for the graph-level ones)."""
    return [r for r in RULES.values() if op in r.judges]
