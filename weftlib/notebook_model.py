"""What a notebook takes and what it records, each declared once, as typed fields of its package's model.

Each question package declares its notebook's `NotebookModel`: a `Parameters` class whose fields are the names
of the notebook's `parameters` cell, each with what a plan may give it (`parameter_kinds`), and a `Record` class
whose fields are the keys the notebook records, each with its JSON kind, label and unit. The suite builds its
parameter checks from the first (`suite.schema`), the `Recorder` refuses a record the second does not declare,
and the readers (the verdict and answer tables, the tests) read a field (`Metric.of`) instead of spelling a key:
a misspelled key fails in mypy, a notebook and its model apart fail a unit test (tests/test_notebook_models.py
reads each notebook's cells), neither waits for a papermill run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
NONFINITE = ("inf", "-inf", "nan")  # how `metrics.json` holds a float that is not finite (`record.jsonable`)
_KIND_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}


class Metric(Generic[T]):
    """One key a notebook records: the JSON kind of its value (bool, int, float, str, list or dict: a table of
    rows is a list, a dataclass a dict), how a person reads it (`label`; `unit`: "B", "s", "x", ... as
    `formatting.format_value` prints it) and whether it may be null. Its key is the field's name."""

    def __init__(self, kind: type[T], label: str = "", unit: str | None = None, *, nullable: bool = False) -> None:
        if kind not in _KIND_NAMES:
            raise TypeError(f"a metric's kind is one of {', '.join(k.__name__ for k in _KIND_NAMES)}, not {kind!r}")
        self.kind, self.label, self.unit, self.nullable = kind, label, unit, nullable
        self.key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __repr__(self) -> str:
        return f"Metric({self.kind.__name__}, key={self.key!r})"

    def of(self, metrics: Mapping[str, Any]) -> T | None:
        """This key's value in a notebook's recorded metrics; None when it is absent or not of its kind."""
        value = metrics.get(self.key)
        return value if value is not None and self.problem(value) is None else None

    def problem(self, value: Any) -> str | None:
        """Why a recorded (JSON) value cannot stand under this key; None when it can."""
        if value is None:
            return None if self.nullable else f"is null, but {self.key!r} is {_KIND_NAMES[self.kind]}"
        if self.kind is float:
            fits = (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in NONFINITE
        elif self.kind is int:
            fits = isinstance(value, int) and not isinstance(value, bool)
        else:
            fits = isinstance(value, self.kind)
        return (
            None if fits else f"is {type(value).__name__} {_short(value)}, but {self.key!r} is {_KIND_NAMES[self.kind]}"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class RecordModel:
    """The keys one notebook records, as `Metric` fields (subclass it). Every notebook may record its claims
    (`Recorder.claims`) and its conclusion (`Recorder.conclude`)."""

    claims = Metric(list, "claims about time or memory, as judged")
    conclusion = Metric(dict, "the notebook's answer, what it rests on, its status")

    @classmethod
    def metrics(cls) -> dict[str, Metric[Any]]:
        """{key: metric} of every field, the inherited ones first."""
        found: dict[str, Metric[Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Metric)})
        return found


class Parameter:
    """One name of a notebook's `parameters` cell and what a plan may give it: a type or constraint
    (`parameter_kinds`), or None for the type of the cell's default. The default stays in the cell."""

    def __init__(self, kind: Any = None) -> None:
        self.kind = kind
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class ParameterModel:
    """The names of one notebook's `parameters` cell, as `Parameter` fields (subclass it); `run_dir`, which
    the runner sets, is left out."""

    @classmethod
    def parameters(cls) -> dict[str, Parameter]:
        found: dict[str, Parameter] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Parameter)})
        return found


@dataclass(frozen=True)
class NotebookModel:
    """One notebook's model: its name, what it takes, what it records; `where` the module declaring it (named
    in errors, so a reader knows where to add a key)."""

    notebook: str
    parameters: type[ParameterModel]
    record: type[RecordModel]
    where: str
