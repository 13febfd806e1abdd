"""The gate held to the real exporters' graphs: every zoo network (and record case) rebuilt by Ultralytics, timm,
torchvision or transformers, cut at the zoo's parser nodes, and judged. The DFC parsed each of them (the zoo's
hailo10h pages on DFC 5.x, the record's parses on 5.3.0), so none may be judged FAIL.

The exports are cached (`weftlib.rebuild.rebuilt.cache_root`): the first run exports each network once, later
runs read the cut graphs back."""

from __future__ import annotations

import re
from collections import Counter

import onnx
import pytest

from weftlib.gate.graphs import Builder
from weftlib.gate.predict import rules as R
from weftlib.gate.predict.device import device_gate
from weftlib.gate.record import zoo
from weftlib.gate.vocabulary import GateVerdict, Prediction
from weftlib.rebuild import cutting, rebuilt, torchvision_schemas
from weftlib.rebuild.recipes import NOT_REBUILT, RECIPES, Recipe

pytestmark = pytest.mark.exports


@pytest.fixture(scope="module")
def built():
    return rebuilt.rebuild_all()


@pytest.fixture(scope="module")
def gated(built, ops):
    return {name: device_gate(b.path, ops) for name, b in built.items()}


def test_every_recipe_is_rebuilt_and_none_is_judged_fail(gated):
    failed = {
        name: sorted({f"{f.subject} @ {f.node}" for f in g.findings if f.prediction == Prediction.REFUSED})[:3]
        for name, g in gated.items()
        if g.verdict == GateVerdict.FAIL
    }
    assert failed == {}


def test_at_least_40_zoo_networks_across_6_families_each_a_5x_parse_by_its_named_exporter(built):
    observations = {o.network: o for o in zoo.parse_observations()}
    zoo_built = [name for name in built if name in observations]
    assert len(zoo_built) >= 40, zoo_built
    assert len({RECIPES[name].family for name in zoo_built}) >= 6
    for name in zoo_built:
        seen = observations[name]
        assert seen.seen_on("hailo10h"), f"{name}: no hailo10h page lists it on DFC 5.x"
        assert RECIPES[name].exporter in (seen.exporter, seen.inferred_exporter), name
    for name in set(built) - set(observations):  # the record's cases, by the exporter their sources name
        assert RECIPES[name].record_case == name


def test_the_zoos_nodes_show_the_ultralytics_and_tinyclip_exports_and_not_the_renamed_ones(built):
    shown = {name for name, b in built.items() if b.provenance == cutting.Provenance.SHOWN}
    assert {"yolov8s", "yolov11n", "yolov8s_seg", "tinyclip_vit_8m_16_text_3m_yfcc15m_text_encoder"} <= shown
    # the zoo's CLIP nodes (Add_1 .. Add_1515) are an older exporter's numbering: the rebuild is inferred
    assert built["clip_vit_b_16_text_encoder"].provenance == cutting.Provenance.INFERRED
    assert all(b.nodes_cut <= b.nodes_exported for b in built.values())


def test_networks_not_rebuilt_say_why_and_have_no_recipe():
    assert NOT_REBUILT and not set(NOT_REBUILT) & set(RECIPES)
    assert all(reason for reason in NOT_REBUILT.values())


def test_yolo11s_attention_parses_by_the_flattened_head_split(gated):
    found = Counter(f.rule for f in gated["yolov11n"].prediction.judgements if f.op == "Reshape")
    assert found["image_heads_flattened"] >= 1 and found["image_heads_unflattened"] >= 1, found
    assert "image_channel_split" not in found


def test_negative_control_the_broad_channel_split_fails_the_yolo11_export(built, ops, monkeypatch):
    """The rule before it was narrowed (any split of an image's channel axis refused) fails Ultralytics' own
    YOLO11 export, cut where the zoo cuts it: the test above would have caught it."""

    class Broad(type(R.RULES["image_channel_split"])):
        def check(self, ctx, node):
            before, after = ctx.io_shapes(node)
            if before is None or after is None or len(before) != 4:
                return R.Misses("not rank 4")
            return R.Fires("any channel split") if R.layouts.shuffles.splits_axis(before, after, 1) else R.Misses("")

    monkeypatch.setitem(R.RULES, "image_channel_split", Broad())
    assert device_gate(built["yolov11n"].path, ops).verdict == GateVerdict.FAIL


def test_a_second_rebuild_reads_the_cache_and_the_key_follows_shape_and_opset(built):
    again = rebuilt.rebuild(RECIPES["yolov8n"])
    assert again.cached and again.path == built["yolov8n"].path
    recipe = RECIPES["yolov8n"]
    keys = {
        rebuilt.cache_key(r)
        for r in (
            recipe,
            Recipe(**{**recipe.__dict__, "opset": 13}),
            Recipe(**{**recipe.__dict__, "shape": (1, 3, 320, 320)}),
        )
    }
    assert len(keys) == 3


