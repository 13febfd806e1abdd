"""Notebook 05 end to end on graphs built here, with DFC results from the TEST DOUBLE of the DFC's Python
API (tests/test_gate_probes.py): the pairing path runs for real, and the three failure classes come through.

The default suite run (tests/test_notebooks.py) covers 05 on what 02 and 03 export, where no DFC exists."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import pytest

from tests.test_gate_device import dit_inputs
from tests.test_gate_graphs import attention, save, topk_head
from tests.test_gate_probes import install_dfc
from weftlib.console import HEADLESS_ENV
from weftlib.gate import run_dfc
from weftlib.suite import params, runner
from weftlib.suite.kernel import ensure_kernel
from weftlib.suite.record import load_metrics
from weftlib.suite.runfolder import NotebookResult

pytestmark = pytest.mark.notebook
NB = params.NOTEBOOK_DIR / "05_gate_pairing.ipynb"


def fake_run(root: Path) -> Path:
    """A run folder as 02, 03 and 04 leave it: metrics.json and graphs (one readable pass, one TopK, one with
    04's rank-5/1/3 inputs)."""
    run = root / "run"
    for name, graphs in {
        "02_export_attention": {"attn": attention()},
        "03_sparse_conv_memory": {"head": topk_head()},
        "04_export_dit_block": {"dit": dit_inputs()},
    }.items():
        (run / name).mkdir(parents=True)
        done = {"conclusion": {"answer": "exported", "rests_on": {}, "unmet": [], "status": "answered"}}
        (run / name / "metrics.json").write_text(json.dumps({"notebook": name, "headline": [], "metrics": done}))
        [save(model, run / name / f"{stem}.onnx") for stem, model in graphs.items()]
    return run


def execute(run: Path, **parameters) -> NotebookResult:
    ensure_kernel()
    plan = params.NotebookPlan("05_gate_pairing", NB, parameters)
    with mock.patch.dict(os.environ, {HEADLESS_ENV: "1"}):
        return runner.execute_one(plan, run, 600, False)


def test_04_pairs_dfc_results_by_cause_and_counts_the_unjudged(tmp_path, monkeypatch):
    run = fake_run(tmp_path)
    first = execute(run)
    assert first.status == "passed", first.describe_error()
    m = load_metrics(run, "05_gate_pairing")["metrics"]
    assert m["graphs_found"] == 3 and m["predictions"] == {"pass": 1, "fail": 2, "unjudged": 0}
    assert "input_rank_1" in m["refused_rules"]  # the dit graph's rank-1 timestep
    assert m["public_record"]["disagreed"] == 0 and m["public_record"]["on_target"] >= 25
    assert m["public_record_held"] == [] and m["contradicted_entries"] == []
    # before the DFC ran, that is an unmet precondition with the script, not a neutral row
    (unmet,) = m["conclusion"]["unmet"]
    assert unmet.startswith("DFC not run here") and "run_dfc.sh" in unmet and "3 graphs unjudged" in unmet
    pack = Path(m["dfc_script"]).parent
    # what the pack's script does in the image, with the double: one result per graph, beside it
    install_dfc(monkeypatch, {"dit": "input layers", "head": "reject /head/TopK"})
    [(pack / f"{g.stem}.dfc.json").write_text(run_dfc(g).to_json()) for g in pack.glob("*.onnx")]
    second = execute(run, dfc_results_dir=str(pack))
    assert second.status == "passed", second.describe_error()
    m = load_metrics(run, "05_gate_pairing")["metrics"]
    assert m["dfc_source"] == "results_dir" and m["dfc_results"] == 3
    assert m["pairing_verdicts"] == {
        "allowlist held": 1,
        "both reject": 1,
        "ops unjudged: the DFC stopped before reading any operator": 1,
    }
    assert m["graphs_unjudged"] == 1
    standing = {row["graph"]: row["rests on"] for row in m["standing"]}
    assert standing == {"attn.onnx": "DFC", "head.onnx": "DFC", "dit.onnx": "prediction only"}
    conclusion = m["conclusion"]
    assert conclusion["rests_on"]["dfc"] == "run"
    assert conclusion["unmet"] == ["1 of 3 graphs have no DFC verdict on their ops (see the pairing)"]
    assert "refused ops TopK" in conclusion["answer"] and "input_rank_1" in conclusion["answer"]


def test_04_fails_naming_a_notebook_whose_outputs_are_missing(tmp_path):
    run = fake_run(tmp_path)
    (run / "04_export_dit_block" / "metrics.json").unlink()  # 04 failed before it recorded anything
    result = execute(run)
    assert result.status == "failed"
    assert "04_export_dit_block: no metrics.json" in json.dumps(result.error)


def test_04_fails_naming_a_notebook_that_stopped_part_way(tmp_path):
    run = fake_run(tmp_path)
    partial = {"notebook": "02_export_attention", "headline": [], "metrics": {"equality_worst_abs_diff": 1e-7}}
    (run / "02_export_attention" / "metrics.json").write_text(json.dumps(partial))  # died before its conclusion
    result = execute(run)
    assert result.status == "failed"
    assert "02_export_attention: recorded no conclusion" in json.dumps(result.error)
