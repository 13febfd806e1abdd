"""Answers a reader takes in at a glance: each notebook's short answer (at most 40 words) built from its own
values, the index and the RFD page showing only those, and the verdict table per RFD graph read from 05's and
06's records, held to the run's summary.json.

The run folder here is made the way 05 and 06 make theirs, by the same library calls on small graphs: a chain of
1x1 convolutions with a refused (Sin), an unjudged op with a probe (Floor) or one without (Sinh) between them.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import nbformat
import onnx
import pytest
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from tests.conftest import write_notebook
from weftlib import dit, trace
from weftlib.attention import conclusion as attention_conclusion
from weftlib.gate import device_gate, write_probes
from weftlib.gate.estimate.calibration import zoo_calibration
from weftlib.gate.graphs import Builder
from weftlib.gate.notebooks import CutRecord, GateRecord
from weftlib.gate.pages import cut_sentences, cut_tables, gate_sentences, plots
from weftlib.gate.predict import explain
from weftlib.gate.run import cutting, gating
from weftlib.gate.vocabulary import PaysOff
from weftlib.notebook_model import RecordModel
from weftlib.sparse import summary as sparse_summary
from weftlib.suite import index_page, params, publish, record, verdicts
from weftlib.suite.models import OVERVIEW_ROLE, OverviewRecord
from weftlib.suite.runfolder import NotebookResult, read_summary
from weftlib.trace.checkpoint import FlagResult, Mismatch

LIMIT = record.MAX_ANSWER_WORDS
OPS = {"sin": "Sin", "floor": "Floor", "sinh": "Sinh", "relu": "Relu"}
GRAPHS = {  # notebook folder -> stem -> its layers (`layered`)
    "02_export_attention": {"att_faithful": ["conv", "sin", "conv"], "att_image": ["conv", "relu", "conv"]},
    "03_sparse_conv_memory": {"conv_faithful": ["sinh", "relu"], "conv_layout": ["sin", "conv"]},
    "04_export_dit_block": {"dit_faithful": ["conv", "sin", "floor", "conv"], "dit_tokens": ["conv", "floor", "conv"]},
}
ANSWER_GRAPHS = {
    "attention layer (02)": ["att_faithful", "att_image"],
    "sparse convolution (03)": ["conv_faithful", "conv_layout"],
    "DiT block (04)": ["dit_faithful", "dit_tokens"],
}
TITLES = {
    "00_overview": "00 · Overview",
    "02_export_attention": "02 · Can the attention be exported exactly?",
    "03_sparse_conv_memory": "03 · Densify or scatter at 1024?",
    "04_export_dit_block": "04 · Can one DiT block be exported?",
    "05_gate_pairing": "05 · Do the allowlist gate and the compiler agree?",
    "06_device_cut": "06 · What runs on the device?",
}
LONG = " ".join(["a figure the notebook keeps"] * 20)  # 100 words: the answer in full


def layered(name: str, layers: list[str]) -> onnx.ModelProto:
    """1x1 convolutions ("conv") with elementwise ops between them, by their ONNX names in lower case: "sin"
    (refused), "floor" (unjudged, and a probe asks about it), "sinh" (unjudged, no probe), "relu"."""
    g = Builder(name)
    x = g.input("x", [1, 8, 4, 4])
    for i, op in enumerate(layers):
        x = g.conv1x1(x, 8, 8, f"/l{i}", seed=i) if op == "conv" else g.node(OPS[op], [x], f"/l{i}/{OPS[op]}")
    g.output(x)
    return g.model()


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    run = tmp_path_factory.mktemp("answers") / "run"
    models = []
    for folder, stems in GRAPHS.items():
        (run / folder).mkdir(parents=True)
        for stem, layers in stems.items():
            onnx.save(layered(stem, layers), str(run / folder / f"{stem}.onnx"))
            models.append(run / folder / f"{stem}.onnx")
    return run, models


def record_05(run, models, ops, fixed=None):
    """What 05 records for the verdict table: each graph's standing and the scripts, and its answer."""
    rec = record.Recorder("05_gate_pairing", run)
    results = gating.gate_all(models, ops)
    pairings = gating.pair_all(results, dict.fromkeys(models))
    probes = write_probes(rec.path("probes"), ops, extra=gating.ops_used(results))
    rec.record(GateRecord.dfc_script.key, str(rec.path("dfc_pack") / "run_dfc.sh"))
    rec.record(GateRecord.probe_script.key, str(probes.script))
    rec.record(GateRecord.graph_standing.key, gating.graph_standing(results, pairings, probes))
    if fixed:
        rec.record(GateRecord.fix_verdicts.key, fixed)
    answer, rests_on, unmet = gate_sentences.conclusion(results, pairings, "not run", rec.path("dfc_pack/run_dfc.sh"))
    rec.conclude(
        answer + " " + LONG, rests_on=rests_on, unmet=unmet, short=gate_sentences.short_answer(results, pairings)
    )
    return results


