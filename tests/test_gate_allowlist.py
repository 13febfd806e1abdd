"""params/device_ops.yaml: loading, clear errors, and the listing checked against its evidence."""

from __future__ import annotations

import copy

import pytest
import yaml

from weftlib import yaml_text
from weftlib.gate import DeviceOpsError, contradictions, evidence_table, load_device_ops, parse_device_ops
from weftlib.gate.compiler.dfc_runner import DFC5_ARCHS
from weftlib.gate.predict.rules import RULES
from weftlib.gate.record.allowlist import DEFAULT_PATH


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(DEFAULT_PATH.read_text())


def predictions(data: dict) -> dict[str, str]:
    return {row["name"]: row["prediction"] for row in evidence_table(parse_device_ops(data))}


def test_the_committed_file_loads_and_holds_the_public_record():
    ops = load_device_ops()
    assert set(ops.rules) == set(RULES), "every detector has an evidence entry and every entry a detector"
    assert {"MatMul", "Softmax", "LayerNormalization", "Erf", "Conv", "Slice", "Concat", "ReduceMax"} <= ops.allowed
    assert {"GatherElements", "TopK", "ScatterND", "Tile", "Where", "Expand", "Cast", "Sin", "Cos"} <= ops.blockers
    # every source is a public document, never an issue of this project
    sources = [e.source for entry in ops.entries.values() for e in entry.evidence if e.seen != "assumed"]
    sources += [e.source for rule in ops.rules.values() for e in rule.evidence] + [c.source for c in ops.cases.values()]
    assert sources and not [s for s in sources if "issue" in s.lower()]
    assert not ops.allowed & ops.blockers
    # opset 11: exports of that opset compiled on DFC 5.3.0 (public_record's benchy-/ne503-yolov8-det-530)
    assert (ops.max_ir_version, ops.opsets) == (10, (11, 23)) and ops.target_arch in DFC5_ARCHS
    # the record's own corrections are carried: the standalone Erf refusal is retracted, ReduceMax is no blocker
    (erf,) = ops.rules["erf_standalone"].evidence
    assert erf.retracted and "artefact" in erf.retracted
    assert ops.status("ReduceMax") == "allowed" and ops.entries["ReduceMax"].by_pattern


def test_committed_listing_has_no_contradiction():
    assert contradictions(load_device_ops()) == []


def test_predictions_follow_the_weighing(raw):
    got = predictions(raw)
    assert got["head_split_glued"] == "parse" and got["head_split_interrupted"] == "refused"
    assert got["input_rank_1"] == "refused" and got["input_rank_3"] == "parse" and got["input_rank_5"] == "unjudged"
    assert got["reshape_5d_to_4d"] == "refused"  # DFC 5.3.0 (inferred) and 5.4.0 agree
    assert got["lone_transpose_0213"] == "unjudged"  # refused on DFC 5.4.0 only: not the target
    assert got["Add"] == "parse" and got["Mod"] == "unjudged"  # Mod: Hailo-8L evidence only, not weighed
    assert got["Reshape"] == "by pattern" and got["Expand"] == "refused"


def test_moving_a_rejected_op_into_device_ops_is_a_contradiction(raw):
    data = copy.deepcopy(raw)
    data["device_ops"]["TopK"] = data["known_blockers"].pop("TopK")
    data["device_ops"]["TopK"].pop("reason")
    assert [r["name"] for r in contradictions(parse_device_ops(data))] == ["TopK"]


def test_miscompiled_counts_against_an_allowlisting(raw):
    data = copy.deepcopy(raw)
    data["device_ops"]["Cast"] = {"evidence": data["known_blockers"].pop("Cast")["evidence"]}
    assert [r["name"] for r in contradictions(parse_device_ops(data))] == ["Cast"]


def test_a_blocker_the_evidence_says_parses_is_a_contradiction(raw):
    data = copy.deepcopy(raw)
    data["known_blockers"]["Add"] = data["device_ops"].pop("Add")
    assert [r["name"] for r in contradictions(parse_device_ops(data))] == ["Add"]


def test_case_evidence_takes_the_cases_version_arch_and_source():
    ops = load_device_ops()
    (item,) = ops.rules["head_split_interrupted"].evidence
    case = ops.cases["llm-qk-norm"]
    assert (item.case, item.dfc, item.arch) == ("llm-qk-norm", case.dfc, case.arch)
    assert item.source.startswith(case.source) and "[llm-qk-norm]" in item.source


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(devices_ops={}), "file: unknown key(s) ['devices_ops']"),
        (lambda d: d["device_ops"]["MatMul"].update(evidnce=[]), "device_ops.MatMul: unknown key(s) ['evidnce']"),
        (lambda d: d["device_ops"].update(TopK={"evidence": "assumed"}), "TopK is in both"),
        (lambda d: d["device_ops"]["Add"]["evidence"][0].update(seen="ok"), "evidence[0].seen: 'ok'"),
        (lambda d: d["device_ops"]["Tanh"]["evidence"][0].pop("source"), "missing key(s) ['source']"),
        (lambda d: d["device_ops"]["MatMul"].update(evidence=[]), "write `evidence: assumed`"),
        (
            lambda d: d["device_ops"]["MatMul"]["evidence"][0].update(case="nowhere"),
            "'nowhere' is not in public_record",
        ),
        (
            lambda d: d["device_ops"]["MatMul"]["evidence"][0].update(case="llm-qk-norm"),
            "seen: parsed, yet case 'llm-qk-norm' was refused",
        ),
        (lambda d: d["device_ops"]["Softmax"].update(by_pattern="yes"), "by_pattern: expected true or false"),
        (lambda d: d["graph_rules"]["conv_rank_5"].pop("note"), "say in `note` what the record leaves silent"),
        (lambda d: d["public_record"]["llm-qk-norm"].update(outcome="bad"), "outcome: 'bad'"),
        (lambda d: d["public_record"]["qvl-block-tokens"].update(stage="deploy"), "stage: 'deploy'"),
        (lambda d: d["public_record"]["qvl-block-tokens"].update(refused_at=["x"]), "a parsed graph names no refused"),
        (lambda d: d["compiler"].update(opsets=[23, 13]), "lowest 23 is above highest 13"),
        (lambda d: d.pop("known_blockers"), "missing key(s) ['known_blockers']"),
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


