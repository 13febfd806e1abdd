"""onnx_export: one checked, folded, self-contained file per export, and clear refusals for bad calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from weftlib.onnx_core import compare, inventory
from weftlib.onnx_core import export as onnx_export


class ShapeHeavy(torch.nn.Module):
    """Uses the input's shape for arange/zeros/reshape: the plumbing a fixed-shape export must fold away."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, w, c = x.shape
        rows = torch.arange(h).flip(0)
        z = self.proj(x)[:, rows] + y.reshape(b, h * w, c).reshape(b, h, w, c) + x.new_zeros(b, h, w, c)
        return z.softmax(-1), z.sum()


ARGS = (
    torch.randn(2, 5, 6, 8, generator=torch.Generator().manual_seed(0)),
    torch.randn(2, 5, 6, 8, generator=torch.Generator().manual_seed(1)),
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[onnx_export.ExportReport, Path]:
    folder = tmp_path_factory.mktemp("export")
    torch.manual_seed(0)
    rep = onnx_export.export(ShapeHeavy(), ARGS, folder / "m.onnx", input_names=["x", "y"], output_names=["p", "s"])
    return rep, folder


def test_export_writes_one_checked_file(exported):
    rep, folder = exported
    assert sorted(p.name for p in folder.iterdir()) == ["m.onnx", "m.parity.json"], "no .data side file, no temp file"
    assert rep.file_bytes == (folder / "m.onnx").stat().st_size
    onnx.checker.check_model(str(rep.path), full_check=True)
    model = onnx.load(str(rep.path))
    assert model.ir_version <= onnx_export.WRITTEN_IR_VERSION == 10
    assert rep.opset == 17 and rep.ir_version == model.ir_version
    assert rep.input_shapes == {"x": [2, 5, 6, 8], "y": [2, 5, 6, 8]}
    assert rep.output_shapes == {"p": [2, 5, 6, 8], "s": []}


def test_export_folds_shape_plumbing(exported):
    rep, _ = exported
    assert rep.plumbing == {}
    assert not set(inventory.SHAPE_PLUMBING) & set(rep.ops)
    assert rep.standard_only and rep.domains == [""]


def test_report_matches_file_and_runtime(exported):
    rep, _ = exported
    assert rep.ops == inventory.inventory(rep.path)
    assert {k: len(v) for k, v in rep.nodes.items()} == rep.ops
    assert rep.node_count == sum(rep.ops.values()) > 0
    p, s = onnx_export.run_onnx(rep.path, tuple(a.numpy() for a in ARGS))
    torch.manual_seed(0)
    ref_p, ref_s = ShapeHeavy().eval()(*ARGS)
    np.testing.assert_allclose(p, ref_p.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(s, ref_s.detach().numpy(), rtol=1e-5)
    assert rep.parity_ok and rep.max_abs_diff <= 1e-4
    # the fp32 [2,5,6,8] intermediates and the Linear weight are the biggest tensors here
    assert rep.largest_intermediate[1] == 2 * 5 * 6 * 8 * 4
    assert rep.largest_initializer[1] >= 8 * 8 * 4


def test_run_onnx_refuses_wrong_inputs(exported):
    rep, _ = exported
    with pytest.raises(ValueError, match="missing"):
        onnx_export.run_onnx(rep.path, {"x": ARGS[0].numpy()})
    with pytest.raises(ValueError, match="takes 2"):
        onnx_export.run_onnx(rep.path, (ARGS[0].numpy(),))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(module=lambda x: x), TypeError, "module"),
        (dict(args=[ARGS[0]]), TypeError, "args"),
        (dict(args=(ARGS[0], 3)), TypeError, r"args\[1\]"),
        (dict(input_names=["x"]), ValueError, "input_names"),
        (dict(input_names=["x", "x"]), ValueError, "unique"),
        (dict(output_names=["p"]), ValueError, "output_names"),
        (dict(opset=99), ValueError, "opset"),
        (dict(atol=-1.0), ValueError, "atol"),
        (dict(path="m.txt"), ValueError, "path"),
        (dict(path="no/such/folder/m.onnx"), FileNotFoundError, "folder"),
    ],
)
def test_export_argument_errors(tmp_path, kwargs, error, match):
    call = dict(
        module=ShapeHeavy(),
        args=ARGS,
        path="m.onnx",
        input_names=["x", "y"],
        output_names=["p", "s"],
        opset=17,
        atol=1e-4,
    )
    call.update(kwargs)
    call["path"] = tmp_path / call["path"]
    with pytest.raises(error, match=match):
        onnx_export.export(call.pop("module"), call.pop("args"), call.pop("path"), **call)
    assert list(tmp_path.rglob("*")) == []


