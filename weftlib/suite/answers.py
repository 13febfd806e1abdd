"""The answer table: one row per RFD question, taken from the notebook's own `Recorder.conclude` record (never
re-typed here), saying what the answer rests on and whether it stands. The index and the RFD page open with it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..notebook_model import RecordModel
from .models import OVERVIEW_ROLE, OverviewRecord
from .record import answer_status, load_metrics
from .runfolder import NotebookResult

NO_CONCLUSION = "unanswered: recorded no conclusion"


def question_of(notebook: Path) -> tuple[str, str]:
    """(question, what was done) from a notebook's title cell: the title without its number, and the first
    paragraph after it, as the notebook itself words them."""
    import nbformat

    if not notebook.is_file():
        return "", ""
    cells = nbformat.read(notebook, as_version=4).cells
    first = next((c for c in cells if c.cell_type == "markdown"), None)
    if first is None:
        return "", ""
    lines = first.source.strip().splitlines()
    title = re.sub(r"^#+\s*(\d+\s*[·:.-]\s*)?", "", lines[0]).strip() if lines else ""
    paragraphs = [p.strip() for p in "\n".join(lines[1:]).split("\n\n") if p.strip()]
    prose = next((p for p in paragraphs if not p.lstrip().startswith(("|", "#", "```", "-", "1."))), "")
    return title, " ".join(prose.split())


def _rests_on_text(rests_on: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in rests_on.items()) or "not stated"


def answer_rows(run_dir: Path, results: list[NotebookResult], run_note: str | None = None) -> list[dict[str, Any]]:
    """One row per notebook the plan ran that answers an RFD question (the overview, which records
    `role = overview`, has none): question, answer (the notebook's short answer when it gave one, its full
    sentence then under `details`), what it rests on, status. A notebook that failed, was
    interrupted or recorded no `conclude` record is unanswered, and says why. `run_note` (e.g. "small plan,
    not the appendix") is added to what every row rests on."""
    rows = []
    failed_before: list[str] = []
    for nb in results:
        recorded = load_metrics(run_dir, nb.name)
        metrics = recorded.get("metrics", {})
        if OverviewRecord.role.of(metrics) == OVERVIEW_ROLE:
            continue
        question, _ = question_of(run_dir / f"{nb.name}.ipynb")
        conclusion = RecordModel.conclusion.of(metrics)
        if conclusion and conclusion.get("answer"):
            short = conclusion.get("short") or ""
            answer, details = (short, conclusion["answer"]) if short else (conclusion["answer"], "")
            rests_on = dict(conclusion.get("rests_on") or {})
            unmet = list(conclusion.get("unmet") or [])
            status = answer_status({"rests_on": rests_on, "unmet": unmet})
        else:
            answer, details, rests_on, unmet, status = "", "", {}, [], NO_CONCLUSION
        if run_note:
            rests_on["run"] = run_note
        head = "unanswered: " + "; ".join(u.split(":")[0] for u in unmet) if unmet else status
        if nb.status == "failed":
            status = f"unanswered: the notebook failed ({nb.describe_error().splitlines()[0]})"
            head = "unanswered: the notebook failed"
        elif nb.status in ("not run", "interrupted"):
            status = head = f"unanswered: {nb.status}"
        if failed_before and nb.status == "passed":
            status += f" (ran after {', '.join(failed_before)} failed: it may rest on partial outputs)"
            head += " (after a failure)"
        if nb.status != "passed":
            failed_before.append(nb.name)
        kind = "answered" if status == "answered" else "stand-in" if status.startswith("answered on") else "unanswered"
        rows.append(
            {
                "notebook": nb.name,
                "question": question,
                "answer": answer,
                "details": details,
                "rests_on": rests_on,
                "rests_on_text": _rests_on_text(rests_on),
                "unmet": unmet,
                "status": status,
                "status_head": head,  # the status in a few words, for the index's cell (in full beneath it)
                "kind": kind,
            }
        )
    return rows


def scope_line(plan_appendix: bool, params_file: str) -> str:
    """Whether this run is the full-size appendix, in words a reader cannot miss."""
    if plan_appendix:
        return f"Full-size appendix run ({Path(params_file).name})."
    return (
        f"Small run ({Path(params_file).name}): NOT the full-size appendix. Each row's geometry says what it "
        "ran at; `make appendix` runs params/appendix.yaml."
    )
