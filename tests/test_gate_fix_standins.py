"""`gate fix` on the faithful DiT block and the faithful NAF upsampler (the stand-ins, exported small as
tests/test_dit.py and tests/test_naf_rewrites.py do): every refusal left is named as unanswered with its
rule, the rewrites that apply answer findings, and each fixed graph is proven equal in onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from weftlib import dit, gate, standins
from weftlib.attention import naf, naf_variants
from weftlib.gate.fix import fix_model, write_fix
from weftlib.gate.run import cutting
from weftlib.onnx_core.export import run_onnx


@pytest.fixture(scope="module")
def faithful(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faithful")
    ops = gate.load_device_ops()
    model = dit.load_flow_model(None, blocks=1, channels=192)
    inputs = dit.example_inputs(model, global_tokens=3)
    variants = dit.exact_variants(model, inputs, names=["faithful"])
    (block,) = dit.evaluate(variants, folder, dit.forward(model, inputs), ops)
    hub = naf.load_hub(standins.NAF_HUB_DIR, "naf", dim=32, kernel_size=3)
    image = torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    features = torch.randn(1, 8, 6, 6, generator=torch.Generator().manual_seed(1))
    prepared = naf_variants.prepare(hub, (24, 24), image, features)
    exports = naf_variants.export_variants(
        prepared,
        folder,
        method="lowres",
        reference="shift",
        atol=1e-4,
        upsampler_variants=["faithful"],
        layer_variants=[],
        workers=1,
        record_from=0,  # at any size: the record's path at a test's size (02 records from NAF's)
    )
    return {"dit": block.report.path, "naf": exports["naf_lowres"].report.path}, ops


ANSWERED = {
    "dit": {"batch_axis_windows", "op:Expand", "op:CastLike", "reshape_5d_to_4d", "head_split_interrupted"},
    "naf": {"op:InstanceNormalization", "op:CastLike", "op:GatherND"},
}


@pytest.mark.parametrize("graph", sorted(ANSWERED))
def test_fix_leaves_only_named_refusals_and_is_proven(faithful, graph, tmp_path):
    paths, ops = faithful
    fix = fix_model(paths[graph], ops)
    answered = {key for a in fix.rewrites for key in a.answers}
    assert ANSWERED[graph] <= answered, answered
    refused = [f for f in fix.after.findings if f.prediction == "refused"]
    assert [(u["node"], u["rule"]) for u in fix.unanswered] == [(f.node, f.key) for f in refused]
    assert all(u["rule"] and u["why"] for u in fix.unanswered)
    before = {f.node for f in fix.before.findings if f.prediction == "refused"}
    assert len(refused) < len(before) or graph == "naf"  # NAF's refusals are in its attention, which no rewrite takes
    assert not ANSWERED[graph] & {f.key for f in fix.after.findings}
    assert fix.proof.proven and len(fix.proof.sets) == 3, fix.proof
    # notebook 06 cuts the fixed graph: every cut of it proven equal to it
    (cut,) = cutting.cut_all([write_fix(fix, tmp_path / "fixed")], ops, tmp_path / "segments").values()
    assert cut.proven and cut.device_segments


def test_the_naf_export_records_its_run_and_the_fix_is_proven_on_it_and_on_the_reduced_graph(faithful, tmp_path):
    from weftlib.gate.fix import recorded
    from weftlib.gate.fix.sets import Geometry, Plan

    paths, ops = faithful
    record, why = recorded.read(paths["naf"])
    assert record is not None, why
    assert [list(a.shape) for a in record.inputs.values()] == [[1, 3, 24, 24], [1, 8, 6, 6]]
    assert list(record.outputs) == ["upsampled"] and record.reduced.suffix == ".pb"  # not a graph of the run
    (again,) = run_onnx(paths["naf"], record.inputs)  # what the exported graph gives on the recorded inputs
    np.testing.assert_allclose(record.outputs["upsampled"], again, rtol=0, atol=1e-6)
    assert not gate.find_models([record.folder])  # 05 and 06 gate, pack and cut none of it
    fix = fix_model(paths["naf"], ops, recorded=True)
    plain = fix_model(paths["naf"], ops)
    assert [a.rewrite for a in fix.rewrites] == [a.rewrite for a in plain.rewrites]
    assert fix.proof.plan == Plan.RECORDED and fix.proof.proven, (fix.proof.plan_note, fix.proof.summary())
    assert [o.geometry for o in fix.proof.origins] == [Geometry.FULL] + [Geometry.REDUCED] * 3
    assert "lr_feats [1, 8, 4, 4]" in fix.proof.origins[1].shapes  # the same model on the kernel size + 1


def test_the_dfc_packs_copy_carries_the_record_so_05s_fix_of_the_copy_proves_on_it(faithful, tmp_path):
    """05 fixes the DFC pack's copies of the graphs, not 02's files: the record must travel with the copy (on the
    appendix it did not, and every NAF fix ran the full proof)."""
    from weftlib.gate.compiler.pack import write_dfc_pack
    from weftlib.gate.fix import recorded
    from weftlib.gate.fix.sets import Plan

    paths, ops = faithful
    pack = write_dfc_pack([paths["naf"]], tmp_path / "pack")
    copy = pack.folder / paths["naf"].name
    record, why = recorded.read(copy)
    assert record is not None, why
    assert fix_model(copy, ops, recorded=True).proof.plan == Plan.RECORDED


def test_a_reduced_graph_that_cannot_be_exported_leaves_no_record_and_says_so(tmp_path):
    from weftlib.attention import naf_records
    from weftlib.gate.fix import recorded

    class Refuses(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no graph at this size")

    folder = tmp_path / "naf_lowres.proof"
    (tmp_path / "naf_lowres.onnx").write_bytes(b"the graph")  # a kept run is bound to its graph: export wrote it first
    naf_records.keeper(folder)({"x": np.zeros(2, np.float32)}, {"y": np.zeros(2, np.float32)})
    with pytest.warns(UserWarning, match="no record for the fix's proof"):
        naf_records.write_reduced(
            Refuses(),
            [torch.zeros(2)],
            folder,
            method="lowres",
            input_names=["x"],
            output_names=["y"],
            builder="",
            atol=1,
            identity={},
        )
    assert not folder.exists()
    assert recorded.read(tmp_path / "naf_lowres.onnx")[0] is None
