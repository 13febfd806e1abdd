"""The run folder's summary is one typed record: what the index writes reads back key for key, older folders
still read, and a foreign file is refused in one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.conftest import write_notebook
from weftlib.formatting import NO_COMMIT
from weftlib.suite import index_page, params, record
from weftlib.suite.runfolder import NotebookResult, RunSummary, SummaryError, read_summary, write_summary


def test_the_index_summary_reads_back_as_a_run_summary_byte_for_byte(tmp_path):
    nb_dir, run_dir = tmp_path / "nbs", tmp_path / "run"
    nb_dir.mkdir()
    write_notebook(nb_dir / "10_one.ipynb", 'run_dir = ""', "")
    (tmp_path / "p.yaml").write_text("notebooks: [10_one]\n")
    plan = params.load_plan(tmp_path / "p.yaml", None, nb_dir)
    record.Recorder("10_one", run_dir).record("size", 3, headline=True)
    results = [NotebookResult("10_one", status="passed", seconds=1.5, cell_seconds={"1": {"seconds": 0.2}})]
    index_page.write_index(run_dir, plan, results, datetime.now(UTC))
    text = (run_dir / "summary.json").read_text()
    summary = read_summary(run_dir)
    assert json.dumps(summary.to_json(), indent=2) == text  # same keys, same nesting, same order
    assert summary.notebooks == results and summary.params_hash == plan.digest()
    assert read_summary(run_dir / "summary.json") == summary
    (tmp_path / "again").mkdir()
    write_summary(tmp_path / "again", summary)
    assert (tmp_path / "again" / "summary.json").read_text() == text


def test_an_older_summary_without_later_keys_still_reads(tmp_path):
    (tmp_path / "summary.json").write_text(
        json.dumps({"passed": True, "finished": "2026-01-01T00:00:00+00:00", "notebooks": [{"name": "10_one"}]})
    )
    summary = read_summary(tmp_path)
    assert summary.passed and summary.timings == {} and summary.notebooks == [NotebookResult("10_one")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1,2", "unreadable or not JSON"),
        ("[1, 2]", "not a summary this suite wrote"),
        ('{"passed": true, "notebooks": [1]}', "notebooks.0"),
        ('{"passed": "maybe"}', "passed"),
    ],
)
def test_a_foreign_summary_is_refused_in_one_line_naming_the_key(tmp_path, text, says):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(SummaryError, match=says) as caught:
        read_summary(tmp_path)
    assert "\n" not in str(caught.value)
    with pytest.raises(SummaryError, match=r"no summary\.json"):
        read_summary(tmp_path / "nowhere")


def test_the_suite_commit_has_one_accessor_and_one_wording_for_none():
    commit = "0123456789abcdef0123"
    assert RunSummary(provenance={"git": {"commit": commit, "dirty": False}}).commit_text == commit[:12]
    dirty = RunSummary(provenance={"git": {"commit": commit, "dirty": True}})
    assert (dirty.commit, dirty.commit_text) == (commit, commit[:12] + " (dirty tree)")
    outside = RunSummary(provenance={"git": {"commit": None, "dirty": None}})
    assert (outside.commit, outside.commit_text) == (None, NO_COMMIT) and RunSummary().commit is None
