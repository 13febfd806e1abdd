"""The Recorder and the progress helper: what notebooks write and show."""

import json

from weftlib import report


def test_recorder_writes_after_every_record(tmp_path):
    rec = report.Recorder("99_x", tmp_path)
    rec.record("a", 1, headline=True)
    first = json.loads((tmp_path / "99_x" / "metrics.json").read_text())
    assert first == {"notebook": "99_x", "headline": ["a"], "metrics": {"a": 1}}
    rec.record("b", {"t": (1, 2)})
    assert report.load_metrics(tmp_path, "99_x")["metrics"]["b"] == {"t": [1, 2]}
    assert report.load_metrics(tmp_path, "missing") == {"notebook": "missing", "headline": [], "metrics": {}}


def test_jsonable_handles_what_notebooks_record():
    import numpy as np
    import torch

    assert report.jsonable({"n": np.int64(3), "t": torch.tensor([1.5]), "s": {2, 1}, "f": float("inf")}) == {
        "n": 3, "t": [1.5], "s": [1, 2], "f": "inf"}


def test_progress_is_silent_under_ci_and_visible_headless(monkeypatch, capsys):
    monkeypatch.setenv(report.HEADLESS_ENV, "1")
    monkeypatch.setenv("CI", "true")
    assert list(report.progress(range(3), desc="x")) == [0, 1, 2]
    assert report.progress(range(3), desc="x").disable
    monkeypatch.delenv("CI")
    assert not report.progress(range(3), desc="x").disable


def test_conclude_records_answer_and_status(tmp_path):
    rec = report.Recorder("99_x", tmp_path)
    got = rec.conclude(" yes, it exports ", rests_on={"sources": "stand-in", "geometry": "32 grid"})
    assert got["status"] == "answered on a stand-in"
    stored = report.load_metrics(tmp_path, "99_x")["metrics"]["conclusion"]
    assert stored == {"answer": "yes, it exports", "rests_on": {"sources": "stand-in", "geometry": "32 grid"},
                      "unmet": [], "status": "answered on a stand-in"}
    unmet = rec.conclude("no verdict", rests_on={"sources": "real checkout"}, unmet=["DFC not run", "no weights"])
    assert unmet["status"] == "unanswered: DFC not run; no weights"
    assert rec.conclude("done", rests_on={"sources": "real checkout"})["status"] == "answered"
    import pytest

    with pytest.raises(ValueError, match="empty"):
        rec.conclude("  ", rests_on={})
