"""The shape of `params/device_ops.yaml`, as pydantic models: every key, its type and what it may hold.

A typo in the file must stop the gate (a misspelled op silently widens or narrows it), so no model takes a
key it does not name (`extra="forbid"`), integers and booleans are strict (no `"10"` for 10, no `"yes"` for
true), and each outcome, stage or kind of observation is one of its listed words. `check` returns the file
as these models, or one `(place, problem)` pair per thing wrong, the place spelled as in the file
(`device_ops.Gather.evidence[0].seen`). What needs the whole file (a cited case that exists, an op in one
listing only) is checked by `weftlib.gate.record.allowlist`, which builds the records from these models.

pydantic is imported only here, and `weftlib.gate.record.allowlist` imports this module only when it reads a file:
the DFC image, which runs the gate's parse command, carries neither.
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from ...formatting import place
from ..vocabulary import Outcome, Seen, Stage


def _problem(text: str) -> PydanticCustomError:
    """An error whose message is `text` as it is (its braces are not a template)."""
    return PydanticCustomError("allowlist", "{problem}", {"problem": text})


def _text(value: object) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool) or str(value) == "":
        raise _problem(f"expected a non-empty string, got {value!r}")
    return str(value)


def _op_name(value: object) -> str:
    if not isinstance(value, str) or not value[:1].isalpha():
        raise _problem(f"an op name must be an ONNX op type, got {value!r}")
    return value


def _item_seen(value: object) -> object:
    """An item's `seen` is a word of `Seen` but `assumed`, which only a whole entry says (`evidence: assumed`)."""
    words = [word for word in Seen if word != Seen.ASSUMED]
    if not isinstance(value, str) or value not in words:
        valid = [repr(str(word)) for word in words]
        raise _problem(f"{value!r}; valid: {', '.join(valid[:-1])} or {valid[-1]}")
    return value


def _evidence(value: object) -> object:
    """`assumed` (nothing was seen) reads as None; a list stays a list for the items' model."""
    if value == Seen.ASSUMED:
        return None
    if value is None:
        raise _problem("expected a list of evidence items or `assumed`, got None")
    return value


