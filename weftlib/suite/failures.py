"""What a failed or interrupted notebook's error record says: the cell (papermill's In [N]), the error, and
the notebook line that raised, read from IPython's traceback, so the index and the console name the line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


_ARROW = re.compile(r"^\s*-+>\s*\d*\s?")  # IPython pads the arrow to the line number: ----> 3, ---> 12, --> 123


def failing_line(traceback: list[str] | str | None) -> str:
    """The notebook line that raised, read from IPython's traceback (the arrow, `---->` or shorter before a
    longer line number, in the last frame that is a notebook cell, `Cell In[N]`); "" when it has none."""
    if not traceback:
        return ""
    text = _ANSI.sub("", "\n".join(traceback) if isinstance(traceback, list) else traceback)
    line = ""
    in_cell = False
    for raw in text.splitlines():
        if raw.startswith("Cell In["):
            in_cell = True
        elif raw.startswith("File ") or raw.startswith("  File "):
            in_cell = False
        elif in_cell and _ARROW.match(raw):
            line = _ARROW.sub("", raw, count=1).rstrip()
    return line


def error_of(exc: BaseException) -> dict[str, Any]:
    """The cell (index and papermill's In [N]), the error and the failing line of a failure."""
    cell = getattr(exc, "cell_index", None)
    source = (getattr(exc, "source", "") or "").strip().splitlines()
    return {
        "cell": cell if cell is None else int(cell),
        "exec_count": getattr(exc, "exec_count", None),
        "ename": getattr(exc, "ename", type(exc).__name__),
        "evalue": str(getattr(exc, "evalue", exc)).strip()[:2000],
        "first_line": source[0] if source else "",
        "line": failing_line(getattr(exc, "traceback", None)),
    }


def running_cell(executed: Path) -> int | None:
    """Index of the cell a kernel died in (e.g. out of memory): the last one the kernel had started."""
    import nbformat

    cells = nbformat.read(executed, as_version=4).cells
    started = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "code" and c.get("metadata", {}).get("papermill", {}).get("start_time")
    ]
    return started[-1] if started else None


def interruption(exc: BaseException) -> dict[str, Any]:
    """The error record of an interrupted notebook: no cell is to blame."""
    return {
        "cell": None,
        "exec_count": None,
        "ename": type(exc).__name__,
        "evalue": str(exc) or "Ctrl-C",
        "first_line": "",
        "line": "",
    }
