"""The cut: device segments and the host remainder of small graphs built here, the DFC's translate arguments
checked against the graph's node names, and the proof that the chain of segments computes the graph, with its
negative control (a cut that drops an edge must fail)."""

from __future__ import annotations

import ast
import json

import numpy as np
import onnx
import pytest

from tests.conftest import REPO
from weftlib.gate.__main__ import main
from weftlib.gate.cut.partition import PartitionError, partition
from weftlib.gate.cut.proof import prove, random_feeds, run_chain
from weftlib.gate.graphs import Builder
from weftlib.gate.vocabulary import Side


def chain(name: str, ops_in_order: list[str], x_shape=(1, 8, 4, 4)) -> onnx.ModelProto:
    """Conv layers with the given op between them at each step: "conv", "sin" (refused), "topk-free"
    "hardswish" (unjudged), "relu"."""
    g = Builder(name)
    x = g.input("x", list(x_shape))
    for i, op in enumerate(ops_in_order):
        if op == "conv":
            x = g.conv1x1(x, 8, 8, f"/l{i}", seed=i)
        elif op == "sin":
            x = g.node("Sin", [x], f"/l{i}/Sin")
        elif op == "hardswish":
            x = g.node("Sinh", [x], f"/l{i}/Sinh")
        elif op == "relu":
            x = g.node("Relu", [x], f"/l{i}/Relu")
    g.output(x)
    return g.model()


def sides(part) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.runs_on, s.nodes) for s in part.segments]


def cut_of(model, ops, tmp_path):
    path = tmp_path / f"{model.graph.name}.onnx"
    onnx.save(model, str(path))
    folder = tmp_path / f"{model.graph.name}.parts"
    folder.mkdir()
    return prove(partition(path, ops, folder), path, folder), path, folder


def test_a_refused_op_in_the_middle_cuts_device_host_device(ops, tmp_path):
    part, _, _ = cut_of(chain("middle", ["conv", "relu", "sin", "conv"]), ops, tmp_path)
    assert sides(part) == [
        (Side.DEVICE, ("/l0/Conv", "/l1/Relu")),
        (Side.HOST, ("/l2/Sin",)),
        (Side.DEVICE, ("/l3/Conv",)),
    ]
    assert part.proven and part.max_abs_diff <= part.tolerance
    first, _, last = part.segments
    assert first.start_node_names == ("x",) and first.end_node_names == ("/l1/Relu",)
    assert first.net_input_shapes == {"x": [1, 8, 4, 4]}
    assert last.start_node_names == ("/l3/Conv",) and last.net_input_shapes == {"/l3/Conv": [1, 8, 4, 4]}
    assert part.coverage.nodes == (3, 4) and part.coverage.crossings == 4  # x in, Relu out, Sin out back in, Conv out
    assert part.coverage.bytes_crossing == 4 * 8 * 4 * 4 * 4  # four [1, 8, 4, 4] fp32 tensors
    assert part.coverage.macs[0] == part.coverage.macs[1] == 2 * 8 * 8 * 16


def test_refused_at_the_start_at_the_end_and_two_regions(ops, tmp_path):
    start, _, _ = cut_of(chain("start", ["sin", "conv", "conv"]), ops, tmp_path)
    assert [s.runs_on for s in start.segments] == [Side.HOST, Side.DEVICE] and start.proven
    end, _, _ = cut_of(chain("end", ["conv", "conv", "sin"]), ops, tmp_path)
    assert [s.runs_on for s in end.segments] == [Side.DEVICE, Side.HOST] and end.proven
    two, _, _ = cut_of(chain("two", ["conv", "sin", "conv", "hardswish", "conv"]), ops, tmp_path)
    assert [s.runs_on for s in two.segments] == [
        Side.DEVICE,
        Side.HOST,
        Side.DEVICE,
        Side.HOST,
        Side.DEVICE,
    ] and two.proven
    assert two.segments[3].nodes == ("/l3/Sinh",)  # unjudged stays on the host too


