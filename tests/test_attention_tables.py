"""weftlib.attention.tables and .conclusion: notebook 02's shown rows and its answer sentence."""

from __future__ import annotations

from types import SimpleNamespace

from weftlib.attention import conclusion, tables
from weftlib.gate import Finding, GateResult, GraphPrediction


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
    )
    assert text.startswith("Yes: every formulation equals natten within 1 × 10⁻⁶, and NAF's upsampler (the stand-in)")
    for part in (
        "swap_natten('lowres') to one opset-17 ONNX file (1,234 nodes",
        "its attention layer `attn` alone 56)",
        "within 2 × 10⁻⁶ and at NAF's geometry within 3 × 10⁻⁶ of the 'shift' formulation",
        "onnxruntime within 4 × 10⁻⁶ of torch; outside DEVICE_OPS the upsampler has GatherND (resize). ",
        "equals natten within 5 × 10⁻⁶ and is predicted to parse at all 3 geometries",
        "Predictions from the public record: P; g is unjudged by r1, r2. For NAF's graphs",
    ):
        assert part in text, part
    assert text.endswith("what it adds: N.")


def _result(verdict: str, *judgements: Finding) -> GateResult:
    prediction = GraphPrediction(verdict=verdict, judgements=judgements, nodes={}, inputs={})
    return GateResult(path="", verdict=verdict, findings=prediction.findings, prediction=prediction)


REFUSED = Finding("r", "Reshape", "reshape_5d_to_4d", "refused", "DFC 5.3.0 refused it", cites=("RFD 1154",))
UNJUDGED = Finding("x", "(input)", "input_rank_5", "unjudged", "not isolated")
PARSED = Finding("c", "Conv", "op", "parse", "observed", inferred=True)


def test_export_summary_record_and_layer_rows():
    summary = {"path": "/run/a.onnx", "nodes": 5}
    assert tables.export_summary_record({"shift": summary}) == {"shift": {"nodes": 5}}
    assert tables.layer_rows("stand-in", {"name": "attn"}) == [
        {"": "sources", "value": "stand-in"},
        {"": "name", "value": "attn"},
    ]


def test_outside_by_graph_keys_each_export_by_its_module():
    exports = {"naf_up": SimpleNamespace(graph="upsampler"), "naf_att": SimpleNamespace(graph="layer")}
    rows = [
        {"graph": "naf_up", "op": "Cos", "from": "rope"},
        {"graph": "naf_up", "op": "GatherND", "from": "upsample"},
        {"graph": "naf_att", "op": "Softmax", "from": "attn"},
    ]
    assert tables.outside_by_graph(exports, rows) == {
        "upsampler": {"Cos": "rope", "GatherND": "upsample"},
        "layer": {"Softmax": "attn"},
    }


def test_gate_by_graph_gives_verdict_refusals_and_unjudged_causes():
    results = {"a.onnx": _result("fail", REFUSED, UNJUDGED, PARSED), "b.onnx": _result("pass", PARSED)}
    exports = [SimpleNamespace(name="naf upsampler", path="a.onnx"), SimpleNamespace(name="naf layer", path="b.onnx")]
    assert tables.gate_by_graph(exports, results) == {
        "naf upsampler": {
            "verdict": "fail",
            "refused_by": {"reshape_5d_to_4d": "RFD 1154"},
            "unjudged_by": {"input_rank_5": 1},
        },
        "naf layer": {"verdict": "pass", "refused_by": {}, "unjudged_by": {}},
    }


def test_rests_on_rows_name_each_distinct_judgement_once():
    rows = tables.rests_on_rows([_result("pass", PARSED), _result("fail", REFUSED, PARSED)])
    assert rows == [
        {"rule": "op Conv", "prediction": "parse", "evidence": "observed", "inferred": True},
        {"rule": "reshape_5d_to_4d", "prediction": "refused", "evidence": "DFC 5.3.0 refused it", "inferred": False},
    ]
    assert tuple(rows[0]) == tables.RESTS_ON_COLUMNS


def test_verdicts_and_refusals_by_method_group_the_graphs_of_each_formulation():
    results = {"g1": _result("fail", REFUSED), "g2": _result("unjudged", UNJUDGED), "s1": _result("unjudged")}
    methods, paths = ["gather", "gather", "shift"], ["g1", "g2", "s1"]
    assert tables.verdicts_by_method(methods, paths, results) == {"gather": ["fail", "unjudged"], "shift": ["unjudged"]}
    assert tables.refusals_by_method(methods, paths, results) == {"gather": ["reshape_5d_to_4d"], "shift": []}
