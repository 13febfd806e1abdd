"""The layout of a notebook's `metrics.json`, written and read in one place.

`weftlib.suite.record.Recorder` writes it beside a notebook's artefacts, and the suite reads it back; so does
the gate (05 and 06 check that the graph notebooks finished, and cite what their graphs rest on), which sits
below the suite and may not import it. Both go through this module, so the file's keys are spelled once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict

FILE = "metrics.json"


class Recorded(TypedDict):
    """What one notebook recorded: its name, the keys of its headline figures, every value it asserted, and how
    some of them are shown (labels, digits)."""

    notebook: str
    headline: list[str]
    metrics: dict[str, Any]
    display: NotRequired[dict[str, Any]]


def path(folder: str | os.PathLike) -> Path:
    """Where a notebook's record lies in its artefact folder."""
    return Path(folder) / FILE


def dumps(notebook: str, headline: list[str], metrics: dict[str, Any], display: dict[str, Any]) -> str:
    """The file's text (the display hints only when there are some)."""
    payload: dict[str, Any] = {"notebook": notebook, "headline": headline, "metrics": metrics}
    if display:
        payload["display"] = display
    return json.dumps(payload, indent=2, sort_keys=False)


def read(folder: str | os.PathLike, notebook: str) -> Recorded:
    """The record in `folder`; an empty one (no headline, no metrics) when the notebook wrote none."""
    file = path(folder)
    if not file.exists():
        return {"notebook": notebook, "headline": [], "metrics": {}}
    recorded: Recorded = json.loads(file.read_text())
    return recorded


def conclusion(recorded: Recorded) -> dict[str, Any] | None:
    """The notebook's conclusion (`Recorder.conclude`), recorded last: None while it has not concluded (it
    stopped part-way, or is still running)."""
    return recorded.get("metrics", {}).get("conclusion")
