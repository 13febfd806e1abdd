"""The README's notebook conventions, checked over every committed notebook."""

import ast

import nbformat
import pytest

from tests.conftest import NOTEBOOKS
from weftlib.params import declared_parameters

LITERAL_NODES = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp, ast.USub, ast.UAdd)


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def is_literal(node: ast.AST) -> bool:
    return all(isinstance(n, LITERAL_NODES + (ast.expr_context,)) for n in ast.walk(node))


def test_the_suite_has_its_notebooks():
    assert list(NOTEBOOKS)[:1] == ["00_overview"]
    assert all(name[:2].isdigit() and name[2] == "_" for name in NOTEBOOKS)


@pytest.mark.parametrize("name", list(NOTEBOOKS))
class TestNotebook:
    def test_title_first_and_kernel(self, name):
        nb = nbformat.read(NOTEBOOKS[name], as_version=4)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert nb.metadata["kernelspec"]["name"] == "weftlib"

    def test_no_outputs(self, name):
        for cell in code_cells(NOTEBOOKS[name]):
            assert not cell.outputs and cell.execution_count is None, cell.source[:60]

    def test_imports_first_then_one_literal_parameters_cell(self, name):
        cells = code_cells(NOTEBOOKS[name])
        first = ast.parse(cells[0].source)
        assert first.body and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in first.body)
        tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
        assert tagged == [1], f"exactly one `parameters` cell, right after the imports; found at {tagged}"
        body = ast.parse(cells[1].source).body
        assert all(isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                   and is_literal(s.value) for s in body), "parameters must be `name = literal`"
        assert "run_dir" in declared_parameters(NOTEBOOKS[name])

    def test_no_imports_after_the_first_cell(self, name):
        for cell in code_cells(NOTEBOOKS[name])[1:]:
            tree = ast.parse(cell.source)
            assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)), cell.source[:60]

    def test_logic_lives_in_weftlib(self, name):
        for cell in code_cells(NOTEBOOKS[name]):
            for node in ast.walk(ast.parse(cell.source)):
                assert not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For,
                                             ast.While)), f"{type(node).__name__} in: {cell.source[:60]}"

    def test_claims_are_asserted_and_recorded(self, name):
        source = "\n".join(c.source for c in code_cells(NOTEBOOKS[name]))
        tree = ast.parse(source)
        assert any(isinstance(n, ast.Assert) for n in ast.walk(tree)), "a notebook must assert its claims"
        assert f'report.Recorder("{name}", run_dir)' in source
        assert "rec.record(" in source
