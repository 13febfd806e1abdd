"""The suite's one folder rule (`weftlib.gate.folder_swap.building`): built beside the target and swapped in
whole, only over a folder of its own kind, keeping every file it did not write, never deleting an input, and
leaving nothing half-built on an error, Ctrl-C or SIGTERM (issue 35)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from tests.conftest import REPO, STUB_ENVIRONMENT
from weftlib.gate import folder_swap
from weftlib.gate.folder_swap import MARKER, FolderRefused, building


def write(target: Path, files: dict[str, str], kind: str = "test folder", **kw) -> None:
    with building(target, kind, **kw) as build:
        for rel, text in files.items():
            (build / rel).parent.mkdir(parents=True, exist_ok=True)
            (build / rel).write_text(text)


def hidden(folder: Path) -> list[str]:
    """What a write may have left beside its target: hidden build or old folders."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def tree(folder: Path) -> dict[str, str]:
    """Every file of `folder` but the marker, with its text."""
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def test_a_second_write_keeps_what_the_suite_did_not_write_and_drops_its_own_old_files(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1", "sub/b.txt": "1", "old.txt": "gone next time"})
    assert json.loads((out / MARKER).read_text()) == {"kind": "test folder", "files": ["a.txt", "old.txt", "sub/b.txt"]}
    (out / "a.dfc.json").write_text("a result")  # what the DFC script writes beside a graph
    (out / "sub" / "notes.txt").write_text("the user's")
    write(out, {"a.txt": "2", "sub/b.txt": "2"})
    assert tree(out) == {"a.txt": "2", "sub/b.txt": "2", "a.dfc.json": "a result", "sub/notes.txt": "the user's"}
    assert hidden(tmp_path) == []
    write(out, {"a.txt": "3"})  # kept files stay theirs on every later write
    assert tree(out) == {"a.txt": "3", "a.dfc.json": "a result", "sub/notes.txt": "the user's"}


def test_a_folder_the_suite_did_not_write_or_wrote_as_something_else_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "partition.json").write_text("mine")
    with pytest.raises(FolderRefused, match=r"not empty and not a test folder of this suite"):
        write(theirs, {"x": "1"})
    assert tree(theirs) == {"partition.json": "mine"}
    other = tmp_path / "other"
    write(other, {"x": "1"}, kind="probe pack")
    with pytest.raises(FolderRefused, match="is a probe pack of this suite, not a partition"):
        write(other, {"x": "2"}, kind="partition")
    assert (other / "x").read_text() == "1" and hidden(tmp_path) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    write(empty, {"x": "1"})  # an empty folder is no one's
    assert tree(empty) == {"x": "1"}


def test_an_input_inside_the_target_is_never_deleted(tmp_path):
    out = tmp_path / "out"
    write(out, {"model.onnx": "the first cut's segment", "partition.json": "1"})
    model = out / "model.onnx"
    with building(out, "test folder", inputs=[model]) as build:
        (build / "model.00.host.onnx").write_text(model.read_text())  # read during the build
        (build / "partition.json").write_text("2")
    assert tree(out) == {
        "model.onnx": "the first cut's segment",
        "model.00.host.onnx": "the first cut's segment",
        "partition.json": "2",
    }


