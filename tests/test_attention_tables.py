"""weftlib.attention.tables and .conclusion: notebook 02's shown rows and its answer sentence."""

from __future__ import annotations

from types import SimpleNamespace

from weftlib.attention import conclusion, tables


def test_export_summary_rows_give_kib_and_the_op_inventory():
    summary = {
        "file_bytes": 2048,
        "ir_version": 10,
        "opset": 17,
        "nodes": 5,
        "largest_intermediate_bytes": 1024,
        "largest_initializer_bytes": 512,
        "ops": {"Slice": 3, "Concat": 2},
    }
    (row,) = tables.export_summary_rows({"shift": summary})
    assert row == {
        "method": "shift",
        "file_kib": 2.0,
        "ir": 10,
        "opset": 17,
        "nodes": 5,
        "largest_intermediate_kib": 1.0,
        "largest_initializer_kib": 0.5,
        "ops": "Slice 3, Concat 2",
    }


def test_key_value_rows_spell_values_as_text():
    assert tables.key_value_rows({"a": 1, "b": [2, 3]}) == [{"": "a", "value": "1"}, {"": "b", "value": "[2, 3]"}]


def test_variant_export_rows_name_the_reference_column():
    report = SimpleNamespace(input_shapes={"q": [1, 2]}, file_bytes=4096, node_count=7, max_abs_diff=1e-6)
    export = SimpleNamespace(graph="upsampler", report=report, vs_reference=2e-6)
    (row,) = tables.variant_export_rows({"naf_lowres": export}, "shift")
    assert row == {
        "graph": "naf_lowres",
        "module": "upsampler",
        "inputs": "q [1, 2]",
        "onnx_kib": 4.0,
        "nodes": 7,
        "onnxruntime vs torch": 1e-6,
        "torch vs shift": 2e-6,
    }


def test_reference_and_geometry_text():
    assert conclusion.reference_name("natten") == "natten (Flex backend)"
    assert conclusion.reference_name("shift") == "the 'shift' formulation (equal to natten in section 1)"
    assert conclusion.naf_geometry_text((192, 192), 12, 32) == "NAF 192x192 from a 12x12 grid of 32 channels"
    assert conclusion.naf_geometry_text((192, 192), 12, 32, (48, 48), [12, 4, 16]) == (
        "NAF 192x192 from a 12x12 grid of 32 channels (the rewrites at 48x48 from 12x12, 16 channels)"
    )
    assert conclusion.naf_geometry_text((192, 192), 12, 32, (192, 192), []).endswith("32 channels")


def test_answer_spells_every_measured_value():
    text = conclusion.answer(
        worst_equality=1e-6,
        naf_kind="the stand-in",
        method="lowres",
        opset=17,
        upsampler_nodes=1234,
        layer_name="attn",
        layer_nodes=56,
        naf_vs_natten=2e-6,
        naf_vs_reference=3e-6,
        reference="shift",
        naf_vs_torch=4e-6,
        outside="GatherND (resize)",
        image_worst=5e-6,
        image_geometries=3,
        predicted="P",
        unjudged_by={"g": ["r1", "r2"]},
        naf_predicted="N",
        fmt=lambda v: f"<{v:g}>",
    )
    assert text.startswith("Yes: every formulation equals natten within <1e-06>, and NAF's upsampler (the stand-in)")
    for part in (
        "swap_natten('lowres') to one opset-17 ONNX file (1,234 nodes",
        "its attention layer `attn` alone 56)",
        "within <2e-06> and at NAF's geometry within <3e-06> of the 'shift' formulation",
        "onnxruntime within <4e-06> of torch; outside DEVICE_OPS the upsampler has GatherND (resize). ",
        "equals natten within <5e-06> and is predicted to parse at all 3 geometries",
        "Predictions from the public record: P; g is unjudged by r1, r2. For NAF's graphs",
    ):
        assert part in text, part
    assert text.endswith("what it adds: N.")
