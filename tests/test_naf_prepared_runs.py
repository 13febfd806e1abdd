"""`naf_variants.prepare` finds the attention layer, the RoPE sizes and the faithful graphs' outputs in one forward
pass, and `export_variants` takes those outputs instead of running the faithful graphs again: at NAF's 512² each
pass is seconds."""

from __future__ import annotations

import torch

from weftlib import standins
from weftlib.attention import naf, naf_rewrites, naf_variants
from weftlib.attention.swap import swap_natten
from weftlib.gate.fix import recorded


def _hub():
    return naf.load_hub(standins.NAF_HUB_DIR, "naf", dim=32, kernel_size=3)


def _passes(model, monkeypatch):
    """Forward passes of the hub model counted (FixedSize calls it once per pass)."""
    passes = []
    model.register_forward_pre_hook(lambda *_: passes.append(1))
    return passes


def test_one_pass_gives_the_layer_the_rope_sizes_and_both_faithful_outputs(monkeypatch):
    hub = _hub()
    passes = _passes(hub, monkeypatch)
    prepared = naf_variants.prepare_at(hub, 6, 4, 16, seed=1)
    assert len(passes) == 1
    with swap_natten("lowres"):
        sizes = naf_rewrites.module_inputs(prepared.fixed, (prepared.image, prepared.features), naf_rewrites.is_rope)
    assert prepared.rope_sizes == sizes and sizes
    up = naf_variants._run(prepared.upsampler(), (prepared.image, prepared.features), "lowres")
    layer = naf_variants._run(prepared.attention_layer(), prepared.layer_inputs, "lowres")
    assert torch.equal(prepared.ran[naf_variants.UPSAMPLER], up)
    assert torch.equal(prepared.ran[naf_variants.LAYER], layer)


def _export(prepared, tmp_path, method, reference, upsampler=("faithful",)):
    return naf_variants.export_variants(
        prepared,
        tmp_path,
        method=method,
        reference=reference,
        atol=1e-4,
        upsampler_variants=list(upsampler),
        layer_variants=["faithful"],
        workers=1,
    )


def test_export_variants_takes_the_prepared_runs_once(tmp_path, monkeypatch):
    prepared = naf_variants.prepare_at(_hub(), 6, 4, 16, seed=1)
    runs = []
    real = naf_variants._run
    monkeypatch.setattr(naf_variants, "_run", lambda m, a, method: runs.append(type(m).__name__) or real(m, a, method))
    got = _export(prepared, tmp_path, "lowres", "shift")
    assert runs == []  # both faithful graphs' outputs came from `prepare`'s pass
    assert prepared.ran == {}  # taken once and let go
    assert all(e.report.parity_ok and e.vs_reference <= 1e-4 for e in got.values())
    # 16 x 24² output elements, below `naf_records.KEEP_RUN_FROM` and `RECORD_FROM`: no run kept beside a graph
    assert not any(recorded.folder_for(e.path).exists() for e in got.values())


def test_another_formulation_runs_its_own_graphs(tmp_path, monkeypatch):
    prepared = naf_variants.prepare_at(_hub(), 6, 4, 16, seed=1)
    runs = []
    real = naf_variants._run
    monkeypatch.setattr(naf_variants, "_run", lambda m, a, method: runs.append(method) or real(m, a, method))
    _export(prepared, tmp_path, "shift", "lowres", upsampler=())
    assert runs == ["shift"] and set(prepared.ran) == {naf_variants.UPSAMPLER, naf_variants.LAYER}  # kept, unused
