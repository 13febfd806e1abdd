"""Run the notebooks of a plan with papermill into a fresh run folder, then publish only a clean run.

The suite knows nothing about attention or voxels: it validates parameters, executes, renders HTML, writes
the run index and swaps the appendix. `__main__` is a thin shell over `run_suite`, a pipeline of named steps
(`_start`, `_execute_plan`, `_conclude`, `_publish`; `_interrupted` on the way out of a stopped run). Progress
lines come from `progress`; what the run folder records (`state.json` on every way out, the typed results)
is `runfolder`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack
from unittest import mock

from ..console import HEADLESS_ENV
from ..formatting import format_value
from ..measure import ALLOCATOR_ENV
from ..paths import REPO_ROOT
from . import params as params_mod
from .appendix import check_target, publish_appendix
from .failures import error_of, interruption, running_cell
from .index_page import write_index
from .kernel import KERNEL_NAME, ensure_kernel, ipc_kernel_manager
from .notebook_html import render_html
from .progress import Progress, cell_durations, last_durations, long_steps, watched_engine
from .provenance import describe_code, outside_code
from .record import headlines, load_metrics
from .room import check_room
from .runfolder import NotebookResult, RunResult, RunSummary, StateDetail, newest_run, write_state

RUNS_DIR = REPO_ROOT / "outputs" / "runs"
APPENDIX_DIR = REPO_ROOT / "outputs" / "appendix"
SMOKE_DIR = REPO_ROOT / "outputs" / "smoke"


class RunInterrupted(Exception):
    """The run was stopped from outside (Ctrl-C, SIGTERM, SIGHUP); the message names the signal."""


# ---- run folders -------------------------------------------------------------------------


def fresh_run_dir(out: str | Path | None) -> Path:
    """A new, empty run folder: `out` if given (must not hold files), else outputs/runs/<UTC time>."""
    if out is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = RUNS_DIR / stamp
        suffix = 1
        while Path(out).exists():
            out = RUNS_DIR / f"{stamp}-{suffix}"
            suffix += 1
    run_dir = Path(out).resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise FileExistsError(f"--out {run_dir} is a file; each run needs a fresh folder")
    if run_dir.exists() and any(run_dir.iterdir()):
        raise FileExistsError(f"--out {run_dir} already holds files; each run needs a fresh folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def execute_one(
    nb: params_mod.NotebookPlan,
    run_dir: Path,
    cell_timeout: int,
    progress: Progress | bool | None,
    plan_file: str = "",
) -> NotebookResult:
    """Execute one notebook into the run folder and render its HTML, whatever the outcome; its page names
    `plan_file`, the plan it ran in.

    An interruption (Ctrl-C, SIGTERM) is re-raised after the executed notebook and its HTML are saved.
    """
    result = NotebookResult(nb.name, parameters=dict(nb.parameters))
    output = run_dir / f"{nb.name}.ipynb"
    start = time.perf_counter()
    interrupted: BaseException | None = None
    try:
        _papermill(nb, output, run_dir, cell_timeout, progress if isinstance(progress, Progress) else None)
        result.status = "passed"
    except (KeyboardInterrupt, RunInterrupted) as exc:
        result.status, result.error, interrupted = "interrupted", interruption(exc), exc
    except Exception as exc:  # papermill raises PapermillExecutionError; a dead kernel raises others
        result.status, result.error = "failed", error_of(exc)
    result.seconds = round(time.perf_counter() - start, 2)
    if output.exists():
        _read_executed(result, nb, output, run_dir, plan_file)
    recorded = load_metrics(run_dir, nb.name)
    result.headline = {k: recorded["metrics"].get(k) for k in recorded.get("headline", [])}
    result.headline_text = headlines(recorded)
    if interrupted is not None:
        raise interrupted
    return result


def _papermill(
    nb: params_mod.NotebookPlan, output: Path, run_dir: Path, cell_timeout: int, watcher: Progress | None
) -> None:
    """papermill on one notebook, its kernel on sockets in a short-lived folder (a socket path has ~100 bytes
    at most), the notebook saved after every cell."""
    import papermill

    with tempfile.TemporaryDirectory(prefix="weft-kernel-") as sockets:
        papermill.execute_notebook(
            str(nb.path),
            str(output),
            parameters={**nb.parameters, "run_dir": str(run_dir)},
            engine_name=watched_engine(watcher),
            kernel_name=KERNEL_NAME,
            cwd=str(REPO_ROOT),
            execution_timeout=cell_timeout,
            progress_bar=False,
            log_output=False,
            stderr_file=watcher.relay if watcher is not None else None,  # its progress bars reach the run's log
            coalesce_streams=True,  # a bar's redraws kept as its last state, not one line per redraw
            request_save_on_cell_execute=True,
            kernel_manager_class=ipc_kernel_manager(Path(sockets)),
            shutdown_kernel="immediate",
        )


def _read_executed(
    result: NotebookResult, nb: params_mod.NotebookPlan, output: Path, run_dir: Path, plan_file: str = ""
) -> None:
    """What the executed notebook says of itself (the cell a dead kernel was in, per-cell durations, long
    steps), and its HTML page with the plan it ran in and the parameters that plan gave."""
    if result.error and result.error["cell"] is None:
        result.error["cell"] = running_cell(output)  # a dead kernel names no cell; the saved state does
    cells = cell_durations(output)
    result.cell_seconds = dict(cells)
    result.long_steps = long_steps(cells)
    render_html(output, run_dir / f"{nb.name}.html", note=plan_note(nb.parameters, plan_file))


def plan_note(parameters: dict[str, Any], plan_file: str) -> str:
    """The line under a notebook page's title: the plan it ran in (by file name) and the parameters that plan
    gave it, or that the plan gave none and the notebook's own defaults ran."""
    plan = f"Ran in the plan {Path(plan_file).name}" if plan_file else "Ran on its own"
    given = "; ".join(f"{k} = {format_value(v)}" for k, v in parameters.items())
    if given:
        return f"{plan}, which gave it {given}; the other parameters are the notebook's defaults."
    return f"{plan}, which gives this notebook no parameters: every parameter is the notebook's default."


