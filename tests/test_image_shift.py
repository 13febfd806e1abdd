"""The image-layout formulation (`weftlib.attention.image_shift`) against real natten, exported, and gated.

Equality uses test_attention's grid (every axis of variation, one natten call per case, shared with it) and
its low-resolution cases; the gate test pairs the export with the old head-split layout of the same call,
which the record refuses, so a pass here is not the gate passing everything rank 4.
"""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch

from weftlib import attention
from weftlib.attention import device_layout, geometry, image_shift, index_math
from weftlib.attention.neighborhood import _expand_heads
from weftlib.gate import device_gate, load_device_ops

from .test_attention import GRID, LOWRES, TOL, _case, _lowres_case

OPS_USED = {"Slice", "Concat", "Mul", "Conv", "ReduceMax", "Sub", "Exp", "Add", "Div"}


def _images(q, k, v):
    heads = q.shape[3]
    k, v = _expand_heads(k, heads), _expand_heads(v, heads)  # GQA expanded before, as attention.na2d does
    return tuple(device_layout.to_image(t) for t in (q, k, v)), heads


@pytest.mark.parametrize("name", sorted(GRID))
def test_equals_natten(name: str) -> None:
    (q, k, v, kernel, dilation), ref = _case(name)
    images, heads = _images(q, k, v)
    out = device_layout.from_image(image_shift.na2d_image(*images, kernel, dilation, heads=heads), heads)
    err = (out - ref).abs().max().item()
    assert err <= TOL, f"image_shift differs from natten by {err:.3g} on {name}"


@pytest.mark.parametrize("name", sorted(LOWRES))
def test_lowres_grid_equals_natten_on_the_upsampling(name: str) -> None:
    (q, k, v, up_k, up_v, kernel, dilation), ref = _lowres_case(name)
    heads = q.shape[3]
    for kv in ((k, v), (up_k, up_v)):  # the coarse grid (resized inside) and the upsampled one
        images, _ = _images(q, *kv)
        out = device_layout.from_image(image_shift.na2d_image(*images, kernel, dilation, heads=heads), heads)
        err = (out - ref).abs().max().item()
        assert err <= TOL, f"image_shift differs from natten by {err:.3g} on {name} (k/v {list(kv[0].shape)})"


