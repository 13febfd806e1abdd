"""The runner: fresh run folders, failures named, and the appendix replaced only by a clean run."""

import json

import pytest

from weftlib import params, suite


def run(tiny_suite, tmp_path, names, appendix):
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("cell_timeout: 60\nnotebooks: [10_ok, 20_bad]\n"), names, nb_dir)
    return suite.run_suite(plan, out=tmp_path / f"run-{'-'.join(names)}", appendix=appendix, progress=False,
                           log=lambda line: None)


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_clean_run_publishes_and_indexes(tiny_suite, tmp_path):
    result = run(tiny_suite, tmp_path, ["10_ok"], tmp_path / "appendix")
    assert result.passed and result.published == (tmp_path / "appendix").resolve()
    summary = json.loads((tmp_path / "appendix" / "summary.json").read_text())
    assert summary["passed"] and summary["notebooks"][0]["headline"] == {"size": 3}
    assert summary["provenance"]["versions"]["torch"].startswith("2.13.0")
    assert (tmp_path / "appendix" / "10_ok.html").exists()
    assert "10_ok" in (tmp_path / "appendix" / "index.html").read_text()


def test_failed_run_leaves_appendix_byte_identical(tiny_suite, tmp_path):
    appendix = tmp_path / "appendix"
    run(tiny_suite, tmp_path, ["10_ok"], appendix)
    before = snapshot(appendix)
    result = run(tiny_suite, tmp_path, ["10_ok", "20_bad"], appendix)
    assert not result.passed and result.published is None
    assert snapshot(appendix) == before
    bad = result.notebooks[1]
    assert bad.status == "failed" and bad.error["ename"] == "AssertionError"
    assert "a false claim must fail the run" in bad.describe_error() and "cell" in bad.describe_error()
    executed = (result.run_dir / "20_bad.ipynb").read_text()
    assert "papermill-error-cell" in executed or "An Exception was encountered" in executed
    assert "FAILED" in (result.run_dir / "index.html").read_text()


def test_out_must_be_fresh(tiny_suite, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep me")
    nb_dir, write = tiny_suite
    plan = params.load_plan(write("notebooks: [10_ok]\n"), None, nb_dir)
    with pytest.raises(FileExistsError, match="fresh folder"):
        suite.run_suite(plan, out=taken, appendix=None, progress=False, log=lambda line: None)
    assert (taken / "x").read_text() == "keep me"


def test_html_hides_tagged_input(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from weftlib.publish import render_html

    hidden = new_code_cell("secret_source_line = 1", outputs=[])
    hidden.metadata["tags"] = ["hide-input"]
    nb = new_notebook(cells=[hidden, new_code_cell("visible_source_line = 2")])
    nbformat.write(nb, tmp_path / "n.ipynb")
    page = render_html(tmp_path / "n.ipynb", tmp_path / "n.html").read_text()
    assert "visible_source_line" in page and "secret_source_line" not in page


def test_dead_kernel_failure_names_the_cell_it_died_in(tmp_path):
    from tests.conftest import write_notebook
    from weftlib import params, suite

    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    write_notebook(nb_dir / "30_dies.ipynb", 'run_dir = ""', "import os\nos._exit(9)")
    plan = params.load_plan(_write(tmp_path, "notebooks: [30_dies]\n"), None, nb_dir)
    result = suite.run_suite(plan, out=tmp_path / "run", appendix=None, progress=False, log=lambda line: None)
    err = result.notebooks[0].error
    assert result.notebooks[0].status == "failed" and err["ename"] == "DeadKernelError"
    assert err["cell"] == 4, err  # markdown, imports, parameters, injected parameters, the dying cell


def _write(folder, text):
    path = folder / "p.yaml"
    path.write_text(text)
    return path
