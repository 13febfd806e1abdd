"""weftlib.standins: the NAF-shaped hub repo and the Pixal3D-shaped host behave as the suite relies on."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import natten
import pytest
import torch

from weftlib import standins, trace
from weftlib.attention import naf_variants
from weftlib.onnx_core import origins
from weftlib.trace import checkpoint

REAL_NAF_OPS = json.loads((Path(__file__).parent / "fixtures" / "naf_real_ops.json").read_text())

ON_CPU_ONLY = not (natten.HAS_LIBNATTEN and torch.cuda.is_available())


def load(**kwargs):
    return torch.hub.load(str(standins.NAF_HUB_DIR), "naf", source="local", trust_repo=True, **kwargs)


@pytest.fixture()
def recorded_na2d(monkeypatch):
    """Replace natten.na2d by a recorder returning zeros of the output shape (what a swap would do)."""
    calls = []

    def fake(q, k, v, **kwargs):
        calls.append((q.shape, k.shape, v.shape, kwargs))
        return torch.zeros(*q.shape[:-1], v.shape[-1])

    monkeypatch.setattr(natten, "na2d", fake)
    return calls


def test_upsampler_calls_na2d_with_nafs_arguments(recorded_na2d):
    model = load(dim=64)
    out = model(torch.randn(2, 3, 40, 40), torch.randn(2, 32, 10, 10), (40, 40))
    assert out.shape == (2, 32, 40, 40)
    ((q, k, v, kwargs),) = recorded_na2d
    assert q == (2, 40, 40, 4, 16) and k == (2, 40, 40, 4, 16) and v == (2, 40, 40, 4, 8)
    assert kwargs == {"kernel_size": (9, 9), "dilation": (4, 4), "stride": 1, "backend": "cutlass-fna"}
    with pytest.raises(ValueError, match="output_size"):
        model(torch.randn(1, 3, 40, 40), torch.randn(1, 32, 10, 10), (42, 42))


def test_standin_defaults_are_nafs_geometry():
    """The real hub entry takes no model arguments, so the stand-in's defaults are the real model's."""
    model = load()
    assert (model.dim, model.heads, model.upsampler.kernel_size) == (256, 4, (9, 9))
    assert (model.image_encoder.rope.num_heads, model.image_encoder.rope.D_head) == (4, 64)
    assert sum(isinstance(m, torch.nn.GroupNorm) for m in model.modules()) == 8


def test_standin_exports_the_real_nafs_op_inventory(tmp_path):
    """The stand-in's graphs carry every op type of the real NAF's (tests/fixtures/naf_real_ops.json,
    measured on valeoai/NAF at ad4e24d), each from the same module: its rotary embedding computed in the
    graph, its GroupNorm, its index-based upsampling. A geometry where the rope's tables stay unfolded
    (192^2: [H*W, D/2] above the exporter's fold limit), small widths and kernel so the test is quick."""
    model = load(dim=64, heads_rope=1, kernel_size=3)
    g = torch.Generator().manual_seed(0)
    prepared = naf_variants.prepare(
        model, (192, 192), torch.rand(1, 3, 192, 192, generator=g), torch.randn(1, 16, 12, 12, generator=g)
    )
    assert prepared.layer.name == REAL_NAF_OPS["attention_layer"]
    exports = naf_variants.export_variants(
        prepared,
        tmp_path,
        method="lowres",
        reference="shift",
        atol=1e-4,
        upsampler_variants=["faithful"],
        layer_variants=["faithful"],
    )
    for e in exports.values():
        real = REAL_NAF_OPS["graphs"][e.graph]["ops"]
        mine = origins.op_origins(e.path, list(e.report.ops))
        lacking = {op: real[op] for op in sorted(set(real) - set(mine))}
        assert not lacking, f"the stand-in's {e.graph} lacks {lacking} (op: where the real NAF has it)"
        extra = sorted(set(mine) - set(real))
        assert not extra, f"the stand-in's {e.graph} has ops the real NAF's has not: {extra}"
        moved = {op: (mine[op], real[op]) for op in real if mine[op] != real[op]}
        assert not moved, f"the stand-in's {e.graph} has ops from other modules than the real NAF's: {moved}"


@pytest.mark.skipif(not ON_CPU_ONLY, reason="libnatten with CUDA would run the kernel")
def test_on_cpu_the_call_fails_inside_cutlass_fna_generic():
    model = load(dim=64)
    result = trace.trace_calls(model, torch.randn(1, 3, 64, 64), torch.randn(1, 64, 16, 16), (64, 64))
    assert "libnatten" in result.raised
    (chain,) = result.ending("natten.functional.na2d -> neighborhood_attention_generic -> cutlass_fna_generic")
    assert [label.split(":")[0] for label in chain.labels()[:2]] == ["naf.py", "attentions.py"]


def test_seeded_weights_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b, c = (load(dim=32, seed=s).state_dict() for s in (1, 1, 2))
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)
    with pytest.raises(ValueError, match="pretrained"):
        load(pretrained=True)


def test_host_never_imports_natten_and_only_installs_it():
    hits = [h for h in trace.static_scan(standins.HOST_ROOT, "natten") if h.kind != "hub_load"]
    assert {h.kind for h in hits} == {"install", "requirement"}
    assert not any(h.path.endswith(".py") for h in hits)
    (hub,) = [h for h in trace.static_scan(standins.HOST_ROOT, "natten") if h.kind == "hub_load"]
    assert hub.path == "pixal3d_standin/image_conditioned_proj.py" and "source='local'" in hub.detail
    for path in standins.HOST_ROOT.rglob("*.py"):
        names = [a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names]
        assert not any(n.split(".")[0] == "natten" for n in names), path
    assert [h.kind for h in trace.static_scan(standins.NAF_HUB_DIR, "natten") if h.kind != "mention"] == [
        "hub_dependency",
        "import",
    ]


def test_host_config_flag_decides_the_naf_call_and_projection_width(recorded_na2d):
    """What the suite relies on is behaviour, not the table's literal: a config with the upsampler flag off
    never reaches natten, one with it on calls na2d once per image and doubles the projection width."""
    inference = standins.import_from(standins.HOST_ROOT, "pixal3d_standin.inference")
    table = inference.IMAGE_COND_CONFIGS
    small = {"image_size": 160, "naf_target_size": 40, "grid_resolution": 4, "embed_dim": 16}
    image = torch.randn(1, 3, 50, 50)
    for name, config in table.items():
        calls_before = len(recorded_na2d)
        model = inference.build_image_cond_model(config, **small)
        out = model(image)
        naf = bool(config.get("use_naf_upsample"))
        assert len(recorded_na2d) - calls_before == int(naf), name
        assert model.proj_channels == (32 if naf else 16) and out.shape == (1, 16, model.proj_channels), name
    assert {bool(c.get("use_naf_upsample")) for c in table.values()} == {False, True}  # both kinds are exercised


def test_flow_checkpoint_needs_the_flag_on():
    flow = standins.import_from(standins.HOST_ROOT, "pixal3d_standin.flow")
    state = flow.build_flow_model(True, embed_dim=64).state_dict()
    on, off = checkpoint.checkpoint_compatibility(
        lambda **kw: flow.build_flow_model(embed_dim=64, **kw), "use_naf_upsample", state
    )
    assert on.loads and off.mismatches == (checkpoint.Mismatch("cond_proj.weight", (32, 64), (32, 128)),)
    with pytest.raises(FileNotFoundError, match="root"):
        standins.import_from(standins.HOST_ROOT / "nope", "x")