def test_export_checks_against_outputs_already_computed(tmp_path):
    """Given the outputs its caller already ran, export checks onnxruntime against those (one forward fewer
    at NAF's geometry): right outputs pass, wrong ones fail the parity check, and the module is not run."""
    module = ShapeHeavy().eval()
    with torch.no_grad():
        outputs = module(*ARGS)
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    names = dict(input_names=["x", "y"], output_names=["p", "s"])
    right = onnx_export.export(module, ARGS, tmp_path / "right.onnx", outputs=outputs, **names)
    traced = len(calls)  # the exporter's own trace may call the hooks; a checking forward would add one more
    wrong = onnx_export.export(module, ARGS, tmp_path / "wrong.onnx", outputs=(outputs[0] + 1, outputs[1]), **names)
    assert right.parity_ok and not wrong.parity_ok and wrong.max_abs_diff == pytest.approx(1.0, abs=1e-5)
    assert len(calls) == 2 * traced
    with pytest.raises(ValueError, match="training mode"):
        onnx_export.export(ShapeHeavy().train(), ARGS, tmp_path / "t.onnx", outputs=outputs, **names)
    assert not (tmp_path / "t.onnx").exists()


def test_nothing_written_when_runtime_fails(tmp_path, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated onnxruntime failure")

    monkeypatch.setattr(onnx_export, "run_onnx", broken)
    with pytest.raises(onnx_export.ExportError, match="onnxruntime"):
        onnx_export.export(ShapeHeavy(), ARGS, tmp_path / "m.onnx", input_names=["x", "y"], output_names=["p", "s"])
    assert list(tmp_path.iterdir()) == []


def test_refuses_above_protobuf_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx.checker, "MAXIMUM_PROTOBUF", 16)
    with pytest.raises(onnx_export.ExportError, match="2 GiB"):
        onnx_export.export(ShapeHeavy(), ARGS, tmp_path / "m.onnx", input_names=["x", "y"], output_names=["p", "s"])
    assert list(tmp_path.iterdir()) == []


