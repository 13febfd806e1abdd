"""The rebuild cache's folder (`weftlib.rebuild.rebuilt`): the cut graph with its weights beside it, so the
backtest reads structure only, and a folder missing a file is exported again. The exporter is stood in for by
a graph written where the real one writes its export (the real exporters run under `-m exports`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from weftlib.onnx_core import walk
from weftlib.rebuild import rebuilt
from weftlib.rebuild.recipes import RECIPES, Recipe


def _graph(channels: int) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(channels * channels, dtype=np.float32).reshape(channels, channels), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, channels])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, channels])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def exports(monkeypatch):
    """Each export writes `_graph(channels)` and a leftover file, as an exporter leaves its own beside it."""
    made = []

    def export(recipe, folder):
        made.append(recipe.network)
        onnx.save(_graph(int(recipe.network.split("_")[1])), str(folder / "model.onnx"))
        (folder / "leftover.txt").write_text("an exporter's own file")
        return folder / "model.onnx"

    monkeypatch.setattr(rebuilt.exporters, "export", export)
    return made


def _recipe(channels: int) -> Recipe:
    return Recipe(**{**RECIPES["yolov8n"].__dict__, "network": f"tiny_{channels}", "ends": (), "start": ""})


@pytest.mark.parametrize("channels", [64, 4])  # 16 KB of weights, over onnx's 1 KB threshold; 64 bytes, under it
def test_a_rebuilt_folder_holds_the_graph_its_weights_and_its_record_and_is_read_back(tmp_path, exports, channels):
    built = rebuilt.rebuild(_recipe(channels), tmp_path)
    folder = built.path.parent
    assert sorted(p.name for p in folder.iterdir()) == [
        "cut.onnx",
        "cut.onnx.data",
        "exported_nodes.txt",
        "rebuilt.json",
    ]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # nothing half-written left beside it
    structure = walk.read_structure(built.path)
    (init,) = structure.model.graph.initializer
    assert uses_external_data(init) == (channels == 64)
    assert (structure.constant(init) == numpy_helper.to_array(_graph(channels).graph.initializer[0])).all()
    onnx.checker.check_model(str(built.path))  # the file with its weights, as the exports tests check it
    again = rebuilt.rebuild(_recipe(channels), tmp_path)
    assert again.cached and again.path == built.path and exports == [f"tiny_{channels}"]


def test_a_folder_missing_its_weights_is_exported_again(tmp_path, exports):
    built = rebuilt.rebuild(_recipe(64), tmp_path)
    (built.path.parent / rebuilt.WEIGHTS).unlink()
    assert not rebuilt.cached(_recipe(64), tmp_path)
    again = rebuilt.rebuild(_recipe(64), tmp_path)
    assert not again.cached and exports == ["tiny_64", "tiny_64"]
    assert (
        walk.read_structure(again.path).constant(walk.read_structure(again.path).model.graph.initializer[0]) >= 0
    ).all()


def test_what_an_exporter_prints_from_cpp_stays_off_the_output(tmp_path, monkeypatch, capfd):
    """onnxsim prints "failed to run ... skip" per node it leaves unfolded, from C++ (below sys.stdout): on a
    newcomer's first appendix a dozen such lines reached the runner's output. They change nothing in the graph."""
    import os

    from weftlib.rebuild import exporters

    def chatty(recipe, folder):
        os.write(1, b'failed to run "Where" op (name is "/Where_1"), skip...\n')
        os.write(2, b'WARNING: failed to run "Add" op, skip...\n')
        onnx.save(_graph(4), str(folder / "model.onnx"))
        return folder / "model.onnx"

    monkeypatch.setattr(exporters, "_ultralytics", chatty)
    path = exporters.export(_recipe(4), tmp_path)
    assert path.exists()
    out, err = capfd.readouterr()
    assert "skip" not in out + err, (out, err)
    print("after")  # the descriptors are restored
    assert capfd.readouterr().out == "after\n"
