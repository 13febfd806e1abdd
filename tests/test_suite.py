"""The runner: fresh run folders, failures named, and the appendix replaced only by a clean run."""

import json

import pytest

from weftlib.suite import failures, params, progress, room, runfolder, runner


def run(tiny_suite, tmp_path, names, appendix):
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("cell_timeout: 60\nnotebooks: [10_ok, 20_bad]\n"), names, nb_dir)
    return runner.run_suite(plan, out=tmp_path / f"run-{'-'.join(names)}", appendix=appendix, log=lambda line: None)


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_clean_run_publishes_and_indexes(tiny_suite, tmp_path):
    result = run(tiny_suite, tmp_path, ["10_ok"], tmp_path / "appendix")
    assert result.passed and result.published == tmp_path.resolve() / "appendix"
    assert (tmp_path / "appendix").is_symlink()  # to a complete copy, swapped in one rename
    summary = json.loads((tmp_path / "appendix" / "summary.json").read_text())
    assert summary["passed"] and summary["notebooks"][0]["headline"] == {"size": 3}
    assert summary["provenance"]["versions"]["torch"].startswith("2.13.0")
    assert (tmp_path / "appendix" / "10_ok.html").exists()
    assert runfolder.read_state(tmp_path / "appendix")["state"] == "passed"  # the published copy says so too
    assert "10_ok" in (tmp_path / "appendix" / "index.html").read_text()


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_failed_run_leaves_appendix_byte_identical(tiny_suite, tmp_path):
    appendix = tmp_path / "appendix"
    run(tiny_suite, tmp_path, ["10_ok"], appendix)
    before = snapshot(appendix)
    result = run(tiny_suite, tmp_path, ["10_ok", "20_bad"], appendix)
    assert not result.passed and result.published is None
    assert snapshot(appendix) == before
    bad = result.notebooks[1]
    assert bad.status == "failed" and bad.error["ename"] == "AssertionError"
    assert "a false claim must fail the run" in bad.describe_error() and "cell" in bad.describe_error()
    executed = (result.run_dir / "20_bad.ipynb").read_text()
    assert "papermill-error-cell" in executed or "An Exception was encountered" in executed
    assert "FAILED" in (result.run_dir / "index.html").read_text()


