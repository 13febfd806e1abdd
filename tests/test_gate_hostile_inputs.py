"""Hostile inputs to every command (issue 43, points 2 and 5): one verdict per model however it is packaged,
one behaviour for a model the ONNX checker rejects, and one line with exit 2, never a traceback, for each
input a command cannot work on. Every model is built here, node by node."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from weftlib.__main__ import main as suite_main
from weftlib.gate.__main__ import _parser
from weftlib.gate.__main__ import main as gate_main

X = (1, 3, 8, 8)
MODEL_COMMANDS = ("device", "pair", "partition", "fix")  # every command that reads and judges a model


def vi(name: str, shape=X, dtype=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, list(shape))


def graph_model(nodes, inputs, outputs, inits=(), sparse=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), sparse_initializer=list(sparse))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def conv_relu() -> onnx.ModelProto:
    """A valid Conv + Relu: the device gate passes it, and a cut puts it on the device whole."""
    weight = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="/relu"),
    ]
    return graph_model(nodes, [vi("x")], [vi("y", (1, 4, 8, 8))], [numpy_helper.from_array(weight, "w")])


def relu(dtype=TensorProto.FLOAT, shape=(1, 4), op="Relu", **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], name=f"/{op.lower()}", **attrs)
    return graph_model([node], [vi("x", shape, dtype)], [vi("y", shape, dtype)])


def external(folder: Path, location: str | None = None) -> Path:
    """conv_relu saved with its weights in `m.bin` beside it; `location`: what the model then says instead."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.onnx"
    onnx.save(conv_relu(), str(path), save_as_external_data=True, location="m.bin", size_threshold=0)
    if location is not None:
        model = onnx.load(str(path), load_external_data=False)
        for entry in model.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        onnx.save(model, str(path))
    return path


def run(command: str, path: Path, out: Path) -> list[str]:
    args = [command, str(path)]
    return args + (["--out", str(out)] if command in ("partition", "fix") else [])


def one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


def refused_by_all(path: Path, tmp_path: Path, capsys, words: str, commands=MODEL_COMMANDS) -> None:
    """Each command exits 2 with one line holding `words`, and writes nothing."""
    for command in commands:
        out = tmp_path / f"out-{command}"
        assert gate_main(run(command, path, out)) == 2, command
        assert words in one_line(capsys), command
        assert not out.exists(), command


# ---------------------------------------------------------------- one verdict however the model is packaged


def test_weights_in_an_external_file_beside_the_model_give_the_inline_verdict(tmp_path, capsys, monkeypatch):
    inline = tmp_path / "inline" / "m.onnx"
    inline.parent.mkdir()
    onnx.save(conv_relu(), str(inline))
    beside = external(tmp_path / "external")
    for path in (inline, beside):
        assert gate_main(["device", str(path)]) == 0, capsys.readouterr()
        assert capsys.readouterr().out.startswith("PASS")
        out = path.parent / "parts"
        assert gate_main(["partition", str(path), "--out", str(out)]) == 0, capsys.readouterr()
        assert "1 device segment(s) of 1" in capsys.readouterr().out
        report = json.loads((out / "partition.json").read_text())
        assert [s["runs_on"] for s in report["segments"]] == ["device"] and report["proven"]
        assert gate_main(["fix", str(path), "--out", str(path.parent / "fixed")]) == 0, capsys.readouterr()
        capsys.readouterr()
    monkeypatch.chdir(beside.parent)  # read from its own folder or from anywhere else: the same verdict
    assert gate_main(["device", "m.onnx", "--json"]) == 0


