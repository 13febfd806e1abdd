"""Shared fixtures: notebook paths by name, tiny throwaway notebooks, and the small plan's one run shared by
every test that reads it (all in tests/test_notebooks.py). Under xdist (`make check`, `make test`: `-n 2 --dist
loadfile`) each file's tests stay on one worker, so a module's fixtures are built once, and the files that run
whole notebooks start first."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem: p for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
# The longest files, started first so that neither worker is left with one of them at the end: the small plan and
# its run under load, the real exporters' networks and the gate notebook (`make test` only), then every file of
# `make check` that took over ~4 s on its worker, longest first (measured on branch s51-tst, 9823f25 with its
# changes: wall under a load of 4.5 to 11, ~3x a quiet machine's), so that what is left at the end is short files
# and the two workers end close together. A new file slower than the last one listed belongs here, by its time;
# one not listed runs after these, in file order.
FIRST = (
    "test_notebooks",
    "test_rebuilt_exports",
    "test_gate_notebook",
    "test_attention",
    "test_torchvision_schemas",
    "test_runs_together",
    "test_suite",
    "test_attention_benchmark",
    "test_device_layout",
    "test_attention_sweep_record",
    "test_params",
    "test_naf_rewrites",
    "test_image_shift",
    "test_gate_fix",
    "test_onnx_export",
    "test_gate_folders_twice",
    "test_attention_sweep_order",
    "test_sparse_memory",
    "test_standins",
    "test_workers",
    "test_sparse",
    "test_gate_fix_standins",
    "test_naf_layer_reference",
    "test_trace",
    "test_gate_folder_swap",
    "test_sparse_bench_processes",
    "test_naf_prepared_runs",
    "test_dit",
    "test_gate_results_bound",
    "test_sparse_bench_shared",
    "test_gate_hostile_inputs",
    "test_gate_probes",
    "test_model_zoo",
    "test_graph_identity",
    "test_gate_cuts",
    "test_fix_hostile",
    "test_gate_merge",
    "test_gate_graph_checks",
    "test_gate_allowlist",
    "test_conventions",
    "test_measure",
    "test_sparse_pipeline",
    "test_answers",
    "test_cut_recorded_reference",
    "test_gate_record_heldout",
    "test_gate_device",
    "test_gate_command_lines",
    "test_gate_dfc_log",
    "test_gate_backtest",
    "test_trace_cost_warm",
)

# What a run's index records as provenance, for runs started in a child process whose index is not what a test
# checks: the real `provenance.environment()` imports torch and natten there (seconds a run), and
# tests/test_suite.py checks it on a run of its own.
STUB_ENVIRONMENT = {
    "versions": {},
    "machine": {"platform": "test", "cpu_count": 1, "ram_bytes": 2**30, "gpu": None},
    "natten": {"note": "not read"},
    "hailo_dfc": {"importable": False, "reason": "not read"},
    "git": {"commit": None, "dirty": None},
}


def pytest_configure(config: pytest.Config) -> None:
    """torch's OpenMP threads wait for work by spinning: with two pytest workers on two cores, each worker's idle
    thread spun on the core the other worker needed (the eager banded attention tests spent two thirds of their CPU
    so). In a process that runs tests they wait passively, their count unchanged. OpenMP reads the variable once,
    as torch loads, so it is set for that import alone: the children tests start (kernels, measuring processes)
    keep the default. xdist's controller runs no test and imports no torch."""
    if "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules:
        return
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import torch  # noqa: F401
    finally:
        del os.environ["OMP_WAIT_POLICY"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the long files first: xdist hands the files out in this order with `--no-loadscope-reorder`."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    rank = {name: place for place, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(FIRST)))


@pytest.fixture(scope="session")
def notebooks() -> dict[str, Path]:
    """name -> path of every committed notebook."""
    return dict(NOTEBOOKS)


def write_notebook(path: Path, parameters: str, body: str) -> Path:
    """A minimal notebook in the suite's shape: imports, a `parameters` cell, a body cell. nbformat is imported
    here, not by every test process (its schema validator compiles grammars: a second and a half of CPU)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    params = new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(
        cells=[
            new_markdown_cell("# tiny"),
            new_code_cell("from weftlib.suite import record"),
            params,
            new_code_cell(body),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "weftlib", "display_name": "weftlib", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """The small plan (params/default.yaml) run once by the suite runner, as CI and `make smoke` run it, for every
    test that reads it: (its RunResult, the folder holding the run and the published appendix link)."""
    from weftlib.suite import params, runner

    plan = params.load_plan(params.REPO_ROOT / "params" / "default.yaml")
    root = tmp_path_factory.mktemp("suite")
    result = runner.run_suite(plan, out=root / "run", appendix=root / "appendix", log=print)
    return result, root


@pytest.fixture
def tiny_suite(tmp_path: Path):
    """A notebook folder with one passing and one failing notebook, and a writer for parameter files."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    write_notebook(
        nb_dir / "10_ok.ipynb",
        'run_dir = ""\nsize = 3\nscale = 0.5\nlabel = "x"',
        'rec = record.Recorder("10_ok", run_dir)\nrec.record("size", size, headline=True)\nassert size > 0',
    )
    write_notebook(
        nb_dir / "20_bad.ipynb",
        'run_dir = ""\nsize = 3',
        'rec = record.Recorder("20_bad", run_dir)\nrec.record("size", size)\n'
        'assert size < 0, "a false claim must fail the run"',
    )

    def params(text: str) -> Path:
        path = tmp_path / "params.yaml"
        path.write_text(text)
        return path

    return nb_dir, params


@pytest.fixture(scope="module")
def ops():
    """The device gate's allowlist (params/device_ops.yaml), read once a module."""
    from weftlib.gate import load_device_ops

    return load_device_ops()


@pytest.fixture(scope="module")
def quick_rates():
    """Each timed row's bracket takes the machine's rates from one call of each, not nine: the tests that use it
    judge the rows a sweep writes, not the rates (tests/test_measure.py does). Fewer calls can only find a lower rate, so
    a row's lower bound only loosens and no row here can beat it for that."""
    from weftlib.measure import bracket

    real = bracket.machine_limits
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bracket, "machine_limits", lambda threads=None, repeats=5: real(threads, repeats=1))
        yield
