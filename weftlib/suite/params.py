"""Parameter files: which notebooks run, in which order, with which values — checked before anything runs.

A parameter file is only trusted after every key has been compared with the notebook's real `parameters`
cell (papermill reads it without starting a kernel): a misspelled key would otherwise be injected as a new
variable, silently ignored, and the appendix would show a run of the defaults under the wrong label.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..paths import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DEFAULT_PLAN = REPO_ROOT / "params" / "default.yaml"  # the small CPU plan; `make appendix` runs appendix.yaml
RESERVED = ("run_dir",)  # set by the runner itself
FILE_KEYS = {"description", "cell_timeout", "notebooks", "appendix"}
ENTRY_KEYS = {"name", "parameters"}


class ParamsError(ValueError):
    """A parameter file that must not run: the message names the file, the key and what is valid."""


@dataclass(frozen=True)
class NotebookPlan:
    """One notebook of a run and the values injected into its `parameters` cell."""

    name: str
    path: Path
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuitePlan:
    """A whole run as a parameter file declares it."""

    source: Path
    description: str
    cell_timeout: int
    notebooks: tuple[NotebookPlan, ...]
    appendix: bool = False  # `appendix: true` in the file: the full-size plan the RFD cites

    def digest(self) -> str:
        """A short hash of everything that decides what the run computes (order and values)."""
        body = [(nb.name, nb.parameters) for nb in self.notebooks]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _fail(source: Path, where: str, problem: str) -> ParamsError:
    return ParamsError(f"{source}: {where}: {problem}")


def _read_yaml(source: Path) -> dict[str, Any]:
    if source.is_dir():
        raise ParamsError(f"{source}: is a directory; --params takes a parameter file such as params/default.yaml")
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(f"{source}: no such parameter file") from None
    except UnicodeDecodeError as exc:
        raise ParamsError(
            f"{source}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); a parameter file is YAML text"
        ) from None
    except OSError as exc:
        raise ParamsError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise _fail(source, "top level", "expected a mapping with a `notebooks` list")
    return data


def _check_keys(source: Path, where: str, got: dict[str, Any], valid: set[str]) -> None:
    unknown = sorted(set(got) - valid)
    if unknown:
        raise _fail(source, where, f"unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(valid))}")


def _entry(source: Path, index: int, raw: Any, notebook_dir: Path) -> NotebookPlan:
    where = f"notebooks[{index}]"
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or "name" not in raw:
        raise _fail(source, where, "expected a notebook name or a mapping with `name` and `parameters`")
    _check_keys(source, where, raw, ENTRY_KEYS)
    name = str(raw["name"])
    path = notebook_dir / f"{name}.ipynb"
    if not path.exists():
        known = sorted(p.stem for p in notebook_dir.glob("*.ipynb"))
        raise _fail(source, f"{where}.name", f"no notebook {name!r}; notebooks: {', '.join(known)}")
    parameters = raw.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise _fail(source, f"{name}.parameters", "expected a mapping of parameter names to values")
    return NotebookPlan(name=name, path=path, parameters=dict(parameters))


def load_plan(source: str | Path, only: list[str] | None = None, notebook_dir: Path = NOTEBOOK_DIR) -> SuitePlan:
    """Read a parameter file (structure only); `only` keeps the named notebooks, in the file's order."""
    source = Path(source)
    data = _read_yaml(source)
    _check_keys(source, "top level", data, FILE_KEYS)
    entries = data.get("notebooks")
    if not isinstance(entries, list) or not entries:
        raise _fail(source, "notebooks", "expected a non-empty list of notebooks")
    notebooks = tuple(_entry(source, i, raw, notebook_dir) for i, raw in enumerate(entries))
    names = [nb.name for nb in notebooks]
    if len(set(names)) != len(names):
        raise _fail(source, "notebooks", "a notebook is listed twice")
    if only:
        missing = [n for n in only if n not in names]
        if missing:
            raise _fail(source, "--only", f"{missing[0]!r} is not in this file; notebooks: {', '.join(names)}")
        notebooks = tuple(nb for nb in notebooks if nb.name in only)
    timeout = data.get("cell_timeout", 900)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        raise _fail(source, "cell_timeout", f"expected a positive number of seconds, got {timeout!r}")
    appendix = data.get("appendix", False)
    if not isinstance(appendix, bool):
        raise _fail(source, "appendix", f"expected true or false, got {appendix!r}")
    return SuitePlan(source, str(data.get("description", "")), timeout, notebooks, appendix)


def notebook_names(source: str | Path = DEFAULT_PLAN) -> list[str]:
    """The notebooks a plan runs, in its order: the one list of the suite's notebooks."""
    return [nb.name for nb in load_plan(source).notebooks]


def declared_parameters(path: Path) -> dict[str, Any]:
    """The notebook's `parameters` cell as {name: default value}, read by papermill without a kernel."""
    import papermill

    declared = papermill.inspect_notebook(str(path))
    if not declared:
        raise ParamsError(f"{path}: has no cell tagged `parameters`")
    values = {}
    for name, info in declared.items():
        try:
            values[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            raise ParamsError(f"{path}: parameter {name!r} has a non-literal default {info['default']!r}") from None
    return values


def type_problem(value: Any, default: Any) -> str | None:
    """Why `value` cannot stand in for `default` (None when it can); ints may replace floats."""
    if default is None:
        return None
    expected = type(default)
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(value, bool) and isinstance(default, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    else:
        ok = isinstance(value, expected)
    return (
        None
        if ok
        else f"expected {expected.__name__} like the default {default!r}, got {type(value).__name__} {value!r}"
    )


def validate(plan: SuitePlan) -> None:
    """Compare every value of the plan with its notebook's `parameters` cell; raise on the first problem."""
    for nb in plan.notebooks:
        declared = declared_parameters(nb.path)
        valid = sorted(k for k in declared if k not in RESERVED)
        for key, value in nb.parameters.items():
            where = f"{nb.name}.parameters.{key}"
            if key in RESERVED:
                raise _fail(plan.source, where, "is set by the runner and cannot be given in a parameter file")
            if key not in declared:
                hint = difflib.get_close_matches(key, valid, n=1)
                did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise _fail(plan.source, where, f"unknown parameter{did_you_mean}; valid keys: {', '.join(valid)}")
            problem = type_problem(value, declared[key])
            if problem:
                raise _fail(plan.source, where, problem)
