"""The venv's mypy warm-up names the outside packages weftlib imports, and never weftlib itself (which a fresh
clone's `make check` must analyse, not read from a cache)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("mypy_environment", REPO / "scripts" / "mypy_environment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_outside_packages_weftlib_imports_and_nothing_of_its_own():
    names = _script().outside_imports(REPO / "weftlib")
    assert {"torch", "onnx", "transformers", "numpy"} <= set(names)
    assert "weftlib" not in names and not set(names) & set(sys.stdlib_module_names)


def test_relative_and_nested_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "a.py").write_text(
        "from . import b\nfrom .c import d\nimport os.path\nimport yaml.loader as y\n"
    )
    (package / "e.py").write_text("from pkg.sub import a\nfrom jinja2 import Template\nimport json, torch\n")
    assert _script().outside_imports(package) == ["jinja2", "torch", "yaml"]
