"""The rules' registry is collected, not written by hand: every rule class of the package is in it once, under a
unique name, with a docstring saying when it fires and an example it fires on; every check says why it fires
or why not. (That every `graph_rules` key of params/device_ops.yaml names a rule: tests/test_gate_allowlist.py.)"""

from __future__ import annotations

import importlib
import pkgutil
import types

import onnx
import pytest

from weftlib.gate.predict import formats as F
from weftlib.gate.predict import rules as R
from weftlib.gate.predict.nodes import predict
from weftlib.onnx_core.walk import graph_inputs, index_model

MODULES = [importlib.import_module(m.name) for m in pkgutil.walk_packages(R.__path__, f"{R.__name__}.")]


def _defined(module: types.ModuleType) -> list[type]:
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, R.Rule) and v.__module__ == module.__name__
    ]


def test_every_rule_class_is_registered_once_and_every_module_with_rules_is_a_topic():
    named = [cls for module in MODULES for cls in _defined(module) if "name" in vars(cls)]
    assert sorted(cls.name for cls in named) == sorted(R.RULES), "a rule class missing from the registry, or extra"
    assert len({cls.name for cls in named}) == len(named), "two rule classes share a name"
    assert all(type(R.RULES[cls.name]) is cls for cls in named)
    with_rules = {module.__name__ for module in MODULES if any("name" in vars(c) for c in _defined(module))}
    assert with_rules == {t.__name__ for t in R.TOPICS}
    assert list(R.RULES) == [cls.name for topic in R.TOPICS for cls in R.rule_classes(topic)]


def test_a_class_naming_no_rule_is_a_kind_or_a_private_family():
    for module in MODULES:
        for cls in _defined(module):
            if "name" not in vars(cls):
                assert cls in (R.Rule, R.GraphRule, R.InputRule, R.NodeRule) or cls.__name__.startswith("_"), cls


def test_a_name_defined_twice_is_refused():
    topic = types.ModuleType("twice")
    exec(  # two classes of one module, the second a copy of the first's name
        "from weftlib.gate.predict.rules import layouts\n"
        "class A(layouts.Reshape5dTo4d):\n    name = 'reshape_5d_to_4d'\n"
        "class B(layouts.Reshape5dTo4d):\n    name = 'reshape_5d_to_4d'\n",
        topic.__dict__,
    )
    assert [c.__name__ for c in R.rule_classes(topic)] == ["A", "B"]
    with pytest.raises(ValueError, match="defined twice: A and B"):
        R.collect((topic,))


@pytest.fixture(scope="module")
def contexts():
    """A fresh context (formats unknown) on every rule's example, and the example."""
    return [(F.Context(index_model(model)), model) for model in (rule.example() for rule in R.RULES.values())]


@pytest.mark.parametrize("name", list(R.RULES))
def test_each_rule_says_when_it_fires_and_fires_on_its_example(name, ops):
    rule = R.RULES[name]
    doc = vars(type(rule)).get("__doc__") or ""
    assert doc.startswith("Fires on"), f"{name}: its class's docstring should say when it fires"
    assert rule.judges and (rule.judges in ((R.INPUT,), (R.GRAPH,))) == (not isinstance(rule, R.NodeRule))
    fired = [f for f in predict(index_model(rule.example()), ops).judgements if f.rule == name]
    assert fired and all(f.detail for f in fired), f"{name} does not fire on its own example"


def _checks(rule: R.Rule, ctx: F.Context) -> list[tuple[onnx.NodeProto | str | None, R.Check]]:
    """What `rule` checks in `ctx`'s graph, and its check of each."""
    if isinstance(rule, R.GraphRule):
        return [(None, rule.check(ctx))]
    if isinstance(rule, R.InputRule):
        return [(name, rule.check(ctx, name)) for name, _ in graph_inputs(ctx.graph)]
    assert isinstance(rule, R.NodeRule)
    return [(n, rule.check(ctx, n)) for n in ctx.graph.nodes if n.op_type in rule.judges]


@pytest.mark.parametrize("name", list(R.RULES))
def test_each_check_says_why_it_fires_or_why_not_and_match_reads_it(name, contexts):
    """On every example graph: a check gives a Fires with a detail or a Misses with a reason, and `match` is
    that detail or None."""
    rule = R.RULES[name]
    missed = 0
    for ctx, _ in contexts:
        for subject, check in _checks(rule, ctx):
            text = check.detail if isinstance(check, R.Fires) else check.reason
            assert isinstance(check, (R.Fires, R.Misses)) and text
            assert rule.match(ctx, subject) == (text if isinstance(check, R.Fires) else None)
            missed += isinstance(check, R.Misses)
    assert missed, f"{name} fires on everything it judges in every example: no reason to read"


def test_a_rule_refuses_a_subject_of_another_kind():
    model = R.RULES["input_rank_3"].example()
    ctx = F.Context(index_model(model))
    with pytest.raises(TypeError, match="judges a node"):
        R.RULES["batch_axis"].match(ctx, "x")
    with pytest.raises(TypeError, match="judges a graph input by its name"):
        R.RULES["input_rank_3"].match(ctx, model.graph.node[0])
