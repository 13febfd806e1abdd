"""weftlib.attention.naf_rewrites / naf_variants / naf: the exact rewrites of what NAF adds around its
attention, each proven equal to the module it replaces with a negative control that must differ, and the
attention layer found by behaviour (on the stand-in; the real checkout is never used by tests)."""

from __future__ import annotations

import sys
import types

import natten
import natten.functional
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from weftlib import attention, standins
from weftlib.attention import naf, naf_rewrites, naf_variants
from weftlib.onnx_core import export as onnx_export

TOL = 1e-5


def standin(**kwargs):
    return naf.load_hub(standins.NAF_HUB_DIR, "naf", **{"dim": 32, "kernel_size": 3, **kwargs})


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_groupnorm_by_reductions_equals_groupnorm_and_exports_without_instancenorm(tmp_path):
    norm = nn.GroupNorm(4, 16)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16, generator=_gen(1)))
        norm.bias.copy_(torch.randn(16, generator=_gen(2)))
    x = torch.randn(2, 16, 7, 9, generator=_gen()) * 3 + 1
    with torch.no_grad():
        exact = (naf_rewrites.PooledGroupNorm(norm)(x) - norm(x)).abs().max()
        control = (naf_rewrites.PooledGroupNorm(norm, control=True)(x) - norm(x)).abs().max()
    assert exact <= TOL and control > 1e-2, (exact, control)
    rep = onnx_export.export(
        naf_rewrites.PooledGroupNorm(norm), (x,), tmp_path / "gn.onnx", input_names=["x"], output_names=["y"]
    )
    assert rep.parity_ok and not {"InstanceNormalization", "CastLike", "Reshape", "ReduceMean"} & set(rep.ops)
    assert {"AveragePool", "Conv", "Sqrt", "Div"} <= set(rep.ops), rep.ops
    with pytest.raises(ValueError, match="images"):
        naf_rewrites.PooledGroupNorm(norm)(torch.randn(2, 16, 5))


def test_rope_by_tables_is_the_modules_own_arithmetic_without_trig_or_neg(tmp_path):
    rope = standin(dim=64, heads_rope=2).image_encoder.rope
    x = torch.randn(1, 64, 6, 10, generator=_gen())
    with torch.no_grad():
        faithful = rope(x)
        exact = (naf_rewrites.ImageRopeTables(rope, (6, 10))(x) - faithful).abs().max()
        control = (naf_rewrites.ImageRopeTables(rope, (6, 10), control=True)(x) - faithful).abs().max()
    assert exact <= 1e-6 and control > 1e-2, (exact, control)
    tables = naf_rewrites.ImageRopeTables(rope, (6, 10))
    rep = onnx_export.export(tables, (x,), tmp_path / "rope.onnx", input_names=["x"], output_names=["y"])
    assert rep.parity_ok and not {"Cos", "Sin", "Tile", "Neg", "Reshape", "Transpose"} & set(rep.ops), rep.ops
    with pytest.raises(ValueError, match="built for"):
        tables(torch.randn(1, 64, 6, 11))
    with pytest.raises(TypeError, match="RoPE"):
        naf_rewrites.ImageRopeTables(nn.Identity(), (6, 10))


def test_nearest_as_resize_copies_exactly_and_exports_resize_not_gathernd(tmp_path):
    class Up(nn.Module):
        def forward(self, x):
            return F.interpolate(x, size=(12, 18), mode="nearest-exact")

    x = torch.randn(1, 4, 3, 6, generator=_gen())
    faithful = Up()(x)
    with naf_rewrites.nearest_as_resize():
        assert torch.equal(Up()(x), faithful)
        odd = F.interpolate(x, size=(7, 9), mode="nearest-exact")  # not an integer ratio: left as it was
    assert torch.equal(odd, F.interpolate(x, size=(7, 9), mode="nearest-exact"))
    with naf_rewrites.nearest_as_resize(control=True):
        assert (Up()(x) - faithful).abs().max() > 1e-2
    assert F.interpolate.__module__ == "torch.nn.functional"  # restored
    plain = onnx_export.export(Up(), (x,), tmp_path / "gather.onnx", input_names=["x"], output_names=["y"])
    resized = onnx_export.export(
        naf_rewrites.NearestAsResize(Up()), (x,), tmp_path / "resize.onnx", input_names=["x"], output_names=["y"]
    )
    assert "GatherND" in plain.ops and "Resize" not in plain.ops, plain.ops
    assert resized.parity_ok and "Resize" in resized.ops and "GatherND" not in resized.ops, resized.ops