@pytest.mark.parametrize("libyaml", [True, False])
def test_libyaml_or_pure_python_read_the_same_allowlist_and_refuse_deep_nesting_alike(libyaml, tmp_path, monkeypatch):
    """The file is read by libyaml where PyYAML has it (every gate command reads it): the same allowlist as
    PyYAML's pure-Python reading, and a document nested past either reader's reach is one sentence either way."""
    if libyaml and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML without libyaml")
    if not libyaml:
        monkeypatch.setattr(yaml_text, "SAFE_LOADER", yaml.SafeLoader)
    pure_python = parse_device_ops(yaml.safe_load(DEFAULT_PATH.read_text()), str(DEFAULT_PATH))
    seen = []
    real_load = yaml.load
    monkeypatch.setattr(yaml, "load", lambda text, Loader: seen.append(Loader) or real_load(text, Loader=Loader))
    assert load_device_ops() == pure_python
    assert seen == [yaml.CSafeLoader if libyaml else yaml.SafeLoader]
    deep = tmp_path / "deep.yaml"
    deep.write_text("device_ops: " + "[" * 20_000)
    with pytest.raises(DeviceOpsError, match=r"nested deeper than YAML can be read; not an allowlist$"):
        load_device_ops(deep)


def test_what_the_suite_writes_is_what_the_compiler_reads():
    """The IR version and opset every export and probe carries sit inside the yaml's compiler limits."""
    from weftlib.onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET

    ops = load_device_ops()
    assert ops.max_ir_version >= WRITTEN_IR_VERSION
    assert ops.opsets[0] <= WRITTEN_OPSET <= ops.opsets[1]


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: d["target"].update(hw="x", dfx="y"),
            "target: unknown key(s) ['dfx', 'hw']; valid keys: ['arch', 'dfc']",
        ),
        (lambda d: d["compiler"].update(max_ir_version="10"), "compiler.max_ir_version: expected an integer, got '10'"),
        (lambda d: d["compiler"].update(opsets=[13]), "compiler.opsets: expected [lowest, highest], got [13]"),
        (lambda d: d.pop("compiler"), "file: missing key(s) ['compiler']"),
        (lambda d: d["compiler"].pop("max_ir_version"), "compiler: missing key(s) ['max_ir_version']"),
        (
            lambda d: d["device_ops"].update({"_Add": {"evidence": "assumed"}}),
            "device_ops._Add: an op name must be an ONNX op type",
        ),
        (lambda d: d["device_ops"]["MatMul"].update(evidence=None), "device_ops.MatMul.evidence: expected a list"),
        (lambda d: d["compile_record"][0].update(params=1.5), "compile_record[0].params: expected an integer"),
        (lambda d: d["target"].update(dfc=""), "target.dfc: expected a non-empty string"),
        (lambda d: d["sources"]["QVL"].pop("origin"), "sources.QVL: missing key(s) ['origin']"),
        (lambda d: d["sources"].update(QVL="a source in full"), "sources.QVL: expected a mapping, got str"),
        (
            lambda d: d["public_record"]["qvl-block-tokens"].update(source="NOBODY (x.py)"),
            "public_record.qvl-block-tokens.source: 'NOBODY' is not in `sources`",
        ),
    ],
)
def test_the_schema_names_the_place_and_what_is_valid(raw, edit, message):
    """The pydantic models' errors read as the file's own places and words (strict integers, required limits)."""
    data = copy.deepcopy(raw)
    edit(data)
    with pytest.raises(DeviceOpsError) as info:
        parse_device_ops(data, "ops.yaml")
    assert f"ops.yaml: {message}" in str(info.value)


def test_every_problem_is_named_at_once(raw):
    data = copy.deepcopy(raw)
    data["device_ops"]["Add"]["evidence"][0]["seen"] = "ok"
    data["known_blockers"]["TopK"]["by_pattern"] = "yes"
    with pytest.raises(DeviceOpsError) as info:
        parse_device_ops(data, "ops.yaml")
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and all(line.startswith("ops.yaml: ") for line in lines)


def test_an_allowlist_from_names_takes_the_committed_target_and_limits():
    from weftlib.gate.record.allowlist import DeviceOps

    ops, committed = DeviceOps.from_names(["Add"]), load_device_ops()
    assert (ops.target_dfc, ops.max_ir_version, ops.opsets) == (
        committed.target_dfc,
        committed.max_ir_version,
        committed.opsets,
    )
    assert ops.allowed == {"Add"} and ops.status("Add") == "allowed"