def test_out_must_be_fresh(tiny_suite, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep me")
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    with pytest.raises(FileExistsError, match="fresh folder"):
        runner.run_suite(plan, out=taken, appendix=None, log=lambda line: None)
    assert (taken / "x").read_text() == "keep me"


def test_html_hides_tagged_input(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from weftlib.suite.notebook_html import render_html

    hidden = new_code_cell("secret_source_line = 1", outputs=[])
    hidden.metadata["tags"] = ["hide-input"]
    nb = new_notebook(cells=[hidden, new_code_cell("visible_source_line = 2")])
    nbformat.write(nb, tmp_path / "n.ipynb")
    page = render_html(tmp_path / "n.ipynb", tmp_path / "n.html").read_text()
    assert "visible_source_line" in page and "secret_source_line" not in page


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_dead_kernel_failure_names_the_cell_it_died_in(tmp_path):
    from tests.conftest import write_notebook
    from weftlib.suite import params, runner

    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    write_notebook(nb_dir / "30_dies.ipynb", 'run_dir = ""', "import os\nos._exit(9)")
    plan = params.load_plan(_write(tmp_path, "notebooks: [30_dies]\n"), None, nb_dir)
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lambda line: None)
    err = result.notebooks[0].error
    assert result.notebooks[0].status == "failed" and err["ename"] == "DeadKernelError"
    assert err["cell"] == 4, err  # markdown, imports, parameters, injected parameters, the dying cell


def _write(folder, text):
    path = folder / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_failure_names_papermills_cell_number_and_the_failing_line(tiny_suite, tmp_path):
    result = run(tiny_suite, tmp_path, ["20_bad"], None)
    bad = result.notebooks[0]
    executed = (result.run_dir / "20_bad.ipynb").read_text()
    assert f"In [{bad.error['exec_count']}]" in executed  # the number papermill's banner shows
    text = bad.describe_error()
    assert f"cell In [{bad.error['exec_count']}]" in text
    assert "failing line: assert size < 0" in text
    state = json.loads((result.run_dir / "state.json").read_text())
    assert state["state"] == "failed" and "20_bad" in state["failed"][0]


def test_failing_line_reads_the_notebook_frame():
    tb = [
        "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
        "\x1b[0;31mAssertionError\x1b[0m                            Traceback (most recent call last)",
        "Cell \x1b[0;32mIn[4], line 3\x1b[0m\n\x1b[1;32m      1\x1b[0m x = 1\n\x1b[0;32m----> 3\x1b[0m \x1b[38;5;28;01massert\x1b[39;00m x < 0",
        "File \x1b[0;32m/lib/x.py:10\x1b[0m, in \x1b[0;36mf\x1b[0;34m()\x1b[0m\n\x1b[0;32m---> 10\x1b[0m inner()",
    ]
    assert failures.failing_line(tb) == "assert x < 0"
    assert failures.failing_line(None) == ""


def test_failing_line_reads_the_shorter_arrow_of_a_two_digit_line():
    """IPython pads its arrow to the line number: `---->` before line 3, `--->` before line 12."""
    tb = [
        "\x1b[0;31mAssertionError\x1b[0m                            Traceback (most recent call last)",
        "Cell \x1b[0;32mIn[4], line 12\x1b[0m\n\x1b[1;32m     11\x1b[0m y = 2\n\x1b[0;32m---> 12\x1b[0m \x1b[38;5;28;01massert\x1b[39;00m y < 0",
    ]
    assert failures.failing_line(tb) == "assert y < 0"
    assert failures.failing_line("Cell In[9], line 123\n--> 123 raise ValueError(3)") == "raise ValueError(3)"


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_a_failure_on_line_12_of_a_cell_names_that_line(tmp_path):
    from tests.conftest import write_notebook

    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    body = "\n".join([f"x{i} = {i}" for i in range(1, 12)] + ['assert x11 < 0, "line twelve is false"'])
    write_notebook(nb_dir / "40_long.ipynb", 'run_dir = ""', body)
    plan = params.load_plan(_write(tmp_path, "notebooks: [40_long]\n"), None, nb_dir)
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lambda line: None)
    bad = result.notebooks[0]
    assert bad.status == "failed" and bad.error["line"] == 'assert x11 < 0, "line twelve is false"', bad.error
    assert 'failing line: assert x11 < 0, "line twelve is false"' in bad.describe_error()


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_passing_run_records_state_durations_and_answer_table(tiny_suite, tmp_path):
    result = run(tiny_suite, tmp_path, ["10_ok"], None)
    assert runfolder.read_state(result.run_dir)["state"] == "passed"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert list(summary)[:3] == ["bottom_line", "answers", "scope"]  # the bottom line, then the answer table
    assert summary["bottom_line"] == (
        "No verdict table in this run; 0 of 1 questions answered. Next: 10_ok unanswered: recorded no conclusion."
    )
    assert summary["answers"][0]["status"] == "unanswered: recorded no conclusion"
    assert "NOT the full-size appendix" in summary["scope"]
    assert summary["answers"][0]["rests_on"]["run"] == "small plan (params.yaml), not the appendix"
    assert summary["durations"]["10_ok"]["seconds"] > 0
    assert 0 < summary["disk_bytes"] <= room.kept_bytes(result.run_dir)  # measured before its summary and index
    assert summary["notebooks"][0]["cell_seconds"]  # papermill's per-cell durations
    page = (result.run_dir / "index.html").read_text()
    assert page.index("Answers") < page.index("Notebooks") and "recorded no conclusion" in page


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_eta_comes_from_the_last_run_of_the_same_plan(tiny_suite, tmp_path):
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    lines: list[str] = []
    first = runner.run_suite(
        plan, out=tmp_path / "runs" / "a", appendix=None, log=lines.append, history=(tmp_path / "runs",)
    )
    assert "no earlier run of this plan" in lines[1]
    history = progress.last_durations(runfolder.newest_run(plan.digest(), (tmp_path / "runs",)))
    assert history["from"] == str(first.run_dir) and history["notebooks"]["10_ok"]["cells"]
    lines.clear()
    runner.run_suite(plan, out=tmp_path / "runs" / "b", appendix=None, log=lines.append, history=(tmp_path / "runs",))
    assert "last run" in lines[1] and "left in the run" in lines[1]
    other = params.load_plan(write("notebooks:\n  - name: 10_ok\n    parameters: {size: 4}\n"), None, nb_dir)
    assert progress.last_durations(runfolder.newest_run(other.digest(), (tmp_path / "runs",))) == {}


