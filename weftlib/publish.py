"""The publishing side: notebook HTML, the run index (`index.html` + `summary.json`) and the appendix swap.

The appendix is what the RFD links to, so it is replaced in one rename from a complete copy: a reader never
sees half of a new run beside half of the old one, and a failed run never reaches it.
"""

from __future__ import annotations

import html
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .report import environment, jsonable

if TYPE_CHECKING:
    from .params import SuitePlan
    from .suite import NotebookResult

HIDE_INPUT_TAG = "hide-input"


def render_html(notebook: Path, target: Path) -> Path:
    """Executed notebook -> standalone HTML; cells tagged `hide-input` show only their output."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}, enabled=True), enabled=True
    )
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    target.write_text(body, encoding="utf-8")
    return target


def _cell(value: Any) -> str:
    text = json.dumps(jsonable(value)) if not isinstance(value, str) else value
    return html.escape(text if len(text) <= 160 else text[:157] + "...")


def _row(run_dir: Path, nb: "NotebookResult") -> str:
    links = [f'<a href="{html.escape(p.name)}">{p.suffix[1:]}</a>'
             for p in (run_dir / f"{nb.name}.html", run_dir / f"{nb.name}.ipynb") if p.exists()]
    metrics = run_dir / nb.name / "metrics.json"
    if metrics.exists():
        links.append(f'<a href="{html.escape(nb.name)}/metrics.json">metrics</a>')
    figures = "".join(f"<li><b>{html.escape(k)}</b>: {_cell(v)}</li>" for k, v in nb.headline.items())
    given = ", ".join(f"{k}={_cell(v)}" for k, v in nb.parameters.items()) or "defaults"
    error = f'<div class="err">{html.escape(nb.describe_error())}</div>' if nb.error else ""
    return (f'<tr class="{nb.status.replace(" ", "-")}"><td>{html.escape(nb.name)}</td>'
            f'<td class="status">{html.escape(nb.status)}</td><td>{nb.seconds:.1f} s</td><td>{given}</td>'
            f"<td><ul>{figures}</ul>{error}</td><td>{' · '.join(links)}</td></tr>")


def _provenance_rows(summary: dict[str, Any]) -> str:
    env = summary["provenance"]
    git = env["git"]
    rows = {
        "parameters": f"{summary['params_file']} (hash {summary['params_hash']})",
        "git commit": f"{git['commit'] or 'not a git checkout'}" + (" (dirty tree)" if git["dirty"] else ""),
        "machine": f"{env['machine']['platform']}, {env['machine']['cpu_count']} CPUs, "
                   f"{env['machine']['ram_bytes'] / 2**30:.1f} GiB RAM, GPU: {env['machine']['gpu'] or 'none'}",
        "natten": env["natten"]["note"],
        "Hailo DFC": "importable" if env["hailo_dfc"]["importable"] else env["hailo_dfc"]["reason"],
        **{f"version: {k}": v or "not installed" for k, v in env["versions"].items()},
        "started / finished (UTC)": f"{summary['started']} / {summary['finished']}",
    }
    return "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows.items())


_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem}
table{border-collapse:collapse;width:100%;margin-bottom:2rem}td,th{border:1px solid #ccc;padding:.4rem;
vertical-align:top;text-align:left}tr.passed .status{background:#d7f5dd}tr.failed .status{background:#fbd5d5}
tr.not-run .status{background:#eee}.err{color:#a00;font-family:monospace;white-space:pre-wrap}ul{margin:0;
padding-left:1.1rem}"""


def write_index(run_dir: Path, plan: "SuitePlan", results: list["NotebookResult"], started: datetime) -> dict:
    """Write `summary.json` and `index.html` for a run; return the summary."""
    summary = {
        "passed": all(r.status == "passed" for r in results),
        "params_file": str(plan.source),
        "params_hash": plan.digest(),
        "description": plan.description,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": environment(),
        "notebooks": [jsonable(r) for r in results],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    verdict = "every notebook passed" if summary["passed"] else "FAILED: " + "; ".join(
        r.describe_error() for r in results if r.status != "passed")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>RFD 1129 appendix</title>"
            f"<style>{_STYLE}</style></head><body><h1>RFD 1129 appendix: run index</h1>"
            f"<p>{html.escape(plan.description)}</p><p><b>{html.escape(verdict)}</b></p>"
            "<table><tr><th>notebook</th><th>status</th><th>duration</th><th>parameters</th><th>headline figures</th>"
            f"<th>links</th></tr>{''.join(_row(run_dir, r) for r in results)}</table>"
            f"<h2>Provenance</h2><table>{_provenance_rows(summary)}</table>"
            "<p><a href='summary.json'>summary.json</a></p></body></html>")
    (run_dir / "index.html").write_text(page, encoding="utf-8")
    return summary


def publish_appendix(run_dir: Path, appendix: Path) -> Path:
    """Replace `appendix` by a copy of `run_dir` in one rename; the old one is removed only afterwards."""
    appendix = appendix.resolve()
    appendix.parent.mkdir(parents=True, exist_ok=True)
    staging = appendix.parent / f".{appendix.name}.new"
    retired = appendix.parent / f".{appendix.name}.old"
    for leftover in (staging, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
    shutil.copytree(run_dir, staging)
    if appendix.exists():
        appendix.rename(retired)
    staging.rename(appendix)
    shutil.rmtree(retired, ignore_errors=True)
    return appendix
