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
from weftlib.gate.compiler.dfc_target import image, target
from weftlib.gate.compiler.pack import MANIFEST, SCRIPT, read_pack, write_dfc_pack
from weftlib.gate.compiler.probe_evidence import evidence_diff
from weftlib.gate.compiler.probe_graphs import OP_PROBES, op_probe
from weftlib.gate.compiler.probes import to_probe, write_probes
from weftlib.gate.record.allowlist import DEFAULT_PATH, parse_device_ops

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


EXTRA = ["Cast", "InstanceNormalization", "HardSwish", "Add"]  # as an export's op list would name them


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return write_probes(tmp_path_factory.mktemp("probes") / "pack", load_device_ops(), extra=EXTRA)


def test_every_unjudged_op_and_rule_is_probed_or_named(pack):
    ops = load_device_ops()
    wanted = to_probe(ops, EXTRA)
    probed = {("op:" if p.subject == "op" else "") + p.name for p in pack.probes}
    assert probed | set(pack.unbuilt) == set(wanted)  # nothing dropped silently, nothing asked twice
    assert {"op:Mod", "op:InstanceNormalization", "op:Flatten", "op:Unsqueeze"} <= probed
    assert {"input_rank_5", "lone_transpose_0213", "head_split_sliced", "rotate_half_partial"} <= probed
    assert {"input_rank_1", "rotate_half", "image_to_tokens"} <= probed  # predictions that rest on an inference
    assert "NOT" not in pack.unbuilt and "op:HardSwish" in pack.unbuilt
    assert not {"op:Add", "op:Cast", "op:MatMul", "head_split_glued"} & set(wanted)  # observed: not asked again


def test_op_probes_sit_between_two_convs_and_rule_probes_exhibit_their_rule(pack):
    for probe in pack.probes:
        model = onnx.load(str(pack.folder / probe.file))
        onnx.checker.check_model(model, full_check=True)
        nodes = model.graph.node
        assert all(n.name for n in nodes) and model.graph.input, probe.file
        assert probe.nodes and set(probe.nodes) <= {n.name for n in nodes} | {i.name for i in model.graph.input}
        if probe.subject == "op":
            assert (nodes[0].op_type, nodes[-1].op_type) == ("Conv", "Conv"), probe.file
            assert len(model.graph.input[0].type.tensor_type.shape.dim) == 4


