"""Runs that share a checkout: each kernel talks over sockets private to its run, so four runs started together
in one checkout all pass, a read-only checkout runs with a writable --out (one of the four, where the machine
can mount one), and no socket is left in the checkout or the working directory. Each run is a tiny notebook in
its own process, as users start them: one batch of four, the most this test ever started at once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, STUB_ENVIRONMENT, write_notebook
from weftlib.suite import runfolder, runner

DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from weftlib.suite import index_page, params, runner
index_page.environment = lambda: {env!r}  # the index's provenance imports torch: seconds per run, nothing to test here
plan = params.load_plan(Path({params!r}), None, Path({nb_dir!r}))
time.sleep(max(0.0, {start!r} - time.time()))  # every run starts its kernel at the same moment
result = runner.run_suite(plan, out={out!r}, appendix=None, log=lambda line: None)
sys.exit(0 if result.passed else 1)
"""


def tiny_plan(tmp_path: Path) -> tuple[Path, Path]:
    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    write_notebook(
        nb_dir / "10_quick.ipynb",
        'run_dir = ""\nsize = 3',
        'rec = record.Recorder("10_quick", run_dir)\nrec.record("size", size)\nassert size == 3',
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text("cell_timeout: 120\nnotebooks: [10_quick]\n")
    return nb_dir, plan


def sockets_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("kernel-ipc*"))


def start_runs(tmp_path: Path, wraps: list[list[str]]) -> list[tuple[Path, subprocess.Popen]]:
    """One run per entry of `wraps` (the command each is started under: [] for none), all at one moment."""
    nb_dir, plan = tiny_plan(tmp_path)
    start = time.time() + 2.0  # past every driver's imports
    runs = []
    for i, wrap in enumerate(wraps):
        out = tmp_path / f"run{i}"
        script = DRIVER.format(
            repo=str(REPO), params=str(plan), nb_dir=str(nb_dir), out=str(out), start=start, env=STUB_ENVIRONMENT
        )
        command = [*wrap, sys.executable, "-c", script]
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        runs.append((out, proc))
    return runs


def finish(runs: list[tuple[Path, subprocess.Popen]]) -> None:
    for out, proc in runs:
        text, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, text[-3000:]
        assert runfolder.read_state(out)["state"] == "passed", text[-3000:]
        assert "Invalid Signature" not in text and "ZMQError" not in text, text[-3000:]


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_four_runs_started_together_in_one_checkout_all_pass_one_read_only(tmp_path):
    """Four runs at once (one in a read-only bind mount of the checkout, where this machine allows it): each
    passes, and nothing of a kernel's is ever put in the checkout."""
    before = sockets_in(REPO)
    read_only = _read_only_wrap(REPO)
    finish(start_runs(tmp_path, [[], [], [], read_only or []]))
    assert sockets_in(REPO) == before
    assert not (REPO / ".ro-probe").exists()


def _read_only_wrap(repo: Path) -> list[str] | None:
    """`unshare` into a private mount namespace where the checkout is bind-mounted read-only (root only:
    root ignores file modes, so chmod cannot make a read-only checkout for it); None where that is refused."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{repo}" "{repo}" && ! touch "{repo}/.ro-probe"'],
        check=False,
        capture_output=True,
    )
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{repo}" "{repo}" && exec "$0" "$@"']


def test_the_command_line_refuses_to_publish_into_a_read_only_checkout(tmp_path):
    """The command line publishes into the checkout by default: in a read-only one it is refused before the
    run, with what to do (that a read-only checkout runs with a writable --out: the test above)."""
    wrap = _read_only_wrap(REPO)
    if wrap is None:
        pytest.skip("cannot bind-mount the checkout read-only here (needs unshare and mount rights)")
    cli = subprocess.run(
        [*wrap, sys.executable, "-m", "weftlib", "run", "--out", str(tmp_path / "cli")],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and "cannot be written" in cli.stderr and "--no-publish" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr and not (tmp_path / "cli").exists()


@pytest.mark.notebook  # runs a notebook in a kernel: `make test`, not `make check`
def test_the_kernel_sockets_are_removed_when_the_notebook_fails(tmp_path, monkeypatch):
    """Every way out of a notebook removes its private socket folder (here: a failing cell)."""
    import tempfile

    made: list[str] = []
    real = tempfile.TemporaryDirectory

    def watched(*args, **kwargs):
        folder = real(*args, **kwargs)
        made.append(folder.name)
        return folder

    monkeypatch.setattr(runner.tempfile, "TemporaryDirectory", watched)
    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    write_notebook(nb_dir / "10_fails.ipynb", 'run_dir = ""', "raise RuntimeError('no')")
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text("notebooks: [10_fails]\n")
    from weftlib.suite import params

    plan = params.load_plan(plan_file, None, nb_dir)
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lambda line: None)
    assert result.notebooks[0].status == "failed"
    assert made and all(not Path(m).exists() for m in made)
    assert all(len(str(Path(m) / "kernel-99999")) < 100 for m in made)  # fits a Unix socket's path
