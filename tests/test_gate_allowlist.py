"""params/device_ops.yaml: loading, clear errors, and the allowlist checked against its evidence."""

from __future__ import annotations

import copy

import pytest
import yaml

from weftlib.gate import DeviceOpsError, check_recorded_verdicts, evidence_table, load_device_ops, parse_device_ops
from weftlib.gate.allowlist import DEFAULT_PATH
from weftlib.gate.dfc_runner import DFC5_ARCHS


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(DEFAULT_PATH.read_text())


def statuses(data: dict) -> dict[str, str]:
    return {row["op"]: row["status"] for row in evidence_table(parse_device_ops(data))}


def test_the_committed_file_loads_and_holds_the_public_evidence():
    ops = load_device_ops()
    assert {"MatMul", "Softmax", "LayerNormalization", "Erf", "Conv", "Slice", "Concat", "Gather"} <= ops.allowed
    assert {
        "GatherElements",
        "TopK",
        "Mod",
        "ScatterND",
        "Tile",
        "Where",
        "Expand",
        "QuantizeLinear",
        "MatMulInteger",
        "Cast",
        "Sin",
        "Cos",
        "Not",
        "And",
        "Greater",
        "Less",
        "IsInf",
        "IsNaN",
    } <= ops.blockers
    # every source is a public document, never an issue of this project
    sources = [e.source for entry in ops.entries.values() for e in entry.evidence if e.seen != "assumed"]
    sources += [v.source for v in ops.verdicts]
    assert sources and not [s for s in sources if "issue" in s.lower()]
    assert any(v.verdict == "unjudged" and {"Cos", "Sin", "ReduceL2"} <= set(v.contains) for v in ops.verdicts)
    assert not ops.allowed & ops.blockers
    assert (ops.condition("Gather"), ops.condition("Erf"), ops.condition("Softmax")) == (
        "constant_index",
        "gelu_pattern",
        "last_axis",
    )
    assert (ops.max_ir_version, ops.opsets) == (10, (13, 23)) and ops.target_arch in DFC5_ARCHS


def test_committed_allowlist_has_no_contradiction_and_every_verdict_is_explained():
    ops = load_device_ops()
    rows = evidence_table(ops)
    assert not [r["op"] for r in rows if r["status"] == "contradicted"]
    assert [r["op"] for r in rows if r["status"] == "contested"] == ["Concat", "Reshape"]
    assert all(r["explained"] for r in check_recorded_verdicts(ops))


def test_moving_a_rejected_op_into_device_ops_is_a_contradiction(raw):
    data = copy.deepcopy(raw)
    data["device_ops"]["TopK"] = data["known_blockers"].pop("TopK")
    data["device_ops"]["TopK"].pop("reason")
    assert statuses(data)["TopK"] == "contradicted"
    data = copy.deepcopy(raw)
    data["device_ops"]["Tile"] = {"evidence": data["known_blockers"].pop("Tile")["evidence"]}
    unexplained = [r for r in check_recorded_verdicts(parse_device_ops(data)) if not r["explained"]]
    assert [(r["op"], r["verdict"]) for r in unexplained] == [("Tile", "rejected")]


def test_statuses_weigh_target_evidence_only(raw):
    got = statuses(raw)
    assert got["Softmax"] == "supported"  # its hailo8l rejection is another DFC/arch
    assert got["Flatten"] == "off-target only" and got["Squeeze"] == "assumed" and got["Add"] == "documented"
    assert got["Gather"] == "off-target only"  # its one rejection is Hailo-8L, and with a data-dependent index


def test_documented_kind_counts_only_where_nothing_was_observed(raw):
    data = copy.deepcopy(raw)
    doc = {"seen": "documented", "dfc": raw["target"]["dfc"], "arch": "unknown", "source": "vendor table"}
    data["device_ops"]["Squeeze"] = {"evidence": [doc]}
    data["known_blockers"]["NonZero"]["evidence"] = [doc]
    got = statuses(data)
    assert (got["Squeeze"], got["NonZero"]) == ("documented", "documented otherwise")
    # an on-target observation wins over the table: Greater is listed by the vendor, refused by the harness
    rows = {r["op"]: r for r in evidence_table(parse_device_ops(raw))}
    assert rows["Greater"]["status"] == "supported" and "an observation decides" in rows["Greater"]["documented"]
    # and moving Greater into DEVICE_OPS on the table's word is a contradiction, not a documented entry
    data = copy.deepcopy(raw)
    data["device_ops"]["Greater"] = {"evidence": data["known_blockers"].pop("Greater")["evidence"]}
    assert statuses(data)["Greater"] == "contradicted"