def test_a_long_step_is_announced_only_where_the_same_cell_ran_last_time(tiny_suite):
    import nbformat

    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    history = {"notebooks": {"10_ok": {"seconds": 90.0, "cells": {"3": {"seconds": 80.0, "line": "slow = work()"}}}}}
    lines: list[str] = []
    watcher = progress.Progress(plan, history, lines.append)
    watcher.notebook_start(1, "10_ok")
    watcher.cell_started(3, nbformat.v4.new_code_cell("# the slow step\nslow = work()"))
    assert "took 1 min 20 s last time" in lines[-1]
    lines.clear()
    watcher.cell_started(3, nbformat.v4.new_code_cell("fast = other()"))  # a cell was inserted above it
    assert lines == []


def test_state_says_interrupted_when_the_runner_is_gone(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    runfolder.write_state(run_dir, "running")
    assert runfolder.read_state(run_dir)["state"] == "running"  # this process is alive
    state = json.loads((run_dir / "state.json").read_text())
    state["pid"] = 2**22 + 12345  # beyond pid_max: no such process
    (run_dir / "state.json").write_text(json.dumps(state))
    got = runfolder.read_state(run_dir)
    assert got["state"] == "interrupted" and "gone" in got["reason"]
    assert runfolder.read_state(tmp_path)["state"] == "unknown"


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_hushes_what_the_libraries_log_while_a_run_unwinds(caplog, signame):
    """The failure a stopped run reports in one line is not repeated by nbclient's "Kernel died" (papermill's
    logger) or asyncio's never-retrieved error, which a kernel shut down under a pending reply can log after the
    signal; before the signal they are heard."""
    import logging
    import os
    import signal
    import time

    loggers = [logging.getLogger(name) for name in ("papermill", "asyncio")]
    caller = signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal (an xdist worker ignores it)
    try:
        with runner._Signals():
            loggers[0].error("heard before the signal")
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), getattr(signal, signame))
                time.sleep(10)  # the handler raises in this (the main) thread at once; unhandled, the test fails
            for logger in loggers:
                logger.error("Kernel died while waiting for execute reply.")
        assert [r.getMessage() for r in caplog.records] == ["heard before the signal"]
        expected = [] if signame == "SIGINT" else [signame]  # Ctrl-C keeps its own words
        named = list(runner._RECEIVED)
        assert named == expected
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the caller's handler is back"
    finally:
        signal.signal(signal.SIGINT, caller)
        for logger in loggers:
            logger.disabled = False


