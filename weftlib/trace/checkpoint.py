"""Does a checkpoint still load when a config flag changes the model's shapes?

Turning an optional-looking component off (e.g. `use_naf_upsample=False`) is only an option if the published
weights still fit the model it builds. This module builds the model for each flag value, lists every key whose
shape differs from the checkpoint, and keeps the exact error a strict `load_state_dict` raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mismatch:
    """A parameter or buffer the model and the checkpoint both have, with different shapes."""

    key: str
    expected: tuple[int, ...]
    checkpoint: tuple[int, ...]


@dataclass(frozen=True)
class FlagResult:
    """How the checkpoint fits the model built with `flag=value`."""

    flag: str
    value: Any
    mismatches: tuple[Mismatch, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    strict_error: str

    @property
    def loads(self) -> bool:
        return not self.strict_error


def shape_mismatches(model_state: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> list[Mismatch]:
    """Keys present in both state dicts whose tensor shapes differ, in the model's key order."""
    return [
        Mismatch(key, tuple(value.shape), tuple(checkpoint[key].shape))
        for key, value in model_state.items()
        if key in checkpoint and tuple(value.shape) != tuple(checkpoint[key].shape)
    ]


def _check_args(factory: Any, flag: str, state_dict: Any, values: tuple[Any, ...]) -> None:
    if not callable(factory):
        raise TypeError(f"factory: expected a callable that builds the model, got {type(factory).__name__}")
    if not isinstance(flag, str) or not flag.isidentifier():
        raise ValueError(f"flag: {flag!r} is not a keyword argument name of the factory")
    if not isinstance(state_dict, Mapping) or not all(hasattr(v, "shape") for v in state_dict.values()):
        raise TypeError("state_dict: expected a mapping of names to tensors (a model's state_dict)")
    if not values:
        raise ValueError("values: give at least one flag value to try")


def _try_flag(factory: Callable[..., Any], flag: str, value: Any, state_dict: Mapping[str, Any]) -> FlagResult:
    model = factory(**{flag: value})
    own = model.state_dict()
    error = ""
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:  # the message names every offending key: it is the evidence
        error = str(exc)
    return FlagResult(
        flag=flag,
        value=value,
        mismatches=tuple(shape_mismatches(own, state_dict)),
        missing=tuple(k for k in own if k not in state_dict),
        unexpected=tuple(k for k in state_dict if k not in own),
        strict_error=error,
    )


def checkpoint_compatibility(
    factory: Callable[..., Any], flag: str, state_dict: Mapping[str, Any], values: Iterable[Any] = (True, False)
) -> list[FlagResult]:
    """For each value, build `factory(**{flag: value})` and report how `state_dict` fits it.

    The model is loaded strictly into a fresh instance per value, so one attempt cannot affect the next.
    """
    values = tuple(values)
    _check_args(factory, flag, state_dict, values)
    return [_try_flag(factory, flag, value, state_dict) for value in values]


def mismatch_records(results: Iterable[FlagResult]) -> list[dict[str, Any]]:
    """One row per mismatched key across flag values, for a table or metrics.json."""
    return [
        {"flag": f"{r.flag}={r.value}", "key": m.key, "expected": list(m.expected), "checkpoint": list(m.checkpoint)}
        for r in results
        for m in r.mismatches
    ]
