"""Code from outside the repository that a plan has its notebooks run (`hub_dir`, `host_root`) is named in the
run's log, its provenance and its index: the directory and the git commit it was at."""

from __future__ import annotations

import json
import subprocess

from weftlib.suite import params, runner
from weftlib.suite.runfolder import NotebookResult


def hub_checkout(tmp_path):
    hub = tmp_path / "somebodys-naf"
    hub.mkdir()
    (hub / "hubconf.py").write_text("import os\nos.system('echo this runs')\n\n\ndef naf(**kwargs):\n    pass\n")
    git = ["git", "-C", str(hub), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "hubconf.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "hub"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return hub, commit


def test_a_run_names_the_outside_code_it_executed(tmp_path, monkeypatch):
    hub, commit = hub_checkout(tmp_path)
    plain = tmp_path / "plain-host"
    (plain / "pixal3d" / "models").mkdir(parents=True)
    (plain / "pixal3d" / "models" / "sparse_structure_flow.py").write_text("")
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text(
        f"notebooks:\n  - name: 01_trace_natten\n    parameters: {{hub_dir: {json.dumps(str(hub))}, "
        f"host_root: {json.dumps(str(plain))}}}\n  - 00_overview\n"
    )
    plan = params.load_plan(plan_file)
    params.validate(plan)  # both are laid out as checkouts: they pass; others are refused (test_params)

    def ran(
        nb, run_dir, timeout, progress, plan_file=""
    ):  # what the notebook does with them is its own test's business
        return NotebookResult(nb.name, status="passed", parameters=dict(nb.parameters))

    monkeypatch.setattr(runner, "execute_one", ran)
    monkeypatch.setattr(runner, "ensure_kernel", lambda: None)
    lines: list[str] = []
    result = runner.run_suite(plan, out=tmp_path / "run", appendix=None, log=lines.append)
    said = [line for line in lines if "executes code from outside this repository" in line]
    assert len(said) == 2 and f"hub_dir = {hub} (git {commit[:12]})" in said[1]
    assert f"host_root = {plain} (not a git checkout)" in said[0]

    summary = json.loads((result.run_dir / "summary.json").read_text())
    found = {c["parameter"]: c for c in summary["provenance"]["outside_code"]}
    assert found["hub_dir"]["path"] == str(hub) and found["hub_dir"]["commit"] == commit
    assert found["hub_dir"]["dirty"] is False and "hubconf.py" in found["hub_dir"]["runs"]
    assert found["host_root"]["commit"] is None
    page = (result.run_dir / "index.html").read_text()
    assert "code from outside this repository" in page and str(hub) in page and commit[:12] in page


def test_a_run_of_the_repositorys_own_code_says_so(tmp_path, monkeypatch):
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text("notebooks: [01_trace_natten]\n")
    monkeypatch.setattr(runner, "execute_one", lambda nb, *a, **kw: NotebookResult(nb.name, status="passed"))
    monkeypatch.setattr(runner, "ensure_kernel", lambda: None)
    result = runner.run_suite(params.load_plan(plan_file), out=tmp_path / "run", appendix=None, log=lambda s: None)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["provenance"]["outside_code"] == []
    assert "none: only this repository&#39;s code and its stand-ins" in (result.run_dir / "index.html").read_text()