def test_a_refused_input_keeps_what_reads_it_on_the_host(ops, tmp_path):
    g = Builder("rank1")
    t = g.input("t", [8])
    x = g.input("x", [1, 8, 4, 4])
    scaled = g.node("Mul", [t, g.const("/k", np.full(8, 2.0))], "/t/Mul")
    as_image = g.node("Reshape", [scaled, g.ints("/t.shape", [1, 8, 1, 1])], "/t/Reshape")
    g.output(g.conv1x1(g.node("Add", [x, as_image], "/Add"), 8, 8, "/post"))
    part, _, _ = cut_of(g.model(), ops, tmp_path)
    host = {n for s in part.segments if s.runs_on == Side.HOST for n in s.nodes}
    assert "/t/Mul" in host  # it reads the rank-1 input the parser refuses
    device = [s for s in part.segments if s.runs_on == Side.DEVICE]
    assert device and all(n in {"/Add", "/post/Conv"} for s in device for n in s.nodes) and part.proven


def test_translate_arguments_name_nodes_of_the_original_graph_never_tensors(ops, tmp_path):
    model = chain("names", ["conv", "relu", "sin", "conv", "relu"])
    part, _, _ = cut_of(model, ops, tmp_path)
    nodes = {n.name for n in model.graph.node}
    inputs = {i.name for i in model.graph.input}
    outputs_not_nodes = {t for n in model.graph.node for t in n.output} - nodes
    for s in part.device_segments:
        assert set(s.start_node_names) <= nodes | inputs and set(s.end_node_names) <= nodes
        assert not set(s.end_node_names) & outputs_not_nodes
        assert set(s.net_input_shapes) == set(s.start_node_names)


def test_negative_control_a_cut_that_drops_an_edge_fails_the_proof(ops, tmp_path):
    part, path, folder = cut_of(chain("edge", ["conv", "sin", "conv"]), ops, tmp_path)
    assert part.proven
    handed = part.segments[1].outputs[0]  # what the host hands back to the device
    broken = prove(part, path, folder, replace={handed: np.zeros((1, 8, 4, 4), np.float32)})
    assert not broken.proven and broken.max_abs_diff > 1e-3


