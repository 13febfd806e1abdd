"""The Recorder and the progress helper: what notebooks write and show."""

import json

import pytest

from weftlib import console
from weftlib.suite import record


def test_recorder_writes_after_every_record(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    rec.record("a", 1, headline=True)
    first = json.loads((tmp_path / "99_x" / "metrics.json").read_text())
    assert first == {"notebook": "99_x", "headline": ["a"], "metrics": {"a": 1}}
    rec.record("b", {"t": (1, 2)})
    assert record.load_metrics(tmp_path, "99_x")["metrics"]["b"] == {"t": [1, 2]}
    assert record.load_metrics(tmp_path, "missing") == {"notebook": "missing", "headline": [], "metrics": {}}


def test_jsonable_handles_what_notebooks_record():
    import numpy as np
    import torch

    assert record.jsonable({"n": np.int64(3), "t": torch.tensor([1.5]), "s": {2, 1}, "f": float("inf")}) == {
        "n": 3,
        "t": [1.5],
        "s": [1, 2],
        "f": "inf",
    }


def test_progress_is_silent_under_ci_and_visible_headless(monkeypatch, capsys):
    monkeypatch.setenv(console.HEADLESS_ENV, "1")
    monkeypatch.setenv("CI", "true")
    assert list(console.progress(range(3), desc="x")) == [0, 1, 2]
    assert console.progress(range(3), desc="x").disable
    monkeypatch.delenv("CI")
    assert not console.progress(range(3), desc="x").disable


def test_conclude_records_answer_and_status(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    got = rec.conclude(" yes, it exports ", rests_on={"sources": "stand-in", "geometry": "32 grid"})
    assert got["status"] == "answered on a stand-in"
    stored = record.load_metrics(tmp_path, "99_x")["metrics"]["conclusion"]
    assert stored == {
        "answer": "yes, it exports",
        "rests_on": {"sources": "stand-in", "geometry": "32 grid"},
        "unmet": [],
        "status": "answered on a stand-in",
    }
    unmet = rec.conclude("no verdict", rests_on={"sources": "real checkout"}, unmet=["DFC not run", "no weights"])
    assert unmet["status"] == "unanswered: DFC not run; no weights"
    assert rec.conclude("done", rests_on={"sources": "real checkout"})["status"] == "answered"
    import pytest

    with pytest.raises(ValueError, match="empty"):
        rec.conclude("  ", rests_on={})


def test_headline_labels_units_describe_and_demote(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    rec.record("worst_abs_diff", 7.152557373046875e-07, headline=True)
    rec.record("dense_bytes", 2**40, headline=True, label="one dense layer", unit="B")
    rec.record("speedup", 2.0, headline=True)
    rec.describe("worst_abs_diff", label="worst difference", digits=2)
    rec.demote("speedup", "millisecond calls")
    got = record.headlines(record.load_metrics(tmp_path, "99_x"))
    assert got == [
        {"key": "worst_abs_diff", "label": "worst difference", "text": "7.2 × 10⁻⁷"},
        {"key": "dense_bytes", "label": "one dense layer", "text": "1 TiB"},
    ]
    stored = record.load_metrics(tmp_path, "99_x")
    assert stored["metrics"]["speedup"] == 2.0 and stored["display"]["speedup"]["not_headline"] == "millisecond calls"
    with pytest.raises(KeyError, match="nothing recorded"):
        rec.describe("missing", label="x")


def test_savefig_writes_a_deterministic_svg_twin(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = record.Recorder("99_x", tmp_path)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    png = rec.savefig(fig, "line.png")
    first = png.with_suffix(".svg").read_text()
    rec.savefig(fig, "line.png")
    plt.close(fig)
    assert png.exists() and first.lstrip().startswith("<?xml") and "<svg" in first
    assert png.with_suffix(".svg").read_text() == first  # no date, no random ids


def test_recorder_widens_pandas_cells():
    import pandas as pd

    pd.set_option("display.max_colwidth", 50)
    record.Recorder("99_x", "")
    assert pd.get_option("display.max_colwidth") is None


def test_a_stand_in_anywhere_among_the_sources_reads_as_answered_on_a_stand_in(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    mixed = "stand-in for Pixal3D; valeoai/NAF checkout at ad4e24d2ec32, /src/NAF"
    assert rec.conclude("yes", rests_on={"sources": mixed})["status"] == "answered on a stand-in"
    real = "Pixal3D checkout at cdbb2bbffbf4, /src/stand-in-copies/Pixal3D"  # the word inside a path is no stand-in
    assert rec.conclude("yes", rests_on={"sources": real})["status"] == "answered"


def test_the_gate_reads_what_a_recorder_writes_through_one_layout(tmp_path):
    """`metrics.json` is written by the suite's Recorder and read by the gate's run_graphs, both through
    `weftlib.metrics_file`: a notebook without its conclusion stopped part-way; with it, its sources are cited."""
    from weftlib import metrics_file
    from weftlib.gate import run_graphs

    rec = record.Recorder("02_x", tmp_path)
    rec.record("graphs", 1)
    (rec.dir / "g.onnx").write_bytes(b"")
    folders = run_graphs.notebook_folders(tmp_path, ["02_x", "03_none"])
    missing = run_graphs.missing_outputs(folders)
    assert "02_x: recorded no conclusion" in missing[0] and "03_none: no metrics.json" in missing[1]
    rec.conclude("an answer", rests_on={"sources": "stand-in naf; Pixal3D@abc"})
    assert run_graphs.missing_outputs({"02_x": rec.dir}) == []
    assert run_graphs.graph_sources({"02_x": rec.dir}) == "stand-in naf (02); Pixal3D@abc (02)"
    recorded = metrics_file.read(rec.dir, "02_x")
    assert recorded == record.load_metrics(tmp_path, "02_x") and metrics_file.path(rec.dir).name == "metrics.json"
    assert metrics_file.conclusion(recorded) == rec.metrics["conclusion"]
    text = metrics_file.path(rec.dir).read_text()
    assert text == metrics_file.dumps("02_x", rec.headline, rec.metrics, rec.display)  # the one writer's bytes
