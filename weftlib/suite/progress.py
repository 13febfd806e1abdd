"""Progress lines and the estimate of the time left, from the durations papermill records per cell.

One line per notebook and one per long step (a cell that took `LONG_STEP_S` or more, now or in the last run
of the same plan), each with the time left as the last run's durations put it. The durations come from the
executed notebooks' metadata (`cell_durations`) and travel to the next run in its summary (`last_durations`).
A cell still running after `HEARTBEAT_S` says so every `HEARTBEAT_S`, a first run included, and the progress
bars a notebook draws (`console.progress`, on the kernel's stderr) are relayed to the same log (`BarRelay`), each
with tqdm's own estimate of the time left in its loop.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..formatting import format_duration as _duration
from .runfolder import NotebookResult, RunSummary

if TYPE_CHECKING:
    from .params import SuitePlan

LONG_STEP_S = 10.0  # a cell that takes longer than this (now or in the last run) gets its own progress line
HEARTBEAT_S = 60.0  # a cell running longer than this says so, again every this many seconds
_BAR = re.compile(r"\d+%\||\|\s*\d+/\d+\s*\[")  # a tqdm bar: "42%|" or "| 3/7 ["


def cell_durations(executed: Path) -> dict[str, dict[str, Any]]:
    """{cell index: {seconds, exec_count, line}} from the per-cell durations papermill stores in an executed
    notebook's metadata (the source of the ETA of the next run)."""
    import nbformat

    out = {}
    for i, cell in enumerate(nbformat.read(executed, as_version=4).cells):
        meta = cell.get("metadata", {}).get("papermill", {})
        if cell.cell_type == "code" and meta.get("duration") is not None:
            out[str(i)] = {
                "seconds": round(float(meta["duration"]), 2),
                "exec_count": cell.get("execution_count"),
                "line": _code_line(cell)[:100],
            }
    return out


