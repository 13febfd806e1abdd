"""`publish --rfd`: the page an RFD folder holds, checked with the CommonMark parser the RFD repository pins
(markdown-it-py 3.0.0), and every refusal leaving the folder as it was."""

from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt

from tests.conftest import write_notebook
from weftlib.__main__ import main
from weftlib.suite import params, runner
from weftlib.suite.publish import PublishError, looks_like_path, publish_rfd

ANSWER = """rec = record.Recorder("10_answer", run_dir)
rec.record("layer_bytes", 3 * 2**30, headline=True, label="one dense layer", unit="B")
rec.record("rows", [{"model": f"10_answer/m{i}.onnx", "gate": "PASS", "nodes": i} for i in range(8)], table=True)
fig, ax = plt.subplots()
ax.plot([1, 2], [3, 4])
rec.savefig(fig, "line.png")
rec.conclude("Yes: it fits in 3 GiB.", rests_on={"sources": "stand-in", "geometry": "CI size: 16 grid"})
assert True"""
UNMET = """rec = record.Recorder("20_unmet", run_dir)
rec.record("graphs_found", 13, headline=True)
rec.conclude("The allowlist alone passes 7 of 13.", rests_on={"sources": "real checkout", "dfc": "not run"},
             unmet=["DFC not run: needs the weftspun-hailo-dfc:5.3.0 image (run probes/run_dfc.sh)"])
assert True"""


QUESTIONS = ("00_overview", "10_answer", "20_unmet")  # the full plan of these tests


def _notebook(path, body, title):
    write_notebook(
        path, 'run_dir = ""', "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" + body
    )
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = f"# {title}\n\nWhat was done, in the notebook's own words. A second sentence."
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("publish")
    nb_dir = root / "nbs"
    nb_dir.mkdir()
    write_notebook(
        nb_dir / "00_overview.ipynb",
        'run_dir = ""',
        'rec = record.Recorder("00_overview", run_dir)\nrec.record("role", "overview")',
    )
    _notebook(nb_dir / "10_answer.ipynb", ANSWER, "10 · Does it fit?")
    _notebook(nb_dir / "20_unmet.ipynb", UNMET, "20 · Do the gates agree?")
    (root / "p.yaml").write_text("notebooks: [00_overview, 10_answer, 20_unmet]\n")
    plan = params.load_plan(root / "p.yaml", None, nb_dir)
    good = runner.run_suite(plan, out=root / "good", appendix=None, log=lambda line: None)
    assert good.passed, [r.describe_error() for r in good.notebooks]
    partial_plan = params.load_plan(root / "p.yaml", ["10_answer"], nb_dir)
    partial = runner.run_suite(partial_plan, out=root / "partial", appendix=None, log=lambda line: None, partial=True)
    return root, good.run_dir, partial.run_dir


