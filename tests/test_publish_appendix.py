"""The appendix swap: `outputs/appendix` is a link to a complete copy, replaced with no moment where it is missing.

The gap check traces every line `publish_appendix` (and its helpers) executes and reads the appendix through
its path before each: the two-rename scheme this replaces fails it between its renames.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from weftlib.__main__ import main
from weftlib.suite import appendix as swap
from weftlib.suite import runfolder
from weftlib.suite.files import write_atomic


def make_run(root, name, text):
    run = root / name
    (run / "01_x").mkdir(parents=True)
    (run / "index.html").write_text(text)
    (run / "01_x" / "metrics.json").write_text(f'{{"run": "{name}"}}')
    runfolder.write_state(run, "passed")
    return run


def copies(appendix):
    return sorted(p for p in swap.versions_dir(appendix).iterdir() if swap.VERSION_NAME.match(p.name))


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def traced_publish(run, appendix, seen, files=(swap.__file__,)):
    """publish_appendix with the appendix's index read before every line executed in `files`."""
    index = appendix / "index.html"

    def local(frame, event, arg):
        if event in ("line", "return"):
            seen.append(index.read_text() if index.is_file() else None)
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename in files else None

    sys.settrace(tracer)
    try:
        return swap.publish_appendix(run, appendix)
    finally:
        sys.settrace(None)


def test_a_reader_never_finds_the_appendix_missing(tmp_path):
    appendix = tmp_path / "outputs" / "appendix"
    swap.publish_appendix(make_run(tmp_path, "old", "old"), appendix)
    seen = []
    result = traced_publish(make_run(tmp_path, "new", "new"), appendix, seen)
    assert result == appendix and appendix.is_symlink()
    assert len(seen) > 20 and None not in seen, f"the appendix was missing at step {seen.index(None)}"
    assert set(seen) == {"old", "new"} and seen[-1] == "new"
    assert seen.index("new") > len(seen) - 1 - seen[::-1].index("old")  # old, then new, never back
    assert (appendix / "index.html").read_text() == "new"


def test_the_check_catches_a_two_rename_swap(tmp_path, monkeypatch):
    """The gap check is not vacuous: a swap that moves the old folder away, then the new one in, fails it."""

    def two_renames(run_dir, appendix):
        staging, retired = appendix.parent / ".new", appendix.parent / ".old"
        shutil.copytree(run_dir, staging)
        appendix.rename(retired)
        staging.rename(appendix)
        shutil.rmtree(retired)
        return appendix

    monkeypatch.setattr(swap, "publish_appendix", two_renames)
    appendix = tmp_path / "appendix"
    shutil.copytree(make_run(tmp_path, "old", "old"), appendix)
    seen = []
    traced_publish(make_run(tmp_path, "new", "new"), appendix, seen, files=(__file__,))
    assert "old" in seen and None in seen and seen[-1] == "new"


def test_a_failed_copy_leaves_the_appendix_byte_identical_and_no_debris(tmp_path, monkeypatch):
    appendix = tmp_path / "appendix"
    swap.publish_appendix(make_run(tmp_path, "old", "old"), appendix)
    before, link_before = snapshot(appendix), os.readlink(appendix)
    versions_before = sorted(swap.versions_dir(appendix).iterdir())

    def half_copy(src, dst, **kw):
        (dst / "01_x").mkdir(parents=True)
        (dst / "index.html").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(swap.shutil, "copytree", half_copy)
    with pytest.raises(OSError, match="No space left"):
        swap.publish_appendix(make_run(tmp_path, "new", "new"), appendix)
    assert snapshot(appendix) == before and os.readlink(appendix) == link_before
    assert sorted(swap.versions_dir(appendix).iterdir()) == versions_before