def record_06(run, models, ops):
    """What 06 records: the answer graphs, the coverage, the device share, node data; and its answer."""
    rec = record.Recorder("06_device_cut", run)
    partitions = cutting.cut_all(models, ops, rec.path("segments"))
    rec.record(CutRecord.coverage.key, cut_tables.coverage_table(partitions, run))
    rec.record(CutRecord.answer_graphs.key, ANSWER_GRAPHS)
    named = cutting.answer_models(models, ANSWER_GRAPHS)
    plots.node_data_files(partitions, cutting.predictions(models, ops, partitions), rec.path("node_data"))
    rec.record(CutRecord.device_share.key, cutting.device_share(partitions, named), headline=True)
    estimates = cutting.estimate_cuts(
        {m: partitions[m] for m in named.values()},
        {m: rec.path("segments") / m.stem for m in named.values()},
        zoo_calibration(),
        repeats=1,
    )
    rec.record(CutRecord.device_payoff.key, cutting.payoff_verdicts(estimates, named))
    sentence, rests_on, unmet = cut_sentences.conclusion(partitions, named, 1e-6, {}, rec.path("run_dfc.sh"), run)
    rec.conclude(
        sentence,
        rests_on=rests_on,
        unmet=unmet,
        short=cut_sentences.short_answer(partitions, named, ANSWER_GRAPHS, 1e-6),
    )
    return partitions


def write_run(run, models, ops, fixed=None):
    """The whole run folder: titled notebooks, 02-04 concluding in full and in short, 05's and 06's records,
    then the index; returns the summary."""
    nb_dir = run.parent / "nbs"
    nb_dir.mkdir(exist_ok=True)
    for name, title in TITLES.items():
        for folder in (nb_dir, run):
            write_notebook(folder / f"{name}.ipynb", 'run_dir = ""', "")
            nb = nbformat.read(folder / f"{name}.ipynb", as_version=4)
            nb.cells[0].source = f"# {title}\n\nWhat was done, in the notebook's own words."
            nbformat.write(nb, folder / f"{name}.ipynb")
    record.Recorder("00_overview", run).record(OverviewRecord.role.key, OVERVIEW_ROLE)
    for name in GRAPHS:
        rec = record.Recorder(name, run)
        rec.conclude(LONG, rests_on={"sources": "stand-in"}, short=f"Yes: {name} exports exactly.")
    results = record_05(run, models, ops, fixed)
    record_06(run, models, ops)
    (run.parent / "p.yaml").write_text("notebooks: [" + ", ".join(TITLES) + "]\n")
    plan = params.load_plan(run.parent / "p.yaml", None, nb_dir)
    done = [NotebookResult(name, status="passed", seconds=1.0) for name in TITLES]
    return index_page.write_index(run, plan, done, datetime.now(UTC)), results


@pytest.fixture(scope="module")
def run(graphs, ops):
    folder, models = graphs
    summary, results = write_run(folder, models, ops)
    return folder, summary, results


def words(text: str) -> int:
    return record.word_count(text)


# ---- the short answers ---------------------------------------------------------------------------------------


