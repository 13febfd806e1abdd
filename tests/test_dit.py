"""weftlib.dit: the flow model from a checkout-shaped tree, its exporters' refusals, real RoPE, the device layout
and the exact changes. Small widths keep it fast; the operator structure does not depend on them."""

from __future__ import annotations

import inspect
import json
import shutil
import sys

import pytest
import torch

from weftlib import dit, standins
from weftlib.dit import model as dit_model
from weftlib.dit import variants as dit_variants
from weftlib.onnx_core import export as onnx_export

SMALL = {"blocks": 1, "channels": 192}  # 12 heads of 16 channels: 2 RoPE frequencies per axis plus padding


@pytest.fixture(scope="module")
def small():
    model = dit.load_flow_model(None, **SMALL)
    inputs = dit.example_inputs(model, global_tokens=3)
    return model, inputs, dit.forward(model, inputs)


@pytest.fixture()
def checkout(tmp_path):
    """The stand-in tree copied elsewhere: a host_root that is not the stand-in's own folder."""
    root = tmp_path / "Pixal3D"
    shutil.copytree(standins.HOST_ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    yield root
    for name in [m for m in sys.modules if m == "pixal3d" or m.startswith("pixal3d.")]:
        del sys.modules[name]  # the next load (from any root) starts clean


# ------------------------------------------------------------------------------------------- the stand-in


def test_stand_in_has_the_upstream_structure(small):
    model, inputs, out = small
    src = dit.source_of(model)
    assert src.stand_in and src.label == "stand-in" and src.backend == "sdpa"
    assert src.config_file == standins.HOST_ROOT / dit.FLOW_CONFIG
    assert {
        k: src.args[k]
        for k in (
            "resolution",
            "in_channels",
            "out_channels",
            "num_heads",
            "mlp_ratio",
            "pe_mode",
            "share_mod",
            "qk_rms_norm",
            "qk_rms_norm_cross",
            "image_attn_mode",
            "model_channels",
            "num_blocks",
        )
    } == {
        "resolution": 8,
        "in_channels": 8,
        "out_channels": 8,
        "num_heads": 12,
        "mlp_ratio": 5.3334,
        "pe_mode": "rope",
        "share_mod": True,
        "qk_rms_norm": True,
        "qk_rms_norm_cross": True,
        "image_attn_mode": "proj",
        "model_channels": 192,
        "num_blocks": 1,
    }
    assert type(model).__name__ == "SparseStructureFlowModel" and len(model.blocks) == 1
    assert model.rope_phases.dtype == torch.complex64 and model.rope_phases.shape == (512, 8)
    # how the complex RoPE, the F.normalize qk norm and the cos/sin timestep embedding behave is tested by what
    # they do to the exports (test_try_exports_..., test_exports_carry_...), not by reading the stand-in's source
    assert hasattr(model, "adaLN_modulation") and hasattr(model.blocks[0], "modulation")  # shared adaLN
    assert dit.condition_channels(model) == (1024, 1024)
    x, t, (c_global, c_proj) = inputs
    assert [list(a.shape) for a in (x, t, c_global, c_proj)] == [[1, 8, 8, 8, 8], [1], [1, 3, 1024], [1, 512, 1024]]
    assert out.shape == x.shape and out.abs().max() > 0


def test_the_package_init_is_never_run_and_would_fail(small):
    assert "pixal3d.pipelines" not in sys.modules and not hasattr(sys.modules["pixal3d"], "pipelines")
    with pytest.raises(ImportError, match="CUDA-only renderers"):
        __import__("pixal3d.pipelines")


def test_the_default_backend_is_a_gpu_library_until_the_loader_sets_sdpa(small):
    model, inputs, out = small
    with dit.attention_backend(model, "flash_attn"), pytest.raises(ImportError):
        dit.forward(model, inputs)
    assert dit.source_of(model).backend == "sdpa"
    with dit.attention_backend(model, "naive"):
        assert dit.max_abs_diff(dit.forward(model, inputs), out) <= 1e-5


def test_load_checks_its_arguments(tmp_path):
    with pytest.raises(ValueError, match="blocks"):
        dit.load_flow_model(blocks=0)
    with pytest.raises(ValueError, match="heads"):
        dit.load_flow_model(channels=100)
    with pytest.raises(FileNotFoundError, match="host_root"):
        dit.load_flow_model(tmp_path)
    with pytest.raises(TypeError, match="load_flow_model"):
        dit.source_of(torch.nn.Linear(2, 2))


def test_a_checkout_elsewhere_uses_its_own_classes_and_config(checkout, small):
    config = checkout / dit.FLOW_CONFIG
    data = json.loads(config.read_text())
    data["models"]["denoiser"]["args"]["mlp_ratio"] = 2.0
    config.write_text(json.dumps(data))
    model = dit.load_flow_model(checkout, **SMALL)
    src = dit.source_of(model)
    assert not src.stand_in and src.label == "real checkout"
    assert inspect.getfile(type(model)).startswith(str(checkout))
    assert src.rope_class is not dit.source_of(small[0]).rope_class
    assert model.blocks[0].mlp.mlp[0].out_features == 384  # its own config file was read
    inputs = dit.example_inputs(model)
    with dit.real_rope(model):
        assert src.rope_class.apply_rotary_embedding is not dit.source_of(small[0]).rope_class.apply_rotary_embedding
        assert dit.max_abs_diff(dit.forward(model, inputs), dit.forward(model, inputs)) == 0
    variant = dit.exact_variants(model, inputs)[1]
    assert variant.name == "device_layout" and dit.max_abs_diff(variant.output(), dit.forward(model, inputs)) <= 1e-5
    data["models"]["denoiser"]["name"] = "Other"
    config.write_text(json.dumps(data))
    with pytest.raises(dit.FlowLoadError, match="Other"):
        dit.load_flow_model(checkout, **SMALL)


def test_example_inputs_are_seeded_and_leave_the_global_rng_alone(small):
    model = small[0]
    state = torch.random.get_rng_state()
    a, b, c = (dit.flat(dit.example_inputs(model, seed=s)) for s in (1, 1, 2))
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and not torch.equal(a[0], c[0])
    assert 0 <= float(a[1]) < dit.TIMESTEP_SCALE
    with pytest.raises(ValueError, match="positive"):
        dit.example_inputs(model, batch=0)


# ------------------------------------------------------------------------------------------ as written


def test_try_exports_keeps_each_refusal_as_data(small):
    model, inputs, _ = small
    attempts = dit.try_exports(model, inputs)
    assert set(attempts) == {"dynamo", "torchscript"} and not any(a.ok for a in attempts.values())
    assert "view_as_complex" in attempts["torchscript"].error
    assert attempts["dynamo"].error.startswith("DispatchError") and "complex" in attempts["dynamo"].error


def test_attempt_reports_success_and_the_innermost_cause():
    ok, error, seconds = onnx_export.attempt(torch.nn.Linear(3, 2), (torch.randn(1, 3),), dynamo=False)
    assert ok and error == "" and seconds > 0
    try:
        try:
            raise ValueError("inner cause\nsecond line")
        except ValueError as inner:
            raise RuntimeError("Failed to convert\nboilerplate") from inner
    except RuntimeError as outer:
        assert onnx_export.first_error_line(outer) == "ValueError: inner cause"
    with pytest.raises(TypeError, match="args"):
        onnx_export.attempt(torch.nn.Linear(3, 2), [torch.randn(1, 3)], dynamo=False)


# ------------------------------------------------------------------------------------------- real RoPE


def test_real_rope_is_bit_identical_and_its_control_is_not(small):
    model, inputs, out = small
    cls = dit.source_of(model).rope_class
    original = cls.__dict__["apply_rotary_embedding"]
    with dit.real_rope(model):
        assert cls.__dict__["apply_rotary_embedding"] is not original
        assert dit.max_abs_diff(dit.forward(model, inputs), out) == 0.0
    with dit.real_rope(model, flip_sign=True):
        assert dit.max_abs_diff(dit.forward(model, inputs), out) > 1e-4
    assert cls.__dict__["apply_rotary_embedding"] is original
    with pytest.raises(ZeroDivisionError), dit.real_rope():
        1 / 0  # noqa: B018 (raise inside the context)
    assert cls.__dict__["apply_rotary_embedding"] is original


@pytest.mark.parametrize("head_dim", [16, 32, 128])
def test_real_rotation_matches_complex_multiplication(head_dim):
    x = torch.randn(2, 64, 3, head_dim)
    phases = torch.polar(torch.ones(64, head_dim // 2), torch.randn(64, head_dim // 2))
    complex_form = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * phases.unsqueeze(-2)
    expected = torch.view_as_real(complex_form).reshape(x.shape)
    assert torch.equal(dit_model._rotate_real(x, phases), expected)
    assert torch.equal(dit_model._rotate_real(x, torch.view_as_real(phases)), expected)


def test_a_short_head_dim_may_differ_in_the_last_bit_only():
    """4 channel pairs do not fill a SIMD vector of complex floats: torch's scalar path may fuse a
    multiply-add, so the last bit can move (the reason the notebook asserts == 0 at head dim 32, not 8)."""
    x = torch.randn(2, 64, 3, 8)
    phases = torch.polar(torch.ones(64, 4), torch.randn(64, 4))
    expected = torch.view_as_real(torch.view_as_complex(x.reshape(2, 64, 3, 4, 2)) * phases.unsqueeze(-2))
    assert dit.max_abs_diff(dit_model._rotate_real(x, phases), expected.reshape(x.shape)) <= 1e-6


# ----------------------------------------------------------------------------- device layout, exact changes


def test_device_layout_is_rank_4_and_equal(small):
    model, inputs, out = small
    module, laid = dit.device_layout(model, inputs)
    assert [a.dim() for a in laid] == [4, 4, 4, 4]
    assert [list(a.shape) for a in laid] == [[1, 8, 8, 64], [1, 1, 1, 1], [1, 1024, 1, 3], [1, 1024, 8, 64]]
    with torch.no_grad():
        got = module(*laid)
    assert got.shape == (1, 8, 8, 64)
    assert dit.max_abs_diff(got.reshape(out.shape), out) <= 1e-5


def test_each_exact_change_stays_within_rounding(small):
    model, inputs, out = small
    variants = {v.name: v for v in dit.exact_variants(model, inputs)}
    assert list(variants) == [
        "faithful",
        "device_layout",
        "device_layout+host_timestep",
        "device_layout+matmul_rms_norm",
        "device_layout+naive_attention",
        "device_layout+all",
    ]
    diffs = {name: dit.max_abs_diff(v.output(), out) for name, v in variants.items()}
    assert diffs["faithful"] == 0  # only real RoPE: bit-identical; the rest may reorder float sums
    assert max(diffs.values()) <= 1e-5, diffs
    assert variants["device_layout+host_timestep"].args[1].shape == (1, 256, 1, 1)
    assert isinstance(variants["device_layout+all"].flow.blocks[0].self_attn.q_rms_norm, dit.MatMulRMSNorm)
    assert not isinstance(model.blocks[0].self_attn.q_rms_norm, dit.MatMulRMSNorm), "the original was modified"
    with pytest.raises(ValueError, match="unknown"):
        dit_variants._variant(model, inputs, "x", ("fold_everything",), True)


def test_exports_carry_the_ranks_and_the_ops_each_change_removes(small, tmp_path):
    from weftlib import gate

    model, inputs, out = small
    variants = dit.exact_variants(model, inputs)
    ops = gate.load_device_ops()
    faithful, everything = dit.evaluate([variants[0], variants[-1]], tmp_path, out, ops)
    assert faithful.ranks == {"x": 5, "t": 1, "cond_global": 3, "cond_proj": 3}
    assert set(everything.ranks.values()) == {4} and everything.max_abs_diff <= 1e-5
    assert faithful.report.parity_ok and everything.report.parity_ok
    assert {"Cos", "Sin"} <= set(faithful.outside) and not everything.outside
    assert faithful.report.ops.get("ReduceL2") and not everything.report.ops.get("ReduceL2")
    assert not faithful.verdict.readable and everything.verdict.readable and everything.verdict.passed
    origins = dit.op_origins(faithful.report.path, ["Cos", "ReduceL2"])
    assert origins["Cos"] == ["t_embedder"] and "blocks.*.self_attn.q_rms_norm" in origins["ReduceL2"]
    table = dit.op_table({"f": faithful.report.ops, "e": everything.report.ops}, ops.allowed)
    first = next(i for i, row in enumerate(table) if row["in DEVICE_OPS"])
    assert not any(row["in DEVICE_OPS"] for row in table[:first]) and all(r["in DEVICE_OPS"] for r in table[first:])
    rows = {r["op"]: r for r in dit.outside_table(faithful, ops)}
    assert rows["Cos"]["listed"] == "blocker" and rows["Cos"]["from"] == "t_embedder"
    assert sorted(p.name for p in tmp_path.glob("*.parity.json")) == [
        "dit_device_layout__all.parity.json",
        "dit_faithful.parity.json",
    ]
