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
from weftlib.suite import publish, runner


def make_run(root, name, text):
    run = root / name
    (run / "01_x").mkdir(parents=True)
    (run / "index.html").write_text(text)
    (run / "01_x" / "metrics.json").write_text(f'{{"run": "{name}"}}')
    runner.write_state(run, "passed")
    return run


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def exchange_supported(tmp_path) -> bool:
    a, b = tmp_path / "xa", tmp_path / "xb"
    a.write_text("a")
    b.mkdir()
    return publish._exchange(a, b) and a.is_dir() and b.read_text() == "a"


def traced_publish(run, appendix, seen, files=(publish.__file__,)):
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
        return publish.publish_appendix(run, appendix)
    finally:
        sys.settrace(None)


@pytest.mark.parametrize("before", ["link", "directory"])
def test_a_reader_never_finds_the_appendix_missing(tmp_path, before):
    appendix = tmp_path / "outputs" / "appendix"
    if before == "link":
        publish.publish_appendix(make_run(tmp_path, "old", "old"), appendix)
    else:  # a real folder, as the two-rename scheme left it
        if not exchange_supported(tmp_path):
            pytest.skip("no renameat2(RENAME_EXCHANGE) here: migrating a real folder has a one-rename gap")
        shutil.copytree(make_run(tmp_path, "old", "old"), appendix)
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

    monkeypatch.setattr(publish, "publish_appendix", two_renames)
    appendix = tmp_path / "appendix"
    shutil.copytree(make_run(tmp_path, "old", "old"), appendix)
    seen = []
    traced_publish(make_run(tmp_path, "new", "new"), appendix, seen, files=(__file__,))
    assert "old" in seen and None in seen and seen[-1] == "new"


def test_a_real_folder_is_migrated_and_kept_as_the_previous_version(tmp_path):
    appendix = tmp_path / "appendix"
    shutil.copytree(make_run(tmp_path, "old", "old"), appendix)
    before = snapshot(appendix)
    publish.publish_appendix(make_run(tmp_path, "new", "new"), appendix)
    assert appendix.is_symlink() and not os.path.isabs(os.readlink(appendix))
    kept = sorted(publish.versions_dir(appendix).iterdir())
    assert len(kept) == 2 and [snapshot(k) == before for k in kept].count(True) == 1
    assert snapshot(appendix) == snapshot(tmp_path / "new")


def test_without_the_exchange_call_the_migration_still_publishes(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "_exchange", lambda a, b: False)
    appendix = tmp_path / "appendix"
    shutil.copytree(make_run(tmp_path, "old", "old"), appendix)
    publish.publish_appendix(make_run(tmp_path, "new", "new"), appendix)
    assert appendix.is_symlink() and (appendix / "index.html").read_text() == "new"
    assert not list(tmp_path.glob(".appendix.link-*"))


def test_a_failed_copy_leaves_the_appendix_byte_identical_and_no_debris(tmp_path, monkeypatch):
    appendix = tmp_path / "appendix"
    publish.publish_appendix(make_run(tmp_path, "old", "old"), appendix)
    before, link_before = snapshot(appendix), os.readlink(appendix)
    versions_before = sorted(publish.versions_dir(appendix).iterdir())

    def half_copy(src, dst, **kw):
        (dst / "01_x").mkdir(parents=True)
        (dst / "index.html").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publish.shutil, "copytree", half_copy)
    with pytest.raises(OSError, match="No space left"):
        publish.publish_appendix(make_run(tmp_path, "new", "new"), appendix)
    assert snapshot(appendix) == before and os.readlink(appendix) == link_before
    assert sorted(publish.versions_dir(appendix).iterdir()) == versions_before


def test_old_versions_are_removed_and_the_link_survives_a_move(tmp_path):
    appendix = tmp_path / "outputs" / "appendix"
    for n in range(4):
        publish.publish_appendix(make_run(tmp_path, f"run{n}", f"run {n}"), appendix)
    kept = sorted(publish.versions_dir(appendix).iterdir())
    assert len(kept) == 2  # the published copy and the one it replaced
    assert {(k / "index.html").read_text() for k in kept} == {"run 2", "run 3"}
    assert appendix.resolve() == max(kept) and not list(appendix.parent.glob(".appendix.link-*"))
    shutil.move(tmp_path / "outputs", tmp_path / "moved")
    assert (tmp_path / "moved" / "appendix" / "index.html").read_text() == "run 3"


def test_status_reads_the_published_link(tmp_path, capsys):
    appendix = tmp_path / "appendix"
    publish.publish_appendix(make_run(tmp_path, "run", "run"), appendix)
    assert main(["status", str(appendix)]) == 0
    assert '"state": "passed"' in capsys.readouterr().out
    assert runner.read_state(appendix)["state"] == "passed"
