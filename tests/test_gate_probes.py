"""The probe pack and the evidence edit, with the DFC's Python API replaced by the TEST DOUBLE of
tests/test_gate_runner.py (it proves the plumbing, never anything about the real compiler)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import onnx
import pytest
import yaml

from tests.test_gate_graphs import attention, save
from tests.test_gate_runner import ParsingWithRecommendationException
from weftlib.gate import load_device_ops, run_dfc
from weftlib.gate.__main__ import main
from weftlib.gate.dfc_runner import image, target
from weftlib.gate.allowlist import DEFAULT_PATH, parse_device_ops
from weftlib.gate.probes import (
    BUILDERS,
    MANIFEST,
    SCRIPT,
    evidence_diff,
    ops_to_probe,
    probe_model,
    read_pack,
    write_dfc_pack,
    write_probes,
)

DFC, ARCH = target()  # the allowlist's target (params/device_ops.yaml)


def install_dfc(monkeypatch, verdicts: dict[str, str]) -> None:
    """A fake hailo_sdk_client: per model name, "parse", "reject <node>" (real DFC message format),
    "input layers" (the RFD 1154 failure) or "inconclusive" (the harness artefact of gen_op_tests.py)."""

    class UnsupportedModelError(Exception):
        pass

    class InvalidHNError(Exception):
        pass

    class ClientRunner:
        def __init__(self, hw_arch):
            self.arch = hw_arch

        def translate_onnx_model(self, path, name, **kwargs):
            what = verdicts.get(name, "parse")
            if what.startswith("reject "):
                node = what.split(" ", 1)[1]
                raise ParsingWithRecommendationException(
                    "Parsing failed. The errors found in the graph are:\n"
                    f" UnsupportedShuffleLayerError in op {node}: Failed to determine type of layer to create in "
                    f"node {node}\n"
                )
            if what == "input layers":
                raise UnsupportedModelError("_add_input_layers: output_format is None")
            if what == "inconclusive":
                raise InvalidHNError("The original node name Y in end_node_names is missing in the HN")
            return object(), {}

        def save_har(self, path):
            Path(path).write_bytes(b"HAR test double")

    client = types.ModuleType("hailo_sdk_client")
    client.ClientRunner = ClientRunner
    client.__version__ = DFC
    UnsupportedModelError.__module__ = "hailo_sdk_common.hailo_nn.exceptions"
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", client)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return write_probes(tmp_path_factory.mktemp("probes"), load_device_ops(), extra=["Cast"])


def test_every_unjudged_op_is_probed_or_named(pack):
    ops = load_device_ops()
    wanted = ops_to_probe(ops, ["Cast"])
    probed = {p.op for p in pack.probes}
    assert probed | set(pack.unbuilt) >= set(wanted)  # nothing dropped silently
    assert {"Add", "ReduceSum", "Resize", "ReduceL2", "Reshape", "Concat", "Gather", "ReduceMax", "Cast"} <= probed
    assert "MatMul" not in wanted  # observed on the target: not asked again
    gather = {p.variant: p.condition_met for p in pack.probes if p.op == "Gather"}
    assert gather == {"condition met": True, "condition broken": False}


def test_each_probe_is_the_op_between_two_convs_named_and_checker_clean(pack):
    for probe in pack.probes:
        model = onnx.load(str(pack.folder / probe.file))
        onnx.checker.check_model(model, full_check=True)
        nodes = model.graph.node
        assert (nodes[0].op_type, nodes[-1].op_type) == ("Conv", "Conv"), probe.file
        assert all(n.name for n in nodes)
        assert any(n.name == f"probe/{probe.op}" for n in nodes), probe.file
        (x,) = model.graph.input
        assert len(x.type.tensor_type.shape.dim) == 4  # image-shaped: the parser can read it


def test_manifest_and_script_are_relative_and_copyable(pack):
    manifest = read_pack(pack.folder)
    assert manifest["graphs"] == [p.file for p in pack.probes] and manifest["image"] == image()
    script = (pack.folder / SCRIPT).read_text()
    assert str(pack.folder) not in script and '"$HERE:/pack"' in script
    assert script.count("docker run") == len(pack.probes)
    assert (pack.folder / "dfc_tool" / "weftlib" / "gate" / "dfc_runner.py").is_file()
    subprocess.run(["bash", "-n", str(pack.folder / SCRIPT)], check=True)  # valid bash


def test_the_packed_tool_runs_alone_with_the_double(pack, tmp_path):
    """The copy in dfc_tool imports without the rest of weftlib (no yaml, pandas): run it in a clean process."""
    code = (
        "import sys, types; from pathlib import Path\n"
        "c = types.ModuleType('hailo_sdk_client')\n"
        "class R:\n"
        "    def __init__(self, hw_arch): pass\n"
        "    def translate_onnx_model(self, *a, **k): return None, {}\n"
        "    def save_har(self, p): Path(p).write_bytes(b'x')\n"
        "c.ClientRunner = R; sys.modules['hailo_sdk_client'] = c\n"
        "from weftlib.gate.dfc_runner import main\n"
        f"sys.exit(main([{str(pack.folder / 'probe_Add.onnx')!r}, '--out', {str(tmp_path / 'r.json')!r}]))\n"
    )
    env = {"PYTHONPATH": str(pack.folder / "dfc_tool"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "parsed"


def run_pack(folder: Path, names: list[str], monkeypatch, verdicts: dict[str, str]) -> None:
    """What run_dfc.sh does in the image, here with the double: one JSON result beside each graph."""
    install_dfc(monkeypatch, verdicts)
    for name in names:
        stem = Path(name).stem
        (folder / f"{stem}.dfc.json").write_text(run_dfc(folder / name, ARCH).to_json())


def test_evidence_turns_probe_results_into_the_yaml_diff(pack, monkeypatch, capsys):
    verdicts = {
        "probe_Reshape": "reject probe/Reshape",
        "probe_ReduceSum": "input layers",
        "probe_Resize": "inconclusive",
        "probe_Concat": "reject probe/pre_Conv",
    }
    run_pack(pack.folder, [p.file for p in pack.probes], monkeypatch, verdicts)
    # a result about another model in a probe's place is refused, not counted
    (pack.folder / "probe_Pad.dfc.json").write_text(
        (pack.folder / "probe_Add.dfc.json").read_text().replace('"probe_Add"', '"full"')
    )
    diff, rows = evidence_diff(pack.folder)
    found = {(r["op"], r["variant"]): r["finding"] for r in rows}
    assert found[("Add", "")] == "parsed" and found[("Reshape", "")] == "rejected"
    assert found[("ReduceSum", "")].startswith("unjudged: before operators")
    assert found[("Resize", "")].startswith("unjudged: inconclusive")
    assert found[("Concat", "")].startswith("unjudged: the DFC rejected ['Conv'] around the op")
    assert found[("Pad", "")].startswith("refused")
    added = [line for line in diff.splitlines() if line.startswith("+      - ")]
    assert any('seen: "parsed"' in line and "probe_Add.onnx" in line for line in added)
    assert any('seen: "rejected"' in line and "probe_Reshape.onnx" in line for line in added)
    assert not any(f"probe_{op}.onnx" in line for line in added for op in ("ReduceSum", "Resize", "Pad", "Concat"))
    assert any("condition_met: true" in line and "probe_Gather_met" in line for line in added)
    # the diff applies, and the file it gives still loads: the edit is ready to commit
    new_text = apply_unified(DEFAULT_PATH.read_text(), diff)
    ops = parse_device_ops(yaml.safe_load(new_text), "patched")
    assert any(e.source.startswith("weftlib.gate probes: probe probe_Add.onnx") for e in ops.entries["Add"].evidence)
    assert main(["evidence", str(pack.folder)]) == 0
    assert '+      - {seen: "parsed"' in capsys.readouterr().out


def apply_unified(text: str, diff: str) -> str:
    """Apply a unified diff produced by difflib (hunks in order) to `text`."""
    import re

    lines, out, i = text.splitlines(True), [], 0
    hunk_lines = diff.splitlines(True)[2:]
    for line in hunk_lines:
        if m := re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line):
            start = int(m.group(1)) - 1
            out += lines[i:start]
            i = start
        elif line.startswith("+"):
            out.append(line[1:])
        elif line.startswith("-"):
            i += 1
        elif line.startswith(" "):
            out.append(lines[i])
            i += 1
    return "".join(out + lines[i:])


def test_pack_of_exported_graphs_and_bad_folders(tmp_path):
    (tmp_path / "src").mkdir()
    a = save(attention(), tmp_path / "src" / "attn.onnx")
    pack = write_dfc_pack([a], tmp_path / "pack")
    assert pack.graphs == ("attn.onnx",) and (pack.folder / "attn.onnx").is_file()
    with pytest.raises(ValueError, match="two graphs are named"):
        write_dfc_pack([a, a], tmp_path / "pack2")
    with pytest.raises(FileNotFoundError):
        write_dfc_pack([tmp_path / "none.onnx"], tmp_path / "pack3")
    with pytest.raises(ValueError, match="no readable manifest.json"):
        read_pack(tmp_path)
    assert main(["evidence", str(tmp_path / "nowhere")]) == 2


def test_probes_cli_writes_the_pack(tmp_path, capsys):
    assert main(["probes", "--out", str(tmp_path / "p"), "--extra", "Cast", "GridSample"]) == 0
    out = capsys.readouterr().out
    assert "run_dfc.sh" in out and "probe_Cast.onnx" in out and "NOT PROBED GridSample: no probe builder" in out
    assert (tmp_path / "p" / MANIFEST).is_file()


def test_probe_builders_cover_the_suites_export_ops():
    """Every op the device gate allowlists in the suite's attention and conv exports has a probe builder."""
    for op in (
        "MatMul",
        "Softmax",
        "Transpose",
        "Reshape",
        "Add",
        "Mul",
        "Div",
        "Sub",
        "ReduceSum",
        "Slice",
        "Pad",
        "Concat",
        "Conv",
        "Resize",
        "Gather",
        "Erf",
        "LayerNormalization",
        "Unsqueeze",
        "Squeeze",
    ):
        assert any(o == op for o, _ in BUILDERS), op
    model, note = probe_model("Softmax", "condition broken")
    assert note == "over axis 1"
