"""Parameter files: which notebooks run, in which order, with which values — checked before anything runs.

A parameter file is only trusted after every key has been compared with the notebook's real `parameters`
cell (papermill reads it without starting a kernel): a misspelled key would otherwise be injected as a new
variable, silently ignored, and the appendix would show a run of the defaults under the wrong label.
The file's own shape (its keys and their types) is checked by pydantic models; YAML's loader is made to refuse a
key written twice, which it would otherwise drop before any model could see it.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..formatting import place
from ..paths import REPO_ROOT
from ..yaml_text import SAFE_LOADER, too_deep
from . import schema

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DEFAULT_PLAN = REPO_ROOT / "params" / "default.yaml"  # the small CPU plan; `make appendix` runs appendix.yaml
FULL_PLAN = REPO_ROOT / "params" / "appendix.yaml"  # the full plan: a run of it is the appendix the RFD cites
NOTEBOOK_NAME = re.compile(r"^\d{2}_[a-z0-9_]+$")  # NN_name: a notebook of the notebook folder, never a path
RESERVED = ("run_dir",)  # set by the runner itself


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
    appendix: bool = False  # `appendix: true` in the file; `validate` refuses it unless the plan is the full plan
    partial: bool = False  # some of the file's notebooks only (`--only`)
    settings: tuple[str, ...] = ()  # the command line's `--set KEY=VALUE`, already applied to `notebooks`

    def digest(self) -> str:
        """A short hash of everything that decides what the run computes (order and values)."""
        body = [(nb.name, nb.parameters) for nb in self.notebooks]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _fail(source: Path, where: str, problem: str) -> ParamsError:
    return ParamsError(f"{source}: {where}: {problem}")


def _places(first: yaml.Mark, second: yaml.Mark) -> str:
    """Where a key stands twice: its two lines, or its two columns of one line (a flow mapping)."""
    if first.line != second.line:
        return f"lines {first.line + 1} and {second.line + 1}"
    return f"line {first.line + 1}, columns {first.column + 1} and {second.column + 1}"


class _UniqueKeyLoader(SAFE_LOADER):
    """YAML's safe loader, refusing a key written twice in one mapping (YAML itself keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:
                continue  # an unhashable key: construct_mapping below says so
            if first is not key_node.start_mark:  # block style or flow style ({a: 1, a: 2}, one line)
                where = _places(first, key_node.start_mark)
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} written twice ({where}); YAML would silently keep the last",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _read_yaml(source: Path) -> Any:
    if source.is_dir():
        raise ParamsError(f"{source}: is a directory; --params takes a parameter file such as params/default.yaml")
    try:
        data = yaml.load(source.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise ParamsError(f"{source}: no such parameter file") from None
    except UnicodeDecodeError as exc:
        raise ParamsError(
            f"{source}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); a parameter file is YAML text"
        ) from None
    except OSError as exc:
        raise ParamsError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        if too_deep(exc):
            raise ParamsError(f"{source}: nested deeper than YAML can be read; {_NESTING}") from None
        raise ParamsError(f"{source}: not valid YAML: {exc}") from None
    problem = nesting_problem(data)
    if problem:
        raise ParamsError(f"{source}: {problem}")
    return data


MAX_NESTING = 32  # no plan value is nested deeper; one that is would only reach a notebook as a runaway
_NESTING = f"a plan's values are nested at most {MAX_NESTING} deep"


def nesting_problem(value: Any, depth: int = 0, within: frozenset[int] = frozenset()) -> str | None:
    """Why a value read from YAML cannot be a plan's: a list or mapping inside itself (an alias in its own
    anchor, `&a [*a]`, which no JSON, hash or notebook can hold), or one nested over MAX_NESTING deep."""
    if not isinstance(value, (list, dict)):
        return None
    if id(value) in within:
        return "a value holds itself (a YAML alias inside its own anchor, e.g. &a [*a]); write it out"
    if depth >= MAX_NESTING:
        return f"a value is nested more than {MAX_NESTING} levels deep; {_NESTING}"
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    for item in items:
        problem = nesting_problem(item, depth + 1, within | {id(value)})
        if problem:
            return problem
    return None


class _Shape(BaseModel):
    """A part of a parameter file: no key beyond its fields, no value coerced to another type."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    EXPECTED: ClassVar[str]  # what the part is, for the message when something else stands in its place


def _notebook_name(name: Any, info: ValidationInfo) -> str:
    """A plain name of the notebook folder (a path once passed and overwrote the source notebook)."""
    if not isinstance(name, str) or not NOTEBOOK_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a notebook name: a name is NN_name (two digits, then lower-case letters, digits "
            "and _), the file's stem in notebooks/, never a path"
        )
    notebook_dir: Path = (info.context or {}).get("notebook_dir", NOTEBOOK_DIR)
    if not (notebook_dir / f"{name}.ipynb").is_file():
        known = sorted(p.stem for p in notebook_dir.glob("*.ipynb"))
        raise ValueError(f"no notebook {name!r}; notebooks: {', '.join(known)}")
    return name


class _Entry(_Shape):
    """One item of `notebooks`: a name, or a name and the values for its `parameters` cell."""

    EXPECTED = "a notebook name or a mapping with `name` and `parameters`"

    name: Annotated[str, BeforeValidator(_notebook_name)] = Field(description="a notebook name")
    parameters: Annotated[dict[str, Any], BeforeValidator(lambda v: v or {})] = Field(  # null, [], "": none
        default_factory=dict, description="a mapping of parameter names to values"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, raw: Any) -> Any:
        return {"name": raw} if isinstance(raw, str) else raw  # `- 10_ok` is `- name: 10_ok`


class _PlanFile(_Shape):
    """A parameter file as written: its keys and their types, each notebook named once."""

    EXPECTED = "a mapping with a `notebooks` list"

    description: Annotated[str, BeforeValidator(str)] = ""
    cell_timeout: int = Field(900, gt=0, description="a positive number of seconds")
    notebooks: list[_Entry] = Field(min_length=1, description="a non-empty list of notebooks")
    appendix: bool = Field(False, description="true or false")

    @field_validator("notebooks")
    @classmethod
    def _once_each(cls, entries: list[_Entry]) -> list[_Entry]:
        names = [entry.name for entry in entries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice; each notebook runs once per plan")
        return entries


def _expected(loc: tuple[int | str, ...]) -> str:
    """What the plan file must hold at `loc`: a part's EXPECTED, or its field's description (a file has two
    levels of parts: the top, and each `notebooks[i]`)."""
    if not loc:
        return _PlanFile.EXPECTED
    if len(loc) == 2:  # notebooks[i]: an entry
        return _Entry.EXPECTED
    model, key = (_PlanFile, loc[0]) if len(loc) == 1 else (_Entry, loc[2])
    field_ = model.model_fields.get(str(key))
    return (field_.description if field_ else None) or str(key)


WHOLE = "top level"  # how a refusal names the plan file as a whole
_UNKNOWN = ("extra_forbidden", "invalid_key")  # a key no field has (invalid_key: not even a string)


def _refusal(source: Path, exc: ValidationError) -> ParamsError:
    """The first problem of a plan file as one line naming the file and the key (unknown keys first, as a
    misspelled key is the likeliest reason for the rest)."""
    errors = exc.errors(include_url=False)
    err = min(errors, key=lambda e: (0, len(e["loc"])) if e["type"] in _UNKNOWN else (1, 0))
    loc, got = tuple(err["loc"]), err["input"]
    if err["type"] in _UNKNOWN:
        valid = ", ".join(sorted(_Entry.model_fields if len(loc) > 1 else _PlanFile.model_fields))
        return _fail(source, place(loc[:-1], WHOLE), f"unknown key {loc[-1]!r}; valid keys: {valid}")
    if loc[-1:] == ("[key]",):  # a key of `parameters` that is no string
        return _fail(source, place(loc[:-2], WHOLE), f"key {got!r} is not a parameter name")
    if err["type"] == "value_error":
        return _fail(source, place(loc, WHOLE), err["msg"].removeprefix("Value error, "))
    scalar = isinstance(got, (str, int, float, bool)) or got is None
    shown = f", got {got!r}" if scalar and err["type"] != "missing" else ""
    return _fail(source, place(loc, WHOLE), f"expected {_expected(loc)}{shown}")


def load_plan(source: str | Path, only: list[str] | None = None, notebook_dir: Path = NOTEBOOK_DIR) -> SuitePlan:
    """Read a parameter file (structure only); `only` keeps the named notebooks, in the file's order."""
    source = Path(source)
    try:
        data = _PlanFile.model_validate(_read_yaml(source), context={"notebook_dir": notebook_dir})
    except ValidationError as exc:
        raise _refusal(source, exc) from None
    notebooks = tuple(
        NotebookPlan(entry.name, notebook_dir / f"{entry.name}.ipynb", dict(entry.parameters))
        for entry in data.notebooks
    )
    if only:
        names = [nb.name for nb in notebooks]
        missing = [n for n in only if n not in names]
        if missing:
            raise _fail(source, "--only", f"{missing[0]!r} is not in this file; notebooks: {', '.join(names)}")
        notebooks = tuple(nb for nb in notebooks if nb.name in only)
    return SuitePlan(source, data.description, data.cell_timeout, notebooks, data.appendix, partial=bool(only))


def notebook_names(source: str | Path = DEFAULT_PLAN) -> list[str]:
    """The notebooks a plan runs, in its order: the one list of the suite's notebooks."""
    return [nb.name for nb in load_plan(source).notebooks]


def _setting(raw: str) -> tuple[str, Any]:
    """`KEY=VALUE` (or `NOTEBOOK.KEY=VALUE`) from the command line: the value read as YAML, as in a plan file
    (`4` a number, `[1, 2]` a list, `{pretrained: false}` a mapping, anything else a string; empty: the empty
    string)."""
    key, sep, text = raw.partition("=")
    key = key.strip()
    if not sep or not re.fullmatch(r"(?:[A-Za-z0-9_]+\.)?[A-Za-z_][A-Za-z0-9_]*", key):
        raise ParamsError(f"--set {raw!r}: expected KEY=VALUE with KEY a parameter name, e.g. --set hub_dir=../NAF")
    if not text:
        return key, ""
    try:
        value = yaml.load(text, Loader=_UniqueKeyLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        if too_deep(exc):
            raise ParamsError(f"--set {key}: the value is nested deeper than YAML can be read; {_NESTING}") from None
        raise ParamsError(f"--set {key}: the value {text!r} is not valid YAML: {exc}") from None
    problem = nesting_problem(value)
    if problem:
        raise ParamsError(f"--set {key}: {problem}")
    return key, value


def apply_settings(plan: SuitePlan, settings: list[str] | None) -> SuitePlan:
    """The plan with each `--set KEY=VALUE` given to every notebook of it whose `parameters` cell has KEY
    (e.g. `hub_dir` to 01 and 02, `host_root` to 01 and 04), and each `--set NOTEBOOK.KEY=VALUE` to that
    notebook only (05's and 06's `dfc_results_dir` are different folders). Refused, naming the setting, when
    no notebook of the plan has that parameter, when it is set by the runner, or when a notebook may not take
    the value (`schema`: a directory that is no checkout of the repository it names, a wrong type, ...)."""
    if not settings:
        return plan
    values: dict[str, Any] = {}
    for raw in settings:
        key, value = _setting(raw)
        if key in values:
            raise ParamsError(f"--set {key}: given twice; give each parameter once")
        values[key] = value
    declared = {nb.name: declared_parameters(nb.path) for nb in plan.notebooks}
    updated = {nb.name: dict(nb.parameters) for nb in plan.notebooks}
    for setting, value in values.items():
        only, _, key = setting.rpartition(".")
        if key in RESERVED:
            raise ParamsError(f"--set {setting}: is set by the runner and cannot be given")
        if only and only not in declared:
            raise ParamsError(f"--set {setting}: {only} is not a notebook of this plan ({', '.join(declared)})")
        takers = [name for name, params in declared.items() if key in params and only in ("", name)]
        if not takers:
            known = sorted({k for params in declared.values() for k in params if k not in RESERVED})
            hint = difflib.get_close_matches(key, known, n=1)
            who = (
                f"{only} has no parameter"
                if only
                else f"no notebook of this plan ({', '.join(declared)}) has a parameter"
            )
            raise ParamsError(f"--set {setting}: {who} {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        for name in takers:
            problem = schema.problem(name, key, value, declared[name][key])
            if problem:
                inside, why = problem
                raise ParamsError(f"--set {setting}: {name}.parameters.{key}{inside}: {why}")
            updated[name][key] = value
    notebooks = tuple(replace(nb, parameters=updated[nb.name]) for nb in plan.notebooks)
    return replace(plan, notebooks=notebooks, settings=tuple(settings))


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


def covers(value: Any, full: Any) -> bool:
    """Whether `value` does at least what the full plan's `full` does: a number at least as large, a list
    holding (something covering) each of its items, a mapping covering each of its keys, else the same."""
    if isinstance(value, bool) or isinstance(full, bool):
        return isinstance(value, bool) and isinstance(full, bool) and value == full
    if isinstance(value, (int, float)) and isinstance(full, (int, float)):
        return value >= full
    if isinstance(value, (list, tuple)) and isinstance(full, (list, tuple)):
        return all(any(covers(v, f) for v in value) for f in full)
    if isinstance(value, dict) and isinstance(full, dict):
        return all(k in value and covers(value[k], f) for k, f in full.items())
    return value == full


def appendix_problem(plan: SuitePlan, full_plan: Path = FULL_PLAN) -> str | None:
    """Why a plan that says `appendix: true` is not the appendix (None when it is): the appendix is a run of
    the full plan's notebooks, in its order, each at least at the full plan's values (geometry, sweeps)."""
    full = load_plan(full_plan)
    names = [nb.name for nb in plan.notebooks]
    wanted = [nb.name for nb in full.notebooks if not plan.partial or nb.name in names]
    if names != wanted:
        return (
            f"only a run of the full plan ({full_plan.name}: {', '.join(nb.name for nb in full.notebooks)}) is the "
            f"appendix; this plan runs {', '.join(names)}"
        )
    for nb, ref in zip(plan.notebooks, (nb for nb in full.notebooks if nb.name in names)):
        defaults = declared_parameters(nb.path)
        for key, value in ref.parameters.items():
            mine = nb.parameters.get(key, defaults.get(key))
            if not covers(mine, value):
                return (
                    f"only a run of the full plan ({full_plan.name}) is the appendix, and {nb.name}.{key} = "
                    f"{mine!r} does less than its {value!r}"
                )
    return None


def validate(plan: SuitePlan) -> None:
    """Check every value of the plan against its notebook's `parameters` cell and the constraints of
    `schema`, and an `appendix: true` against the full plan; raise on the first problem, naming it."""
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
            problem = schema.problem(nb.name, key, value, declared[key])
            if problem:
                inside, why = problem
                raise _fail(plan.source, where + inside, why)
    if plan.appendix:
        refused = appendix_problem(plan)
        if refused:
            raise _fail(
                plan.source, "appendix", f"true, but {refused}; remove `appendix: true` (it publishes to outputs/smoke)"
            )
