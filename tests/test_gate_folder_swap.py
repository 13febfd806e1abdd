"""The suite's one folder rule (`weftlib.gate.folder_swap.building`): built beside the target and swapped in
whole, only over a folder of its own kind, keeping every file it did not write, never deleting an input, and
leaving nothing half-built on an error, Ctrl-C or SIGTERM (issue 35)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
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
