"""Values as a person reads them: numbers rounded to significant digits with their unit, durations to the
second, a commit as pages quote it, a place in a YAML file as its reader names it.

A basics module: the suite's recorder, the run index and the question packages' tables and sentences all
spell values the same way through it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_BYTE_STEPS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _number(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, without exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if 1e-3 <= abs(x) < 1e6:
        text = f"{x:.{digits}g}"
        rounded = float(text)
        return f"{int(rounded):,}" if rounded.is_integer() and abs(rounded) >= 1000 else text
    mantissa, exponent = f"{x:.{max(digits - 1, 0)}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def format_value(value: Any, unit: str | None = None, digits: int = 3) -> str:  # noqa: PLR0911, PLR0912 - one branch per kind of value and unit
    """A recorded value as a person reads it: rounded, with its unit, lists and mappings spelled out.

    Units: "B" bytes (shown in KiB/MiB/GiB), "s" seconds (ms below one second, `format_duration` from a minute),
    "x" a ratio ("2.4×"), "%" a percentage; any other unit is appended as given.
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if unit == "B":
            for name, size in _BYTE_STEPS:
                if abs(value) >= size:
                    return f"{_number(value / size, digits)} {name}"
            return f"{_number(value, digits)} B"
        if unit == "s":
            if abs(value) < 1:
                return f"{_number(value * 1000, digits)} ms"
            if value >= 60:
                return format_duration(value)
            return f"{_number(value, digits)} s"
        if unit == "x":
            return f"{_number(value, digits)}×"
        if unit == "%":
            return f"{_number(value, digits)} %"
        text = _number(value, digits)
        return f"{text} {unit}" if unit else text
    if isinstance(value, str):
        return f"{value} {unit}" if unit else value
    if isinstance(value, dict):
        if not value:
            return "none"
        return "; ".join(f"{k}: {format_value(v, unit, digits)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        return ", ".join(format_value(v, unit, digits) for v in value)
    return str(value)


def format_duration(seconds: float) -> str:
    """A duration as people write one, to the second: `42 s`, `1 min 50 s`, `17 min`, `2 h 05 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


NO_COMMIT = "not a git checkout"  # what the suite says of a commit when the code ran outside git


def commit_text(commit: str | None, dirty: bool | None, digits: int | None = 12) -> str:
    """A git commit as pages quote it: its first `digits` digits (all with None) and "(dirty tree)" when the
    checkout had uncommitted changes, or `NO_COMMIT` outside a git checkout."""
    if not commit:
        return NO_COMMIT
    return commit[:digits] + (" (dirty tree)" if dirty else "")


def place(loc: Sequence[int | str], whole: str) -> str:
    """Where in a YAML file a value stands, as its reader names it: `notebooks[2].parameters`,
    `device_ops.Gather.evidence[0].seen`, or `whole` for the file itself (a location as pydantic gives it)."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).removeprefix(".")
    return text or whole


MAX_ANSWER_WORDS = 40  # an answer read at a glance: one sentence, its figures left to the notebook (issue 36)


def word_count(text: str) -> int:
    """Words as a reader counts them: runs of non-space characters (`5 × 10⁻⁷` is three)."""
    return len(text.split())