@pytest.mark.parametrize(
    "case, words",
    [
        ("climbs out", "a path that climbs out with '..'"),
        ("absolute", "an absolute path"),
        ("link out", "through the symbolic link"),
    ],
)
def test_external_data_outside_the_models_folder_is_refused_by_every_command(case, words, tmp_path, capsys):
    outside = tmp_path / "outside.bin"
    if case == "climbs out":
        path = external(tmp_path / "up" / "inner", "../x.bin")
        (path.parent / "m.bin").rename(tmp_path / "up" / "x.bin")
    elif case == "absolute":
        path = external(tmp_path / "abs", str(outside))
        (path.parent / "m.bin").rename(outside)
    else:
        path = external(tmp_path / "link")
        (path.parent / "m.bin").rename(outside)
        (path.parent / "m.bin").symlink_to(outside)
    refused_by_all(path, tmp_path, capsys, f"{words}")
    assert gate_main(["device", str(path)]) == 2
    assert "external data is read only from the model's own folder" in one_line(capsys)


# ---------------------------------------------------------------- one behaviour for what ONNX itself rejects


def test_a_model_the_onnx_checker_rejects_is_refused_alike_by_every_command(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(relu(bogus=1), str(path))  # Relu has no attribute `bogus`
    refused_by_all(path, tmp_path, capsys, "the ONNX checker rejects it")
    assert "the ONNX checker rejects" in " ".join(_parser().format_help().split())


def test_a_checker_clean_model_the_dfc_refuses_is_still_judged_not_refused(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    model = relu()
    model.ir_version = 12  # valid ONNX, above what the DFC's bundled checker takes: a verdict, not bad input
    onnx.save(model, str(path))
    assert gate_main(["device", str(path)]) == 1 and "IR version 12" in capsys.readouterr().out


# ---------------------------------------------------------------- one line, exit 2, for each hostile input


def sequence_input() -> onnx.ModelProto:
    node = helper.make_node("SequenceLength", ["x"], ["y"], name="/len")
    sequence = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])
    return graph_model([node], [sequence], [vi("y", (), TensorProto.INT64)])


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: relu(TensorProto.STRING, (2,), "Identity"), "input 'x' is a tensor of string"),
        (lambda: relu(TensorProto.BFLOAT16), "input 'x' is a tensor of bfloat16"),
        (sequence_input, "input 'x' is a sequence"),
        (lambda: relu(shape=(1024, 1024, 1024, 1024)), "4,096.0 GiB, over the memory budget"),
    ],
    ids=["string", "bfloat16", "sequence", "2^40 elements"],
)
def test_inputs_the_proof_cannot_feed_are_refused_by_partition_and_fix(build, words, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(build(), str(path))
    refused_by_all(path, tmp_path, capsys, words, commands=("partition", "fix"))


def sparse_initializer() -> onnx.ModelProto:
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 3], np.int64), "i"), [1, 4])
    add = helper.make_node("Add", ["x", "w"], ["y"], name="/add")
    return graph_model([add], [vi("x", (1, 4))], [vi("y", (1, 4))], sparse=[sparse])


def named_twice() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n"), helper.make_node("Relu", ["a"], ["y"], name="n")]
    return graph_model(nodes, [vi("x", (1, 4))], [vi("y", (1, 4))])


def short_initializer() -> onnx.ModelProto:
    """An initializer that declares 4 GiB and holds 32 bytes."""
    weight = numpy_helper.from_array(np.ones(8, np.float32), "w")
    del weight.dims[:]
    weight.dims.extend([1 << 30])
    add = helper.make_node("Add", ["x", "w"], ["y"], name="/add")
    return graph_model([add], [vi("x", (1,))], [vi("y", (1 << 30,))], [weight])