def rfd_folder(tmp_path, title="# RFD 1129: Hailo operator coverage"):
    rfd = tmp_path / "rfd" / "1129-hailo-operator-coverage"
    rfd.mkdir(parents=True)
    (rfd / "README.md").write_text(title + "\n\nForty lines at most.\n")
    (rfd / "DETAILS.md").write_text("# Details\n")
    (rfd / "SKILL.md").write_text("# Skill\n")
    return rfd


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_page_parses_and_holds_answers_sections_tables_and_svg(runs, tmp_path):
    _, good, _ = runs
    rfd = rfd_folder(tmp_path)
    before = snapshot(rfd)
    target, block = publish_rfd(good, rfd, questions=QUESTIONS)
    assert target == rfd / "page.qmd"
    assert set(snapshot(rfd)) - set(before) == {target.relative_to(rfd)}  # one file, nothing else
    assert {k: v for k, v in snapshot(rfd).items() if k in before} == before
    text = target.read_text(encoding="utf-8")

    # hygiene: LF only, one final newline, no trailing whitespace
    raw = target.read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n") and not raw.endswith(b"\n\n")
    assert all(line == line.rstrip() for line in text.split("\n"))

    import yaml

    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)  # Quarto front matter, as the RFD site's pages carry
    assert yaml.safe_load(front)["title"]
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"]
    assert headings == ["Answers", "10 · Does it fit?", "20 · Do the gates agree?"]

    rows, row = [], None
    for i, t in enumerate(tokens):
        if t.type == "tr_open":
            row = []
        elif t.type in ("th_open", "td_open"):
            row.append(tokens[i + 1].content)
        elif t.type == "tr_close":
            rows.append(row)
    answer_header = rows[0]
    assert answer_header == ["Question", "Answer", "Rests on", "Status"]
    assert rows[1][:2] == ["Does it fit?", "Yes: it fits in 3 GiB."] and rows[1][3] == "answered on a stand-in"
    assert "geometry: CI size: 16 grid" in rows[1][2]
    assert rows[2][3].startswith("unanswered: DFC not run: needs the weftspun-hailo-dfc:5.3.0 image")
    assert ["one dense layer", "3 GiB"] in rows
    assert not any(looks_like_path(r[0]) for r in rows), [r[0] for r in rows if looks_like_path(r[0])]
    key_table = next(r for r in rows if r and r[0] == "gate")  # the path column moved last
    assert key_table == ["gate", "nodes", "model"]
    assert "*Top 5 of 8 rows" in text
    items = [tokens[i + 2].content for i, t in enumerate(tokens) if t.type == "list_item_open"]
    assert not any(looks_like_path(x.split()[0]) for x in items if x)

    fences = [t for t in tokens if t.type == "fence" and t.info.strip() == "{=html}"]
    assert len(fences) == 1 and "<svg" in fences[0].content
    svg = fences[0].content[fences[0].content.index("<svg") : fences[0].content.rindex("</svg>") + 6]
    ET.fromstring(svg)
    assert "<img" not in text and ".png" not in text

    assert text.count("*Provenance:*") == 3  # the answer table and each section
    assert "machine" in text and "hash" in text
    assert "NOT the full-size appendix" in text
    assert "Measured by the RFD 1129 suite at commit" in block and "CPUs" in block
    assert "20_unmet: graphs found: 13" in block


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_pandoc_renders_the_page_with_its_answer_table_pipe_tables_and_inline_svg(runs, tmp_path):
    """Quarto renders a .qmd with pandoc: the page must survive pandoc itself (pypandoc-binary ships it), not only a
    CommonMark parser. Raw `{=html}` blocks pass through; pipe tables become tables; front matter becomes the title."""
    import pypandoc

    _, good, _ = runs
    target, _ = publish_rfd(good, rfd_folder(tmp_path), questions=QUESTIONS)
    html = pypandoc.convert_file(str(target), "html5", format="markdown", extra_args=["--standalone"])
    tables = re.findall(r"<table.*?</table>", html, flags=re.S)
    cells = [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", t, re.S)] for t in tables
    ]
    answer = cells[0]
    assert answer[:4] == ["Question", "Answer", "Rests on", "Status"]
    assert "Does it fit?" in answer and "Yes: it fits in 3 GiB." in answer and "answered on a stand-in" in answer
    assert any("one dense layer" in t and "3 GiB" in t for t in cells[1:])  # a notebook's pipe table
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) == 1
    ET.fromstring(svgs[0])  # the inline figure arrives whole and well-formed
    assert "<title>" in html and "<img" not in html