def test_a_short_answer_over_forty_words_fails_the_notebook_and_one_within_is_kept(tmp_path):
    rec = record.Recorder("99_x", tmp_path)
    with pytest.raises(ValueError, match="41 words, more than 40"):
        rec.conclude("long", rests_on={}, short=" ".join(["w"] * 41))
    got = rec.conclude("the sentence in full", rests_on={"sources": "stand-in"}, short=" Yes:  in short. ")
    assert got["answer"] == "the sentence in full" and got["short"] == "Yes: in short."


def test_each_topic_builds_its_short_answer_from_its_values(tmp_path, ops):
    def gated(layers):
        return device_gate(onnx_file(tmp_path, layers), ops)

    faithful, passing, waiting, refused = (
        gated(["conv", "sin", "conv"]),
        gated(["conv", "relu"]),
        gated(["conv", "floor"]),
        gated(["sin", "conv"]),
    )
    assert explain.short_prediction({"f": faithful, "v": passing}, ["f"]) == "v is predicted to parse"
    assert explain.short_prediction({"f": faithful, "v": refused}, ["f"]) == (
        "no variant parses yet: the closest, v, is refused by op Sin"
    )
    assert explain.short_prediction({"f": faithful, "v": refused, "w": waiting}, ["f"]) == (
        "no variant parses yet: w waits on op Floor, which the record leaves unjudged (the probe `probe_Floor` settles it)"
    )
    assert explain.named(["a", "b", "c", "d"]) == "a, b +2" and explain.named(["a", "b"]) == "a and b"
    # over its word budget the phrase gives counts instead of names, so the answer stays within 40 words
    assert explain.short_prediction({"f": faithful, "w": waiting}, ["f"], budget=12) == (
        "no variant parses yet: w waits on 1 unjudged rules and ops (see 05's probes)"
    )
    texts = {
        "01": trace.natten_short(
            "a -> cutlass_fna_generic",
            FlagResult("use_naf_upsample", False, (Mismatch("proj.weight", (8, 1024), (8, 2048)),), (), (), "e"),
        ),
        "02": attention_conclusion.short_answer(
            worst_equality=2.4e-7,
            naf_vs_natten=3.1e-7,
            naf_results={"NAF upsampler, faithful": faithful, "NAF upsampler, device": passing},
            faithful=["NAF upsampler, faithful"],
        ),
        "03": sparse_summary.short_sentence(
            res=1024,
            peaks={"dense": 9 * 2**30, "accumulate": 2**27, "scatter": 2**28},
            device_memory_gib=8.0,
            named={"conv_scatter": refused, "layout_gathered": passing},
            faithful=["conv_scatter"],
        ),
        "04": dit.short_answer({"faithful": faithful, "tokens": refused, "tokens+all": waiting}),
    }
    assert texts["01"].startswith("natten is not optional: NAF's forward reaches cutlass_fna_generic")
    assert "(proj.weight)" in texts["01"]
    assert texts["02"].startswith(
        "Yes: every formulation and NAF's upsampler and attention layer equal natten within 3 × 10⁻⁷"
    )
    assert texts["02"].endswith("of NAF's exact variants, NAF upsampler (device) is predicted to parse.")
    assert texts["03"].startswith("Scatter, not densify: one layer at the 1024 grid needs 9 GiB densified against")
    assert "128 MiB by accumulate" in texts["03"] and texts["03"].endswith("layout_gathered is predicted to parse.")
    assert texts["04"] == (
        "It exports exactly (RoPE in real arithmetic), the faithful block is refused by op Sin; no variant parses "
        "yet: tokens+all waits on op Floor, which the record leaves unjudged (the probe `probe_Floor` settles it)."
    )
    assert all(words(t) <= LIMIT for t in texts.values()), {k: words(t) for k, t in texts.items()}


def onnx_file(folder, layers):
    name = "g" + "_".join(layers)
    path = folder / f"{name}.onnx"
    onnx.save(layered(name, layers), str(path))
    return path