_DRIVER = """
import signal
import sys
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, even if CI started us ignoring it
sys.path.insert(0, {repo!r})
from weftlib.suite import index_page, params, runner
index_page.environment = lambda: {env!r}  # the index's provenance imports torch: seconds, nothing to test here
plan = params.load_plan(Path({params!r}), None, Path({nb_dir!r}))
try:
    runner.run_suite(plan, out={out!r}, appendix=None)
except runner.RunInterrupted as exc:
    print("interrupted:", exc, file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_stopped_run_says_interrupted_in_one_line(tmp_path, signame):
    """Ctrl-C (SIGINT) and a kill (SIGTERM) leave state.json saying interrupted, an index, and one line on
    stderr: no asyncio traceback, no kernel warning."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO, STUB_ENVIRONMENT, write_notebook

    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    write_notebook(nb_dir / "10_slow.ipynb", 'run_dir = ""', "import time\ntime.sleep(60)")
    params_file = _write(tmp_path, "notebooks: [10_slow]\n")
    out = tmp_path / "run"
    script = _DRIVER.format(
        repo=str(REPO), params=str(params_file), nb_dir=str(nb_dir), out=str(out), env=STUB_ENVIRONMENT
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until the slow cell runs
        executed = out / "10_slow.ipynb"
        if executed.exists() and "time.sleep" in executed.read_text() and '"status": "running"' in executed.read_text():
            break
        time.sleep(0.5)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [err.strip()], err  # exactly one line
    assert err.startswith("interrupted:") and signame in err and "Traceback" not in err
    state = runfolder.read_state(out)
    assert state["state"] == "interrupted" and state["notebook"] == "10_slow" and signame in state["reason"]
    assert (out / "index.html").exists()


def test_status_command_reports_the_state(tmp_path, capsys):
    from weftlib.__main__ import main

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    runfolder.write_state(run_dir, "passed")
    assert main(["status", str(run_dir)]) == 0 and '"state": "passed"' in capsys.readouterr().out
    runfolder.write_state(run_dir, "interrupted", reason="stopped by SIGTERM")
    assert main(["status", str(run_dir)]) == 1 and "SIGTERM" in capsys.readouterr().out
    with pytest.raises(ValueError, match="state must be one of"):
        runfolder.write_state(run_dir, "done")


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
@pytest.mark.parametrize("outside, seen", [(None, None), ("0", "0")])
def test_kernels_get_the_allocator_setting_unless_the_caller_chose(tiny_suite, tmp_path, monkeypatch, outside, seen):
    """Every kernel the runner starts asks torch's allocator for huge pages (measure.ALLOCATOR_ENV); a value
    the caller already set is kept."""
    from tests.conftest import write_notebook
    from weftlib.measure import ALLOCATOR_ENV

    nb_dir, write = tiny_suite
    names = sorted(ALLOCATOR_ENV)
    write_notebook(
        nb_dir / "30_env.ipynb",
        'run_dir = ""',
        f'import os\nrec = record.Recorder("30_env", run_dir)\nrec.record("env", [os.environ.get(n) for n in {names!r}])',
    )
    for name in names:
        if outside is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, outside)
    plan = params.load_plan(write("cell_timeout: 60\nnotebooks: [30_env]\n"), None, nb_dir)
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lambda line: None)
    assert result.passed
    got = json.loads((tmp_path / "run" / "30_env" / "metrics.json").read_text())["metrics"]["env"]
    assert got == ([ALLOCATOR_ENV[n] for n in names] if seen is None else [seen] * len(names))


def test_a_progress_line_closes_the_brackets_its_code_opens(tiny_suite):
    import nbformat

    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    lines: list[str] = []
    watcher = progress.Progress(plan, {}, lines.append)
    watcher.notebook_start(1, "10_ok")
    clock = iter([0.0, 30.0])
    watcher.clock = lambda: next(clock)
    cell = nbformat.v4.new_code_cell("costs = pd.DataFrame(\n    rows\n)")
    watcher.cell_started(22, cell)
    watcher.cell_finished(22, cell)
    assert lines[-1] == "      10_ok cell 22 (costs = pd.DataFrame(…)): done in 30 s"
    long = nbformat.v4.new_code_cell(
        "geoms = geometry.grid(bench_sizes, kernel=bench_kernel, heads=heads, dim=bench_dim)"
    )
    said = progress._first_line(long)
    assert said == "geoms = geometry.grid(bench_sizes, kernel=bench_kernel, h…)"
    commented = nbformat.v4.new_code_cell("naf_references = {}  # the faithful graphs' outputs")
    assert progress._first_line(commented) == "naf_references = {}"
    for text in (said, progress._first_line(cell), progress._first_line(nbformat.v4.new_code_cell("x = {'a': [1,"))):
        assert text.count("(") == text.count(")") and text.count("[") == text.count("]"), text


