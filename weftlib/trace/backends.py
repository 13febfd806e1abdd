"""Backend verdicts: ask each backend whether it can run here and keep its refusal as the finding."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """Whether one check passed, what it returned, and the reason it gave when it refused."""

    name: str
    ok: bool
    value: str
    reason: str


def verdicts(checks: Mapping[str, Callable[[], Any]]) -> list[Verdict]:
    """Run each zero-argument check; a raised exception is its reason (checks that log instead of raising
    should be called in their raising mode, e.g. natten's `can_run_*(..., raise_error=True)`)."""
    results = []
    for name, check in checks.items():
        if not callable(check):
            raise TypeError(f"checks[{name!r}]: expected a zero-argument callable, got {type(check).__name__}")
        try:
            value = check()
        except Exception as exc:  # the refusal is the finding
            results.append(Verdict(name, False, "", f"{type(exc).__name__}: {exc}"))
            continue
        results.append(Verdict(name, bool(value), repr(value), ""))
    return results
