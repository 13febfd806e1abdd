"""Notebook 06 end to end on a graph built here, with the DFC's results for its cuts kept in a folder of the
user's (not the pack this run writes): 06 must read them from the `dfc_results_dir` it is given.

The default suite run (tests/test_notebooks.py) covers 06 on what 02, 03 and 04 export, where no DFC exists."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import pytest

from tests.test_gate_graphs import attention, save
from weftlib.console import HEADLESS_ENV
from weftlib.gate.compiler.dfc_log import DfcResult
from weftlib.suite import params, runner
from weftlib.suite.kernel import ensure_kernel
from weftlib.suite.record import load_metrics

pytestmark = pytest.mark.notebook
NB = params.NOTEBOOK_DIR / "06_device_cut.ipynb"


def fake_run(root: Path) -> Path:
    """A run folder as 02 leaves it: its metrics.json with a conclusion, and one graph the device takes."""
    run = root / "run"
    (run / "02_export_attention").mkdir(parents=True)
    done = {"conclusion": {"answer": "exported", "rests_on": {"sources": "stand-in"}, "unmet": [], "status": "x"}}
    (run / "02_export_attention" / "metrics.json").write_text(json.dumps({"metrics": done}))
    save(attention(), run / "02_export_attention" / "attn.onnx")
    return run


def test_06_reads_the_dfc_results_from_the_folder_it_is_given(tmp_path):
    run = fake_run(tmp_path)
    kept = tmp_path / "results_from_the_dfc_session"  # the pack of an earlier run, after run_dfc.sh
    kept.mkdir()
    for index in range(4):
        parsed = DfcResult(verdict="parsed", model=f"attn.cut{index:02d}.onnx", arch="hailo10h", dfc_version="5.3.0")
        (kept / f"attn.cut{index:02d}.dfc.json").write_text(parsed.to_json())
    ensure_kernel()
    graphs = {"graph_notebooks": ["02_export_attention"]}
    gate_plan = params.NotebookPlan("05_gate_pairing", NB.with_name("05_gate_pairing.ipynb"), graphs)
    parameters = {**graphs, "answer_graphs": {"DiT block (04)": ["attn"]}, "dfc_results_dir": str(kept)}
    plan = params.NotebookPlan("06_device_cut", NB, parameters)
    with mock.patch.dict(os.environ, {HEADLESS_ENV: "1"}):
        gated = runner.execute_one(gate_plan, run, 600, False)  # 06's verdict table reads 05's record
        assert gated.status == "passed", gated.describe_error()
        result = runner.execute_one(plan, run, 600, False)
    assert result.status == "passed", result.describe_error()
    metrics = load_metrics(run, "06_device_cut")["metrics"]
    assert metrics["cut_verdicts"] and all("parsed" in json.dumps(row) for row in metrics["cut_verdicts"])
    assert metrics["conclusion"]["rests_on"]["sources"] == "stand-in (02)"  # what 02 rested on, not a literal