def test_a_published_copy_links_the_runs_files_and_keeps_them_when_the_run_is_written_again(tmp_path, monkeypatch):
    """Gigabytes of graphs are linked, not copied; a later write of the run's index (renamed over, as the
    suite writes it) leaves the published file as it was; where no link can be made, the file is copied."""
    run = make_run(tmp_path, "run", "first")
    appendix = tmp_path / "outputs" / "appendix"
    swap.publish_appendix(run, appendix)
    published = appendix / "01_x" / "metrics.json"
    assert published.stat().st_ino == (run / "01_x" / "metrics.json").stat().st_ino
    write_atomic(run / "index.html", "rewritten")
    assert (appendix / "index.html").read_text() == "first"

    def no_link(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(swap.os, "link", no_link)
    swap.publish_appendix(make_run(tmp_path, "other", "second"), appendix)
    assert (appendix / "index.html").read_text() == "second"
    assert (appendix / "index.html").stat().st_ino != (tmp_path / "other" / "index.html").stat().st_ino


def test_old_versions_are_removed_and_the_link_survives_a_move(tmp_path):
    appendix = tmp_path / "outputs" / "appendix"
    for n in range(4):
        swap.publish_appendix(make_run(tmp_path, f"run{n}", f"run {n}"), appendix)
    kept = copies(appendix)
    assert len(kept) == 2  # the published copy and the one it replaced
    assert {(k / "index.html").read_text() for k in kept} == {"run 2", "run 3"}
    assert appendix.resolve() == max(kept) and not list(appendix.parent.glob(".appendix.link-*"))
    shutil.move(tmp_path / "outputs", tmp_path / "moved")
    assert (tmp_path / "moved" / "appendix" / "index.html").read_text() == "run 3"


def test_status_reads_the_published_link(tmp_path, capsys):
    appendix = tmp_path / "appendix"
    swap.publish_appendix(make_run(tmp_path, "run", "run"), appendix)
    assert main(["status", str(appendix)]) == 0
    assert '"state": "passed"' in capsys.readouterr().out
    assert runfolder.read_state(appendix)["state"] == "passed"


# ---- targets the suite did not create are refused; nothing is adopted, moved or deleted ------------------------


def users_folder(path):
    path.mkdir(parents=True)
    (path / "notes.md").write_text("my notes")
    (path / "sub").mkdir()
    (path / "sub" / "data.csv").write_text("1,2")
    return path


def refused(run, target, match):
    parent = target.parent
    before = {p: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in sorted(parent.rglob("*"))}
    with pytest.raises(swap.PublishError, match=match):
        swap.publish_appendix(run, target)
    after = {p: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in sorted(parent.rglob("*"))}
    assert after == before  # nothing written, moved or removed


def test_an_existing_folder_is_refused_twice_and_kept_whole(tmp_path):
    """A folder of the user's at the target is never moved into the versions nor removed."""
    target = users_folder(tmp_path / "out" / "mine")
    before = snapshot(target)
    for n in range(2):
        refused(make_run(tmp_path, f"run{n}", "new"), target, "a folder the suite did not create")
    assert snapshot(target) == before and not target.is_symlink()
    assert not swap.versions_dir(target).exists()


def test_a_file_a_foreign_link_or_a_foreign_versions_folder_is_refused(tmp_path):
    run = make_run(tmp_path, "run", "new")
    out = tmp_path / "out"
    out.mkdir()
    (out / "file").write_text("mine")
    refused(run, out / "file", "a file the suite did not create")
    elsewhere = users_folder(tmp_path / "elsewhere")
    (out / "link").symlink_to(elsewhere)
    refused(run, out / "link", "a symlink the suite did not create")
    users_folder(out / ".fresh.versions")
    refused(run, out / "fresh", "the suite did not make it")


def test_the_working_directory_the_checkout_and_the_run_itself_are_refused(tmp_path, monkeypatch):
    from tests.conftest import REPO

    run = make_run(tmp_path, "run", "new")
    work = users_folder(tmp_path / "work")
    monkeypatch.chdir(work)
    for target, match in (
        ("/", "names no folder"),
        (".", "the working directory"),
        (work, "the working directory"),
        (tmp_path, "the working directory or a folder above it"),
        (REPO, "the repository root"),
        (run, "the run folder"),
        (run / "inside", "the run folder or inside it"),
    ):
        with pytest.raises(swap.PublishError, match=match):
            swap.check_target(target, run)
    assert snapshot(work) == {p.relative_to(work): p.read_bytes() for p in work.rglob("*") if p.is_file()}


def test_the_command_line_refuses_the_target_before_anything_runs(tmp_path, capsys, monkeypatch):
    """`--appendix .` once resolved to the working directory, found only after the whole run."""
    work = users_folder(tmp_path / "work")
    monkeypatch.chdir(work)
    before = snapshot(work)
    code = main(["run", "--out", str(tmp_path / "run2"), "--appendix", "."])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err and "the working directory" in err
    assert not (tmp_path / "run2").exists() and snapshot(work) == before


def test_nothing_in_the_versions_folder_but_the_suites_copies_is_removed(tmp_path):
    appendix = tmp_path / "appendix"
    swap.publish_appendix(make_run(tmp_path, "a", "a"), appendix)
    stray = swap.versions_dir(appendix) / "keep-me.txt"
    stray.write_text("mine")
    for n in range(3):
        swap.publish_appendix(make_run(tmp_path, f"r{n}", f"r{n}"), appendix)
    assert stray.read_text() == "mine" and len(copies(appendix)) == 2


# ---- publishers take turns --------------------------------------------------------------------------------------

PUBLISHER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from weftlib.suite import appendix as swap
time.sleep(max(0.0, {start!r} - time.time()))
for n in range({times}):
    swap.publish_appendix(Path({run!r}), Path({appendix!r}))
"""


def big_run(root, name, files=300):
    run = make_run(root, name, name)
    for i in range(files):
        (run / "01_x" / f"part{i}.txt").write_text(f"{name} {i}")
    return run


def complete(copy, files=300):
    name = (copy / "index.html").read_text()
    return all((copy / "01_x" / f"part{i}.txt").read_text() == f"{name} {i}" for i in range(files))


def test_two_publishers_racing_always_leave_a_complete_copy_behind_the_link(tmp_path):
    import subprocess
    import time

    from tests.conftest import REPO

    appendix = tmp_path / "out" / "appendix"
    runs = [big_run(tmp_path, "one"), big_run(tmp_path, "two")]
    for trial in range(2):
        start = time.time() + 1.0
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    PUBLISHER.format(repo=str(REPO), start=start, times=3, run=str(run), appendix=str(appendix)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for run in runs
        ]
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, out[-2000:]
        assert appendix.is_symlink() and complete(appendix), f"trial {trial}: the link leads to a broken copy"
        assert all(complete(c) for c in copies(appendix)) and len(copies(appendix)) == 2
    assert not list(appendix.parent.glob(".appendix.link-*"))


def test_a_copy_that_fails_file_by_file_says_so_in_one_line(tmp_path, monkeypatch):
    """A full disk fails copytree once per file (shutil.Error with a list): the error names how many, the
    reason once and the first file, in one short line, and the appendix is left as it was."""
    appendix = tmp_path / "appendix"
    swap.publish_appendix(make_run(tmp_path, "old", "old"), appendix)
    before = snapshot(appendix)
    why = "[Errno 28] No space left on device: '{0}' -> '{1}'"
    errors = [
        (f"/run/{i}.onnx", f"/copy/{i}.onnx", why.format(f"/run/{i}.onnx", f"/copy/{i}.onnx")) for i in range(500)
    ]

    def full_disk(src, dst, **kw):
        (dst / "01_x").mkdir(parents=True)
        raise shutil.Error(errors)

    monkeypatch.setattr(swap.shutil, "copytree", full_disk)
    with pytest.raises(OSError) as caught:
        swap.publish_appendix(make_run(tmp_path, "new", "new"), appendix)
    message = str(caught.value)
    assert "500 files" in message and "[Errno 28] No space left on device" in message and "/run/0.onnx" in message
    assert len(message) < 400 and "\n" not in message and message.count("No space") == 1
    assert snapshot(appendix) == before
