"""What each notebook's parameters may hold: the type of its `parameters` cell's default, narrowed by what its
model declares (`notebook_model.Parameter`, with the kinds of `parameter_kinds`; `models` says where each lives).

A value that passes here cannot fail late, or pass vacuously, for a reason the plan could have shown (see
`parameter_kinds`). Values are checked strictly (pydantic, strict mode): no string stands for a number, no bool for
an int; an int may stand for a float. Parameters that name a directory of code the notebook executes (`hub_dir`,
`host_root`) are `OutsideCode`, so the run can say which outside code it ran.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, TypeAdapter, ValidationError

from ..parameter_kinds import Directory, OneOf, OutsideCode, resolve
from .models import model_of

__all__ = ["constraints", "outside_code", "problem", "repository", "resolve"]


def constraints(notebook: str) -> dict[str, Any]:
    """{parameter: what it may hold} as the notebook's model declares it (None: the type of the cell's default);
    empty for a notebook the suite has no model of."""
    model = model_of(notebook)
    return {} if model is None else {k: p.kind for k, p in model.parameters.parameters().items()}


def outside_code(notebook: str) -> dict[str, str]:
    """{parameter: what it names} for the parameters of `notebook` that point at code the notebook runs."""
    return {k: v.what for k, v in constraints(notebook).items() if isinstance(v, OutsideCode)}


def repository(notebook: str, key: str) -> str:
    """The repository an outside-code parameter names a checkout of ("valeoai/NAF", "Pixal3D")."""
    entry = constraints(notebook).get(key)
    if not isinstance(entry, OutsideCode):
        raise KeyError(f"{notebook}.{key} names no outside code")
    return entry.repository


def _inferred(default: Any) -> Any:
    """The type a value must have to stand in for `default` (None: anything)."""
    if default is None:
        return Any
    if isinstance(default, (list, tuple)):
        kinds = {type(item) for item in default}
        if len(kinds) == 1 and not isinstance(default[0], (list, tuple, dict)) and default[0] is not None:
            return list[_inferred(default[0])]  # type: ignore[misc]  # built at run time for pydantic
        return list[Any]
    if isinstance(default, dict):
        return dict[str, Any]
    return type(default)


def _declared(entry: Any) -> Any:
    if isinstance(entry, OutsideCode):
        return Annotated[Directory, AfterValidator(entry.check)]  # a directory, then a checkout of its repository
    if isinstance(entry, OneOf):
        choice = Literal[entry.choices()]  # type: ignore[valid-type]
        return list[choice] if entry.many else choice  # type: ignore[valid-type]
    return entry


def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind, config=ConfigDict(strict=True))


def problem(notebook: str, key: str, value: Any, default: Any) -> tuple[str, str] | None:
    """(where inside the value, e.g. "[1]", and why) when `value` may not be given for `key`; None if it may."""
    entry = constraints(notebook).get(key)
    kind = _inferred(default) if entry is None else _declared(entry)
    if kind is Any:
        return None
    try:
        _adapter(kind).validate_python(value)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        got = err["input"]
        return (
            where,
            f"{message[:1].lower()}{message[1:]}, got {type(got).__name__} {got!r} (the default is {default!r})",
        )
    return None
