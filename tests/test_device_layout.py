"""Device layouts: every input rank 4, proven equal to the faithful formulation and readable by the gate.

Small shapes keep this fast; equality is measured against the real references (the same `attention.na2d`
formulations, `sparse.submanifold_conv3d` and fp64 dense conv3d via `sparse.reference_conv3d`)."""

from __future__ import annotations

import pytest
import torch

from weftlib import attention, sparse
from weftlib.attention import device_layout as attention_layout
from weftlib.gate import device_gate
from weftlib.sparse import device_layout as sparse_layout
from weftlib.sparse import voxels


def test_image_round_trip_is_exact():
    x = torch.randn(1, 5, 6, 4, 3)
    assert torch.equal(attention_layout.from_image(attention_layout.to_image(x), 4), x)
    assert attention_layout.to_image(x).shape == (1, 12, 5, 6)
    with pytest.raises(ValueError, match="divisible by heads=5"):
        attention_layout.from_image(torch.zeros(1, 12, 2, 2), 5)
    with pytest.raises(ValueError, match="expected \\[B, H, W, heads, D\\]"):
        attention_layout.to_image(torch.zeros(2, 2))


@pytest.mark.parametrize("method", ["gather", "shift"])
def test_attention_layout_equals_the_formulation_and_its_inputs_parse(tmp_path, ops, method):
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 7, 9, 2, 4, generator=gen) for _ in range(2))
    v = torch.randn(1, 7, 9, 2, 6, generator=gen)
    exp = attention_layout.export_attention(q, k, v, 3, 2, method, tmp_path / f"na_{method}.onnx")
    assert exp.vs_faithful == 0.0  # the same arithmetic, only relaid out
    assert exp.report.parity_ok and exp.report.max_abs_diff <= 1e-5
    assert exp.inputs == {"q": (1, 8, 7, 9), "k": (1, 8, 7, 9), "v": (1, 12, 7, 9)}
    result = device_gate(exp.path, ops)
    assert result.readable and set(result.prediction.inputs.values()) == {"parse"}, result.prediction.inputs
    # the head split back to [B, H, W, heads, D] inside the graph is what the record refuses (5-D -> 4-D)
    assert result.verdict == "fail" and result.rules.get("reshape_5d_to_4d") == "refused", result.rules
    if method != "shift":
        return
    # and the faithful rank-5 export of the same formulation: its inputs are unjudged (the record does not
    # isolate rank 5), so it is never a pass
    from weftlib.onnx_core import export as onnx_export

    faithful = onnx_export.export(
        attention.NA2d(3, 2, method=method),
        (q, k, v),
        tmp_path / f"f_{method}.onnx",
        input_names=["q", "k", "v"],
        output_names=["out"],
    )
    verdict = device_gate(faithful.path, ops)
    assert set(verdict.prediction.inputs.values()) == {"unjudged"} and verdict.rules["input_rank_5"] == "unjudged"
    assert verdict.verdict != "pass"


@pytest.fixture(scope="module")
def bunny():
    coords = voxels.voxel_set("bunny", 8)
    nbr = sparse.kernel_map(coords)
    gen = torch.Generator().manual_seed(3)
    feats = torch.randn(len(coords), 4, generator=gen)
    weight = torch.randn(5, 4, 3, 3, 3, generator=gen) / 10
    bias = torch.randn(5, generator=gen)
    return coords, nbr, feats, weight, bias


def test_gathered_rows_and_conv_equal_submanifold_conv3d(bunny):
    coords, nbr, feats, weight, bias = bunny
    rows = sparse_layout.gather_rows(feats, nbr)
    assert rows.shape == (len(coords), 27 * 4)
    out = sparse_layout.image_as_rows(sparse_layout.GatheredConv(weight, bias)(sparse_layout.rows_as_image(rows)))
    ref = sparse.reference_conv3d(feats, coords, weight, 8, bias)  # fp64 dense conv3d at the active sites
    assert float((out.double() - ref).abs().max()) <= 1e-5
    for method in ("accumulate", "im2col"):
        got = sparse.submanifold_conv3d(feats, nbr, weight, bias, method=method)
        assert float((out - got).abs().max()) <= 1e-5


def test_gathered_conv_export_is_one_conv_on_an_image(tmp_path, ops, bunny):
    coords, nbr, feats, weight, bias = bunny
    exp = sparse_layout.export_gathered_conv(feats, nbr, weight, bias, tmp_path / "conv_gathered.onnx")
    assert exp.vs_faithful <= 1e-5 and exp.report.parity_ok
    assert exp.inputs == {"rows": (1, 108, len(coords), 1)}
    assert exp.report.ops == {"Conv": 1}
    result = device_gate(exp.path, ops)
    assert result.readable and result.passed, result.problems


def test_dense_conv_as_banded_2d_conv_equals_conv3d(tmp_path, ops, bunny):
    coords, _, feats, weight, bias = bunny
    grid = sparse.densify(feats, coords, 8)
    exp = sparse_layout.export_dense_as_2d(grid, weight, bias, tmp_path / "conv_dense_2d.onnx")
    assert exp.vs_faithful <= 1e-5 and exp.report.parity_ok
    assert exp.inputs == {"grid": (1, 32, 8, 8)}
    assert device_gate(exp.path, ops).passed
    folded = sparse_layout.DenseConvAs2d(weight, bias, 8)(sparse_layout.fold_depth(grid)).reshape(1, 5, 8, 8, 8)
    x, y, z = coords.to(torch.int64).unbind(1)
    ref = sparse.reference_conv3d(feats, coords, weight, 8, bias)
    assert float((folded[0, :, x, y, z].t().double() - ref).abs().max()) <= 1e-5


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="must agree on N"):
        sparse_layout.gather_rows(torch.zeros(3, 2), torch.zeros(4, 27, dtype=torch.int64))
    with pytest.raises(ValueError, match="Cout, Cin, k, k, k"):
        sparse_layout.flat_weight(torch.zeros(2, 2, 3))
    with pytest.raises(ValueError, match="heads"):
        attention_layout.NA2dImage(3, heads=0)
