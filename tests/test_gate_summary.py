"""Notebook 05's helpers: finding graphs, matching DFC results by stem, the op matrix and the edits table."""

from __future__ import annotations

from tests.test_gate_graphs import attention, gather, save, topk_head
from weftlib.gate import (
    collect_dfc,
    device_gate,
    edits_table,
    evidence_table,
    find_models,
    gate_table,
    load_device_ops,
    op_matrix,
    pair,
    pairing_table,
    plot_op_matrix,
)
from weftlib.gate.compiler.dfc_target import default_arch
from weftlib.gate.compiler.results import result_files

ARCH = default_arch()


def test_models_results_and_tables(tmp_path, monkeypatch):
    ops = load_device_ops()
    (tmp_path / "02" / "sub").mkdir(parents=True)
    (tmp_path / "03").mkdir()
    a = save(attention(), tmp_path / "02" / "sub" / "attn.onnx")
    h = save(topk_head(), tmp_path / "03" / "head.onnx")
    g = save(gather(False), tmp_path / "03" / "sel.onnx")
    models = find_models([tmp_path / "02", tmp_path / "03", tmp_path / "missing"])
    assert models == [a, h, g]

    results_dir = tmp_path / "dfc"
    results_dir.mkdir()
    (results_dir / "attn.dfc.log").write_text("[info] Translation completed on ONNX model attn\n")
    (results_dir / "head.txt").write_text(
        "[info] Translation started on ONNX model head\n"
        " UnsupportedOperationError in op /head/TopK: TopK operation is unsupported\n"
    )
    (results_dir / "unrelated.md").write_text("not a result")
    assert sorted(result_files(results_dir)) == ["attn", "head"]
    dfc, how = collect_dfc(models, str(results_dir), ARCH)
    assert how == "results_dir" and dfc[g] is None
    assert (dfc[a].verdict, dfc[h].verdict) == ("parsed", "rejected")

    results = {m: device_gate(m, ops) for m in models}
    table = gate_table(results, tmp_path)
    assert list(table["model"]) == ["02/sub/attn.onnx", "03/head.onnx", "03/sel.onnx"]
    assert list(table["gate"]) == ["PASS", "FAIL", "UNJUDGED"]
    assert list(table["refused"]) == ["", "op TopK", ""]
    pairings = {m: pair(results[m], dfc[m], m) for m in models}
    assert list(pairing_table(pairings, tmp_path)["verdict"]) == ["allowlist held", "both reject", "DFC not run"]

    counts, status = op_matrix(results, ops, tmp_path)
    assert counts.loc["03/sel.onnx", "Gather"] == 1 and status.loc["03/sel.onnx", "Gather"] == "unjudged"
    assert status.loc["03/head.onnx", "TopK"] == "refused" and status.loc["03/sel.onnx", "ArgMax"] == "parse"
    assert status.loc["02/sub/attn.onnx", "TopK"] == "" and status.loc["02/sub/attn.onnx", "MatMul"] == "parse"
    assert int(counts.to_numpy().sum()) == sum(r.nodes for r in results.values())
    fig = plot_op_matrix(counts, status)
    assert len(fig.axes[0].texts) == int((counts > 0).to_numpy().sum())

    assert edits_table(pairings, evidence_table(ops), tmp_path).empty  # the committed listing agrees with itself
    moved = [{**r, "listed": "device_ops"} if r["name"] == "TopK" else r for r in evidence_table(ops)]
    edits = edits_table(pairings, moved, tmp_path)
    assert [(r["action"], r["op"]) for _, r in edits.iterrows()] == [("move out", "TopK")]


def test_collect_without_results_or_parser_is_not_run(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "hailo_sdk_client", None)
    model = save(attention(), tmp_path / "a.onnx")
    assert collect_dfc([model], "", ARCH) == ({model: None}, "not run")


def test_unmet_dfc_names_the_script_inside_the_run_folder(tmp_path):
    """The published appendix is a copy of the run folder: its command must not name this machine's path."""
    from weftlib.gate import conclusion

    (tmp_path / "02").mkdir()
    model = save(attention(), tmp_path / "02" / "a.onnx")
    results = {model: device_gate(model, load_device_ops())}
    pairings = {model: pair(results[model], None, model)}
    script = tmp_path / "05_gate_pairing" / "dfc_pack" / "run_dfc.sh"
    _answer, rests_on, unmet = conclusion(results, pairings, "not run", script, run_dir=tmp_path, notebooks=["02_x"])
    assert rests_on["dfc"] == "not run" and len(unmet) == 1
    assert rests_on["geometry"] == "the graphs 02 exported in this run, at their geometries"
    assert "run `bash 05_gate_pairing/dfc_pack/run_dfc.sh` in the run folder and rerun 05" in unmet[0]
    assert str(tmp_path) not in unmet[0] and "1 graphs unjudged" in unmet[0]
    assert str(script) in conclusion(results, pairings, "not run", script)[2][0]


