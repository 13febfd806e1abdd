"""Values as a person reads them: numbers rounded to significant digits with their unit, durations to the
second, a commit as pages quote it, a place in a YAML file as its reader names it.

A basics module: the suite's recorder, the run index and the question packages' tables and sentences all
spell values the same way through it.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from typing import Any

ABSENT = "—"  # what a page shows for a value that is not there (None, NaN, pandas' NA): never "None" or "nan"
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
# "ValueError: ...", "torch._dynamo.exc.Unsupported: ..." at the start of a message: the class, not the sentence
_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Warning)|Unsupported)\s*:\s*")
_OP_OVERLOAD = re.compile(r"<OpOverload\(op='([^']+)'[^>]*>")  # torch's repr of an aten op: its name is the sentence
_BYTE_STEPS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _number(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, without exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if 1e-3 <= abs(x) < 1e6:
        text = f"{x:.{digits}g}"
        rounded = float(text)
        return f"{int(rounded):,}" if rounded.is_integer() and abs(rounded) >= 1000 else text
    mantissa, exponent = f"{x:.{max(digits - 1, 0)}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa  # 1 × 10⁻⁶, not 1.00 × 10⁻⁶
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def absent(value: Any) -> bool:
    """Whether `value` stands for nothing: None, a float NaN, or pandas' NA and NaT (read without pandas)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def error_sentence(text: str) -> str:
    """An error message as a page says it: its first line, without the exception's class name in front, torch's
    `<OpOverload(op='aten.x', ...)>` as `aten.x`, and its first sentence when the message runs on."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    line = _OP_OVERLOAD.sub(r"\1", _EXCEPTION.sub("", line))
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", line, maxsplit=1)[0]
    return first[:1].upper() + first[1:] if first else line


def format_value(value: Any, unit: str | None = None, digits: int = 3) -> str:  # noqa: PLR0911, PLR0912 - one branch per kind of value and unit
    """A recorded value as a person reads it: rounded, with its unit, lists and mappings spelled out; an absent
    value (None, NaN) as `ABSENT`, an error message as `error_sentence`.

    Units: "B" bytes (shown in KiB/MiB/GiB), "s" seconds (ms below one second, `format_duration` from a minute),
    "x" a ratio ("2.4×"), "%" a percentage; any other unit is appended as given.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # a numpy scalar, as the Python number it holds
    if absent(value):
        return ABSENT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):
        value = float(value) if not isinstance(value, int) else value
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
        value = error_sentence(value) if _EXCEPTION.match(value) else value
        return f"{value} {unit}" if unit else value
    if isinstance(value, dict):
        if not value:
            return "none"
        return "; ".join(
            f"{k}: {len(v)} entries (in full in its table)" if _nested(v) else f"{k}: {format_value(v, unit, digits)}"
            for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        return ", ".join(format_value(v, unit, digits) for v in value)
    return str(value)


def _nested(value: Any) -> bool:
    """A mapping or list of mappings inside a mapping: a table of its own, which one line cannot spell."""
    if isinstance(value, dict):
        return any(isinstance(v, (dict, list, tuple)) for v in value.values())
    return isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value)


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