def test_constant_fill_becomes_initializer(tmp_path):
    shape = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), name="shape")
    fill = helper.make_node(
        "ConstantOfShape",
        ["shape"],
        ["c"],
        name="fill",
        value=numpy_helper.from_array(np.array([1.5], dtype=np.float32)),
    )
    add = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    graph = helper.make_graph(
        [fill, add],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[shape],
    )
    model = onnx_export._materialise_fills(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert inventory.inventory(model) == {"Add": 1}
    onnx.save(model, str(tmp_path / "f.onnx"))
    (y,) = onnx_export.run_onnx(tmp_path / "f.onnx", {"x": np.zeros((2, 3), np.float32)})
    np.testing.assert_array_equal(y, np.full((2, 3), 1.5, np.float32))


def test_max_abs_diff():
    a = [np.zeros((2, 2), np.float32)]
    assert compare.max_abs_diff(a, [np.full((2, 2), 0.25, np.float32)]) == 0.25
    assert compare.max_abs_diff(a, [np.zeros((4,), np.float32)]) == float("inf")
    assert compare.max_abs_diff(a, []) == float("inf")
    assert compare.max_abs_diff(a, [np.full((2, 2), np.nan, np.float32)]) == float("inf")


def test_max_abs_diff_strict_raises_where_it_would_answer_inf():
    a = [np.zeros((2, 2), np.float32)]
    assert compare.max_abs_diff(a, [np.full((2, 2), 0.25, np.float32)], strict=True) == 0.25
    with pytest.raises(ValueError, match="shapes differ"):
        compare.max_abs_diff(a, [np.zeros((4,), np.float32)], strict=True)
    with pytest.raises(ValueError, match="outputs against"):
        compare.max_abs_diff(a, [], strict=True)
    with pytest.raises(ValueError, match="not finite"):
        compare.max_abs_diff(a, [np.full((2, 2), np.nan, np.float32)], strict=True)


def test_max_abs_diff_in_chunks_finds_the_worst_element_anywhere(monkeypatch):
    """Chunked (a gigabyte output is never copied whole): the worst element and a NaN count in whichever
    chunk they fall, a transposed tensor is compared element by element, and [2, 3] is not [3, 2]."""
    monkeypatch.setattr(compare, "DIFF_CHUNK", 4)
    ref = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    for index in [(0, 0), (2, 3), (4, 5)]:
        off = ref.clone()
        off[index] += 0.5
        assert compare.max_abs_diff([ref], [off]) == 0.5
        assert compare.max_abs_diff([ref.numpy()], [off.numpy()]) == 0.5
    assert compare.max_abs_diff([ref.t()], [ref.t().contiguous()]) == 0.0
    assert compare.max_abs_diff([ref.t()], [ref.contiguous().reshape(6, 5)]) > 0
    nan = ref.clone()
    nan[4, 5] = float("nan")
    assert compare.max_abs_diff([ref], [nan]) == float("inf")
    assert compare.max_abs_diff([np.zeros((2, 3))], [np.zeros((3, 2))]) == float("inf")
    # NAF's case: a permuted [B, H, W, C] view against a C-ordered [B, C, H, W], blocked along H
    view = torch.arange(4 * 5 * 3, dtype=torch.float32).reshape(1, 4, 5, 3).permute(0, 3, 1, 2)
    assert [b[2] for b in compare._blocks(view.numpy(), view.contiguous().numpy())] == [
        slice(h, h + 1) for h in range(4)
    ]
    for index in [(0, 0, 0, 0), (0, 2, 3, 4), (0, 1, 3, 0)]:
        off = view.contiguous()
        off[index] -= 0.75
        assert compare.max_abs_diff([view], [off]) == 0.75 == compare.max_abs_diff([off], [view])
    assert compare.max_abs_diff([np.float32(1.0)], [np.float32(1.5)]) == 0.5
    assert compare.max_abs_diff([np.zeros((3, 0))], [np.zeros((3, 0))]) == 0.0


class Opset18Ops(torch.nn.Module):
    """Ops whose ONNX form changed at opset 18 (Split num_outputs, Reduce* axes as input)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b, c = torch.split(x, 1, dim=-1)
        return a + b * c, x.mean(-1), x.amax(-1), torch.chunk(x, 2, dim=1)[1], torch.logsumexp(x, -1)


def test_opset18_ops_reach_opset17(tmp_path):
    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(2))
    rep = onnx_export.export(Opset18Ops(), (x,), tmp_path / "o.onnx", input_names=["x"], output_names=list("abcde"))
    model = onnx.load(str(rep.path))
    assert rep.opset == 17 and rep.parity_ok, rep.max_abs_diff
    assert {"Split", "ReduceMean", "ReduceMax", "ReduceLogSumExp"} <= set(rep.ops)
    for node in model.graph.node:
        names = {a.name for a in node.attribute}
        assert "num_outputs" not in names, node.name
        if node.op_type.startswith("Reduce") and node.op_type != "ReduceSum":
            assert len(node.input) == 1 and "axes" in names, node.name
    used = {i for n in model.graph.node for i in n.input}
    assert all(init.name in used for init in model.graph.initializer)


def test_onnx_version_converter_still_cannot_take_our_opset18_graph():
    """`onnx_core/opset.py` stays only while onnx's own converter cannot do this: the day
    `onnx.version_converter.convert_version` turns the exporter's opset-18 graph into a valid opset-17 one,
    this test fails; then drop the module and call the converter in `export._to_proto`."""
    import onnx.version_converter
    import onnx_ir

    from weftlib.onnx_core.walk import default_opset

    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(2))
    # what `export` hands to the opset rewrite: the dynamo exporter's graph (opset 18), folded
    graph18 = onnx_ir.serde.serialize_model(
        onnx_export._fold(onnx_export._trace(Opset18Ops(), (x,), ["x"], list("abcde"), 17))
    )
    assert default_opset(graph18) == 18 and "Split" in {n.op_type for n in graph18.graph.node}
    try:
        converted = onnx.version_converter.convert_version(graph18, 17)
        onnx.checker.check_model(converted, full_check=True)
        failure = None if default_opset(converted) == 17 else f"kept opset {default_opset(converted)}"
    except Exception as exc:  # onnx 1.23: RuntimeError from the C++ adapter lookup
        failure = f"{type(exc).__name__}: {exc}"
    assert failure is not None, "onnx converts opset 18 -> 17 now: drop weftlib/onnx_core/opset.py"
    assert "No Adapter From Version $18 for Split" in failure, failure  # today's reason, onnx 1.23


def test_written_file_is_readable_by_others(exported):
    rep, _ = exported
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(rep.path.stat().st_mode) == 0o666 & ~umask
