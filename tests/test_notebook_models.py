"""Each notebook and its package's model (`notebook_model`) agree, read from the notebook's cells without running
it: the `parameters` cell names what the model's `Parameters` declares, each default meets its constraint, and
every `rec.record` / `rec.describe` call names a key the model's `Record` declares, with its unit and label; every
declared key is recorded somewhere. The `Recorder` refuses what the model does not allow, naming the key."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from weftlib.notebook_model import Metric, NotebookModel, RecordModel
from weftlib.suite import params, record, schema
from weftlib.suite.models import WHERE, model_of

RECORDING = ("record", "describe", "demote")  # Recorder methods whose first argument is a key


def model(name: str) -> NotebookModel:
    found = model_of(name)
    assert found is not None, f"{name} has no model in suite/models.py WHERE"
    return found


def record_calls(path: Path) -> list[tuple[str, str, dict[str, ast.expr]]]:
    """(method, key, keyword arguments) of every `rec.<record|describe|demote>(...)` call in a notebook's code
    cells; a key that is not a string literal is an error (a key must be readable without running)."""
    calls = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in RECORDING or not (
                isinstance(node.func.value, ast.Name) and node.func.value.id == "rec"
            ):
                continue
            key = node.args[0] if node.args else None
            assert isinstance(key, ast.Constant) and isinstance(key.value, str), (
                f"{path.name}: rec.{node.func.attr}({ast.unparse(key) if key else ''}...): a key is a string literal"
            )
            calls.append((node.func.attr, key.value, {k.arg: k.value for k in node.keywords if k.arg}))
    return calls


def test_every_notebook_has_a_model_and_every_model_a_notebook(notebooks):
    assert set(WHERE) == set(notebooks)
    for name in notebooks:
        assert model(name).notebook == name


def test_the_parameters_cell_names_what_the_model_declares_and_each_default_meets_it(notebooks):
    for name, path in notebooks.items():
        declared = params.declared_parameters(path)
        cell = {k for k in declared if k not in params.RESERVED}
        modelled = set(model(name).parameters.parameters())
        assert cell == modelled, (
            f"{name}: in the cell only {sorted(cell - modelled)}, in {model(name).where} only {sorted(modelled - cell)}"
        )
        for key, default in declared.items():
            assert schema.problem(name, key, default, default) is None, (name, key, default)


def test_every_recorded_key_is_declared_with_its_unit_and_label_and_every_declared_key_is_recorded(notebooks):
    for name, path in notebooks.items():
        metrics = model(name).record.metrics()
        calls = record_calls(path)
        for method, key, keywords in calls:
            assert key in metrics, f"{name}: rec.{method}({key!r}) is not declared in {model(name).where}"
            unit, label = keywords.get("unit"), keywords.get("label")
            if isinstance(unit, ast.Constant):
                assert unit.value == metrics[key].unit, (
                    f"{name}.{key}: unit {unit.value!r}, declared {metrics[key].unit!r}"
                )
            if isinstance(label, ast.Constant):  # a label worded with the run's values (an f-string) may differ
                assert label.value == metrics[key].label, (
                    f"{name}.{key}: label {label.value!r}, declared {metrics[key].label!r}"
                )
        recorded = {key for _, key, _ in calls} | set(RecordModel.metrics())  # claims, conclusion: every notebook may
        assert set(metrics) <= recorded, f"{name}: declared but never recorded: {sorted(set(metrics) - recorded)}"


def test_a_key_read_by_the_tables_is_a_field_of_a_model():
    from weftlib.gate.notebooks import CutRecord, GateRecord

    assert GateRecord.graph_standing.key == "graph_standing" and CutRecord.device_payoff.key == "device_payoff"
    assert isinstance(CutRecord.metrics()["answer_graphs"], Metric)


def test_the_recorder_refuses_what_the_model_does_not_allow_naming_the_key(tmp_path):
    rec = record.Recorder("05_gate_pairing", tmp_path)
    with pytest.raises(record.RecordError, match=r"'graph_standings'.*not declare.*weftlib.gate.notebooks"):
        rec.record("graph_standings", {})
    with pytest.raises(record.RecordError, match=r"'graphs_found' is str '3', but 'graphs_found' is an integer"):
        rec.record("graphs_found", "3")
    with pytest.raises(record.RecordError, match=r"'graphs_found'.*is bool"):
        rec.record("graphs_found", True)
    with pytest.raises(record.RecordError, match=r"'graphs_found' given the unit 's'.*declares none"):
        rec.record("graphs_found", 3, unit="s")
    assert not (tmp_path / "05_gate_pairing" / "metrics.json").exists()  # nothing half-written
    rec.record("graphs_found", 3)
    rec.record("device_gate_table", pd.DataFrame({"graph": ["a"], "verdict": ["pass"]}))  # a table is a list of rows
    rec.record("public_record_looo_agreement", float("nan"))  # a float that is not finite is still a float
    shown = record.load_metrics(tmp_path, "05_gate_pairing")
    assert shown["metrics"]["graphs_found"] == 3
    assert shown["display"]["public_record_looo_agreement"]["label"].startswith("the gate's agreement")


def test_a_plan_is_checked_against_the_models_parameters():
    assert schema.problem("04_export_dit_block", "timestep_rank", 1, 2) is not None  # never rank 1
    assert schema.problem("04_export_dit_block", "timestep_rank", 3, 2) is None
    assert schema.outside_code("04_export_dit_block") == {
        "host_root": schema.constraints("04_export_dit_block")["host_root"].what
    }


def test_a_notebook_outside_the_suite_records_freely(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    rec.record("anything", "3", unit="s")
    assert rec.model is None and record.load_metrics(tmp_path, "99_x")["metrics"]["anything"] == "3"
