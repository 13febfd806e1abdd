"""The record's builder registry: the YAML's rebuilt cases and `BUILDERS` agree both ways, every topic module is
registered, and a case named twice (or not at all) is refused before anything is registered."""

from __future__ import annotations

import importlib
import pkgutil

import onnx
import pytest

from weftlib.gate.record import public_record as P
from weftlib.gate.record.public_record import registry

SHARED = {"blocks", "registry"}  # the package's modules that hold no case


def test_the_yamls_rebuilt_cases_and_the_registry_agree_both_ways(ops):
    rebuilt = {name for name, case in ops.cases.items() if case.rebuilt}
    assert sorted(rebuilt - set(P.BUILDERS)) == [], "marked rebuilt in params/device_ops.yaml, but no @case builds it"
    assert sorted(set(P.BUILDERS) - rebuilt) == [], "built by a @case, but not a rebuilt case of the YAML"


def test_every_topic_module_of_the_package_is_imported_and_registers_cases():
    topics = {m.name for m in pkgutil.iter_modules(P.__path__)} - SHARED
    registering = {build.__module__.rsplit(".", 1)[-1] for build in P.BUILDERS.values()}
    assert sorted(topics - registering) == [], "a topic module not imported by public_record/__init__.py"
    assert registering <= topics


def test_outcomes_that_share_a_graph_share_one_builder():
    cnn = importlib.import_module("weftlib.gate.record.public_record.cnn")
    assert P.BUILDERS["robot-resnet18-int8"] is P.BUILDERS["robot-resnet18-a16"] is cnn.resnet18_stem


@pytest.fixture
def scratch(monkeypatch):
    """The registry swapped for an empty one, so a test registers without touching the real cases."""
    empty: dict[str, registry.Build] = {}
    monkeypatch.setattr(registry, "BUILDERS", empty)
    return empty


def _model() -> onnx.ModelProto:
    return onnx.ModelProto()


def test_a_case_is_registered_under_each_of_its_names(scratch):
    assert registry.case("one", "two")(_model) is _model
    assert scratch == {"one": _model, "two": _model}


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (("taken", "fresh"), r"case 'taken' is built twice: by tests.test_record_builders._model and "),
        (("fresh", "fresh"), r"names a case twice: \('fresh', 'fresh'\)"),
        ((), r"names no public_record case"),
    ],
)
def test_a_case_named_twice_or_none_is_refused_and_nothing_half_registered(scratch, names, error):
    registry.case("taken")(_model)

    def other() -> onnx.ModelProto:
        return onnx.ModelProto()

    with pytest.raises(ValueError, match=error):
        registry.case(*names)(other)
    assert scratch == {"taken": _model}