def test_a_file_of_theirs_in_the_way_of_a_new_one_is_refused_and_nothing_changes(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    (out / "b.txt").write_text("the user's b")
    with pytest.raises(FolderRefused, match=r"in the way of new ones: \['b.txt'\]"):
        write(out, {"a.txt": "2", "b.txt": "ours"})
    assert tree(out) == {"a.txt": "1", "b.txt": "the user's b"} and hidden(tmp_path) == []


def test_a_failure_while_building_leaves_the_target_as_it_was(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    with pytest.raises(RuntimeError), building(out, "test folder") as build:
        (build / "a.txt").write_text("half")
        raise RuntimeError("the build fails")
    assert tree(out) == {"a.txt": "1"} and hidden(tmp_path) == []


def test_a_symlinked_target_is_written_through_and_no_link_is_left_behind(tmp_path):
    real = tmp_path / "real"
    link = tmp_path / "link"
    write(real, {"a.txt": "1"})
    link.symlink_to(real)
    write(link, {"a.txt": "2"})
    assert link.is_symlink() and link.resolve() == real and (link / "a.txt").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # no `.old-*` link beside them
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FolderRefused, match="which does not exist"):
        write(dangling, {"a.txt": "1"})


def test_the_current_folder_and_a_file_are_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FolderRefused, match=r"^\. is the current folder"):
        write(Path("."), {"a.txt": "1"})
    (tmp_path / "f").write_text("a file")
    with pytest.raises(FolderRefused, match="is a file, not a folder"):
        write(tmp_path / "f", {})
    with pytest.raises(FolderRefused, match="is a file, not a folder"):
        write(tmp_path / "f" / "below", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_signal_during_the_swap_waits_until_the_swap_is_whole(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    swap = folder_swap._swap

    def killed_while_swapping(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs here, and only notes the signal
        swap(*args)

    monkeypatch.setattr(folder_swap, "_swap", killed_while_swapping)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        write(out, {"a.txt": "2"})
    assert tree(out) == {"a.txt": "2"} and hidden(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is the suite's only while it writes


_SLOW_WRITE = """
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, even if CI started us ignoring it
sys.path.insert(0, {repo!r})
from weftlib.gate.folder_swap import building
with building(Path({out!r}), "test folder") as build:
    for i in range(5):
        (build / f"part{{i}}.onnx").write_text("half")
    print("building", flush=True)
    time.sleep(60)
"""


def start_slow_write(out: Path) -> subprocess.Popen:
    script = _SLOW_WRITE.format(repo=str(REPO), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "building"
    return proc


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_while_building_leaves_nothing_half_built(tmp_path, signame):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    proc = start_slow_write(out)
    assert len(hidden(tmp_path)) == 2 and ".out.lock" in hidden(tmp_path)  # the build and the lock, beside it
    proc.send_signal(getattr(signal, signame))
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert tree(out) == {"a.txt": "1"} and hidden(tmp_path) == []


def test_the_write_after_a_sigkill_removes_the_half_built_folder(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    proc = start_slow_write(out)
    proc.kill()
    proc.communicate(timeout=60)
    assert len(hidden(tmp_path)) == 2  # SIGKILL cannot be caught: the build and the lock file (unlocked) stay
    write(out, {"a.txt": "2"})
    assert tree(out) == {"a.txt": "2"} and hidden(tmp_path) == []


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_swap_killed_half_way_is_finished_or_undone_by_the_next_write(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    (out / "a.dfc.json").write_text("a result")
    pid = dead_pid()
    carried = tmp_path / f".out.build-{pid}-abc"  # killed after carrying the result into its new folder
    carried.mkdir()
    (carried / "a.txt").write_text("2")
    (carried / MARKER).write_text(json.dumps({"kind": "test folder", "files": ["a.txt"]}))
    os.rename(out / "a.dfc.json", carried / "a.dfc.json")
    write(out, {"a.txt": "3"})
    assert tree(out) == {"a.txt": "3", "a.dfc.json": "a result"} and hidden(tmp_path) == []
    os.rename(out, tmp_path / f".out.old-{pid}-abc")  # killed between the two renames of the swap
    write(out, {"a.txt": "4"})
    assert tree(out) == {"a.txt": "4", "a.dfc.json": "a result"} and hidden(tmp_path) == []


def test_the_new_folder_has_the_mode_a_plain_folder_would(tmp_path):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    plain = tmp_path / "plain"
    plain.mkdir()
    assert out.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


# ---- one writer at a time (issue 43): a lock on the target for the whole build and swap


def test_a_second_writer_is_refused_while_the_first_is_paused_between_its_renames(tmp_path, monkeypatch):
    """Writer A stops between the renames of its swap (it has carried the user's notes into its new folder); the
    user drops another file into the target; writer B comes. B used to swap in its own folder (carrying the
    late file) and A then deleted it as "the old folder": both reported success and the user's file was gone."""
    out = tmp_path / "out"
    write(out, {"a.txt": "0"})
    (out / "notes.txt").write_text("mine")
    paused, resume = threading.Event(), threading.Event()
    rename, renames = os.rename, []

    def renaming(src, dst):
        if threading.current_thread().name == "A":
            renames.append(src)
            if len(renames) == 2:  # the notes are carried; the target is next
                paused.set()
                assert resume.wait(30)
        return rename(src, dst)

    monkeypatch.setattr(os, "rename", renaming)
    outcome = {}

    def writer_a():
        try:
            write(out, {"a.txt": "A"})
            outcome["A"] = "written"
        except BaseException as exc:
            outcome["A"] = repr(exc)

    a = threading.Thread(target=writer_a, name="A")
    a.start()
    try:
        assert paused.wait(30)
        (out / "late.txt").write_text("mine too")
        with pytest.raises(FolderRefused, match=rf"being written by another process \(pid {os.getpid()}\)") as refused:
            write(out, {"a.txt": "B"})
        assert "\n" not in str(refused.value)
    finally:
        resume.set()
        a.join(30)
    assert outcome["A"] == "written"
    assert tree(out) == {"a.txt": "A", "notes.txt": "mine", "late.txt": "mine too"} and hidden(tmp_path) == []


def test_a_write_while_another_process_builds_is_refused_in_one_line_and_waits_for_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    write(out, {"a.txt": "1"})
    proc = start_slow_write(out)
    try:
        with pytest.raises(FolderRefused, match=rf"being written by another process \(pid {proc.pid}\)"):
            write(out, {"a.txt": "2"})
        from weftlib.gate.__main__ import main

        assert main(["probes", "--out", str(out)]) == 2  # the CLI: one line, rc 2, before any work
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "being written by another process" in err and err.count("\n") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert tree(out) == {"a.txt": "1"} and hidden(tmp_path) == []
    write(out, {"a.txt": "3"})  # the lock went with its writer
    assert tree(out) == {"a.txt": "3"} and hidden(tmp_path) == []


# ---- SIGTERM and SIGHUP as Ctrl-C (issue 43): rc 130, one line, nothing left in the temporary folder

_SLOW_FIX = """
import sys, time
sys.path.insert(0, {repo!r})
import onnxruntime
def slow_session(*args, **kwargs):  # the proof's first run, made slow
    print("proving", flush=True)
    time.sleep(60)
onnxruntime.InferenceSession = slow_session
from weftlib.gate.__main__ import main
sys.exit(main(["fix", {model!r}, "--out", {out!r}]))
"""


def left_in(tmp: Path) -> list[str]:
    """What is left in a temporary folder, but onnxruntime's own session file (`.ses`, written when it is
    imported and read again by the next process: not a leftover of the suite's)."""
    return sorted(p.name for p in tmp.iterdir() if p.name != ".ses")


def stopped(script: str, tmp: Path, signame: str, ready: Callable[[subprocess.Popen], bool]) -> tuple[int, str]:
    """Run `script` with `tmp` as its TMPDIR, wait until `ready`, send `signame`: (rc, stderr). The script starts
    with the signal's default disposition, as under a terminal: started by `nohup` (or a CI runner that does the
    same) it would inherit SIGHUP ignored, which the commands rightly keep ignored."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    default = f"import signal\nsignal.signal(signal.{signame}, signal.SIG_DFL)\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", default + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert ready(proc)
    finally:
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_the_gate_stopped_mid_proof_exits_130_in_one_line_and_leaves_no_temporary_folder(tmp_path, signame):
    from weftlib.gate.record import public_record

    model = tmp_path / "m.onnx"  # a graph a rewrite answers (Expand), so fix reaches its proof
    onnx.save(public_record.BUILDERS["clef-expand"](), model)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = _SLOW_FIX.format(repo=str(REPO), model=str(model), out=str(tmp_path / "fixed"))

    def proving(proc: subprocess.Popen) -> bool:
        return proc.stdout is not None and proc.stdout.readline().strip() == "proving"

    rc, err = stopped(script, tmp, signame, proving)
    assert rc == 130 and err.strip() == f"interrupted ({signame})", err
    assert left_in(tmp) == [] and not (tmp_path / "fixed").exists() and hidden(tmp_path) == []


_SLOW_START = """
import sys, time
sys.path.insert(0, {repo!r})
from weftlib.suite import runner
def slow_validate(plan):  # checking the plan, made slow
    print("checking", flush=True)
    time.sleep(60)
runner.params_mod.validate = slow_validate
from weftlib.__main__ import main
sys.exit(main(["run", "--params", {params!r}, "--out", {out!r}, "--no-publish"]))
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_run_stopped_before_it_starts_exits_130_in_one_line(tmp_path, signame):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = _SLOW_START.format(repo=str(REPO), params=str(REPO / "params" / "default.yaml"), out=str(tmp_path / "run"))

    def checking(proc: subprocess.Popen) -> bool:
        return proc.stdout is not None and proc.stdout.readline().strip() == "checking"

    rc, err = stopped(script, tmp, signame, checking)
    assert rc == 130 and err.strip() == f"interrupted ({signame}) before the run started; nothing ran", err
    assert left_in(tmp) == []


_SLOW_KERNEL = """
import functools, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
import weftlib.__main__ as cli
from weftlib.suite import index_page, params
index_page.environment = lambda: {env!r}  # the index's provenance imports torch: seconds, nothing to test here
cli.load_plan = functools.partial(params.load_plan, notebook_dir=Path({nb_dir!r}))
sys.exit(cli.main(["run", "--params", {params!r}, "--out", {out!r}, "--no-publish"]))
"""


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
@pytest.mark.parametrize("signame", ["SIGTERM"])
def test_a_run_stopped_mid_notebook_leaves_nothing_its_kernel_made_in_the_temporary_folder(tmp_path, signame):
    """The kernel is killed with the run, before it can remove its scratch (a graph being proven): the run's
    own temporary folder, removed by the runner, is where it was."""
    from tests.conftest import write_notebook

    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    body = "import tempfile, time\nscratch = tempfile.mkdtemp(prefix='weftlib-fix-')\ntime.sleep(60)"
    write_notebook(nb_dir / "10_slow.ipynb", 'run_dir = ""', body)
    (tmp_path / "p.yaml").write_text("notebooks: [10_slow]\n")
    tmp, out = tmp_path / "tmp", tmp_path / "run"
    tmp.mkdir()
    script = _SLOW_KERNEL.format(
        repo=str(REPO), nb_dir=str(nb_dir), params=str(tmp_path / "p.yaml"), out=str(out), env=STUB_ENVIRONMENT
    )

    def sleeping(proc: subprocess.Popen) -> bool:
        deadline = time.time() + 90
        while time.time() < deadline:
            if any(tmp.rglob("weftlib-fix-*")):
                return True
            time.sleep(0.5)
        return False

    rc, err = stopped(script, tmp, signame, sleeping)
    assert rc == 130 and err.strip().startswith("interrupted:") and signame in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert left_in(tmp) == []
