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
from weftlib.gate.summary import result_files
from weftlib.gate.dfc_runner import default_arch

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
    assert status.loc["03/head.onnx", "TopK"] == "refused" and status.loc["03/sel.onnx", "ArgMax"] == "unjudged"
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
    _answer, rests_on, unmet = conclusion(results, pairings, "not run", script, run_dir=tmp_path)
    assert rests_on["dfc"] == "not run" and len(unmet) == 1
    assert "run `bash 05_gate_pairing/dfc_pack/run_dfc.sh` in the run folder and rerun 05" in unmet[0]
    assert str(tmp_path) not in unmet[0] and "1 graphs unjudged" in unmet[0]
    assert str(script) in conclusion(results, pairings, "not run", script)[2][0]


def test_the_prediction_sentence_names_causes_apart_from_their_consequences(tmp_path):
    """A refused head reshape, and the Softmax it leaves with no format: the reshape is the cause."""
    from weftlib.gate import prediction_rows, prediction_sentence
    from weftlib.gate import rules as R

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