def test_a_tolerance_given_is_the_one_the_proof_holds_to(ops, tmp_path):
    """One tolerance: the library's `TOLERANCE` unless given, and a given one is what `proven`, `partition.json`
    and the command judge by; notebook 06's parameter defaults to the library's."""
    from weftlib.gate.cut.partition import write_partition
    from weftlib.gate.cut.segments import TOLERANCE

    part, path, folder = cut_of(chain("tol", ["conv", "sin", "conv"]), ops, tmp_path)
    assert part.tolerance == TOLERANCE
    broken = {part.segments[1].outputs[0]: np.zeros((1, 8, 4, 4), np.float32)}
    diff = prove(part, path, folder, replace=broken).max_abs_diff
    assert diff is not None and diff > TOLERANCE
    loose = prove(part, path, folder, tolerance=2 * diff, replace=broken)
    strict = prove(part, path, folder, tolerance=diff / 2, replace=broken)
    assert (loose.tolerance, loose.proven, strict.tolerance, strict.proven) == (2 * diff, True, diff / 2, False)
    written = write_partition(path, ops, tmp_path / "given", tolerance=0.5)
    assert (
        written.tolerance == 0.5 and json.loads((tmp_path / "given" / "partition.json").read_text())["tolerance"] == 0.5
    )
    assert main(["partition", str(path), "--out", str(tmp_path / "cli"), "--tolerance", "0"]) in (0, 1)
    assert json.loads((tmp_path / "cli" / "partition.json").read_text())["tolerance"] == 0
    notebook = json.loads((REPO / "notebooks" / "06_device_cut.ipynb").read_text())
    (cell,) = [c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    (given,) = [
        a.value
        for a in ast.parse("".join(cell["source"])).body
        if isinstance(a, ast.Assign) and ast.unparse(a.targets[0]) == "tolerance"
    ]
    assert ast.literal_eval(given) == TOLERANCE


def test_the_chain_lets_go_of_what_no_later_segment_reads(ops, tmp_path):
    part, path, folder = cut_of(chain("live", ["conv", "sin", "conv", "sin", "conv"]), ops, tmp_path)
    feeds = random_feeds(path)
    everything = run_chain(part, folder, feeds)
    final = part.segments[-1].outputs
    kept = run_chain(part, folder, feeds, outputs=final)
    assert set(kept) == set(final) and len(everything) > len(kept) + 2
    assert all(np.array_equal(kept[t], everything[t]) for t in final)


def test_the_command_writes_the_segments_and_partition_json(tmp_path, capsys):
    model = chain("cli", ["conv", "sin", "conv"])
    path = tmp_path / "cli.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "parts"
    assert main(["partition", str(path), "--out", str(out)]) == 0
    report = json.loads((out / "partition.json").read_text())
    assert [s["runs_on"] for s in report["segments"]] == [Side.DEVICE, Side.HOST, Side.DEVICE]
    assert all((out / s["file"]).is_file() for s in report["segments"])
    assert report["max_abs_diff"] <= report["tolerance"] and report["coverage"]["nodes"]["device"] == 2
    assert {"start_node_names", "end_node_names", "net_input_shapes"} <= set(report["segments"][0])
    assert "end_node_names" not in report["segments"][1]  # the host part needs no DFC arguments
    assert "2 of 3 nodes" in capsys.readouterr().out


def test_the_command_refuses_bad_input_and_writes_nothing(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    path = tmp_path / "m.onnx"
    onnx.save(chain("m", ["conv"]), str(path))
    assert main(["partition", str(path), "--out", str(theirs)]) == 2
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    assert main(["partition", str(broken), "--out", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    err = capsys.readouterr().err
    assert err.count("error: ") == 2


def test_unnamed_nodes_cannot_be_cut(ops, tmp_path):
    model = chain("unnamed", ["conv", "sin"])
    model.graph.node[0].name = ""
    path = tmp_path / "u.onnx"
    onnx.save(model, str(path))
    with pytest.raises(PartitionError, match="unique name"):
        partition(path, ops, tmp_path)


def test_one_dfc_session_judges_the_cuts_and_a_refused_segment_moves_its_nodes(ops, tmp_path, monkeypatch):
    """The pack parses each graph whole and each device segment as its cut; read back, a segment the DFC
    (the test double of tests/test_gate_probes.py) refuses on a node sends that node to the host, and the new
    cut is proven again. A failure before any operator moves nothing."""
    from tests.test_gate_probes import install_dfc
    from weftlib.gate import run_dfc
    from weftlib.gate.compiler.pack import SCRIPT, results_in
    from weftlib.gate.run.cutting import cut_all, cut_stem, pack_cuts, read_back

    models = []
    for name, layers in (("a", ["conv", "relu", "sin", "conv", "relu"]), ("b", ["conv", "sin", "conv"])):
        path = tmp_path / f"{name}.onnx"
        onnx.save(chain(name, layers), str(path))
        models.append(path)
    parts = cut_all(models, ops, tmp_path / "cuts")
    assert all(p.proven for p in parts.values())
    pack = pack_cuts(parts, tmp_path / "pack", "hailo10h")
    script = (pack.folder / SCRIPT).read_text()
    assert script.count("docker run") == 2 + sum(len(p.device_segments) for p in parts.values())
    assert "--out /pack/a.cut00.dfc.json --start-node-names x --end-node-names /l1/Relu" in script
    install_dfc(monkeypatch, {"a": "reject /l4/Relu", "b": "input layers"})
    stems = []
    for model, part in parts.items():
        for s in part.device_segments:
            stem = cut_stem(model, s.index)
            args = {"start_node_names": list(s.start_node_names), "end_node_names": list(s.end_node_names)}
            (pack.folder / f"{stem}.dfc.json").write_text(run_dfc(pack.folder / model.name, **args).to_json())
            stems.append(stem)
    again, verdicts = read_back(parts, results_in(pack.folder, stems), ops, tmp_path / "again")
    by = {(v.model, v.segment): v for v in verdicts}
    assert by[("a", 2)].dfc == "rejected" and by[("a", 2)].moved == ("/l4/Relu",)
    assert by[("a", 0)].dfc == "rejected" and by[("a", 0)].moved == ("/l0/Conv", "/l1/Relu")  # it names none of them
    assert {v.dfc for v in verdicts if v.model == "b"} == {"unjudged"}
    moved_a = {n for s in again[models[0]].segments if s.runs_on == Side.HOST for n in s.nodes}
    assert {"/l4/Relu", "/l0/Conv"} <= moved_a and again[models[0]].proven
    assert again[models[1]] is parts[models[1]]  # nothing moved: the same cut


def test_the_picture_and_the_node_data_cover_every_node(ops, tmp_path):
    from matplotlib.colors import to_rgb

    from weftlib.gate.pages.colours import SIDE_COLOURS
    from weftlib.gate.pages.plots import node_data, node_sides, plot_partition
    from weftlib.gate.predict.nodes import predict
    from weftlib.onnx_core.walk import index_model

    model = chain("pic", ["conv", "hardswish", "conv", "sin", "conv"])
    part, _, _ = cut_of(model, ops, tmp_path)
    prediction = predict(index_model(model), ops)
    sides = node_sides(part, prediction)
    assert sides == {
        "/l0/Conv": "device",
        "/l1/Sinh": "host (unjudged)",
        "/l2/Conv": "device",
        "/l3/Sin": "host (refused)",
        "/l4/Conv": "device",
    }
    fig = plot_partition(part, prediction)
    (row,) = fig.axes[0].images  # one pixel column per node, in execution order, coloured by its side
    order = [n for s in part.segments for n in s.nodes]
    assert row.get_array().shape == (1, len(sides), 3)
    assert [tuple(px) for px in row.get_array()[0]] == [to_rgb(SIDE_COLOURS[sides[n]]) for n in order]
    data = node_data(part, prediction, "pic")
    assert set(data["pic"]["results"]) == set(sides)
    assert [t["bgColor"] for t in data["pic"]["thresholds"]] == [
        SIDE_COLOURS[k] for k in ("host (refused)", "host (unjudged)", "host", "device")
    ]


def test_a_graph_whose_shapes_are_all_known_is_not_inferred_again(monkeypatch):
    """The cut reads one large graph several times; shape inference copies it whole each time, so a model
    that already carries every node output's static shape is read as it is, and gives the same shapes."""
    from weftlib.onnx_core import walk

    inferred = chain("known", ["conv", "relu", "conv"])  # the builder's models come inferred
    bare = onnx.ModelProto()
    bare.CopyFrom(inferred)
    del bare.graph.value_info[:]
    expected = walk.index_model(bare).shapes
    calls = []
    real = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert walk.index_model(inferred).shapes == expected and not calls
    walk.index_model(bare)
    assert calls == [1]  # without the shapes it infers them
    partial = onnx.ModelProto()
    partial.CopyFrom(inferred)
    partial.graph.value_info[0].type.tensor_type.shape.dim[0].ClearField("dim_value")
    assert walk.index_model(partial).shapes == expected and calls == [1, 1]  # one unknown dim: inferred again


def test_the_pictures_colour_by_the_prediction_the_cut_started_from(ops, tmp_path):
    """The cut keeps the whole graph's prediction, so the pictures need not predict a large graph again; it
    is the prediction a fresh read of the file gives, node for node."""
    from weftlib.gate.run.cutting import cut_all, predictions

    path = tmp_path / "p.onnx"
    onnx.save(chain("p", ["conv", "hardswish", "conv", "sin", "conv"]), str(path))
    parts = cut_all([path], ops, tmp_path / "cuts")
    kept, fresh = predictions([path], ops, parts)[path], predictions([path], ops)[path]
    assert kept is parts[path].prediction
    assert [(f.node, f.rule, f.prediction) for f in kept.judgements] == [
        (f.node, f.rule, f.prediction) for f in fresh.judgements
    ]
    assert {f.prediction for f in kept.judgements} >= {"parse", "refused", "unjudged"}