def test_05_and_06_say_their_answers_in_short(run):
    folder, _summary, results = run
    m05 = record.load_metrics(folder, "05_gate_pairing")["metrics"]
    assert (GateRecord.conclusion.of(m05) or {})["short"] == (
        "Of 6 graphs the gate predicts 1 to parse, 3 refused and 2 unjudged (op Sin refuses 3); 0 verdicts rest "
        "on the DFC, 6 on the public record alone."
    )
    m06 = record.load_metrics(folder, "06_device_cut")["metrics"]
    short = (CutRecord.conclusion.of(m06) or {})["short"]
    shares = CutRecord.device_share.of(m06) or {}
    assert [shares[stems[0]] for stems in ANSWER_GRAPHS.values()] == [1.0, 0.0, 1.0]
    assert short == (
        "Every cut is proven equal to its graph within 1 × 10⁻⁶; the faithful graphs put 0 % to 100 % of their MACs "
        "on the device, the best exact variants 100 %."
    )
    assert all(words((RecordModel.conclusion.of(m) or {})["short"]) <= LIMIT for m in (m05, m06))
    assert len(results) == 6


# ---- the index and the page show the short answers -------------------------------------------------------------


def answer_cells(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    table = soup.find("h2", string="Answers").find_next("table")
    return [td.get_text(" ", strip=True) for td in table.select("td.answer")]


def test_every_answer_cell_of_the_index_and_the_page_is_at_most_forty_words(run):
    folder, summary, _ = run
    cells = answer_cells((folder / "index.html").read_text())
    assert len(cells) == 5 and all(0 < words(c) <= LIMIT for c in cells), cells
    page = publish.render_page(folder, summary)
    tokens = MarkdownIt("commonmark").enable("table").parse(page.split("\n---\n", 1)[1])
    rows, row = [], []
    for i, t in enumerate(tokens):
        if t.type == "tr_open":
            row = []
        elif t.type == "td_open":
            row.append(tokens[i + 1].content)
        elif t.type == "tr_close" and row:
            rows.append(row)
    answers = [r[1] for r in rows[:5]]  # the answer table opens the page
    assert answers == cells
    lines = [line for line in page.splitlines() if line.startswith("**Answer.**")]
    assert len(lines) == 5 and all(words(line.split("*Status:")[0]) - 1 <= LIMIT for line in lines)
    # the answer in full stays in summary.json and on the page, under its section
    saved = json.loads((folder / "summary.json").read_text())["answers"]
    assert [a["answer"] for a in saved] == cells
    assert all(words(a["details"]) > words(a["answer"]) for a in saved)
    assert sum(a["details"].endswith(LONG) for a in saved) == 4  # 02, 03, 04 and 05: 06 says its own in full
    assert page.count("**In full.**") == 5


# ---- the verdict table -------------------------------------------------------------------------------------------


def text_of(cell) -> str:
    """A cell's text as a reader reads it: one space between its pieces, none before punctuation."""
    text = " ".join(cell.get_text(" ").split())
    return re.sub(r"\( ", "(", re.sub(r" ([:;,)])", r"\1", text))


def verdict_table(html: str) -> list[list[str]]:
    soup = BeautifulSoup(html, "html.parser")
    return [[text_of(td) for td in tr.find_all("td")] for tr in soup.select("table.verdicts tr.verdict-row")]


def expected_cells(row: dict) -> list[str]:
    """A verdict row as the table must show it, from summary.json's row alone."""

    def side(s):
        basis = {"DFC": "DFC", "prediction": "predicted"}.get(s["basis"], s["basis"])
        return f"{s['verdict']} ({basis}) {s['stem']}" + (f": {s['by']}" if s["by"] else "")

    settle = f"{row['settle']['kind']}: {row['settle']['text'].replace('`', '')}"
    share = f"{row['faithful']['share_text']} → {row['variant']['share_text']}"
    payoff = f"{row['faithful']['payoff']} → {row['variant']['payoff']}"
    return [row["graph"], side(row["faithful"]), side(row["variant"]), settle, share, payoff]


def test_the_verdict_table_is_summary_jsons_in_the_index_and_on_the_page(run):
    folder, summary, _ = run
    saved = read_summary(folder).verdicts
    assert saved == summary.verdicts and [r["graph"] for r in saved] == list(ANSWER_GRAPHS)
    index = (folder / "index.html").read_text()
    shown = verdict_table(index)
    strip_links = [[c.split(" ONNX")[0] for c in cells] for cells in shown]  # the index links each graph
    assert strip_links == [expected_cells(r) for r in saved]
    page = publish.render_page(folder, summary)
    assert verdict_table(page) == [expected_cells(r) for r in saved]
    assert not BeautifulSoup(page, "html.parser").select("table.verdicts a")  # the page lives outside the run


def test_each_row_is_read_from_05_and_06s_records_and_says_what_settles_the_rest(run):
    folder, summary, _ = run
    standing = GateRecord.graph_standing.of(record.load_metrics(folder, "05_gate_pairing")["metrics"])
    shares = CutRecord.device_share.of(record.load_metrics(folder, "06_device_cut")["metrics"])
    payoffs = CutRecord.device_payoff.of(record.load_metrics(folder, "06_device_cut")["metrics"])
    rows = {r["graph"]: r for r in summary.verdicts}
    for row in rows.values():
        for side in (row["faithful"], row["variant"]):
            assert side["verdict"] == standing[side["stem"]]["verdict"]
            assert side["share"] == shares[side["stem"]]
            assert side["payoff"] == payoffs[side["stem"]] and side["payoff"] in {str(v) for v in PaysOff}
    attention, sparse, block = rows["attention layer (02)"], rows["sparse convolution (03)"], rows["DiT block (04)"]
    assert (attention["faithful"]["verdict"], attention["faithful"]["by"]) == ("refused", "op Sin ×1")
    assert attention["variant"]["verdict"] == "pass" and attention["settle"] == {
        "kind": "DFC run",
        "text": "`bash 05_gate_pairing/dfc_pack/run_dfc.sh`",
    }
    assert attention["variant"]["share"] == 1.0 and attention["variant"]["share_text"] == "100 % (3 of 3 nodes)"
    assert block["faithful"]["by"] == "op Sin ×1" and block["variant"]["by"] == "op Floor ×1"
    assert block["settle"] == {"kind": "probe", "text": "`probe_Floor` in `bash 05_gate_pairing/probes/run_dfc.sh`"}
    assert (sparse["faithful"]["verdict"], sparse["faithful"]["by"]) == ("unjudged", "op Sinh ×1")
    assert sparse["variant"]["verdict"] == "refused" and sparse["settle"]["kind"] == "rewrite"
    links = {link["label"]: link["href"] for link in block["variant"]["links"]}
    assert links == {"ONNX": "04_export_dit_block/dit_tokens.onnx"}  # no picture of the cut in this folder
    assert all((folder / href).is_file() for href in links.values())
    # what the page says to run to see a graph is installed by the project (netron is a dependency)
    index = (folder / "index.html").read_text()
    assert ".venv/bin/netron" in index and "netron" in (params.REPO_ROOT / "pyproject.toml").read_text()
    assert "model-explorer" not in index


def test_the_figure_counts_the_graphs_by_verdict_before_and_after_the_variants(run):
    folder, summary, _ = run
    assert verdicts.stage_counts(summary.verdicts) == {
        "faithful graphs": {"unjudged": 1, "refused": 2},
        "best exact variants": {"pass": 1, "unjudged": 1, "refused": 1},
    }
    assert (folder / verdicts.FIGURE).is_file() and (folder / "verdicts.svg").is_file()
    assert f'<img src="{verdicts.FIGURE}"' in (folder / "index.html").read_text()
    assert "*Figure: the RFD graphs by verdict" in publish.render_page(folder, summary)


def test_gate_fixs_verdicts_add_a_column_and_a_bar_when_05_records_them(graphs, ops, tmp_path):
    import shutil

    folder, models = graphs
    copy = tmp_path / "run"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("05_gate_pairing", "06_device_cut", "*.html", "*.json"))
    moved = [copy / m.relative_to(folder) for m in models]
    summary, _ = write_run(copy, moved, ops, fixed={"dit_faithful": "unjudged", "att_faithful": "pass"})
    counts = verdicts.stage_counts(summary.verdicts)
    assert counts["after gate fix"] == {"pass": 1, "unjudged": 1, "not run": 1}
    html = (copy / "index.html").read_text()
    assert "after <code>gate fix</code>" in html and len(verdict_table(html)[0]) == 7


