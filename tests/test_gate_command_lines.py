"""What each gate command prints last, tried as a newcomer would: a small conv + LayerNorm + softmax-attention
net exported by torch (opset 17) taken through device, fix, partition, probes, dfc, pair and evidence.

Every command ends with its totals and a `next:` line; the constants and shape arithmetic of a torch export are
one line in `device`'s listing, not one line each, while `--json` keeps every finding.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.test_gate_graphs import attention, const, make, save, tensor
from tests.test_gate_runner import install_double
from weftlib.gate import device_gate, load_device_ops
from weftlib.gate.__main__ import main
from weftlib.gate.compiler.dfc_target import image, opset_word
from weftlib.gate.predict.summary_lines import FOLDED, Split, static_nodes_of

FINDING_WORDS = ("  refused ", "  unjudged ")


def export_net(path: Path, opset: int = 17) -> Path:
    """A user's own model: conv, LayerNorm over tokens, two-head softmax attention, a projection."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, c: int = 16, heads: int = 2) -> None:
            super().__init__()
            self.conv, self.norm = nn.Conv2d(3, c, 3, padding=1), nn.LayerNorm(c)
            self.qkv, self.proj, self.heads = nn.Linear(c, 3 * c), nn.Linear(c, c), heads

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            b, c, h, w = y.shape
            t = self.norm(y.flatten(2).transpose(1, 2))
            q, k, v = (
                z.reshape(b, h * w, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(t).chunk(3, -1)
            )
            a = torch.softmax(q @ k.transpose(-1, -2) / (c // self.heads) ** 0.5, dim=-1)
            return self.proj((a @ v).transpose(1, 2).reshape(b, h * w, c))

    torch.manual_seed(0)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (torch.randn(1, 3, 8, 8),), str(path), opset_version=opset, dynamo=False)
    return path


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    return export_net(tmp_path_factory.mktemp("user") / "net.onnx")


def closing(out: str) -> tuple[str, str]:
    """The totals line and the next line a command printed."""
    lines = out.splitlines()
    totals = [line for line in lines if line.lstrip().startswith("totals")]
    nexts = [line for line in lines if line.startswith("next: ")]
    assert totals and len(nexts) == 1, out
    return totals[0], nexts[0]


def test_device_groups_constants_and_shape_arithmetic_and_leads_to_fix(net, capsys):
    result = device_gate(net, load_device_ops())
    static = static_nodes_of(str(net))
    split = Split.of(result.findings, static)
    assert main(["device", str(net)]) == 1
    out = capsys.readouterr().out
    listing = out.split("\ntotals: ")[0]  # the finding lines, before the totals
    listed = [line for line in listing.splitlines() if line.startswith(FINDING_WORDS)]
    # every refusal on its own line; the unjudged Shapes and shape Gathers as one line (Constant has its entry in the
    # op table, issue 42, so no Constant is a finding at all)
    assert not [f for f in result.findings if f.op == "Constant"]
    assert len(split.folded) >= 3 and {f.op for f in split.folded} >= {"Shape", "Gather"}
    assert len(listed) == len(result.findings) - len(split.folded) + 1
    assert sum(FOLDED in line for line in listed) == 1
    assert not any("[Constant]" in line or "[Shape]" in line for line in listed)
    refused = [f for f in result.findings if f.prediction == "refused"]
    assert refused and all(f"{f.node} [{f.op}] by {f.subject}" in out for f in refused)
    assert "the verdict does not rest on them (FAIL without them)" in out
    totals, step = closing(out)
    assert totals.startswith(f"totals: {result.nodes} nodes: {len(refused)} refused, ")
    assert f"({len({f.node for f in split.folded})} of them {FOLDED})" in totals
    assert "  refused by concat_no_format x1 [Concat]" in out and "  unjudged by op Reshape x" in out
    assert step.startswith(f"next: python -m weftlib.gate fix {net} --out ")
    # the JSON is every finding, as before: grouping is presentation only
    assert main(["device", str(net), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert len(report["findings"]) == len(result.findings) and report["verdict"] == "fail"


def test_constants_that_decide_the_verdict_say_so(tmp_path, capsys):
    """A graph unjudged only because of shape arithmetic (ones of the input's Shape, nothing recorded for either
    op): the grouped line says it decides the verdict."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="/shape"),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], name="/ones", value=const("one", np.ones(1))),
        helper.make_node("Mul", ["x", "ones"], ["y"], name="/mul"),
    ]
    path = save(make(nodes, [tensor("x")], [tensor("y")]), tmp_path / "c.onnx")
    assert main(["device", str(path)]) == 3
    out = capsys.readouterr().out
    assert "THEY DECIDE THE VERDICT: the graph is UNJUDGED only because of them (judged to parse, it would PASS)" in out
    listing = out.split("totals")[0].replace(f"{FOLDED}, grouped (op Shape x1, op ConstantOfShape x1)", "")
    assert "[Shape]" not in listing and "[ConstantOfShape]" not in listing
    assert closing(out)[1].startswith("next: python -m weftlib.gate fix ")


def test_fix_and_partition_end_with_totals_and_what_comes_next(net, tmp_path, capsys):
    assert main(["fix", str(net), "--out", str(tmp_path / "fixed")]) == 1
    out = capsys.readouterr().out
    totals, step = closing(out)
    assert totals.startswith("totals after the fix: ") and " refused, " in totals
    assert step.startswith("next: python -m weftlib.gate probes --out ")
    assert f"then: python -m weftlib.gate partition {net} --out " in out  # refusals no rewrite answers remain
    assert main(["partition", str(net), "--out", str(tmp_path / "cut")]) == 0
    out = capsys.readouterr().out
    totals, step = closing(out)
    assert "device segment(s)" in totals and "host segment(s)" in totals
    assert "  the gate on the whole graph: " in out
    assert step.startswith(f"next: give the DFC each device segment: python -m weftlib.gate dfc {tmp_path / 'cut'}/")
    assert "--start-node-names/--end-node-names" in step and "host segment(s) in onnxruntime" in step


def test_probes_and_evidence_lead_to_the_dfc_and_back(tmp_path, capsys):
    folder = tmp_path / "probes"
    assert main(["probes", "--out", str(folder)]) == 0
    totals, step = closing(capsys.readouterr().out)
    assert totals.startswith("totals: ") and " probe(s)" in totals
    assert f"bash {folder / 'run_dfc.sh'} where Docker and {image()} are" in step
    assert step.endswith(f"python -m weftlib.gate evidence {folder}")
    assert main(["evidence", str(folder)]) == 0
    totals, step = closing(capsys.readouterr().out)
    assert "no DFC result yet x" in totals and "run_dfc.sh" in step


def test_dfc_says_its_image_where_to_get_it_and_the_opset(net, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", None)  # no DFC here
    assert main(["dfc", str(net), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"image: {image()}" in err and "README.md, 'On real checkouts, and with the DFC'" in err
    assert "opset 17: within 11-23" in err
    assert f"next: run a command above where Docker and the image are, then python -m weftlib.gate pair {net}" in err
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## On real checkouts, and with the DFC")[1].split("\n## ")[0]
    assert image() in section and "Developer Zone" in section and "wheel" in section
    # with a DFC (the test double of its client): its errors by class and op, then `pair`
    install_double(monkeypatch, "reject")
    assert main(["dfc", str(net), "--out", str(tmp_path / "r.json")]) == 1
    totals, step = closing(capsys.readouterr().out)
    assert totals.startswith("totals: DFC rejected, 1 error(s) by class UnsupportedSoftmaxLayerError x1")
    assert step.startswith(f"next: python -m weftlib.gate pair {net} --dfc {tmp_path / 'r.json'}")


def test_opset_words_follow_the_record():
    """Opset 20 (a recent torch export's) against the opsets the record gives DFC 5.3.0, and both edges."""
    low, high = load_device_ops().opsets
    assert low <= 20 <= high and opset_word(20).startswith(f"opset 20: within {low}-{high}")
    assert opset_word(low - 1).startswith(f"opset {low - 1}: outside {low}-{high}")
    assert opset_word(high + 1).startswith(f"opset {high + 1}: outside")
    assert "no default-domain opset" in opset_word(None)


def test_pair_leads_to_the_dfc_then_to_the_edits(net, tmp_path, capsys):
    assert main(["pair", str(net)]) == 1
    totals, step = closing(capsys.readouterr().out)
    assert totals.startswith("totals: ") and " refused, " in totals
    assert step == f"next: python -m weftlib.gate dfc {net} --out {net.with_name('net.dfc.json')}"
    result = tmp_path / "net.dfc.json"
    result.write_text(
        json.dumps({"kind": "weftlib.gate/dfc-result", "verdict": "parsed", "model": "net", "har": "net.har"})
    )
    code = main(["pair", str(net), "--dfc", str(result)])
    out = capsys.readouterr().out
    totals, step = closing(out)
    assert code == 1 and "edits: " in out  # the gate refused what the DFC parsed: the listing moves
    assert step.startswith("next: make the edits above to params/device_ops.yaml")


def test_the_export_holds_the_plumbing_the_grouping_is_for(net):
    """The export really is a torch export with the plumbing the grouping is for (a guard on the fixture)."""
    model = onnx.load(str(net))
    ops = [n.op_type for n in model.graph.node]
    assert {"Conv", "LayerNormalization", "Softmax", "Constant", "Shape"} <= set(ops)


def test_a_file_problem_leads_to_a_re_export(tmp_path, capsys):
    """A graph refused for the file itself (an IR above the DFC's checker): no rewrite helps, so no `fix`."""
    path = save(attention(ir=11), tmp_path / "ir11.onnx")
    assert main(["device", str(path)]) == 1
    totals, step = closing(capsys.readouterr().out)
    assert totals.endswith("1 problem(s) of the file itself")
    assert step.startswith("next: re-export the graph")