def long_steps(cells: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells of `cell_durations` that took `LONG_STEP_S` or more, each with its index as `cell`."""
    return [{"cell": int(k), **v} for k, v in cells.items() if v["seconds"] >= LONG_STEP_S]


def last_durations(last: tuple[Path, RunSummary] | None) -> dict[str, Any]:
    """Per-notebook and per-cell seconds from the `last` run of the same plan (`runfolder.newest_run`: its folder
    and summary): {"from": run folder, "notebooks": {name: {"seconds", "cells"}}}; empty if none."""
    if last is None:
        return {}
    where, summary = last
    notebooks = {
        nb.name: {"seconds": nb.seconds, "cells": nb.cell_seconds} for nb in summary.notebooks if nb.status == "passed"
    }
    return {"from": str(where), "notebooks": notebooks}


class Progress:
    """Prints one line per notebook and per long step, with the time left estimated from the last run."""

    def __init__(self, plan: SuitePlan, history: dict[str, Any], log: Callable[[str], None]) -> None:
        self.plan = plan
        self.history = history.get("notebooks", {})
        self.log = log
        self.index = 0
        self.name = ""
        self.cell_start = 0.0
        self.nb_start = 0.0
        self.done_cells: set[str] = set()
        self.clock: Callable[[], float] = time.perf_counter
        self.cell: tuple[int | None, str, float | None] | None = None  # the running cell: index, line, last time
        self._stop = threading.Event()
        self._beats: threading.Thread | None = None
        self.relay = BarRelay(self)

    def _left_after(self, index: int) -> float | None:
        """Seconds the notebooks after position `index` took last time (None if any is unknown)."""
        rest = [self.history.get(nb.name, {}).get("seconds") for nb in self.plan.notebooks[index:]]
        return None if any(s is None for s in rest) else float(sum(rest))

    def _left_in_notebook(self) -> float | None:
        cells = self.history.get(self.name, {}).get("cells")
        if not cells:
            return None
        return float(sum(c["seconds"] for k, c in cells.items() if k not in self.done_cells))

    def _eta(self) -> str:
        here, after = self._left_in_notebook(), self._left_after(self.index)
        if here is None or after is None:
            return ""
        return f"; about {_duration(here + after)} left in the run (from the last run's durations)"

    def notebook_start(self, index: int, name: str) -> None:
        self.index, self.name, self.done_cells = index, name, set()
        self.nb_start = time.perf_counter()
        last = self.history.get(name, {}).get("seconds")
        total = self._left_after(index - 1)
        hint = (
            (f" (last run {_duration(last)}" + (f"; about {_duration(total)} left in the run" if total else "") + ")")
            if last is not None
            else " (no earlier run of this plan to estimate from)"
        )
        self.log(f"[{index}/{len(self.plan.notebooks)}] {name}: running{hint}")

    def notebook_end(self, result: NotebookResult) -> None:
        after = self._left_after(self.index)
        eta = f"; about {_duration(after)} left in the run" if after and self.index < len(self.plan.notebooks) else ""
        self.log(
            f"[{self.index}/{len(self.plan.notebooks)}] {result.name}: {result.status} "
            f"in {_duration(result.seconds)}{eta}"
        )

    def cell_started(self, index: int | None, cell: Any) -> None:
        self.cell_start = self.clock()
        entry = self.history.get(self.name, {}).get("cells", {}).get(str(index), {})
        line = _code_line(cell)[:100]
        if entry.get("line", line) != line:
            entry = {}  # the notebook changed since that run: this index is another cell now
        last = entry.get("seconds")
        self.cell = (index, _first_line(cell), last)
        if last is not None and last >= LONG_STEP_S:
            self.log(
                f"      {self.name} cell {index} ({_first_line(cell)}): running, took "
                f"{_duration(last)} last time{self._eta()}"
            )
        self._start_beats()

    def cell_finished(self, index: int | None, cell: Any) -> None:
        self._stop_beats()
        self.cell = None
        self.done_cells.add(str(index))
        took = self.clock() - self.cell_start
        if took >= LONG_STEP_S:
            self.log(f"      {self.name} cell {index} ({_first_line(cell)}): done in {_duration(took)}{self._eta()}")

    def beat(self) -> None:
        """The running cell's line: how long it has run, and what the last run says is left (on a first run,
        that there is no estimate but its progress bars')."""
        if self.cell is None:
            return
        index, line, last = self.cell
        ran = self.clock() - self.cell_start
        if last is not None:
            left = f"took {_duration(last)} last time{self._eta()}"
        else:
            left = "no earlier run of this cell to estimate from; its progress bars, if any, say how far it is"
        self.log(f"      {self.name} cell {index} ({line}): still running after {_duration(ran)}; {left}")

    def bar(self, text: str) -> None:
        """A progress bar the running cell drew, as one log line."""
        index = self.cell[0] if self.cell else "?"
        self.log(f"      {self.name} cell {index}: {text}")

    def _start_beats(self) -> None:
        self._stop_beats()
        self._stop = threading.Event()
        self._beats = threading.Thread(target=self._beat_every, args=(self._stop,), daemon=True, name="weft-beats")
        self._beats.start()

    def _beat_every(self, stop: threading.Event) -> None:
        while not stop.wait(HEARTBEAT_S):
            self.beat()

    def _stop_beats(self) -> None:
        self._stop.set()
        if self._beats is not None:
            self._beats.join()
            self._beats = None


class BarRelay:
    """A file-like object papermill writes the kernel's stderr to (`stderr_file`): each tqdm bar in it (the
    text after the last carriage return of a line) goes to the run's log once per count it reaches (a bar
    redrawn at the same count, as on closing, is not said again); anything else is left to the notebook,
    which keeps it."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.last = ""

    def write(self, text: str) -> int:
        for chunk in re.split(r"[\r\n]+", text):
            shown = chunk.strip()
            count = shown.split("[", 1)[0]  # the bar's name, share and count, before its times
            if shown and count != self.last and _BAR.search(shown):
                self.last = count
                self.progress.bar(shown)
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered: each bar is logged as it arrives."""


def _code_line(cell: Any) -> str:
    """A cell's first line of code (comments and blank lines skipped): how durations name their cell."""
    return next((ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#")), "")


_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _first_line(cell: Any) -> str:
    """A cell's first line of code for a progress line, at most about 60 characters, its brackets closed (a
    line that opens a call, `rows = f(`, reads `rows = f(…)`), so the line's own parenthesis stays balanced."""
    line = re.sub(r"\s+#.*$", "", _code_line(cell)).rstrip()  # its code, not its comment
    cut = len(line) > 60
    line = line[:57].rstrip() if cut else line
    opened: list[str] = []
    for char in line:
        if char in _CLOSING:
            opened.append(_CLOSING[char])
        elif opened and char == opened[-1]:
            opened.pop()
    return line + ("…" if cut or opened else "") + "".join(reversed(opened))


def watched_engine(progress: Progress | None) -> str:
    """Register (once) a papermill engine that tells `progress` when each cell starts and ends."""
    from papermill import engines

    class WatchedEngine(engines.NBClientEngine):
        watcher: Progress | None = None

        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
            watcher = cls.watcher
            if watcher is not None:
                start, complete = nb_man.cell_start, nb_man.cell_complete

                def cell_start(cell: Any, cell_index: int | None = None, **kw: Any) -> None:
                    start(cell, cell_index, **kw)
                    watcher.cell_started(cell_index, cell)

                def cell_complete(cell: Any, cell_index: int | None = None, **kw: Any) -> None:
                    complete(cell, cell_index, **kw)
                    watcher.cell_finished(cell_index, cell)

                nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    WatchedEngine.watcher = progress
    engines.papermill_engines.register("weft", WatchedEngine)
    return "weft"
