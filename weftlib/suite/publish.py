"""The RFD figure page (`publish --rfd DIR` writes `DIR/page.qmd`) from a fully passing run: the answer table,
the verdict table per RFD graph with its figure, then one section per notebook with its headline figures, the top rows of its key tables and its figures as
inline SVG, rendered from templates/page.qmd.j2; and the block a person pastes into DETAILS.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..formatting import format_value
from .answers import question_of
from .appendix import PublishError
from .files import write_atomic
from .index_page import machine_line, outside_code_text
from .models import OVERVIEW_ROLE, OverviewRecord
from .pages import ENV
from .record import load_metrics
from .runfolder import NotebookResult, RunSummary, SummaryError, read_state, read_summary
from .verdicts import FIGURE, verdict_table_html

PROTECTED = ("README.md", "DETAILS.md", "SKILL.md")
RFD_TITLE = re.compile(r"^# RFD \d{4}:")
MAX_SVG_BYTES = 1_500_000
FIGURE_SVG = Path(FIGURE).with_suffix(".svg")  # the verdict figure's SVG twin, which the page inlines
# ---- notebook pages ----------------------------------------------------------------------------------------


# ---- the answer table -------------------------------------------------------------------------------------


# ---- the run index ----------------------------------------------------------------------------------------


_EXT = r"(onnx|py|json|yaml|yml|har|hef|html|ipynb|csv|png|svg|log|txt|md|qmd|sh|toml)"
_PATHLIKE = re.compile(
    r"^(\.{0,2}/)?[\w.-]+(/[\w.-]+)+/?(:\d+)?(\s|$)"  # a/b, ./a/b.onnx, dir/
    rf"|^[\w.-]+\.{_EXT}(:\d+)?\b"  # naf.py, naf.py:48 -> ..., model.onnx
    rf"|\.{_EXT}$",
    re.IGNORECASE,
)


def looks_like_path(text: Any) -> bool:
    """A cell that reads as a file path (`a/b.onnx`, `naf.py`): RFD hygiene keeps those out of first cells."""
    return isinstance(text, str) and bool(_PATHLIKE.search(text.strip()))


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else format_value(value)
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def pipe_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub/CommonMark pipe table; a first column that holds file paths moves to the end (hygiene)."""
    if rows and any(looks_like_path(r[0]) for r in rows) and len(header) > 1:
        header = header[1:] + header[:1]
        rows = [r[1:] + r[:1] for r in rows]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _record_tables(recorded: dict[str, Any], top: int = 5, most: int = 2) -> list[tuple[str, str]]:
    """The notebook's key tables: those recorded with `table=True` first, else the first short record tables
    (lists of same-keyed mappings, at most 8 columns); each cut to its top rows."""
    metrics, shown = recorded.get("metrics", {}), recorded.get("display", {})

    def is_table(v: Any) -> bool:
        return (
            isinstance(v, list)
            and bool(v)
            and all(isinstance(r, dict) for r in v)
            and len(v[0]) <= 8
            and all(r.keys() == v[0].keys() for r in v)
        )

    demoted = {k for k, s in shown.items() if s.get("not_headline")}
    flagged = [k for k, s in shown.items() if s.get("table") and k not in demoted and is_table(metrics.get(k))]
    keys = flagged or [k for k, v in metrics.items() if is_table(v) and k not in demoted][:most]
    out = []
    for key in keys:
        value = metrics[key]
        header = list(value[0])
        body = pipe_table(header, [[row.get(h) for h in header] for row in value[:top]])
        more = f"\n\n*Top {top} of {len(value)} rows; the full table is in the appendix.*" if len(value) > top else ""
        out.append((shown.get(key, {}).get("label") or key.replace("_", " "), body + more))
    return out


def _svg_block(svg: Path) -> str | None:
    text = svg.read_text(encoding="utf-8")
    if len(text.encode()) > MAX_SVG_BYTES:
        return None
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<!--.*?-->\s*", "", text, flags=re.S)
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n") if ln.strip()]
    return '```{=html}\n<div style="overflow-x:auto">\n' + "\n".join(lines) + "\n</div>\n```"


def check_run(run_dir: Path) -> RunSummary:
    """The summary of a run that may be published; PublishError for a failed, partial or unfinished one."""
    if not run_dir.is_dir():
        raise PublishError(f"{run_dir}: no such run folder")
    state = read_state(run_dir)
    if state.get("state") != "passed":
        raise PublishError(
            f"{run_dir}: the run is {state.get('state')} ({state.get('reason', 'see state.json')}); "
            "only a fully passing run is published"
        )
    try:
        summary = read_summary(run_dir)
    except SummaryError as exc:
        raise PublishError(f"{exc}; publish a run this suite wrote") from None
    if not summary.passed or any(nb.status != "passed" for nb in summary.notebooks):
        raise PublishError(f"{run_dir}: not every notebook passed; only a fully passing run is published")
    if summary.partial:
        raise PublishError(f"{run_dir}: a partial run (--only); publish a run of the whole parameter file")
    return summary


def check_rfd_dir(rfd: Path, page: str) -> Path:
    """The target file in an RFD folder; PublishError unless `rfd` holds a README.md starting with
    `# RFD NNNN:` and the page is a new-or-generated `.qmd` that is not README.md, DETAILS.md or SKILL.md."""
    if page in PROTECTED or Path(page).name in PROTECTED:
        raise PublishError(f"refusing to write {page}: README.md, DETAILS.md and SKILL.md are written by people")
    if Path(page).name != page or not page.endswith(".qmd"):
        raise PublishError(f"--page {page!r}: a file name ending in .qmd, inside the RFD folder")
    readme = rfd / "README.md"
    if not readme.is_file():
        raise PublishError(f"{rfd}: no README.md; not an RFD folder")
    first = readme.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
    if not first or not RFD_TITLE.match(first[0]):
        raise PublishError(f"{readme}: does not start with '# RFD NNNN:'; not an RFD folder")
    return rfd / page