# ---- the bottom line ---------------------------------------------------------------------------------------------


def test_the_index_summary_and_page_open_with_the_bottom_line_built_from_the_rows(run):
    folder, summary, _ = run
    rows = summary.verdicts
    refused = sum(r["faithful"]["verdict"] == "refused" for r in rows)
    passing = sum((r["variant"] or {}).get("verdict") == "pass" for r in rows)
    line = summary.bottom_line
    assert line.startswith(
        f"Of the {len(rows)} RFD graphs, {refused} are predicted refused as written; for {passing} a proven exact "
        f"variant or `gate fix` passes; {len(rows)} wait on a DFC run. Next: run `bash "
    ), line
    assert (refused, passing) == (2, 1)
    # the next step names both packs' scripts inside this run folder, and the rerun that gives each notebook
    # its own pack's results (05's graphs and 06's cuts are different folders)
    run_dir = index_page.readable_path(folder)
    graphs, cuts = f"{run_dir}/05_gate_pairing/dfc_pack", f"{run_dir}/06_device_cut/cut_pack"
    assert f"run `bash {graphs}/run_dfc.sh` and `bash {cuts}/run_dfc.sh` where Docker" in line
    assert line.endswith(f"--set 05_gate_pairing.dfc_results_dir={graphs} --set 06_device_cut.dfc_results_dir={cuts}`.")
    assert "weftspun-hailo-dfc:" in line
    saved = json.loads((folder / "summary.json").read_text())
    assert next(iter(saved)) == "bottom_line" and saved["bottom_line"] == line
    soup = BeautifulSoup((folder / "index.html").read_text(), "html.parser")
    first = soup.body.find(True)  # the first element of the page is the bottom line
    assert "bottom-line" in first.get("class", []) and " ".join(
        first.get_text().split()
    ) == "Bottom line. " + line.replace("`", "")
    page = publish.render_page(folder, summary)
    body = [b for b in page.split("\n---\n", 1)[1].split("\n\n") if b.strip() and not b.strip().startswith("<!--")]
    assert body[0] == f"**Bottom line.** {line}"