def test_on_target_observation_wins_over_off_target_ones(raw):
    data = copy.deepcopy(raw)
    hailo8l = {"seen": "rejected", "dfc": "3.x", "arch": "hailo8l", "source": "off-target run"}
    on_target = {"seen": "parsed", **raw["target"], "source": "on-target run"}
    data["device_ops"]["ReduceMax"] = {"evidence": [hailo8l, on_target]}
    data["known_blockers"].pop("ReduceMax")
    data["recorded_verdicts"] = [v for v in data["recorded_verdicts"] if "ReduceMax" not in v.get("blocked_by", [])]
    assert statuses(data)["ReduceMax"] == "supported"
    data["device_ops"]["ReduceMax"]["evidence"] = [hailo8l]
    assert statuses(data)["ReduceMax"] == "off-target only"


def test_miscompiled_counts_against_an_allowlisting(raw):
    data = copy.deepcopy(raw)
    data["device_ops"]["Cast"] = {"evidence": data["known_blockers"].pop("Cast")["evidence"]}
    assert statuses(data)["Cast"] == "contradicted"


def test_a_parsed_graph_containing_a_blocker_is_unexplained(raw):
    data = copy.deepcopy(raw)
    data["recorded_verdicts"][2]["contains"].append("TopK")
    rows = [r for r in check_recorded_verdicts(parse_device_ops(data)) if not r["explained"]]
    assert [(r["op"], r["finding"]) for r in rows] == [
        ("TopK", "blocker here, yet the graph parsed: the allowlist is too strict")
    ]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(devices_ops={}), "file: unknown key(s) ['devices_ops']"),
        (lambda d: d["device_ops"]["MatMul"].update(evidnce=[]), "device_ops.MatMul: unknown key(s) ['evidnce']"),
        (lambda d: d["device_ops"].update(TopK={"evidence": "assumed"}), "TopK is in both"),
        (lambda d: d["device_ops"]["Gather"].update(condition="constant"), "'constant' is not a condition"),
        (lambda d: d["device_ops"]["MatMul"]["evidence"][0].update(seen="ok"), "evidence[0].seen: 'ok'"),
        (lambda d: d["device_ops"]["MatMul"]["evidence"][0].pop("source"), "missing key(s) ['source']"),
        (lambda d: d["device_ops"]["MatMul"].update(evidence=[]), "write `evidence: assumed`"),
        (lambda d: d["compiler"].update(opsets=[23, 13]), "lowest 23 is above highest 13"),
        (lambda d: d["recorded_verdicts"][0].pop("blocked_by"), "needs `blocked_by`"),
        (lambda d: d["recorded_verdicts"][0].update(verdict="ok"), "verdict: 'ok'"),
        (lambda d: d.pop("known_blockers"), "missing key(s) ['known_blockers']"),
        (lambda d: d.pop("target"), "missing key(s) ['target']"),
        (lambda d: d["target"].pop("arch"), "target: missing key(s) ['arch']"),
    ],
)
def test_bad_entries_are_clear_errors(raw, edit, message):
    data = copy.deepcopy(raw)
    edit(data)
    with pytest.raises(DeviceOpsError) as info:
        parse_device_ops(data, "ops.yaml")
    assert str(info.value).startswith("ops.yaml: ") and message in str(info.value)


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("device_ops: [unclosed\n")
    with pytest.raises(DeviceOpsError, match="not valid YAML"):
        load_device_ops(bad)
    with pytest.raises(DeviceOpsError, match="cannot read"):
        load_device_ops(tmp_path / "missing.yaml")
    bad.write_text("- just a list\n")
    with pytest.raises(DeviceOpsError, match="file: expected a mapping"):
        load_device_ops(bad)


def test_what_the_suite_writes_is_what_the_compiler_reads():
    """The IR version and opset every export and probe carries sit inside the yaml's compiler limits."""
    from weftlib.onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET

    ops = load_device_ops()
    assert WRITTEN_IR_VERSION <= ops.max_ir_version
    assert ops.opsets[0] <= WRITTEN_OPSET <= ops.opsets[1]