def test_dropping_one_offset_fails_the_equality() -> None:
    geom = geometry.Geometry("rect", (13, 17), 4, 16, 48, 5, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = image_shift.equality(geom)
        dropped = image_shift.equality(geom, offsets=[o for o in range(25) if o != 12])
    assert whole["max_abs_diff"] <= TOL and whole["offsets"] == "all 25"
    assert dropped["max_abs_diff"] > 1e-2 and dropped["offsets"] == "24 of 25"


def test_heads_far_apart_stay_exact() -> None:
    """Each head subtracts its own maximum: with one head's scores hundreds below another's, one maximum
    shared by all heads would underflow every exponential of the low head (0 / 0), as checked here."""
    gen = torch.Generator().manual_seed(7)
    q, k = (torch.randn(1, 9, 11, 2, 8, generator=gen) for _ in range(2))
    v = torch.randn(1, 9, 11, 2, 8, generator=gen)
    q[..., 0, :] *= 40.0  # head 0: scores of order +-100
    q[..., 1, :] -= 40.0  # head 1: scores near -200 ...
    k[..., 1, :] = k[..., 1, :].abs() + 1.0  # ... at every key
    index = torch.from_numpy(index_math.neighbor_index((9, 11), (3, 3), (1, 1)))  # [HW, kk]
    qf, kf = q.reshape(99, 2, 8), k.reshape(99, 2, 8)
    scores = (qf[:, None] * kf[index]).sum(-1) * 8**-0.5  # [HW, kk, heads]
    shared = scores.amax(dim=(1, 2), keepdim=True)
    assert (torch.exp(scores[..., 1:] - shared).sum(1) == 0).any()  # a shared maximum would give 0 / 0
    expected = attention.na2d(q, k, v, 3, 1, method="shift")
    images, heads = _images(q, k, v)
    out = device_layout.from_image(image_shift.na2d_image(*images, 3, 1, heads=heads), heads)
    assert torch.isfinite(out).all()
    assert (out - expected).abs().max().item() <= 1e-4


def test_explicit_scale_and_refusals() -> None:
    (q, k, v, kernel, dilation), _ = _case("k3-d1-square")
    images, heads = _images(q, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = attention.natten_reference(q, k, v, kernel, dilation, scale=0.7)
    out = device_layout.from_image(image_shift.na2d_image(*images, kernel, dilation, heads=heads, scale=0.7), heads)
    assert (out - ref).abs().max().item() <= TOL
    qi, ki, vi = (torch.zeros(1, 8, 6, 7) for _ in range(3))
    cases = [
        ((qi[0], ki, vi, 3), {"heads": 2}, "must be an image"),
        ((qi, ki, vi, 3), {"heads": 3}, "not a multiple of heads=3"),
        ((qi, torch.zeros(1, 4, 6, 7), vi, 3), {"heads": 2}, "expand grouped k/v"),
        ((qi, ki, torch.zeros(1, 8, 6, 6), 3), {"heads": 2}, "share a grid"),
        ((qi, ki, vi, 3, 3), {"heads": 2}, "cannot exceed the input size"),
        ((qi, torch.zeros(1, 8, 3, 3), torch.zeros(1, 8, 3, 3), 3, 2), {"heads": 2}, "nearest-upsampled"),
        ((qi, ki, vi, 3), {"heads": 2, "offsets": [9]}, "offsets"),
        ((qi, ki, vi, 3), {"heads": 2, "offsets": []}, "offsets"),
        ((qi, ki, vi, 1), {"heads": 2}, "kernel_size"),
        ((qi, ki, vi, 3), {"heads": 0}, "heads"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            image_shift.na2d_image(*args, **kwargs)
    with pytest.raises(TypeError, match=r"`key` must be a torch.Tensor"):
        image_shift.na2d_image(qi, None, vi, 3, heads=2)
    with pytest.raises(ValueError, match="has no low-resolution"):
        image_shift.image_inputs(geometry.Geometry("g", (8, 8), 2, 4, 4, 3), {}, low=True)


@pytest.fixture(scope="module")
def head_split_verdict(tmp_path_factory):
    """The gate's result on the head-split layout's export of a call, exported once per distinct call: both cases
    below make the same one (the coarse grid upsampled is the full-resolution k/v), a dynamo export apiece."""
    made: list[tuple[tuple[torch.Tensor, ...], object]] = []

    def verdict(q, k, v, kernel, dilation):
        call = (q, k, v, torch.tensor(kernel), torch.tensor(dilation))
        for seen, result in made:
            if all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(seen, call, strict=True)):
                return result
        path = tmp_path_factory.mktemp("head_split") / "old.onnx"
        result = device_gate(device_layout.export_attention(q, k, v, kernel, dilation, "shift", path).path, OPS)
        made.append((call, result))
        return result

    return verdict


OPS = load_device_ops()


@pytest.mark.parametrize("low", [False, True])
def test_export_has_no_reshape_and_is_predicted_to_parse(tmp_path, low: bool, head_split_verdict) -> None:
    geom = geometry.Geometry("lowgrid", (10, 12), 2, 8, 12, 3, 2, 1, (5, 6))
    images = image_shift.image_inputs(geom, geometry.make_inputs(geom), low=low)
    exp = image_shift.export_image(*images, geom.kernel, geom.dilation, geom.heads, tmp_path / "image.onnx")
    assert exp.vs_faithful <= TOL and exp.report.parity_ok and exp.report.max_abs_diff <= 1e-5
    model = onnx.load(exp.path)
    ops = {n.op_type for n in model.graph.node}
    assert ops == OPS_USED | ({"Resize"} if low else set()), ops  # no Reshape, Transpose, Softmax, Gather
    assert all(len(s) == 4 for s in exp.inputs.values()) and exp.inputs["k"] == (
        (1, 16, 5, 6) if low else (1, 16, 10, 12)
    )
    result = device_gate(exp.path, OPS)
    assert result.verdict == "pass" and not result.findings, result.findings
    matched = {f.rule for f in result.prediction.judgements}
    assert {"input_rank_4", "concat_image_height", "reduce_max_channel_axis"} <= matched
    # the negative control: the head-split layout of the same call is refused (its Reshape from rank 5 to 4)
    q, k, v = (device_layout.from_image(t, geom.heads) for t in images)
    if low:
        k, v = (attention.upsample_nearest(t, geom.dilation) for t in (k, v))
    old_result = head_split_verdict(q, k, v, geom.kernel, geom.dilation)
    assert old_result.verdict == "fail" and old_result.rules.get("reshape_5d_to_4d") == "refused"


def test_export_all_names_one_graph_per_geometry(tmp_path) -> None:
    geoms = [geometry.Geometry("6^2", (6, 6), 2, 4, 4, 3), geometry.Geometry("low", (8, 8), 2, 4, 4, 3, 2, 1, (4, 4))]
    out = image_shift.export_image_all(geoms, tmp_path)
    assert {k: e.path.name for k, e in out.items()} == {"6^2": "image_6p2.onnx", "low": "image_low.onnx"}
    assert out["low"].inputs["k"] == (1, 8, 4, 4)  # NAF's case exported on the coarse grid
    with pytest.raises(ValueError, match="distinct"):
        image_shift.export_image_all(geoms[:1] * 2, tmp_path)