def test_the_answer_rests_on_the_sources_the_graph_notebooks_used(tmp_path):
    """05's `rests_on["sources"]` was the literal "stand-in" whatever the run used; it names what the graph
    notebooks recorded, so an answer on real checkouts is not reported as a stand-in's, nor the reverse."""
    import json

    from weftlib.gate import conclusion
    from weftlib.suite.record import answer_status

    recorded = {
        "02_export_attention": "valeoai/NAF checkout at ad4e24d, /src/NAF",
        "04_export_dit_block": "Pixal3D checkout at cdbb2bb, /src/Pixal3D",
    }
    for name, sources in recorded.items():
        (tmp_path / name).mkdir()
        conc = {"answer": "a", "rests_on": {"sources": sources}}
        (tmp_path / name / "metrics.json").write_text(json.dumps({"metrics": {"conclusion": conc}}))
    model = save(attention(), tmp_path / "02_export_attention" / "a.onnx")
    results = {model: device_gate(model, load_device_ops())}
    pairings = {model: pair(results[model], None, model)}
    script = tmp_path / "05_gate_pairing" / "dfc_pack" / "run_dfc.sh"
    rests_on = conclusion(results, pairings, "not run", script, run_dir=tmp_path, notebooks=[*recorded])[1]
    assert rests_on["sources"] == (
        "valeoai/NAF checkout at ad4e24d, /src/NAF (02); Pixal3D checkout at cdbb2bb, /src/Pixal3D (04)"
    )
    assert answer_status({"rests_on": rests_on}) == "answered"
    conc = {"answer": "a", "rests_on": {"sources": "stand-in for valeoai/NAF"}}
    (tmp_path / "02_export_attention" / "metrics.json").write_text(json.dumps({"metrics": {"conclusion": conc}}))
    rests_on = conclusion(results, pairings, "not run", script, run_dir=tmp_path, notebooks=[*recorded])[1]
    assert rests_on["sources"].startswith("stand-in for valeoai/NAF (02); Pixal3D checkout")
    assert answer_status({"rests_on": rests_on}) == "answered on a stand-in"


def test_the_prediction_sentence_names_causes_apart_from_their_consequences(tmp_path):
    """A refused head reshape, and the Softmax it leaves with no format: the reshape is the cause."""
    from weftlib.gate import prediction_rows, prediction_sentence
    from weftlib.gate.predict import rules as R

    ops = load_device_ops()
    width = save(R.RULES["softmax_untracked"].example(), tmp_path / "width.onnx")
    glued = save(R.RULES["head_split_glued"].example(), tmp_path / "glued.onnx")
    odd = save(R.RULES["input_rank_5"].example(), tmp_path / "odd.onnx")
    results = {"faithful": device_gate(width, ops), "glued": device_gate(glued, ops), "odd": device_gate(odd, ops)}
    sentence = prediction_sentence(results, ["faithful"])
    assert sentence.startswith("faithful is predicted fail, refused by image_channel_split (qvl-block-tokens-as-width)")
    assert "(and, downstream of those, softmax_untracked)" in sentence
    assert sentence.endswith("predicted to parse: glued")
    without = prediction_sentence({k: v for k, v in results.items() if k != "glued"}, ["faithful"])
    assert without.endswith("no variant is predicted to parse; the closest, odd, is unjudged by input_rank_5")
    rows = {r["graph"]: r for r in prediction_rows(results)}
    assert rows["glued"]["prediction"] == "pass" and rows["glued"]["refused by"] == "-"
    assert rows["faithful"]["refused by"].startswith("image_channel_split x1")