def provenance_line(summary: RunSummary) -> str:
    """The page's provenance sentence, under the answer table and each section."""
    env = summary.provenance
    outside = f"; code from outside this repository: {outside_code_text(env)}" if env.get("outside_code") else ""
    return (
        f"*Provenance:* suite commit {summary.commit_text}; parameters {Path(summary.params_file).name} "
        f"(hash {summary.params_hash}); machine {machine_line(env)}{outside}; run {summary.finished}."
    )


def render_page(run_dir: Path, summary: RunSummary) -> str:
    """The page's Markdown (templates/page.qmd.j2): answer table, verdict table and its figure, then one section
    per notebook (question, what was done, the answer and in full, headline figures and top rows of key tables as
    pipe tables, figures as inline SVG, provenance)."""
    text = ENV.get_template("page.qmd.j2").render(
        params_name=Path(summary.params_file).name,
        bottom_line=summary.bottom_line,
        scope=summary.scope,
        answer_table=pipe_table(
            ["Question", "Answer", "Rests on", "Status"],
            [
                [a["question"] or a["notebook"], a["answer"] or "—", a["rests_on_text"], a["status"]]
                for a in summary.answers
            ],
        ),
        verdict_table=verdict_table_html(summary.verdicts, links=False) if summary.verdicts else "",
        verdict_figure=_svg_block(run_dir / FIGURE_SVG) if (run_dir / FIGURE_SVG).is_file() else "",
        provenance=provenance_line(summary),
        sections=[s for nb in summary.notebooks if (s := _page_section(run_dir, nb, summary)) is not None],
    )
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def _page_section(run_dir: Path, nb: NotebookResult, summary: RunSummary) -> dict[str, Any] | None:
    """What the page says of one notebook (None for the overview, which answers no question)."""
    recorded = load_metrics(run_dir, nb.name)
    if OverviewRecord.role.of(recorded.get("metrics", {})) == OVERVIEW_ROLE:
        return None
    question, done = question_of(run_dir / f"{nb.name}.ipynb")
    figures = nb.headline_text
    quality = summary.timings.get(nb.name)
    return {
        "name": nb.name,
        "number": nb.name.split("_")[0],
        "question": question,
        "done": done,
        "row": next((a for a in summary.answers if a["notebook"] == nb.name), None),
        "figures": pipe_table(["Figure", "Value"], [[h["label"], h["text"]] for h in figures]) if figures else "",
        "timings": quality["text"] if quality and quality["timed_rows"] else "",
        "tables": _record_tables(recorded),
        "svgs": [(svg.stem.replace("_", " "), _svg_block(svg)) for svg in sorted((run_dir / nb.name).glob("*.svg"))],
    }


def headline_block(summary: RunSummary) -> str:
    """The block a person pastes into DETAILS.md: headline figures per notebook with machine and commit."""
    lines = [
        f"Measured by the RFD 1129 suite at commit {summary.commit_text} ({Path(summary.params_file).name}, "
        f"hash {summary.params_hash}) on {machine_line(summary.provenance)}, {summary.finished[:10]}:"
    ]
    for nb in summary.notebooks:
        lines += [f"- {nb.name}: {h['label']}: {h['text']}" for h in nb.headline_text]
    return "\n".join(lines)


def rfd_questions() -> list[str]:
    """The notebooks whose questions the RFD page answers: those of the full plan (params/appendix.yaml)."""
    from .params import FULL_PLAN, notebook_names

    return notebook_names(FULL_PLAN)


def check_questions(run_dir: Path, summary: RunSummary, questions: Sequence[str]) -> None:
    """PublishError unless the run's answer table answers every question (the overview, recorded as such by
    the run, asks none): a page whose table lacks one would read as the RFD's whole answer."""
    answered = {a.get("notebook") for a in summary.answers if a.get("answer")}
    missing = [
        n
        for n in questions
        if n not in answered and OverviewRecord.role.of(load_metrics(run_dir, n).get("metrics", {})) != OVERVIEW_ROLE
    ]
    if missing:
        raise PublishError(
            f"{run_dir}: the answer table lacks the RFD question(s) of {', '.join(missing)}; the page answers "
            "every question of the full plan: publish a run of params/appendix.yaml"
        )


def publish_rfd(
    run_dir: str | os.PathLike, rfd: str | os.PathLike, page: str = "page.qmd", questions: Sequence[str] | None = None
) -> tuple[Path, str]:
    """Write `rfd/page` from a fully passing run, atomically; return (its path, the paste-able headline block).

    Refuses (PublishError, nothing written) a failed, interrupted or partial run, one whose answer table
    lacks a question of `questions` (default: the full plan's notebooks), a folder that is not an RFD folder,
    and README.md / DETAILS.md / SKILL.md as the target. Only the one `.qmd` file is written (through a fresh
    temporary file, so nothing planted in the folder is followed): no ONNX, HAR, HEF or HTML artefact goes
    into the RFD folder.
    """
    run_dir, rfd = Path(run_dir).resolve(), Path(rfd).resolve()
    target = check_rfd_dir(rfd, page)
    summary = check_run(run_dir)
    check_questions(run_dir, summary, rfd_questions() if questions is None else questions)
    text = render_page(run_dir, summary)
    write_atomic(target, text)
    return target, headline_block(summary)
