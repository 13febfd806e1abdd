"""The attention layer's reference at NAF's geometry comes from the upsampler's own reference run, where the layer
ran once on exactly the inputs its graph is checked on: the same answer as running it alone, computed once."""

from __future__ import annotations

import dataclasses

import torch

from weftlib import standins
from weftlib.attention import naf, naf_variants


def _prepared():
    hub = naf.load_hub(standins.NAF_HUB_DIR, "naf", dim=32, kernel_size=3)
    return naf_variants.prepare_at(hub, 6, 4, 16, seed=1)


def test_the_upsamplers_reference_run_gives_the_layers_reference_exactly():
    prepared = _prepared()
    with naf_variants._layer_output(prepared) as seen:
        naf.reference_output(prepared.upsampler(), prepared.image, prepared.features, reference="shift")
    alone = naf.reference_output(prepared.attention_layer(), *prepared.layer_inputs, reference="shift")
    assert len(seen) == 1 and torch.equal(seen[0], alone)


def test_a_layer_run_on_other_inputs_gives_no_reference():
    prepared = _prepared()
    q, k, v, *rest = prepared.layer.args
    other = dataclasses.replace(prepared.layer, args=(q + 1, k, v, *rest))
    with naf_variants._layer_output(dataclasses.replace(prepared, layer=other)) as seen:
        naf.reference_output(prepared.upsampler(), prepared.image, prepared.features, reference="shift")
    assert seen == []


def test_export_variants_runs_the_reference_formulation_once_per_graph_not_twice(tmp_path, monkeypatch):
    prepared, runs = _prepared(), []
    real = naf.reference_output
    monkeypatch.setattr(
        naf, "reference_output", lambda model, *a, **k: runs.append(type(model).__name__) or real(model, *a, **k)
    )
    refs: dict = {}
    naf_variants.export_variants(
        prepared,
        tmp_path,
        method="lowres",
        reference="shift",
        atol=1e-4,
        upsampler_variants=["faithful"],
        layer_variants=["faithful"],
        references=refs,
        workers=1,
    )
    assert runs == ["FixedSize"] and len(refs) == 2  # the layer's reference taken from the upsampler's run