def test_a_cell_running_past_a_minute_says_so_on_a_first_run_and_relays_its_bars(tiny_suite):
    import nbformat

    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    lines: list[str] = []
    watcher = progress.Progress(plan, {}, lines.append)  # no earlier run: nothing to estimate from
    watcher.notebook_start(1, "10_ok")
    now = [0.0]
    watcher.clock = lambda: now[0]
    cell = nbformat.v4.new_code_cell("rows = benchmark.sweep(geoms)")
    watcher.cell_started(7, cell)
    assert watcher._beats is not None and watcher._beats.is_alive()  # the heartbeat runs while the cell does
    now[0] = 14 * 60 + 26
    watcher.beat()
    assert lines[-1].startswith("      10_ok cell 7 (rows = benchmark.sweep(geoms)): still running after 14 min 26 s")
    assert "no earlier run of this cell to estimate from" in lines[-1]
    bar = "attention sweep:  40%|████      | 4/10 [05:46<08:39, 86.5s/formulation, naf_512]"
    watcher.relay.write("\rattention sweep:   0%|          | 0/10 [00:00<?, ?formulation/s]\r" + bar)
    watcher.relay.write("\r" + bar.replace("86.5s", "86.6s"))  # a redraw at the same count is said once
    watcher.relay.write("a UserWarning the notebook keeps\n")
    assert lines[-2:] == [
        "      10_ok cell 7: attention sweep:   0%|          | 0/10 [00:00<?, ?formulation/s]",
        f"      10_ok cell 7: {bar}",
    ]
    beats = watcher._beats
    watcher.cell_finished(7, cell)
    assert watcher._beats is None and not beats.is_alive()
    said = len(lines)
    watcher.beat()  # no cell running: nothing to say
    assert len(lines) == said
    # a cell that ran last time says what is left
    history = {"notebooks": {"10_ok": {"seconds": 900.0, "cells": {"7": {"seconds": 866.0, "line": cell.source}}}}}
    watcher = progress.Progress(plan, history, lines.append)
    watcher.notebook_start(1, "10_ok")
    watcher.clock = lambda: now[0]
    watcher.cell_started(7, cell)
    now[0] += 120
    watcher.beat()
    watcher.cell_finished(7, cell)
    assert "still running after 2 min; took 14 min 26 s last time; about" in lines[-2]


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_each_notebook_page_names_the_plan_it_ran_in(tiny_suite, tmp_path):
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lambda s: None)
    page = (result.run_dir / "10_ok.html").read_text()
    assert f"Ran in the plan {plan.source.name}, which gives this notebook no parameters" in page
    assert "default parameters." not in page
    assert runner.plan_note({"size": 4, "tol": 1e-6}, "params/appendix.yaml") == (
        "Ran in the plan appendix.yaml, which gave it size = 4; tol = 1 × 10⁻⁶; the other parameters are the "
        "notebook's defaults."
    )


def _earlier_run(folder, plan, kept):
    folder.mkdir(parents=True)
    summary = runfolder.RunSummary(params_hash=plan.digest(), finished="2026-12-06T10:00:00+00:00", disk_bytes=kept)
    runfolder.write_summary(folder, summary)


def test_a_run_is_refused_before_it_writes_when_its_plans_last_run_kept_more_than_is_free(tiny_suite, tmp_path):
    """The last run of the same plan kept more than the disk has free: refused at once, nothing written, and
    the message says how much is free, what the last run kept and where. A run of another plan is not held
    back by it, nor is a run of this plan when there is room."""
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    free = room.free_bytes(tmp_path)
    _earlier_run(tmp_path / "runs" / "a", plan, 2 * free)
    out = tmp_path / "runs" / "b"
    with pytest.raises(room.NoRoom, match=r"not enough disk for this run: .* free .* kept .*runs/a"):
        runner.run_suite(plan, out=out, appendix=None, log=lambda line: None, history=(tmp_path / "runs",))
    assert not out.exists()
    other = params.load_plan(write("notebooks:\n  - name: 10_ok\n    parameters: {size: 4}\n"), None, nb_dir)
    assert runfolder.newest_run(other.digest(), (tmp_path / "runs",)) is None
    room.check_room(out, free // 2, tmp_path / "runs" / "a", tmp_path / "runs")  # room enough: no refusal


def test_kept_bytes_counts_a_hard_linked_file_once(tmp_path):
    """The published appendix hard-links the run's files: a run and its copy keep the bytes once."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "graph.onnx").write_bytes(b"x" * 100_000)
    one = room.kept_bytes(tmp_path)
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "graph.onnx").hardlink_to(tmp_path / "run" / "graph.onnx")
    assert room.kept_bytes(tmp_path) == one >= 100_000
    (tmp_path / "copy" / "other.onnx").write_bytes(b"y" * 100_000)
    assert room.kept_bytes(tmp_path) >= one + 100_000


def test_no_room_is_an_error_line_and_exit_2(tmp_path, capsys, monkeypatch):
    from weftlib.__main__ import main

    def refuse(*args):
        raise room.NoRoom("not enough disk for this run: 1 GiB free")

    monkeypatch.setattr(runner, "check_room", refuse)
    monkeypatch.setattr(runner, "newest_run", lambda *a: (tmp_path, runfolder.RunSummary(disk_bytes=1)))
    code = main(["run", "--params", str(params.DEFAULT_PLAN), "--out", str(tmp_path / "o"), "--no-publish"])
    assert code == 2 and capsys.readouterr().err == "error: not enough disk for this run: 1 GiB free\n"
    assert not (tmp_path / "o").exists()