Text = Annotated[str, BeforeValidator(_text)]  # a non-empty string; a number is read as its text
Note = Annotated[str, BeforeValidator(str)]  # free text, whatever YAML made of it
Name = Annotated[str, BeforeValidator(str)]  # a case's or a rule's name
OpName = Annotated[str, BeforeValidator(_op_name)]
ItemSeen = Annotated[Seen, BeforeValidator(_item_seen)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvidenceItem(_Record):
    """One observation, or a vendor table's word; a `case` lends it its DFC version, arch and source."""

    seen: ItemSeen
    case: Note = ""
    dfc: Text | None = None
    arch: Text | None = None
    source: Text | None = None
    note: Note = ""
    inferred: StrictBool = False
    retracted: Note = ""

    @model_validator(mode="after")
    def _sourced(self) -> EvidenceItem:
        if not self.case and self.source is None:
            raise _problem("missing key(s) ['source'] (or cite a `case` of public_record)")
        return self


Evidence = Annotated[tuple[EvidenceItem, ...] | None, BeforeValidator(_evidence)]  # None: `assumed`


class OpBody(_Record):
    """An entry of `device_ops` or `known_blockers`."""

    by_pattern: StrictBool = False
    evidence: Evidence
    note: Note = ""
    reason: Note = ""

    @field_validator("evidence")
    @classmethod
    def _some(cls, value: tuple[EvidenceItem, ...] | None, info: ValidationInfo) -> tuple[EvidenceItem, ...] | None:
        if value == () and not info.data.get("by_pattern", False):
            raise _problem("empty; write `evidence: assumed` when nothing was seen")
        return value


class RuleBody(_Record):
    """An entry of `graph_rules`: what the rule covers and its evidence (silence said in `note`)."""

    what: Text
    evidence: Evidence
    note: Note = ""

    @model_validator(mode="after")
    def _said(self) -> RuleBody:
        if self.evidence == () and not self.note:
            raise _problem("no evidence: say in `note` what the record leaves silent")
        return self


class CaseBody(_Record):
    """An entry of `public_record`."""

    graph: Text
    dfc: Text
    arch: Text
    stage: Stage
    outcome: Outcome
    source: Text
    error: Note = ""
    refused_at: tuple[Text, ...] = ()
    note: Note = ""
    rebuilt: StrictBool = True

    @field_validator("refused_at")
    @classmethod
    def _refused(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if value and info.data.get("outcome") == Outcome.PARSED:
            raise _problem("a parsed graph names no refused node")
        return value


class SourceBody(_Record):
    """An entry of `sources`: the source in full, and its origin (the author or organisation behind it).

    Sources of one origin are not independent of each other (one author's logbook and probes), so the
    held-out backtest holds out an origin, not a key, and the record counts its origins."""

    origin: Text
    cite: Text


class Target(_Record):
    dfc: Text
    arch: Text


class Compiler(_Record):
    max_ir_version: StrictInt
    opsets: tuple[StrictInt, StrictInt]

    @field_validator("opsets", mode="before")
    @classmethod
    def _pair(cls, value: object) -> object:
        if isinstance(value, list | tuple) and len(value) != 2:
            raise _problem(f"expected [lowest, highest], got {value!r}")
        return value

    @field_validator("opsets")
    @classmethod
    def _ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        if value[0] > value[1]:
            raise _problem(f"lowest {value[0]} is above highest {value[1]}")
        return value


class CompileFigure(_Record):
    layer: Text
    params: StrictInt
    dfc: Text
    result: Text
    source: Text


class AllowlistFile(_Record):
    """The whole file."""

    target: Target
    compiler: Compiler
    sources: dict[Text, SourceBody] = {}
    compile_record: tuple[CompileFigure, ...] = ()
    public_record: dict[Name, CaseBody] = {}
    device_ops: dict[OpName, OpBody]
    known_blockers: dict[OpName, OpBody]
    graph_rules: dict[Name, RuleBody] = {}


def check(data: object) -> AllowlistFile | list[tuple[str, str]]:
    """The file as models, or each problem as (place, problem), in the file's order."""
    try:
        return AllowlistFile.model_validate(data)
    except ValidationError as exc:
        return _problems(exc.errors())


def _problems(errors: list[ErrorDetails]) -> list[tuple[str, str]]:
    """One problem per place: the unknown (or missing) keys of one mapping are named together."""
    keys: dict[tuple[str, tuple[int | str, ...]], list[str]] = {}
    problems: dict[tuple[str, tuple[int | str, ...]], str] = {}
    for err in errors:
        loc = tuple(part for part in err["loc"] if part != "[key]")
        if err["type"] in ("extra_forbidden", "missing"):
            keys.setdefault((err["type"], loc[:-1]), []).append(str(loc[-1]))
            problems.setdefault((err["type"], loc[:-1]), "")
        else:
            problems.setdefault((err["type"], loc), _say(err))
    for (kind, loc), names in keys.items():
        if kind == "missing":
            problems[kind, loc] = f"missing key(s) {sorted(names)}"
        else:
            problems[kind, loc] = f"unknown key(s) {sorted(names)}; valid keys: {sorted(_fields_at(loc))}"
    return [(place(loc, "file"), problem) for (_, loc), problem in problems.items()]


# pydantic's error types, said in the file's words (pydantic's own message for any other)
_SAID = {
    "literal_error": "{value!r}; valid: {expected}",
    "enum": "{value!r}; valid: {expected}",
    "model_type": "expected a mapping, got {type}",
    "model_attributes_type": "expected a mapping, got {type}",
    "dict_type": "expected a mapping, got {type}",
    "tuple_type": "expected a list, got {type}",
    "list_type": "expected a list, got {type}",
    "bool_type": "expected true or false, got {value!r}",
    "int_type": "expected an integer, got {value!r}",
}


def _say(err: ErrorDetails) -> str:
    said = _SAID.get(err["type"])
    if said is None:
        return err["msg"]
    value = err["input"]
    return said.format(value=value, type=type(value).__name__, expected=err.get("ctx", {}).get("expected"))


def _fields_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at `loc` (of the file) takes."""
    kind: Any = AllowlistFile
    for part in loc:
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            kind = kind.model_fields[str(part)].annotation
        else:  # a mapping's value, or a list's item
            kind = get_args(kind)[-1 if get_origin(kind) is dict else 0]
        while get_origin(kind) in (Annotated, Union, UnionType):
            kind = next(arg for arg in get_args(kind) if arg is not type(None))
    return list(kind.model_fields) if isinstance(kind, type) and issubclass(kind, BaseModel) else []