def test_every_red_row_of_the_index_shows_its_next_step_uncollapsed(run):
    folder, summary, _ = run
    soup = BeautifulSoup((folder / "index.html").read_text(), "html.parser")
    red = soup.select("table.answers tr.unanswered")
    unanswered = [a for a in summary.answers if a["kind"] == "unanswered"]
    assert red and len(red) == len(unanswered)  # 05 and 06: no DFC ran
    for tr, answer in zip(red, unanswered, strict=True):
        status = tr.select_one("td.status")
        shown = [text_of(li) for li in status.select("ul.next li") if not li.find_parent("details")]
        assert shown == [f"next: {u.replace('`', '')}" for u in answer["unmet"]], shown
        assert all("bash " in s for s in shown)


def test_the_verdict_table_says_what_its_columns_and_its_arrow_mean(run):
    folder, _summary, _ = run
    caption = BeautifulSoup((folder / "index.html").read_text(), "html.parser").select_one("table.verdicts caption")
    text = text_of(caption)
    for said in (
        "best exact variant: a variant made by hand in torch",
        "0 % → 100 %",
        "a refused graph can show 100 %",
    ):
        assert said in text, said


def test_a_share_short_of_the_whole_never_reads_100_percent():
    assert verdicts.share_text(1.0, {"MACs on device": 0.99996, "nodes on device": "40 of 45"}) == (
        "> 99.99 % (40 of 45 nodes)"
    )
    assert verdicts.share_text(1.0, {"MACs on device": 1.0, "nodes on device": "40 of 45"}) == "100 % (40 of 45 nodes)"
    assert verdicts.share_text(0.5) == "50 %" and verdicts.share_text(None) == "not cut"
