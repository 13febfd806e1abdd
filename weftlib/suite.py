"""Run the notebooks of a plan with papermill into a fresh run folder, then publish only a clean run.

The suite knows nothing about attention or voxels: it validates parameters, executes, renders HTML, writes
the run index and swaps the appendix. `__main__` is a thin shell over `run_suite`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from unittest import mock

from . import params as params_mod
from .publish import publish_appendix, render_html, write_index
from .report import HEADLESS_ENV, REPO_ROOT, load_metrics

KERNEL_NAME = "weftlib"
RUNS_DIR = REPO_ROOT / "outputs" / "runs"
APPENDIX_DIR = REPO_ROOT / "outputs" / "appendix"


@dataclass
class NotebookResult:
    """What happened to one notebook of a run."""

    name: str
    status: str = "not run"  # passed | failed | not run
    seconds: float = 0.0
    error: dict[str, Any] | None = None
    headline: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)

    def describe_error(self) -> str:
        """`notebook, cell N: ErrorName: message`, the line the runner prints for a failure."""
        if not self.error:
            return f"{self.name}: {self.status}"
        err = self.error
        return f"{self.name}, cell {err.get('cell')}: {err.get('ename')}: {err.get('evalue')}"


@dataclass
class RunResult:
    """The whole run: where it is, what each notebook did, and whether the appendix was replaced."""

    run_dir: Path
    notebooks: list[NotebookResult]
    published: Path | None = None

    @property
    def passed(self) -> bool:
        return all(nb.status == "passed" for nb in self.notebooks)


def fresh_run_dir(out: str | Path | None) -> Path:
    """A new, empty run folder: `out` if given (must not hold files), else outputs/runs/<UTC time>."""
    if out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        out = RUNS_DIR / stamp
        suffix = 1
        while Path(out).exists():
            out = RUNS_DIR / f"{stamp}-{suffix}"
            suffix += 1
    run_dir = Path(out).resolve()
    if run_dir.exists() and any(run_dir.iterdir()):
        raise FileExistsError(f"--out {run_dir} already holds files; each run needs a fresh folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def ensure_kernel(name: str = KERNEL_NAME) -> None:
    """Register this interpreter as the `weftlib` Jupyter kernel unless a kernel of that name exists."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
        return
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=name, display_name="weftlib (RFD 1129)", prefix=sys.prefix)


def _error_of(exc: BaseException) -> dict[str, Any]:
    """The notebook, cell and error of a failure, from papermill's exception when it is one."""
    cell = getattr(exc, "cell_index", None)
    source = (getattr(exc, "source", "") or "").strip().splitlines()
    return {
        "cell": cell if cell is None else int(cell),
        "exec_count": getattr(exc, "exec_count", None),
        "ename": getattr(exc, "ename", type(exc).__name__),
        "evalue": str(getattr(exc, "evalue", exc)).strip()[:2000],
        "first_line": source[0] if source else "",
    }


def _running_cell(executed: Path) -> int | None:
    """Index of the cell a kernel died in (e.g. out of memory): the last one the kernel had started."""
    import nbformat

    cells = nbformat.read(executed, as_version=4).cells
    started = [i for i, c in enumerate(cells)
               if c.cell_type == "code" and c.get("metadata", {}).get("papermill", {}).get("start_time")]
    return started[-1] if started else None


def execute_one(nb: params_mod.NotebookPlan, run_dir: Path, cell_timeout: int, progress: bool) -> NotebookResult:
    """Execute one notebook into the run folder and render its HTML, whatever the outcome."""
    import papermill

    result = NotebookResult(nb.name, parameters=dict(nb.parameters))
    output = run_dir / f"{nb.name}.ipynb"
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(nb.path), str(output), parameters={**nb.parameters, "run_dir": str(run_dir)},
            kernel_name=KERNEL_NAME, cwd=str(REPO_ROOT), execution_timeout=cell_timeout,
            progress_bar=progress, log_output=False, request_save_on_cell_execute=True,
        )
        result.status = "passed"
    except Exception as exc:  # papermill raises PapermillExecutionError; a dead kernel raises others
        result.status = "failed"
        result.error = _error_of(exc)
    result.seconds = round(time.perf_counter() - start, 2)
    if result.error and result.error["cell"] is None and output.exists():
        result.error["cell"] = _running_cell(output)  # a dead kernel names no cell; the saved state does
    if output.exists():
        render_html(output, run_dir / f"{nb.name}.html")
    recorded = load_metrics(run_dir, nb.name)
    result.headline = {k: recorded["metrics"].get(k) for k in recorded.get("headline", [])}
    return result


def _say(line: str) -> None:
    print(line, flush=True)


def run_suite(
    plan: params_mod.SuitePlan, out: str | Path | None = None, appendix: str | Path | None = APPENDIX_DIR,
    progress: bool | None = None, log: Callable[[str], None] = _say,
) -> RunResult:
    """Validate every parameter, execute the plan in order, write the index, publish if all passed.

    `appendix=None` never publishes (used for partial runs); `progress=None` shows papermill's progress
    bars on a terminal and plain log lines under CI or when the output is not a terminal.
    """
    params_mod.validate(plan)
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    run_dir = fresh_run_dir(out)
    ensure_kernel()
    started = datetime.now(timezone.utc)
    results: list[NotebookResult] = []
    log(f"run {run_dir} ({plan.source.name}, {len(plan.notebooks)} notebooks)")
    with mock.patch.dict(os.environ, {HEADLESS_ENV: "1"}):  # kernels inherit it: nobody is watching
        for i, nb in enumerate(plan.notebooks, 1):
            log(f"[{i}/{len(plan.notebooks)}] {nb.name}: running")
            res = execute_one(nb, run_dir, plan.cell_timeout, progress)
            results.append(res)
            log(f"[{i}/{len(plan.notebooks)}] {nb.name}: {res.status} in {res.seconds:.1f} s")
    outcome = RunResult(run_dir, results)
    write_index(run_dir, plan, results, started)
    if outcome.passed and appendix is not None:
        outcome.published = publish_appendix(run_dir, Path(appendix))
    return outcome
