"""The publishing side: notebook HTML, the run index (`index.html` + `summary.json`) and the RFD figure page
(`publish --rfd DIR` writes `DIR/page.qmd`); the appendix swap is `appendix.py`'s.

Everything a reader meets opens with the answer table: one row per RFD question, taken from the notebook's
own `Recorder.conclude` record (never re-typed here), saying what the answer rests on and whether it stands.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import jinja2
import markupsafe

from .appendix import PublishError
from .appendix import check_target, publish_appendix  # noqa: F401 (runner.py's, until it imports them from appendix)
from .files import write_atomic
from .provenance import describe_code, environment, outside_code
from .runfolder import NO_COMMIT, NotebookResult, RunSummary, SummaryError, read_state, read_summary, write_summary
from ..formatting import format_duration, format_value
from .record import answer_status, load_metrics, timing_quality

if TYPE_CHECKING:
    from .params import SuitePlan

HIDE_INPUT_TAG = "hide-input"
INJECTED_TAG = "injected-parameters"
OVERVIEW_ROLE = "overview"
NO_CONCLUSION = "unanswered: recorded no conclusion"
PROTECTED = ("README.md", "DETAILS.md", "SKILL.md")
RFD_TITLE = re.compile(r"^# RFD \d{4}:")
MAX_SVG_BYTES = 1_500_000
ENV = jinja2.Environment(  # the pages are templates in templates/; HTML is escaped, the RFD page's Markdown is not
    loader=jinja2.PackageLoader("weftlib.suite", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
ENV.filters["code"] = lambda text: markupsafe.Markup(
    re.sub(r"`([^`]+)`", r"<code>\1</code>", str(markupsafe.escape(text)))
)


# ---- notebook pages ----------------------------------------------------------------------------------------


def render_html(notebook: Path, target: Path, note: str = "") -> Path:
    """Executed notebook -> standalone HTML for readers: code folded (a "show code" button unfolds it), the
    runner's injected-parameters cell removed (it holds the run folder's local path), cells tagged
    `hide-input` showing only their output, and `note` (e.g. the parameters given) under the title."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}, remove_cell_tags={INJECTED_TAG}, enabled=True),
        enabled=True,
    )
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    fold, toggle = (
        ENV.get_template("notebook_fold.html.j2").render(),
        ENV.get_template("notebook_toggle.html.j2").render(),
    )
    body = body.replace("</head>", fold + "</head>", 1)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + toggle, body, count=1)
    if note:
        shown = ENV.get_template("run_note.html.j2").render(note=note)
        title_end = body.find("</h1>")
        body = body[: title_end + 5] + shown + body[title_end + 5 :] if title_end >= 0 else body
    write_atomic(target, body)
    return target