def test_load_hub_takes_a_local_checkout_only(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no hubconf.py"):
        naf.load_hub(tmp_path)
    assert not standin().training


def test_attention_layer_is_found_by_behaviour_with_its_inputs():
    model = standin()
    image, feats = torch.rand(1, 3, 24, 24, generator=_gen()), torch.randn(1, 8, 6, 6, generator=_gen(1))
    layer = naf.find_attention_layer(naf.FixedSize(model, (24, 24)), image, feats)
    assert layer.name == "upsampler" and layer.module is model.upsampler and layer.parameters == 0
    assert [list(t.shape) for t in layer.args] == [[1, 32, 24, 24], [1, 32, 6, 6], [1, 8, 6, 6], [1, 3, 24, 24]]
    assert layer.kernel_size == (3, 3) and layer.dilation == (4, 4) and layer.heads == 4
    assert layer.call["backend"] == "cutlass-fna" and natten.functional.na2d is attention.reference._real_natten_na2d()
    with pytest.raises(ValueError, match="one call"):
        naf.find_attention_layer(nn.Identity(), torch.zeros(1))


def test_natten_on_cpu_reaches_a_module_that_imported_na2d_by_name():
    """NAF's attentions.py does `from natten import na2d`: the reference must reach that name too."""
    held = types.ModuleType("holds_na2d")
    held.na2d = natten.functional.na2d
    q, k = (torch.randn(1, 8, 8, 2, 8, generator=_gen(i)) for i in (0, 1))
    v = torch.randn(1, 8, 8, 2, 4, generator=_gen(2))
    sys.modules["holds_na2d"] = held
    try:
        with naf.natten_on_cpu():
            out = held.na2d(q, k, v, kernel_size=3, dilation=2, backend="cutlass-fna")
        assert held.na2d is natten.functional.na2d  # restored
    finally:
        del sys.modules["holds_na2d"]
    assert (out - attention.na2d(q, k, v, 3, 2, method="shift")).abs().max() <= TOL


def test_every_variant_equals_natten_and_every_control_differs():
    model = standin(heads_rope=1)
    prepared = naf_variants.prepare(
        model, (24, 24), torch.rand(1, 3, 24, 24, generator=_gen()), torch.randn(1, 8, 6, 6, generator=_gen(1))
    )
    rows = naf_variants.natten_equality(prepared, method="lowres")
    exact = [r for r in rows if not r["control"]]
    controls = [r for r in rows if r["control"]]
    variants = {(r["graph"], r["variant"]) for r in exact}
    assert variants == {(naf_variants.UPSAMPLER, v) for v in naf_variants.UPSAMPLER_VARIANTS} | {
        (naf_variants.LAYER, v) for v in naf_variants.LAYER_VARIANTS
    }
    assert max(r["vs natten"] for r in exact) <= TOL, exact
    assert {r["control"] for r in controls} == set(naf_rewrites.CHANGES)
    assert min(r["vs natten"] for r in controls) > 1e-3, controls


def test_rewritten_copies_refuses_what_it_cannot_do_and_leaves_the_model_alone():
    model = naf.FixedSize(standin(), (24, 24))
    with pytest.raises(ValueError, match="changes"):
        naf_rewrites.rewritten(model, ["fast"], layer="upsampler", heads=4, kernel_size=(3, 3))
    with pytest.raises(ValueError, match="replaces the attention layer"):
        naf_rewrites.rewritten(model, ["image", "resize"], layer="upsampler", heads=4, kernel_size=(3, 3))
    with pytest.raises(ValueError, match="input shapes"):
        naf_rewrites.rewritten(model, ["rope"], layer="upsampler", heads=4, kernel_size=(3, 3))
    with pytest.raises(ValueError, match="control"):
        naf_rewrites.rewritten(model, ["groupnorm"], layer="upsampler", heads=4, kernel_size=(3, 3), control="rope")
    out = naf_rewrites.rewritten(model, ["groupnorm", "image"], layer="upsampler", heads=4, kernel_size=(3, 3))
    assert sum(isinstance(m, nn.GroupNorm) for m in model.modules()) == 8
    assert not any(isinstance(m, nn.GroupNorm) for m in out.modules())
    assert isinstance(out.model.upsampler, naf_rewrites.ImageLayoutAttention)


def test_export_variants_names_the_graphs_and_refuses_a_vacuous_reference(tmp_path):
    model = standin()
    prepared = naf_variants.prepare(
        model, (24, 24), torch.rand(1, 3, 24, 24, generator=_gen()), torch.randn(1, 8, 6, 6, generator=_gen(1))
    )
    with pytest.raises(ValueError, match="vacuous"):
        naf_variants.export_variants(prepared, tmp_path, method="shift", reference="shift", atol=1e-4)
    exports = naf_variants.export_variants(
        prepared,
        tmp_path,
        method="lowres",
        reference="shift",
        atol=1e-4,
        upsampler_variants=["resize"],
        layer_variants=["image"],
    )
    assert sorted(exports) == ["naf_attention_image", "naf_lowres__resize"]
    assert all(e.report.parity_ok and e.vs_reference <= TOL for e in exports.values())
    assert "GatherND" not in exports["naf_lowres__resize"].report.ops
    rows = naf_variants.outside_rows(exports, {"Conv", "Slice"})
    assert {r["graph"] for r in rows} == set(exports) and all(r["from"] for r in rows)
