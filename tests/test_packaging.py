"""pyproject.toml is the single source of dependencies; environment.yml and the Makefile must follow it."""

import re
import tomllib
from pathlib import Path

import yaml

from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
ENV_TEXT = (REPO / "environment.yml").read_text()
ENV = yaml.safe_load(ENV_TEXT)


def pip_entries() -> list[str]:
    return next(d["pip"] for d in ENV["dependencies"] if isinstance(d, dict) and "pip" in d)


def test_python_version_agrees():
    conda_python = next(d for d in ENV["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert conda_python == "python=3.11"
    assert PYPROJECT["project"]["requires-python"] == ">=3.11,<3.12"


def test_pins_agree():
    deps = PYPROJECT["project"]["dependencies"]
    assert "torch==2.13.0" in deps and "natten==0.21.7" in deps
    build = PYPROJECT["build-system"]["requires"]
    for entry in pip_entries():
        name = re.split(r"[=<>]", entry)[0]
        in_pyproject = [d for d in deps + build if re.split(r"[=<>]", d)[0] == name]
        assert in_pyproject, f"environment.yml installs {entry!r}, which pyproject.toml does not declare"
        assert entry in in_pyproject, f"environment.yml pins {entry!r}; pyproject.toml says {in_pyproject}"


def test_install_line_uses_declared_extras():
    match = re.search(r'pip install --no-build-isolation -e "\.\[([a-z,]+)\]"', ENV_TEXT)
    assert match, "environment.yml must say how to install the project"
    extras = set(match.group(1).split(","))
    assert extras <= set(PYPROJECT["project"]["optional-dependencies"]), extras
    assert "jupyterlab" in " ".join(PYPROJECT["project"]["optional-dependencies"]["lab"])


def test_makefile_takes_torch_pin_from_pyproject():
    makefile = (REPO / "Makefile").read_text()
    assert not re.search(r"torch==\d", makefile), "the Makefile must read the torch pin from pyproject.toml"
    assert "pyproject.toml" in makefile
    assert "--no-build-isolation -e" in makefile


def test_readme_first_screen_has_the_two_commands():
    first_screen = "\n".join((REPO / "README.md").read_text().splitlines()[:25])
    assert "make appendix" in first_screen and "make test" in first_screen
    assert "make test" in (REPO / ".ci" / "run").read_text()


def _dry_run(target, *args):
    import shutil
    import subprocess

    import pytest

    if shutil.which("make") is None:
        pytest.skip("needs make")
    out = subprocess.run(["make", "-n", target, *args], check=False, cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_check_is_make_test_less_the_notebooks_and_the_exports():
    """`make check`, the inner loop the README's developer section names: every step of `make test` but the
    tests that run a notebook or the real exporters, on both cores; the long files it orders first exist."""
    from tests.conftest import FIRST

    check, test = _dry_run("check"), _dry_run("test")
    for step in ("ruff check .", "ruff format --check .", "lint-imports --no-cache", "mypy", "pytest -q -n 2"):
        assert step in check and step in test, step
    assert '-m "not notebook and not exports"' in check and "not notebook" not in test
    assert "make check" in (REPO / "README.md").read_text()
    assert [name for name in FIRST if not (REPO / "tests" / f"{name}.py").is_file()] == []


def test_make_targets_run_the_plans_they_name():
    import os

    assert "weftlib run --params params/appendix.yaml" in _dry_run("appendix")
    assert "weftlib run --params params/default.yaml" in _dry_run("smoke")
    assert "pytest" in _dry_run("test")
    assert 'weftlib publish "outputs/appendix" --rfd "/some/rfd"' in _dry_run("publish", "RFD=/some/rfd")
    lab = next(line for line in _dry_run("lab").splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in lab) == (os.geteuid() == 0), lab  # Lab refuses root without it
    assert f'--ServerApp.root_dir="{REPO}"' in lab  # outputs/ reachable through /files/ for the graph view
    assert "filter.nbstrip.clean" in _dry_run("lab")


def test_lab_asks_nothing_of_the_outside_world():
    """`make lab` installs the project's Lab settings where JupyterLab reads an environment's own settings:
    no "fetch Jupyter news?" pop-up and no update check, so an offline machine is never prompted."""
    import json

    overrides = json.loads((REPO / "lab" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    dry = _dry_run("lab", "-W", "lab/overrides.json")  # as if the settings file had just changed
    assert "cp lab/overrides.json .venv/share/jupyter/lab/settings/overrides.json" in dry
    lab = next(line for line in dry.splitlines() if "jupyter lab" in line)
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in lab
    try:
        from jupyterlab.commands import get_app_dir
    except ImportError:
        return  # Lab is an extra (`make lab` installs it); CI checks the file and the recipe
    app_dir = Path(get_app_dir())
    assert app_dir == REPO / ".venv" / "share" / "jupyter" / "lab"  # the folder the recipe writes into
    schema = json.loads((app_dir / "schemas" / "@jupyterlab" / "apputils-extension" / "notification.json").read_text())
    assert {"fetchNews", "checkForUpdates"} <= set(schema["properties"])
    assert {"const": "false", "title": "Never"} in schema["properties"]["fetchNews"]["oneOf"]


def test_every_data_file_of_the_package_is_declared_package_data():
    """A wheel holds only the data files package-data names: a template or a shipped mesh left out would be
    missing from an installed copy while an editable checkout still finds it."""
    from fnmatch import fnmatch

    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["weftlib"]
    package = REPO / "weftlib"
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert data, "the package ships data files (templates, the bunny); none found"
    undeclared = [d for d in data if not any(fnmatch(d, g.replace("**/", "*")) for g in globs)]
    assert undeclared == [], f"data files no package-data glob of pyproject.toml names: {undeclared}"