def test_probes_out_refuses_a_folder_it_did_not_write_and_replaces_its_own(tmp_path):
    ops = load_device_ops()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "manifest.json").write_text('{"mine": true}')
    (theirs / "run_dfc.sh").write_text("echo the user's own\n")
    with pytest.raises(ValueError, match="not empty and not a probe pack"):
        write_probes(theirs, ops)
    assert (theirs / "run_dfc.sh").read_text() == "echo the user's own\n" and len(list(theirs.iterdir())) == 2
    assert main(["probes", "--out", str(theirs)]) == 2
    ours = tmp_path / "ours"
    first = write_probes(ours, ops)
    result = ours / f"{first.probes[0].stem}.dfc.json"
    result.write_text("{}")  # the DFC's result of a probe the next pack leaves unchanged (issue 35: it is kept)
    write_probes(ours, ops)
    assert result.read_text() == "{}" and read_pack(ours)["probes"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no build or old folder left behind


def test_manifest_and_script_are_relative_and_copyable(pack):
    manifest = read_pack(pack.folder)
    assert manifest["graphs"] == [p.file for p in pack.probes] and manifest["image"] == image()
    script = (pack.folder / SCRIPT).read_text()
    assert str(pack.folder) not in script and '"$HERE:/pack"' in script
    assert script.count("docker run") == len(pack.probes)
    assert (pack.folder / "dfc_tool" / "weftlib" / "gate" / "compiler" / "dfc_runner.py").is_file()
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
        "from weftlib.gate.compiler.dfc_runner import main\n"
        f"sys.exit(main([{str(pack.folder / pack.probes[0].file)!r}, '--arch', 'hailo10h', '--out', {str(tmp_path / 'r.json')!r}]))\n"
    )
    env = {"PYTHONPATH": str(pack.folder / "dfc_tool"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
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
        "probe_Mod": "reject probe/Mod",
        "probe_rule_input_rank_5": "input layers",
        "probe_Unsqueeze": "inconclusive",
        "probe_rule_head_split_sliced": "reject probe/pre/MatMul",
    }
    run_pack(pack.folder, [p.file for p in pack.probes], monkeypatch, verdicts)
    # an unbound result (no graph hash) about another model in a probe's place is refused, not counted (a bound
    # one refuses the whole folder: tests/test_gate_results_bound.py)
    other = json.loads((pack.folder / "probe_Mod.dfc.json").read_text())
    (pack.folder / "probe_Flatten.dfc.json").write_text(json.dumps({**other, "model": "full", "sha256": None}))
    diff, rows = evidence_diff(pack.folder)
    found = {r["subject"]: r["finding"] for r in rows}
    assert found["op Mod"] == "rejected" and found["lone_transpose_0213"] == "parsed"
    assert found["input_rank_5"].startswith("unjudged: before operators")
    assert found["op Unsqueeze"].startswith("unjudged: inconclusive")
    assert found["head_split_sliced"].startswith("unjudged: the DFC rejected ['probe/pre/MatMul'], not the nodes")
    assert found["op Flatten"].startswith("refused")
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    # only the evidence lists that gained an item change; every comment and every other line stays as it was
    assert removed and all("evidence" in line for line in removed)
    assert all(
        line in apply_unified(DEFAULT_PATH.read_text(), diff)
        for line in DEFAULT_PATH.read_text().splitlines()
        if line.lstrip().startswith("#")
    )
    assert any('"rejected"' in line and "probe_Mod.onnx" in line for line in added)
    assert any('"parsed"' in line and "probe_rule_lone_transpose_0213.onnx" in line for line in added)
    assert not any(f"probe_{s}.onnx" in line for line in added for s in ("rule_input_rank_5", "Unsqueeze", "Flatten"))
    # the diff applies, the file it gives still loads, and the new observations move the predictions
    ops = parse_device_ops(yaml.safe_load(apply_unified(DEFAULT_PATH.read_text(), diff)), "patched")
    from weftlib.gate.record.standing import op_standing, rule_standing

    assert rule_standing("lone_transpose_0213", ops).prediction == "parse"  # a 5.3.0 parse now decides
    assert op_standing("Mod", ops).prediction == "refused"
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
    with pytest.raises(ValueError, match=r"no readable manifest\.json"):
        read_pack(tmp_path)
    assert main(["evidence", str(tmp_path / "nowhere")]) == 2


def test_probes_cli_writes_the_pack(tmp_path, capsys):
    assert main(["probes", "--out", str(tmp_path / "p"), "--extra", "Cast", "GridSample", "HardSwish"]) == 0
    out = capsys.readouterr().out
    assert "run_dfc.sh" in out and "probe_rule_input_rank_5.onnx" in out and "NOT PROBED op:HardSwish" in out
    assert "GridSample" not in out  # refused on the target already: nothing to ask
    assert (tmp_path / "p" / MANIFEST).is_file()


def test_op_builders_cover_the_ops_the_suites_exports_leave_unjudged():
    for op in ("Unsqueeze", "Flatten", "Mod", "InstanceNormalization", "Constant", "ConstantOfShape", "Resize"):
        assert op in OP_PROBES, op
    model, note = op_probe("Flatten")
    assert note == "then a Reshape back to rank 4" and model.graph.node[1].op_type == "Flatten"


def test_evidence_refuses_a_malformed_pack_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / MANIFEST).write_text(json.dumps({"kind": "weftlib.gate/dfc-pack", "probes": [{"subject": "op"}]}))
    assert main(["evidence", str(bad)]) == 2
    assert "malformed" in capsys.readouterr().err
    (bad / MANIFEST).write_text(json.dumps({"kind": "weftlib.gate/dfc-pack", "probes": ["x"]}))
    assert main(["evidence", str(bad)]) == 2
    (bad / MANIFEST).write_text(json.dumps(["not", "a", "manifest"]))
    assert main(["evidence", str(bad)]) == 2
    entry = {"subject": "op", "name": "Mod", "file": "../../etc/passwd", "why": "x", "nodes": []}
    (bad / MANIFEST).write_text(json.dumps({"kind": "weftlib.gate/dfc-pack", "probes": [entry]}))
    assert main(["evidence", str(bad)]) == 2
    assert "not a graph of the pack folder" in capsys.readouterr().err


def test_an_out_folder_that_cannot_be_written_is_exit_2(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    assert main(["probes", "--out", str(blocker / "pack")]) == 2
    assert main(["probes", "--out", str(blocker)]) == 2
    model = save(attention(), tmp_path / "attn.onnx")
    assert main(["dfc", str(model), "--out", str(blocker / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 3 and "Traceback" not in err
