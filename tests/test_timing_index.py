"""The run index says per notebook whether its timings were taken on a quiet machine, and durations read like
durations."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import nbformat

from tests.conftest import write_notebook
from weftlib.suite import index_page, params, publish, record
from weftlib.suite.runfolder import NotebookResult

TIMED = [
    {"method": "gather", "seconds": 4.9, "contended": True},
    {"method": "shift", "seconds": 8.1, "contended": False},
    {"method": "masked", "seconds": None, "contended": None},  # refused: no timed row
]


def test_timing_quality_counts_timed_rows_per_record_at_any_depth():
    recorded = {
        "metrics": {
            "bench_rows": TIMED,
            "layer": {"rows": [{"contended": False}], "spconv": {"seconds": 9.6, "contended": True}},
            "answer": "no timings here",
        }
    }
    q = record.timing_quality(recorded)
    assert (q["timed_rows"], q["contended_rows"], q["contended"]) == (4, 2, True)
    assert q["by_record"] == {"bench_rows": {"timed": 2, "contended": 1}, "layer": {"timed": 2, "contended": 1}}
    assert q["text"] == "CONTENDED: 2 of 4 timed rows (bench_rows 1 of 2, layer 1 of 2)"
    assert record.timing_quality({"metrics": {"bench_rows": TIMED[1:]}})["text"] == "quiet: 1 timed rows"
    assert record.timing_quality({"metrics": {}})["text"] == "no timed rows"


def test_index_and_summary_say_which_notebooks_timings_were_contended(tmp_path):
    nb_dir, run_dir = tmp_path / "nbs", tmp_path / "run"
    nb_dir.mkdir()
    for name in ("10_timed", "20_untimed"):
        write_notebook(nb_dir / f"{name}.ipynb", 'run_dir = ""', "")
    (tmp_path / "p.yaml").write_text("notebooks: [10_timed, 20_untimed]\n")
    plan = params.load_plan(tmp_path / "p.yaml", None, nb_dir)
    record.Recorder("10_timed", run_dir).record("bench_rows", TIMED)
    record.Recorder("20_untimed", run_dir).record("size", 3)
    results = [
        NotebookResult("10_timed", status="passed", seconds=110.4),
        NotebookResult("20_untimed", status="passed", seconds=2.6),
    ]
    summary = index_page.write_index(run_dir, plan, results, datetime.now(UTC))
    assert summary.timings["10_timed"]["contended"] and not summary.timings["20_untimed"]["contended"]
    assert json.loads((run_dir / "summary.json").read_text())["timings"]["10_timed"]["contended_rows"] == 1
    page = (run_dir / "index.html").read_text()
    assert "CONTENDED: 1 of 2 timed rows (bench_rows 1 of 2)" in page and "no timed rows" in page
    assert "<td>1 min 50 s</td>" in page and "<td>3 s</td>" in page and "e+02" not in page
    rfd_page = publish.render_page(run_dir, summary)  # the RFD page says it beside the notebook's figures
    assert "*Timings:* CONTENDED: 1 of 2 timed rows (bench_rows 1 of 2)." in rfd_page
    assert rfd_page.count("*Timings:*") == 1  # a notebook without timed rows gets no such line


def test_index_and_summary_say_where_a_notebooks_minutes_went(tmp_path):
    """Each long step of a notebook is listed beside its duration, longest first, under the section it ran in."""
    nb_dir, run_dir = tmp_path / "nbs", tmp_path / "run"
    nb_dir.mkdir()
    write_notebook(nb_dir / "10_timed.ipynb", 'run_dir = ""', "")
    (tmp_path / "p.yaml").write_text("notebooks: [10_timed]\n")
    plan = params.load_plan(tmp_path / "p.yaml", None, nb_dir)
    run_dir.mkdir()
    executed = write_notebook(run_dir / "10_timed.ipynb", 'run_dir = ""', "sweep = benchmark.sweep(geoms)")
    nb = nbformat.read(executed, as_version=4)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("## 2 · Time every formulation\nwhy it is timed"))
    nbformat.write(nb, executed)  # cells: heading, imports, parameters, the section's heading, the sweep
    steps = [
        {"cell": 1, "seconds": 12.0, "exec_count": 1, "line": "from weftlib.suite import record"},
        {"cell": 4, "seconds": 191.0, "exec_count": 3, "line": "sweep = benchmark.sweep(geoms)"},
    ]
    results = [NotebookResult("10_timed", status="passed", seconds=210.0, long_steps=steps)]
    summary = index_page.write_index(run_dir, plan, results, datetime.now(UTC))
    recorded = json.loads((run_dir / "summary.json").read_text())["durations"]["10_timed"]["long_steps"]
    assert [(s["cell"], s["section"]) for s in recorded] == [(4, "2 · Time every formulation"), (1, "tiny")]
    assert summary.durations["10_timed"]["seconds"] == 210.0
    page = (run_dir / "index.html").read_text()
    assert "where the minutes went" in page
    first = page.index("3 min 11 s 2 · Time every formulation: sweep = benchmark.sweep(geoms)")
    assert first < page.index("12 s tiny: from weftlib.suite import record")


def test_timing_quality_gives_the_range_of_the_machines_rates_over_the_timed_rows():
    rows = [
        {"seconds": 1.0, "contended": False, "copy_gbps": 61.2, "sgemm_gflops": 198.0},
        {"seconds": 2.0, "contended": True, "copy_gbps": 32.4, "sgemm_gflops": 174.6},
        {"seconds": 3.0, "contended": False, "copy_gbps": "nan", "sgemm_gflops": float("nan")},  # read back from JSON
        {"seconds": None, "copy_gbps": 5.0},  # not a timed row: no `contended`
    ]
    q = record.timing_quality({"metrics": {"bench_rows": rows}})
    assert q["rates"] == {"copy_gbps": (32.4, 61.2), "sgemm_gflops": (174.6, 198.0)}
    assert q["text"] == "CONTENDED: 1 of 3 timed rows (bench_rows 1 of 3); copy 32 to 61 GB/s, sgemm 175 to 198 GFLOP/s"
    assert record.timing_quality({"metrics": {"bench_rows": TIMED}})["rates"] == {}  # rows without rates: none given
