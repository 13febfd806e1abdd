"""Notebooks 05 and 06 end to end on graphs built here, each run once, with DFC results from the TEST DOUBLE of
the DFC's Python API (tests/test_gate_probes.py): 05's pairing path runs for real and the three failure classes
come through; 06 reads its cuts' results from a folder of the user's (not the pack its run writes).

What 05 does before any DFC ran, and how it refuses a run whose notebooks are missing or stopped part-way, is
held here at the library level, on the functions its cells call with those parameters. The default suite run
(tests/test_notebooks.py) covers 05 and 06 on what 02, 03 and 04 export, where no DFC exists."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import pytest

from tests.test_gate_device import dit_inputs
from tests.test_gate_graphs import attention, save, topk_head
from tests.test_gate_probes import install_dfc
from weftlib import gate
from weftlib.console import HEADLESS_ENV
from weftlib.gate.compiler.dfc_log import DfcResult
from weftlib.gate.pages import gate_sentences, gate_tables
from weftlib.gate.run import gating
from weftlib.suite import params, runner
from weftlib.suite.kernel import ensure_kernel
from weftlib.suite.record import load_metrics
from weftlib.suite.runfolder import NotebookResult

pytestmark = pytest.mark.notebook
NOTEBOOKS = params.NOTEBOOK_DIR
GRAPH_NOTEBOOKS = ["02_export_attention", "03_sparse_conv_memory", "04_export_dit_block"]  # 05's default
DFC_VERDICTS = {"dit": "input layers", "head": "reject /head/TopK"}  # attn parses


def fake_run(root: Path) -> Path:
    """A run folder as 02, 03 and 04 leave it: metrics.json and graphs (one readable pass, one TopK, one with
    04's rank-5/1/3 inputs), each notebook's conclusion resting on a stand-in."""
    run = root / "run"
    for name, graphs in {
        "02_export_attention": {"attn": attention()},
        "03_sparse_conv_memory": {"head": topk_head()},
        "04_export_dit_block": {"dit": dit_inputs()},
    }.items():
        (run / name).mkdir(parents=True)
        done = {"conclusion": {"answer": "exported", "rests_on": {"sources": "stand-in"}, "unmet": [], "status": "x"}}
        (run / name / "metrics.json").write_text(json.dumps({"notebook": name, "headline": [], "metrics": done}))
        [save(model, run / name / f"{stem}.onnx") for stem, model in graphs.items()]
    return run


def execute(run: Path, name: str, **parameters) -> NotebookResult:
    ensure_kernel()
    plan = params.NotebookPlan(name, NOTEBOOKS / f"{name}.ipynb", parameters)
    with mock.patch.dict(os.environ, {HEADLESS_ENV: "1"}):
        return runner.execute_one(plan, run, 600, False)


def gate_before_the_dfc(run: Path, pack_dir: Path):
    """05's cells on `run` with `dfc_results_dir=""`: its graphs packed for the DFC, gated, paired with nothing
    and concluded. -> (the pack, the gate's table, its findings, the conclusion's answer and unmet list)."""
    ops = gate.load_device_ops()
    folders = gate.notebook_folders(run, GRAPH_NOTEBOOKS)
    assert gate.missing_outputs(folders) == []
    pack, models = gating.pack_models(gate.find_models(folders.values()), pack_dir, ops.target_arch)
    results = gating.gate_all(models, ops)
    dfc, source = gate.collect_dfc(models, "", ops.target_arch)
    pairings = gating.pair_all(results, dfc)
    answer, _, unmet = gate_sentences.conclusion(
        results, pairings, source, pack.script, run_dir=run, notebooks=GRAPH_NOTEBOOKS
    )
    table, findings = gate_tables.gate_table(results, pack.folder), gate_tables.findings_table(results, pack.folder)
    return pack, table, findings, answer, unmet


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """The one run of 05 here: the fake run's graphs packed as 05 packs them, parsed by the DFC double into a
    folder of the user's (what the pack's run_dfc.sh leaves), and 05 run once with `dfc_results_dir` there.
    -> (the run folder, 05's result)."""
    root = tmp_path_factory.mktemp("gate")
    run = fake_run(root)
    pack, *_ = gate_before_the_dfc(run, root / "kept")
    with pytest.MonkeyPatch.context() as monkeypatch:
        install_dfc(monkeypatch, DFC_VERDICTS)
        [(pack.folder / f"{g.stem}.dfc.json").write_text(gate.run_dfc(g).to_json()) for g in pack.folder.glob("*.onnx")]
    return run, execute(run, "05_gate_pairing", dfc_results_dir=str(pack.folder))


def test_05_before_the_dfc_counts_every_graph_unjudged_and_names_the_script(tmp_path):
    run = fake_run(tmp_path)
    pack, table, findings, answer, unmet = gate_before_the_dfc(run, tmp_path / "pack")
    assert gate_tables.verdict_counts(table) == {"pass": 1, "fail": 2, "unjudged": 0}
    assert "input_rank_1" in gate_tables.refused_rules(findings)  # the dit graph's rank-1 timestep
    assert "refused ops TopK" in answer and "0 verdicts rest on the DFC" in answer
    # before the DFC ran, that is an unmet precondition with the script, not a neutral row
    (unmet,) = unmet
    assert unmet.startswith("DFC not run here") and "run_dfc.sh" in unmet and "3 graphs unjudged" in unmet
    assert pack.script.is_file() and sorted(p.stem for p in pack.folder.glob("*.onnx")) == ["attn", "dit", "head"]


def test_05_refuses_a_run_naming_a_notebook_whose_outputs_are_missing(tmp_path):
    """05's first assertion on its graphs: `missing_outputs` of the run's `notebook_folders`, each named."""
    run = fake_run(tmp_path)
    (run / "04_export_dit_block" / "metrics.json").unlink()  # 04 failed before it recorded anything
    partial = {"notebook": "02_export_attention", "headline": [], "metrics": {"equality_worst_abs_diff": 1e-7}}
    (run / "02_export_attention" / "metrics.json").write_text(json.dumps(partial))  # died before its conclusion
    missing = gate.missing_outputs(gate.notebook_folders(run, GRAPH_NOTEBOOKS))
    assert len(missing) == 2
    assert missing[0].startswith("02_export_attention: recorded no conclusion")
    assert missing[1].startswith("04_export_dit_block: no metrics.json")


def test_05_pairs_dfc_results_by_cause_and_counts_the_unjudged(gated):
    run, result = gated
    assert result.status == "passed", result.describe_error()
    m = load_metrics(run, "05_gate_pairing")["metrics"]
    assert m["graphs_found"] == 3 and m["predictions"] == {"pass": 1, "fail": 2, "unjudged": 0}
    assert "input_rank_1" in m["refused_rules"]
    assert m["public_record"]["disagreed"] == 0 and m["public_record"]["on_target"] >= 25
    assert m["public_record_held"] == [] and m["contradicted_entries"] == []
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


def test_06_reads_the_dfc_results_from_the_folder_it_is_given(gated, tmp_path):
    """06 on 02's graph of the same run, after 05 (its verdict table reads 05's record), with the DFC's
    results for its cuts kept in a folder of the user's: 06 must read them from the `dfc_results_dir` given."""
    run, first = gated
    assert first.status == "passed", first.describe_error()
    kept = tmp_path / "results_from_the_dfc_session"  # the pack of an earlier run, after run_dfc.sh
    kept.mkdir()
    for index in range(4):
        parsed = DfcResult(verdict="parsed", model=f"attn.cut{index:02d}.onnx", arch="hailo10h", dfc_version="5.3.0")
        (kept / f"attn.cut{index:02d}.dfc.json").write_text(parsed.to_json())
    result = execute(
        run,
        "06_device_cut",
        graph_notebooks=["02_export_attention"],
        answer_graphs={"DiT block (04)": ["attn"]},
        dfc_results_dir=str(kept),
    )
    assert result.status == "passed", result.describe_error()
    metrics = load_metrics(run, "06_device_cut")["metrics"]
    assert metrics["cut_verdicts"] and all("parsed" in json.dumps(row) for row in metrics["cut_verdicts"])
    assert metrics["conclusion"]["rests_on"]["sources"] == "stand-in (02)"  # what 02 rested on, not a literal
