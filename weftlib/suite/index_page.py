"""A run's index: `summary.json` (the typed `RunSummary`) and `index.html`, both opening with the answer table
and the verdict table per RFD graph (with its figure), then each notebook's status, duration, timing quality,
parameters and figures, and the run's provenance.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..formatting import commit_text, format_duration, format_value
from ..paths import REPO_ROOT
from .answers import answer_rows, scope_line
from .bottom_line import Where, bottom_line
from .files import write_atomic
from .pages import ENV
from .provenance import describe_code, environment, machine_text, outside_code
from .record import load_metrics, timing_quality
from .room import kept_bytes
from .runfolder import NotebookResult, RunSummary, write_summary
from .verdicts import pack_scripts, verdict_rows, verdict_table_html, write_figure

if TYPE_CHECKING:
    from .params import SuitePlan


def _duration(seconds: float) -> str:
    """A notebook's duration in the index; a dash for one that never ran (0 s)."""
    return format_duration(seconds) if seconds else "—"


def provenance_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """The index's provenance table: parameters, the suite's full commit, machine, natten, the DFC, outside
    code, package versions and when the run started and finished."""
    env = summary.provenance
    return [
        ("parameters", f"{summary.params_file} (hash {summary.params_hash})"),
        ("git commit", commit_text(summary.commit, summary.dirty, digits=None)),
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
    """The machine a run used, in one line: its platform, then `provenance.machine_text`."""
    return f"{env['machine']['platform']}, {machine_text(env['machine'])}"


def write_index(
    run_dir: Path,
    plan: SuitePlan,
    results: list[NotebookResult],
    started: datetime,
    state: str | None = None,
    partial: bool = False,
) -> RunSummary:
    """Write `summary.json` and `index.html` for a run, both opening with the answer table and the verdict
    table (its figure saved beside them); return the summary."""
    summary = _run_summary(run_dir, plan, results, started, state, partial)
    write_summary(run_dir, summary)
    figure = write_figure(run_dir, summary.verdicts)
    verdict = (
        "Every notebook passed."
        if summary.passed
        else "FAILED: " + "; ".join(r.describe_error() for r in results if r.status != "passed")
    )
    page = ENV.get_template("index.html.j2").render(
        bottom_line=summary.bottom_line,
        appendix=plan.appendix,
        scope=summary.scope,
        answers=summary.answers,
        verdict_table=verdict_table_html(summary.verdicts) if summary.verdicts else "",
        verdict_figure=figure.name if figure else "",
        state=summary.state,
        verdict=verdict,
        notebooks=[
            _index_row(run_dir, r, summary.timings[r.name], summary.durations[r.name]["long_steps"]) for r in results
        ],
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
    answers, verdicts = answer_rows(run_dir, results, run_note), verdict_rows(run_dir)
    where = Where(readable_path(run_dir), pack_scripts(run_dir), readable_path(Path(str(plan.source))))
    return RunSummary(
        bottom_line=bottom_line(verdicts, answers, where),
        answers=answers,
        scope=scope_line(plan.appendix, str(plan.source)),
        verdicts=verdicts,
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
        durations={r.name: {"seconds": r.seconds, "long_steps": long_steps(run_dir, r)} for r in results},
        disk_bytes=kept_bytes(run_dir),
        timings={r.name: timing_quality(load_metrics(run_dir, r.name)) for r in results},
        provenance={
            **environment(),
            "outside_code": outside_code(plan, [r.name for r in results if r.status != "not run"]),
        },
        notebooks=list(results),
    )


def readable_path(path: Path) -> str:
    """A path as a command on a page names it: inside the repository relative to its root (where the README's
    commands run), elsewhere in full."""
    resolved = Path(path).resolve()
    return resolved.relative_to(REPO_ROOT).as_posix() if resolved.is_relative_to(REPO_ROOT) else resolved.as_posix()


def section_headings(executed: Path) -> dict[int, str]:
    """{cell index: the heading of the section it falls under} in an executed notebook: the last markdown heading
    above each cell (its `#` marks dropped); empty where the notebook cannot be read."""
    import nbformat

    try:
        cells = nbformat.read(executed, as_version=4).cells
    except (OSError, ValueError):
        return {}
    out, heading = {}, ""
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            lines = [ln.lstrip("#").strip() for ln in cell.source.splitlines() if ln.startswith("#")]
            heading = lines[-1] if lines else heading
        out[i] = heading
    return out


def long_steps(run_dir: Path, r: NotebookResult) -> list[dict[str, Any]]:
    """A notebook's long steps (the runner's cells over its threshold), longest first, each with the section it
    is in: where the notebook's minutes went, as `summary.json` and the index say it."""
    headings = section_headings(run_dir / f"{r.name}.ipynb") if r.long_steps else {}
    steps = [{**s, "section": headings.get(int(s["cell"]), "")} for s in r.long_steps]
    return sorted(steps, key=lambda s: -float(s["seconds"]))


def step_text(step: dict[str, Any]) -> str:
    """One long step in a line: its time, its section and its first line of code."""
    where = f"{step['section']}: " if step.get("section") else ""
    return f"{format_duration(float(step['seconds']))} {where}{step['line']}"


def _index_row(
    run_dir: Path, r: NotebookResult, timings: dict[str, Any], steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """One notebook's row of the index: its status, duration and long steps, timing quality, parameters,
    figures, links."""
    links = [(p.suffix[1:], p.name) for p in (run_dir / f"{r.name}.html", run_dir / f"{r.name}.ipynb") if p.exists()]
    if (run_dir / r.name / "metrics.json").exists():
        links.append(("metrics", f"{r.name}/metrics.json"))
    return {
        "name": r.name,
        "status": r.status,
        "css": r.status.replace(" ", "-"),
        "duration": _duration(r.seconds),
        "steps": [step_text(s) for s in steps],
        "timings": timings,
        "given": ", ".join(f"{k}={format_value(v)}" for k, v in r.parameters.items()) or "defaults",
        "figures": r.headline_text,
        "error": r.describe_error() if r.error else "",
        "links": links,
    }