def _refused(rfd, run_dir, match, **kw):
    before = snapshot(rfd)
    with pytest.raises(PublishError, match=match):
        publish_rfd(run_dir, rfd, **{"questions": QUESTIONS, **kw})
    assert snapshot(rfd) == before


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_refuses_bad_folders_and_protected_files(runs, tmp_path):
    _, good, _ = runs
    rfd = rfd_folder(tmp_path)
    for name in ("README.md", "DETAILS.md", "SKILL.md"):
        _refused(rfd, good, "written by people", page=name)
    _refused(rfd, good, "ending in .qmd", page="../page.qmd")
    _refused(rfd, good, "ending in .qmd", page="page.html")
    (rfd / "README.md").write_text("# Hailo notes\n")
    _refused(rfd, good, "does not start with '# RFD NNNN:'")
    (rfd / "README.md").unlink()
    _refused(rfd, good, "no README.md")


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_refuses_partial_failed_and_unfinished_runs(runs, tmp_path):
    _root, good, partial = runs
    rfd = rfd_folder(tmp_path)
    _refused(rfd, partial, "partial run")
    failed = tmp_path / "failed"
    shutil.copytree(good, failed)
    summary = json.loads((failed / "summary.json").read_text())
    summary["notebooks"][1]["status"] = "failed"
    summary["passed"] = False
    (failed / "summary.json").write_text(json.dumps(summary))
    _refused(rfd, failed, "not every notebook passed")
    state = json.loads((failed / "state.json").read_text())
    for what in ("failed", "interrupted"):
        state["state"] = what
        (failed / "state.json").write_text(json.dumps(state))
        _refused(rfd, failed, f"the run is {what}")
    (failed / "state.json").unlink()
    _refused(rfd, failed, "the run is unknown")
    _refused(rfd, tmp_path / "nowhere", "no such run folder")


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_cli_prints_the_block_and_exits_2_on_refusal(runs, tmp_path, capsys, monkeypatch):
    from weftlib.suite import publish

    _, good, partial = runs
    rfd = rfd_folder(tmp_path)
    monkeypatch.setattr(publish, "rfd_questions", lambda: list(QUESTIONS))
    assert main(["publish", str(good), "--rfd", str(rfd)]) == 0
    out = capsys.readouterr().out
    assert "paste into DETAILS.md" in out and "10_answer: one dense layer: 3 GiB" in out
    assert main(["publish", str(partial), "--rfd", str(rfd)]) == 2
    assert "partial run" in capsys.readouterr().err


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_refuses_a_run_whose_answer_table_lacks_an_rfd_question(runs, tmp_path, capsys):
    """The RFD's questions are the full plan's notebooks (params/appendix.yaml), whatever a run calls itself:
    these tiny runs answer none of them, and a run of the overview alone answers nothing."""
    _root, good, _ = runs
    rfd = rfd_folder(tmp_path)
    before = snapshot(rfd)
    assert main(["publish", str(good), "--rfd", str(rfd)]) == 2
    err = capsys.readouterr().err
    assert "lacks the RFD question(s) of 01_trace_natten" in err and "04_export_dit_block" in err
    assert "00_overview" not in err.split("lacks")[1]  # the overview answers no question
    overview_only = tmp_path / "overview"
    shutil.copytree(good, overview_only)
    summary = json.loads((overview_only / "summary.json").read_text())
    summary["answers"] = []
    (overview_only / "summary.json").write_text(json.dumps(summary))
    _refused(rfd, overview_only, "lacks the RFD question\\(s\\) of 10_answer, 20_unmet")
    assert snapshot(rfd) == before


@pytest.mark.notebook  # its `runs` run notebooks in kernels: `make test`, not `make check`
def test_a_planted_temporary_file_is_never_followed(runs, tmp_path):
    _, good, _ = runs
    rfd = rfd_folder(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    planted = rfd / ".page.qmd.tmp"
    planted.symlink_to(outside)
    target, _ = publish_rfd(good, rfd, questions=QUESTIONS)
    assert outside.read_text() == "not yours"
    assert not target.is_symlink() and target.read_text().startswith("---\n")
    assert planted.is_symlink() and os.readlink(planted) == str(outside)  # left as it was: not the suite's
    assert sorted(p.name for p in rfd.iterdir()) == sorted(
        [".page.qmd.tmp", "DETAILS.md", "README.md", "SKILL.md", "page.qmd"]
    )


@pytest.mark.parametrize("summary", ["[1,2", "[1, 2]", '{"passed": true, "notebooks": [1]}', "\udcff"])
def test_publish_and_status_refuse_a_corrupt_run_folder_without_a_traceback(tmp_path, summary, capsys):
    """status on a corrupt state.json, publish on a corrupt summary.json: one line, exit 1 or 2, no traceback."""
    from weftlib.__main__ import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text("{not json")
    assert main(["status", str(run)]) == 1
    assert "not JSON" in capsys.readouterr().out
    (run / "state.json").write_text('{"state": "passed"}')
    (run / "summary.json").write_bytes(summary.encode("utf-8", "surrogateescape"))
    rfd = tmp_path / "rfd"
    rfd.mkdir()
    (rfd / "README.md").write_text("# RFD 1129: operator coverage\n")
    assert main(["publish", str(run), "--rfd", str(rfd)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert sorted(p.name for p in rfd.iterdir()) == ["README.md"]
