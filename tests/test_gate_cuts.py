"""Notebook 06's figures, rows and sentences, from graphs cut here (the cut itself: tests/test_gate_partition.py)."""

from __future__ import annotations

import onnx
import pytest

from tests.test_gate_partition import chain
from weftlib.gate.pages import cut_sentences, cut_tables, plots
from weftlib.gate.run import cutting


@pytest.fixture()
def cut(ops, tmp_path):
    models = []
    for name, layers in (("a", ["conv", "relu", "sin", "conv"]), ("b", ["sin", "sin"])):
        path = tmp_path / f"{name}.onnx"
        onnx.save(chain(name, layers), str(path))
        models.append(path)
    return models, cutting.cut_all(models, ops, tmp_path / "segments")


def test_every_node_is_in_one_segment_and_every_end_node_in_its_own(cut):
    """What 06 asserted of each cut and no longer restates: the rule of `partition`."""
    _models, partitions = cut
    for part in partitions.values():
        assert part.coverage.nodes[1] == len({n for s in part.segments for n in s.nodes})
        assert all(set(s.end_node_names) <= set(s.nodes) for s in part.device_segments)


def test_the_answer_graphs_are_found_by_stem_and_the_absent_named(cut):
    models, _partitions = cut
    asked = {"first": ["a"], "second": ["b", "c"]}
    assert cutting.answer_models(models, asked) == {"a": models[0], "b": models[1]}
    assert cutting.absent_graphs(models, asked) == ["c"]
    assert cutting.absent_graphs(models, {"first": ["a"]}) == []


def test_pictures_node_data_and_the_pack_cover_every_graph(ops, cut, tmp_path):
    import matplotlib.pyplot as plt

    models, partitions = cut
    prediction = cutting.predictions(models, ops, partitions)
    every = plots.pictures(partitions, prediction)
    only = plots.pictures(partitions, prediction, only=[models[1]])
    assert list(every) == ["a.png", "b.png"] and list(only) == ["b.png"]
    plt.close("all")
    written = plots.node_data_files(partitions, prediction, tmp_path / "node_data")
    assert written == [plots.node_data_file(tmp_path / "node_data", m) for m in models]
    assert all(p.is_file() for p in written)
    assert cutting.cut_count(partitions) == sum(len(p.device_segments) for p in partitions.values()) == 2
    pack = cutting.pack_cuts(partitions, tmp_path / "pack", "hailo10h")
    assert cut_sentences.pack_sentence(pack, 2) == (
        f"**2 graphs and 2 cuts** in `{pack.folder}`; run them all with `bash {pack.script}`."
    )
    assert cutting.cut_results(partitions, pack.folder) == {}  # the DFC has not run: no result in the pack
    risks = cut_tables.compile_risks(partitions, ops, tmp_path)
    assert list(risks["graph"]) == ["a.onnx"]  # b has no device layer: no compile risk to name


def test_without_dfc_results_the_cuts_stand_and_the_answer_names_the_script(ops, cut, tmp_path):
    models, partitions = cut
    same, verdicts = cutting.after_dfc(partitions, {}, ops, tmp_path / "again")
    assert same is partitions and verdicts == []
    table = cut_tables.verdict_table(verdicts)
    assert table.empty and list(table.columns) == ["model", "segment", "dfc", "moved", "why"]
    rows = cut_tables.verdict_table(
        [cutting.CutVerdict("a", 0, "rejected", ("/l0/Conv",), "UnsupportedOperationError")]
    )
    assert rows.to_dict("records")[0]["moved"] == ("/l0/Conv",)
    named = cutting.answer_models(models, {"q": ["a", "b"]})
    shares = cutting.device_share(partitions, named)
    assert set(shares) == {"a", "b"} and shares["b"] == 0.0 and 0 < shares["a"] <= 1
    script = tmp_path / "06_device_cut" / "cut_pack" / "run_dfc.sh"
    answer, rests_on, unmet = cut_sentences.conclusion(partitions, named, 1e-6, {}, script, tmp_path)
    assert answer.startswith("Every graph cut and proven (chain vs graph within 1 × 10⁻⁶): a: ")
    assert "b: nothing is predicted to run on the device (the host computes all 2 nodes)" in answer
    assert answer.endswith(".")
    assert rests_on == {"dfc": "not run", "sources": "unknown"}
    given = cut_sentences.conclusion(partitions, named, 1e-6, {}, script, tmp_path, sources="stand-in for x (02)")[1]
    assert given["sources"] == "stand-in for x (02)"
    assert len(unmet) == 1 and "`bash 06_device_cut/cut_pack/run_dfc.sh` in the run folder" in unmet[0]


def test_a_run_cuts_to_the_tolerance_it_is_given(ops, cut, tmp_path):
    """06's `tolerance` reaches every proof of the run's cuts (it was once shown and ignored): a looser one is
    held by each partition and written in its partition.json; the default is the library's."""
    import json

    from weftlib.gate.cut.segments import TOLERANCE

    models, partitions = cut
    assert {p.tolerance for p in partitions.values()} == {TOLERANCE}
    loose = cutting.cut_all(models, ops, tmp_path / "loose", tolerance=0.25)
    assert {p.tolerance for p in loose.values()} == {0.25}
    written = {json.loads((tmp_path / "loose" / m.stem / "partition.json").read_text())["tolerance"] for m in models}
    assert written == {0.25}
    again, verdicts = cutting.after_dfc(loose, {}, ops, tmp_path / "after", tolerance=0.25)
    assert again is loose and verdicts == []


def test_forty_pictures_hold_no_pyplot_figure_open_and_still_draw(ops, cut, tmp_path):
    """06 draws a picture per graph (40-odd): pyplot warned past 20 open figures on its page (issue 45)."""
    import warnings

    import matplotlib.pyplot as plt

    models, partitions = cut
    prediction = cutting.predictions(models, ops, partitions)
    plt.close("all")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pyplot's "More than 20 figures have been opened" would raise
        # the 21st open figure is the one pyplot warns on (figure.max_open_warning: 20)
        figures = [plots.plot_partition(partitions[models[0]], prediction[models[0]]) for _ in range(21)]
    assert plt.get_fignums() == []
    figures[-1].savefig(tmp_path / "last.png")
    assert (tmp_path / "last.png").stat().st_size > 5_000
    assert cut_sentences.viewer_sentence(models[0], tmp_path / "node_data" / "a.json", tmp_path).startswith(
        "To browse a graph node by node: `.venv/bin/netron a.onnx` from the run folder"
    )