# ---- the answer table -------------------------------------------------------------------------------------


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
    `role = overview`, has none): question, answer, what it rests on, status. A notebook that failed, was
    interrupted or recorded no `conclude` record is unanswered, and says why. `run_note` (e.g. "small plan,
    not the appendix") is added to what every row rests on."""
    rows = []
    failed_before: list[str] = []
    for nb in results:
        recorded = load_metrics(run_dir, nb.name)
        metrics = recorded.get("metrics", {})
        if metrics.get("role") == OVERVIEW_ROLE:
            continue
        question, _ = question_of(run_dir / f"{nb.name}.ipynb")
        conclusion = metrics.get("conclusion")
        if isinstance(conclusion, dict) and conclusion.get("answer"):
            answer = conclusion["answer"]
            rests_on = dict(conclusion.get("rests_on") or {})
            unmet = list(conclusion.get("unmet") or [])
            status = answer_status({"rests_on": rests_on, "unmet": unmet})
        else:
            answer, rests_on, unmet, status = "", {}, [], NO_CONCLUSION
        if run_note:
            rests_on["run"] = run_note
        if nb.status == "failed":
            status = f"unanswered: the notebook failed ({nb.describe_error().splitlines()[0]})"
        elif nb.status in ("not run", "interrupted"):
            status = f"unanswered: {nb.status}"
        if failed_before and nb.status == "passed":
            status += f" (ran after {', '.join(failed_before)} failed: it may rest on partial outputs)"
        if nb.status != "passed":
            failed_before.append(nb.name)
        kind = "answered" if status == "answered" else "stand-in" if status.startswith("answered on") else "unanswered"
        rows.append(
            {
                "notebook": nb.name,
                "question": question,
                "answer": answer,
                "rests_on": rests_on,
                "rests_on_text": _rests_on_text(rests_on),
                "unmet": unmet,
                "status": status,
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


# ---- the run index ----------------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    """A notebook's duration in the index; a dash for one that never ran (0 s)."""
    return format_duration(seconds) if seconds else "—"


def provenance_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """The index's provenance table: parameters, the suite's full commit, machine, natten, the DFC, outside
    code, package versions and when the run started and finished."""
    env = summary.provenance
    return [
        ("parameters", f"{summary.params_file} (hash {summary.params_hash})"),
        ("git commit", (summary.commit or NO_COMMIT) + (" (dirty tree)" if summary.dirty else "")),
        ("machine", machine_line(env)),
        ("natten", env["natten"]["note"]),
        ("Hailo DFC", "importable" if env["hailo_dfc"]["importable"] else env["hailo_dfc"]["reason"]),
        ("code from outside this repository", outside_code_text(env)),
        *((f"version: {k}", v or "not installed") for k, v in env["versions"].items()),
        ("started / finished (UTC)", f"{summary.started} / {summary.finished}"),
    ]


def outside_code_text(env: dict[str, Any]) -> str:
    """What the run executed from outside the repository (`hub_dir`, `host_root`), or that it executed none."""
    found = env.get("outside_code") or []
    return "; ".join(describe_code(c) for c in found) or "none: only this repository's code and its stand-ins"


def machine_line(env: dict[str, Any]) -> str:
    m = env["machine"]
    return f"{m['platform']}, {m['cpu_count']} CPUs, {m['ram_bytes'] / 2**30:.1f} GiB RAM, GPU: {m['gpu'] or 'none'}"


def write_index(
    run_dir: Path,
    plan: SuitePlan,
    results: list[NotebookResult],
    started: datetime,
    state: str | None = None,
    partial: bool = False,
) -> RunSummary:
    """Write `summary.json` and `index.html` for a run, both opening with the answer table; return the summary."""
    summary = _run_summary(run_dir, plan, results, started, state, partial)
    write_summary(run_dir, summary)
    verdict = (
        "Every notebook passed."
        if summary.passed
        else "FAILED: " + "; ".join(r.describe_error() for r in results if r.status != "passed")
    )
    page = ENV.get_template("index.html.j2").render(
        appendix=plan.appendix,
        scope=summary.scope,
        answers=summary.answers,
        state=summary.state,
        verdict=verdict,
        notebooks=[_index_row(run_dir, r, summary.timings[r.name]) for r in results],
        provenance=provenance_rows(summary),
    )
    write_atomic(run_dir / "index.html", page)
    return summary


def _run_summary(
    run_dir: Path, plan: SuitePlan, results: list[NotebookResult], started: datetime, state: str | None, partial: bool
) -> RunSummary:
    """The run's summary: the answer table, the plan it ran, when, per-notebook durations and timing quality,
    provenance (this machine and the outside code the notebooks that ran executed) and the results."""
    passed = all(r.status == "passed" for r in results)
    state = state or ("passed" if passed else "failed")
    run_note = None if plan.appendix else f"small plan ({Path(str(plan.source)).name}), not the appendix"
    return RunSummary(
        answers=answer_rows(run_dir, results, run_note),
        scope=scope_line(plan.appendix, str(plan.source)),
        appendix=plan.appendix,
        state=state,
        passed=passed and state == "passed",
        partial=partial,
        params_file=str(plan.source),
        params_set=list(plan.settings),
        params_hash=plan.digest(),
        description=plan.description,
        started=started.isoformat(timespec="seconds"),
        finished=datetime.now(UTC).isoformat(timespec="seconds"),
        durations={r.name: {"seconds": r.seconds, "long_steps": r.long_steps} for r in results},
        timings={r.name: timing_quality(load_metrics(run_dir, r.name)) for r in results},
        provenance={
            **environment(),
            "outside_code": outside_code(plan, [r.name for r in results if r.status != "not run"]),
        },
        notebooks=list(results),
    )


def _index_row(run_dir: Path, r: NotebookResult, timings: dict[str, Any]) -> dict[str, Any]:
    """One notebook's row of the index: its status, duration, timing quality, parameters, figures, links."""
    links = [(p.suffix[1:], p.name) for p in (run_dir / f"{r.name}.html", run_dir / f"{r.name}.ipynb") if p.exists()]
    if (run_dir / r.name / "metrics.json").exists():
        links.append(("metrics", f"{r.name}/metrics.json"))
    return {
        "name": r.name,
        "status": r.status,
        "css": r.status.replace(" ", "-"),
        "duration": _duration(r.seconds),
        "timings": timings,
        "given": ", ".join(f"{k}={format_value(v)}" for k, v in r.parameters.items()) or "defaults",
        "figures": r.headline_text,
        "error": r.describe_error() if r.error else "",
        "links": links,
    }


# ---- the RFD figure page ----------------------------------------------------------------------------------

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
    """The page's Markdown (templates/page.qmd.j2): answer table, then one section per notebook (question, what
    was done, headline figures and top rows of key tables as pipe tables, figures as inline SVG, provenance)."""
    text = ENV.get_template("page.qmd.j2").render(
        params_name=Path(summary.params_file).name,
        scope=summary.scope,
        answer_table=pipe_table(
            ["Question", "Answer", "Rests on", "Status"],
            [
                [a["question"] or a["notebook"], a["answer"] or "—", a["rests_on_text"], a["status"]]
                for a in summary.answers
            ],
        ),
        provenance=provenance_line(summary),
        sections=[s for nb in summary.notebooks if (s := _page_section(run_dir, nb, summary)) is not None],
    )
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def _page_section(run_dir: Path, nb: NotebookResult, summary: RunSummary) -> dict[str, Any] | None:
    """What the page says of one notebook (None for the overview, which answers no question)."""
    recorded = load_metrics(run_dir, nb.name)
    if recorded.get("metrics", {}).get("role") == OVERVIEW_ROLE:
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
        if n not in answered and load_metrics(run_dir, n).get("metrics", {}).get("role") != OVERVIEW_ROLE
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