def test_notebook_05s_figures_rows_and_sentences(tmp_path):
    """What 05 records and shows, from graphs gated here: each figure, row and sentence, and the rules the
    notebook no longer restates (a verdict per graph, a pass without objection, the pack holds every graph,
    the matrix agrees with the gate, a graph rests on the prediction exactly when its pairing is unjudged)."""
    import pandas as pd

    from weftlib.gate import findings_table, pack_models, run_graphs, standing_table
    from weftlib.gate.pages import gate_sentences, gate_tables
    from weftlib.gate.run import gating
    from weftlib.gate.vocabulary import PairVerdict

    ops = load_device_ops()
    (tmp_path / "02").mkdir()
    graphs = [
        save(attention(), tmp_path / "02" / "attn.onnx"),
        save(topk_head(), tmp_path / "02" / "head.onnx"),
        save(gather(False), tmp_path / "02" / "sel.onnx"),
    ]
    assert run_graphs.notebook_folders(tmp_path, ["02"]) == {"02": tmp_path / "02"}
    pack, models = pack_models(graphs, tmp_path / "pack", ARCH)
    assert pack.script.is_file() and set(pack.graphs) == {m.name for m in graphs}
    results = {m: device_gate(m, ops) for m in models}
    table = gate_table(results, pack.folder)
    assert gate_tables.verdict_counts(table) == {"pass": 1, "fail": 1, "unjudged": 1}
    for r in results.values():
        refused = any(f.prediction == "refused" for f in r.findings)
        assert (r.verdict == "fail") == bool(r.problems or r.refused_ops or refused)
        assert r.verdict != "pass" or not r.findings
    assert gate_tables.refused_rules(findings_table(results, pack.folder)) == ["op TopK"]
    assert "TopK" in gating.ops_used(results) and gating.ops_used(results) == sorted(gating.ops_used(results))

    dfc = {m: None for m in models}
    assert gating.results_found(dfc) == 0
    sentence = gate_sentences.dfc_sentence("not run", 0, 3, pack.script)
    assert sentence.startswith("**DFC results: not run** (0 of 3 graphs). **DFC not run here** for 3 graphs")
    assert f"run `bash {pack.script}` where Docker" in sentence
    assert (
        gate_sentences.dfc_sentence("results_dir", 3, 3, pack.script) == "**DFC results: results_dir** (3 of 3 graphs)."
    )
    row = gate_tables.pack_table(pack, 1).iloc[0]
    assert (row["graphs"], row["without a result"], row["script"]) == (3, 2, str(pack.script))

    pairings = gating.pair_all(results, dfc)
    assert all(p.verdict == PairVerdict.NOT_RUN for p in pairings.values())
    assert gate_tables.pairing_verdicts(pairing_table(pairings, pack.folder)) == {PairVerdict.NOT_RUN: 3}
    standing = standing_table(results, pairings, pack.folder)
    assert gate_tables.graphs_unjudged(standing) == sum(not p.judged for p in pairings.values()) == 3

    counts, status = op_matrix(results, ops, pack.folder)
    assert gate_tables.refused_in_matrix(counts, status) == ["TopK"]
    assert set(gate_tables.refused_in_matrix(counts, status)) == {op for r in results.values() for op in r.refused_ops}

    evidence = pd.DataFrame(evidence_table(ops))
    tallies = gate_tables.prediction_counts(evidence)
    assert sum(tallies.values()) == len(evidence) and all(kind in ("op", "rule") for kind, _ in tallies)


def test_the_public_record_and_the_listing_in_figures():
    import pandas as pd

    from weftlib.gate.pages import gate_tables
    from weftlib.gate.run import gating

    rows = [
        {"case": "a", "agreement": "agrees", "reach": "target"},
        {"case": "b", "agreement": "unjudged", "reach": "other_5x"},
        {"case": "c", "agreement": "agrees", "reach": "other_5x"},
    ]
    counts = pd.DataFrame([{"source": "QVL", "agrees": 2}])
    figures = gating.public_record_summary(rows, counts)
    assert {k: v for k, v in figures.items() if k != "by_source"} == {
        "cases": 3,
        "agreed": 2,
        "unjudged": 1,
        "disagreed": 0,
        "on_target": 1,
    }
    assert figures["by_source"] is counts
    ops = load_device_ops()
    missing = gating.not_rebuilt(ops)
    assert missing and all(not ops.cases[name].rebuilt for name in missing)
    assert list(gate_tables.not_rebuilt_table(missing)["case"]) == list(missing)
    assert gating.contradicted(ops) == []  # the committed listing agrees with its own evidence
    sources = gate_tables.sources_table(ops)
    assert list(sources.columns) == ["source", "in full"] and len(sources) == len(ops.sources)


def test_the_probe_rows_and_sentences():
    from types import SimpleNamespace

    from weftlib.gate.pages import gate_sentences, gate_tables
    from weftlib.gate.run import gating

    probe = SimpleNamespace(file="probe_rule_x.onnx", label="x", nodes=("probe/x/a", "probe/x/b"), why="unjudged")
    pack = SimpleNamespace(probes=(probe,), unbuilt={"op:Foo": "no probe builder"}, folder="out", script="out/run.sh")
    assert gate_tables.probe_table(pack).to_dict("records") == [
        {"probe": "probe_rule_x.onnx", "asks about": "x", "nodes": "probe/x/a, probe/x/b", "why": "unjudged"}
    ]
    assert gating.unprobed_rules(pack) == []
    assert gating.unprobed_rules(SimpleNamespace(unbuilt={"op:Foo": "", "softmax_untracked": ""})) == [
        "softmax_untracked"
    ]
    assert gate_sentences.probes_sentence(pack) == (
        "**1 probes** in `out`; run them all with `bash out/run.sh`. Not probed (no builder, named): op:Foo."
    )
    assert gating.probe_evidence("", None) == ("", [])
    assert gate_sentences.diff_markdown("-a\n+b", True) == "```diff\n-a\n+b\n```"
    assert gate_sentences.diff_markdown("", True) == "No probe result changes the allowlist."
    assert gate_sentences.diff_markdown("", False) == "No probe results given (`probe_results_dir`)."
    assert gate_sentences.answer_markdown("3 graphs gated", ["DFC not run here"]) == (
        "**3 graphs gated**\n\n- unmet: DFC not run here"
    )
    assert gate_sentences.answer_markdown("done", []) == "**done**\n\n"