def _say(line: str) -> None:
    print(line, flush=True)


_RECEIVED: list[str] = []
# What the libraries under a run log while a stopped run unwinds: nbclient's "Kernel died while waiting for execute
# reply" (papermill's logger) when the kernel is shut down under a pending reply, and asyncio's never-retrieved
# DeadKernelError. Each repeats, as a traceback, the interruption the run reports in one line.
_UNWINDING_LOGGERS = ("papermill", "nbclient", "asyncio")


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGINT, SIGTERM and SIGHUP take Ctrl-C's way out (a KeyboardInterrupt, which asyncio and nbclient unwind
    cleanly), the unwinding's own log hushed; a signal other than Ctrl-C's is named for the state file."""
    for name in _UNWINDING_LOGGERS:
        logging.getLogger(name).disabled = True
    if signum != signal.SIGINT:
        _RECEIVED.append(signal.Signals(signum).name)
    raise KeyboardInterrupt


class _Signals:
    """SIGINT, SIGTERM and SIGHUP take Ctrl-C's way out (`_raise_interrupt`) in the main thread for the duration
    of a run, its index and its publishing included (one the process was told to ignore, as `nohup` does SIGHUP,
    stays ignored; a SIGINT handler of the caller's own stays). The loggers a signal hushed stay hushed: the
    process is ending by it, and asyncio reports a never-retrieved error when the error is collected."""

    def __enter__(self) -> _Signals:
        self.saved: dict[int, Any] = {}
        _RECEIVED.clear()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                current = signal.getsignal(sig)
                if current is not signal.SIG_IGN and (sig != signal.SIGINT or current is signal.default_int_handler):
                    self.saved[sig] = signal.signal(sig, _raise_interrupt)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def default_publish_dir(plan: params_mod.SuitePlan) -> Path:
    """Where a fully passing run is copied: outputs/appendix for the appendix plan, outputs/smoke otherwise,
    so a small run can never replace (or pass for) the appendix."""
    return APPENDIX_DIR if plan.appendix else SMOKE_DIR


@dataclass
class _RunStates:
    """The states one run writes to its folder's state.json, each with the run's start and its plan file."""

    run_dir: Path
    started: datetime
    params_file: str

    def write(self, state: str, **detail: Unpack[StateDetail]) -> None:
        full: StateDetail = {"started": self.started.isoformat(timespec="seconds"), "params_file": self.params_file}
        write_state(self.run_dir, state, **(full | detail))


def run_suite(
    plan: params_mod.SuitePlan,
    out: str | Path | None = None,
    appendix: str | Path | None = APPENDIX_DIR,
    log: Callable[[str], None] = _say,
    partial: bool = False,
    history: tuple[Path, ...] | None = None,
) -> RunResult:
    """Validate every parameter, execute the plan in order, write the index, publish if all passed.

    `appendix=None` never publishes (used for partial runs); `partial` marks a run of part of a parameter
    file (`--only`), which `publish --rfd` refuses. Progress lines (one per notebook and per long step, with
    the time left estimated from the last run of the same plan, searched in `history`) go to `log`.
    """
    last = newest_run(plan.digest(), _history(history))  # read once: the room it kept, the time it took
    states = _start(plan, out, appendix, last)
    outcome = RunResult(states.run_dir, [])
    try:
        with _Signals():
            _execute_plan(plan, states, outcome.notebooks, Progress(plan, last_durations(last), log), log)
            _conclude(plan, states, outcome, partial)
            _publish(outcome, appendix)
        return outcome
    except (KeyboardInterrupt, RunInterrupted) as exc:
        raise _interrupted(plan, states, outcome, partial, exc) from None
    except BaseException as exc:
        states.write("failed", reason=f"runner error: {type(exc).__name__}: {exc}")
        raise


def _start(
    plan: params_mod.SuitePlan,
    out: str | Path | None,
    appendix: str | Path | None,
    last: tuple[Path, RunSummary] | None,
) -> _RunStates:
    """Every check that can refuse the run, before hours of work rather than after (the parameters, the
    publish target, the room the `last` run of the plan kept), then the fresh run folder, saying "running"."""
    params_mod.validate(plan)
    if appendix is not None:
        check_target(appendix, Path(out) if out is not None else None)
    if last is not None and last[1].disk_bytes:
        check_room(Path(out) if out is not None else RUNS_DIR, last[1].disk_bytes, last[0], RUNS_DIR)
    states = _RunStates(fresh_run_dir(out), datetime.now(UTC), str(plan.source))
    states.write("running", notebook=None)
    return states


def _history(history: tuple[Path, ...] | None) -> tuple[Path, ...]:
    """Where earlier runs are looked for: `history`, by default the runs, the appendix and the smoke copy."""
    return history if history is not None else (RUNS_DIR, APPENDIX_DIR, SMOKE_DIR)


def _publish(outcome: RunResult, appendix: str | Path | None) -> None:
    """A fully passing run is copied to `appendix` (the copy carries the final state); any other stays put."""
    if outcome.passed and appendix is not None:
        outcome.published = publish_appendix(outcome.run_dir, Path(appendix))


def _execute_plan(
    plan: params_mod.SuitePlan,
    states: _RunStates,
    results: list[NotebookResult],
    watcher: Progress,
    log: Callable[[str], None],
) -> None:
    """Every notebook of the plan in order, each kernel headless and asking for huge pages; an interrupted
    notebook is recorded before the interruption goes on up.

    The kernels' temporary folder is the run's own (`TMPDIR`, removed at the end whatever happened): a kernel
    stopped with the run (Ctrl-C, SIGTERM) is killed before it can remove its own (a graph being proven, a
    scratch export), and nothing may be left behind in the user's."""
    ensure_kernel()
    log(f"run {states.run_dir} ({plan.source.name}, {len(plan.notebooks)} notebooks)")
    for code in outside_code(plan):
        log(f"  executes code from outside this repository: {describe_code(code)}")
    # kernels inherit both: nobody is watching, and the allocators ask for huge pages (measure.ALLOCATOR_ENV)
    kernel_env = {HEADLESS_ENV: "1", **{k: os.environ.get(k, v) for k, v in ALLOCATOR_ENV.items()}}
    with (
        tempfile.TemporaryDirectory(prefix="weft-run-", ignore_cleanup_errors=True) as scratch,
        mock.patch.dict(os.environ, {**kernel_env, "TMPDIR": scratch}),
    ):
        for i, nb in enumerate(plan.notebooks, 1):
            states.write("running", notebook=nb.name)
            watcher.notebook_start(i, nb.name)
            try:
                res = execute_one(nb, states.run_dir, plan.cell_timeout, watcher, str(plan.source))
            except (KeyboardInterrupt, RunInterrupted):
                results.append(NotebookResult(nb.name, status="interrupted", parameters=dict(nb.parameters)))
                raise
            results.append(res)
            watcher.notebook_end(res)


def _not_run(plan: params_mod.SuitePlan, results: list[NotebookResult]) -> None:
    """Every notebook the run did not reach, appended as not run."""
    results.extend(NotebookResult(nb.name, parameters=dict(nb.parameters)) for nb in plan.notebooks[len(results) :])


def _conclude(plan: params_mod.SuitePlan, states: _RunStates, outcome: RunResult, partial: bool) -> None:
    """The run's final state, its index, and the failed notebooks named in state.json."""
    results = outcome.notebooks
    _not_run(plan, results)
    outcome.state = "passed" if outcome.passed else "failed"
    write_index(states.run_dir, plan, results, states.started, state=outcome.state, partial=partial)
    failed = [r.describe_error() for r in results if r.status == "failed"]
    states.write(outcome.state, notebook=None, failed=failed)


def _interrupted(
    plan: params_mod.SuitePlan, states: _RunStates, outcome: RunResult, partial: bool, exc: BaseException
) -> RunInterrupted:
    """Mark the run interrupted (state, then index, best effort) and say by what and during which notebook."""
    outcome.state = "interrupted"
    if isinstance(exc, RunInterrupted):
        reason = str(exc)
    else:
        named = _RECEIVED[0] if _RECEIVED else str(exc)  # a signal `weftlib.__main__` turned into Ctrl-C names itself
        reason = f"stopped by {named}" if named else "stopped by Ctrl-C (SIGINT)"
    results = outcome.notebooks
    current = results[-1].name if results else None
    _not_run(plan, results)
    states.write("interrupted", notebook=current, reason=reason)
    _quietly(lambda: write_index(states.run_dir, plan, results, states.started, state="interrupted", partial=partial))
    return RunInterrupted(f"{reason} during {current or 'start-up'}; run folder {states.run_dir} marked interrupted")


def _quietly(action: Callable[[], Any]) -> None:
    """Run a best-effort step on the way out of an interrupted run (a second Ctrl-C must not hide the first)."""
    with contextlib.suppress(Exception, KeyboardInterrupt):
        action()