def test_a_cut_at_a_node_the_export_lacks_is_refused_in_one_line():
    g = Builder("tiny")
    g.output(g.conv1x1(g.input("x", [1, 4, 8, 8]), 4, 4, "/conv"))
    recipe = Recipe("tiny", RECIPES["yolov8n"].exporter, RECIPES["yolov8n"].family, "", (1, 4, 8, 8), 17, "",
                    ends=("/model.22/cv2.0/cv2.0.2/Conv",))  # fmt: skip
    with pytest.raises(cutting.CutError, match=re.escape("no node '/model.22/cv2.0/cv2.0.2/Conv'")):
        cutting.cut(g.model(), recipe)
    whole = cutting.cut(g.model(), Recipe(**{**recipe.__dict__, "ends": ()}))
    assert [o.name for o in whole.graph.output] == [o.name for o in g.model().graph.output]


def test_torchvision_imports_beside_cpu_torch_and_its_nms_is_declared_not_run():
    import torch

    torchvision_schemas.declare()
    torchvision_schemas.declare()  # idempotent
    import torchvision

    assert torchvision.models.resnet18 is not None
    with pytest.raises(NotImplementedError):
        torch.ops.torchvision.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)


def test_every_cut_graph_is_a_checked_onnx_file(built):
    for b in built.values():
        onnx.checker.check_model(onnx.load(str(b.path)))


# ------------------------------------------------------------- the backtest with the exporters' graphs (issue 42)


@pytest.fixture(scope="module")
def combined(built, ops):
    from weftlib.rebuild import zoo_backtest as Z

    judged = Z.judged_cases(ops, Z.cached_graphs(list(built)))
    listing = Z.zoo_evidence(ops, judged)
    return judged, Z.backtest(ops, judged, listing), Z.leave_one_origin_out(ops, judged, listing)


def test_the_zoos_parses_and_the_exported_record_cases_join_the_backtest(combined, ops):
    from weftlib.rebuild import zoo_backtest as Z

    judged, rows, _ = combined
    counts = Z.kinds(judged)
    assert counts["zoo parses"] >= 40 and counts["record, exporter"] == sum(
        bool(r.record_case) for r in RECIPES.values()
    )
    zoo_rows = [r for r in rows if str(r["source"]).startswith("ZOO ")]
    assert {r["arch"] for r in zoo_rows} <= {"hailo10h", "hailo15h"} and all(str(r["dfc"])[0] == "5" for r in zoo_rows)
    assert {r["origin"] for r in zoo_rows} == {ops.origin("USDA")}
    assert {r["graph"] for r in rows if r["case"] == "benchy-yolov8-det-530"} == {"exporter"}


def test_in_sample_every_judged_case_agrees(combined):
    from weftlib.gate.predict import backtest as B
    from weftlib.rebuild import zoo_backtest as Z

    _, rows, held = combined
    figures = Z.targets(B.agreement(rows), Z.by_origin(held)["all origins"])
    assert Z.unmet(figures, "agreement") == [], figures


def test_coverage_does_not_fall_below_what_it_is(combined):
    """Floors at the figures measured when the zoo joined (in sample 0.80, held out 0.49): a guard against
    regress, not the target (the next test)."""
    from weftlib.gate.predict import backtest as B
    from weftlib.rebuild import zoo_backtest as Z

    _, rows, held = combined
    assert B.agreement(rows)["coverage"] >= 0.8
    assert Z.by_origin(held)["all origins"]["coverage"] >= 0.48


@pytest.mark.xfail(
    strict=True,
    reason="issue 42's coverage targets are not met honestly: the unjudged cases rest on rules no DFC 5.3.0 run "
    "shows (gather_constant_index, batch_axis_windows, channels_last_transpose_nchw, ...), and the zoo's own parses "
    "are DFC 5.2.0, another 5.x than the target's, which the ladder shows and never lets decide alone",
)
def test_coverage_meets_issue_42s_targets(combined):
    from weftlib.gate.predict import backtest as B
    from weftlib.rebuild import zoo_backtest as Z

    _, rows, held = combined
    assert Z.unmet(Z.targets(B.agreement(rows), Z.by_origin(held)["all origins"]), "coverage") == []


def test_holding_the_vendor_out_removes_its_zoo_and_its_tables(combined, ops):
    from weftlib.rebuild import zoo_backtest as Z

    judged, rows, held = combined
    vendor = ops.origin("ZOO x")
    in_sample = {r["case"]: r["agreement"] for r in rows}
    held_out = {r["case"]: r["agreement"] for r in held if r["held out"] == vendor}
    assert set(held_out) == {n for n, j in judged.items() if j.case.source.startswith("ZOO ")}
    # without the vendor's tables, ops only the tables vouch for go unjudged: fewer zoo cases agree
    assert sum(a == "agrees" for a in held_out.values()) < sum(in_sample[n] == "agrees" for n in held_out)
    assert Z.by_origin(held)[vendor]["disagrees"] == 0