@pytest.mark.parametrize(
    "build, words",
    [
        (sparse_initializer, "initializer 'w' is sparse"),
        (named_twice, "two nodes are named 'n'"),
        (short_initializer, "raw_data size (32 bytes) is too small"),
    ],
    ids=["sparse initializer", "two nodes of one name", "4 GiB declared, 32 bytes held"],
)
def test_what_no_command_can_read_is_refused_by_every_command(build, words, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(build(), str(path))
    refused_by_all(path, tmp_path, capsys, words)


def test_a_symbolic_link_loop_as_out_is_one_line(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_relu(), str(model))
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    loop = str(tmp_path / "a")
    for args in (
        ["partition", str(model), "--out", loop],
        ["fix", str(model), "--out", loop],
        ["probes", "--out", loop],
        ["dfc", str(model), "--out", loop],
    ):
        assert gate_main(args) == 2, args
        assert "a symbolic link loop?" in one_line(capsys)
    assert suite_main(["run", "--out", loop, "--no-publish"]) == 2
    assert "a symbolic link loop?" in one_line(capsys)


def test_run_out_inside_a_file_is_one_line_and_nothing_runs(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("mine")
    assert suite_main(["run", "--out", str(tmp_path / "file.txt" / "sub"), "--no-publish"]) == 2
    assert "file.txt is a file, so no folder can be made inside it" in one_line(capsys)
    assert (tmp_path / "file.txt").read_text() == "mine"


def test_a_245_character_file_name(tmp_path, capsys):
    """A model may have a long name (the device gate reads it); a file written from it or a folder built
    beside --out that would pass the file system's limit is refused in words, before any work."""
    path = tmp_path / f"{'m' * 245}.onnx"
    onnx.save(conv_relu(), str(path))
    assert gate_main(["device", str(path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    for command in ("partition", "fix"):
        out = tmp_path / command
        assert gate_main([command, str(path), "--out", str(out)]) == 2
        assert "copy it under a shorter name" in one_line(capsys) and not out.exists()
    assert gate_main(["probes", "--out", str(tmp_path / ("p" * 245))]) == 2
    assert "245 bytes; this file system takes" in one_line(capsys)
    assert suite_main(["run", "--out", str(tmp_path / ("r" * 300)), "--no-publish"]) == 2
    assert "300 bytes, over" in one_line(capsys)


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_and_yaml_are_one_line(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(conv_relu(), str(model))
    result = tmp_path / "r.dfc.json"
    result.write_text(DEEP)
    assert gate_main(["pair", str(model), "--dfc", str(result)]) == 2
    assert "RecursionError" in one_line(capsys)
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "manifest.json").write_text(DEEP)
    assert gate_main(["evidence", str(pack)]) == 2
    assert "no readable manifest.json" in one_line(capsys)
    marked = tmp_path / "marked"
    marked.mkdir()
    (marked / ".weftlib-folder.json").write_text(DEEP)
    assert gate_main(["partition", str(model), "--out", str(marked)]) == 2
    assert "no readable .weftlib-folder.json" in one_line(capsys)
    ops = tmp_path / "ops.yaml"
    ops.write_text("ops: " + "[" * 20_000)
    assert gate_main(["device", str(model), "--ops", str(ops)]) == 2
    assert "nested deeper than YAML can be read" in one_line(capsys)
    state = tmp_path / "run"
    state.mkdir()
    (state / "state.json").write_text(DEEP)
    assert suite_main(["status", str(state)]) == 1
    assert "not a state this suite wrote" in capsys.readouterr().out


def test_external_data_shorter_than_its_tensor_declares_is_refused_by_every_command(tmp_path, capsys):
    """The same 4 GiB declared over 32 bytes, kept in a file beside the model (no length written)."""
    path = tmp_path / "m.onnx"
    model = short_initializer()
    model.graph.initializer[0].dims[:] = [8]
    onnx.save(model, str(path), save_as_external_data=True, location="m.bin", size_threshold=0)
    model = onnx.load(str(path), load_external_data=False)
    weight = model.graph.initializer[0]
    weight.dims[:] = [1 << 30]
    kept = [e for e in weight.external_data if e.key != "length"]
    del weight.external_data[:]
    weight.external_data.extend(kept)
    onnx.save(model, str(path))
    refused_by_all(path, tmp_path, capsys, "reads bytes up to 4294967296 of it, which holds 32")
