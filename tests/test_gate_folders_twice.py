"""The gate's commands lose nothing (issue 35): `partition` and `probes`, and notebook 05's and 06's packs,
written twice into the same folder with DFC results and a user's files put there between the two runs; and no
device segment of any cut is a graph the gate fails. Every graph is built here."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from tests.conftest import REPO
from tests.test_gate_graph_checks import conv, model, relu
from tests.test_gate_partition import chain
from tests.test_gate_probes import save
from weftlib.gate import device_gate
from weftlib.gate.__main__ import main
from weftlib.gate.compiler.dfc_target import default_arch
from weftlib.gate.compiler.pack import MANIFEST, write_dfc_pack
from weftlib.gate.compiler.probes import write_probes
from weftlib.gate.cut.partition import WHOLE_FILE, write_partition
from weftlib.gate.folder_swap import MARKER
from weftlib.gate.run.cutting import cut_all, pack_cuts
from weftlib.gate.vocabulary import Side


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_partition_twice_into_one_folder_keeps_the_results_and_the_users_files(tmp_path, capsys):
    path = save(chain("m", ["conv", "sin", "conv"]), tmp_path / "m.onnx")
    out = tmp_path / "parts"
    assert main(["partition", str(path), "--out", str(out)]) == 0
    (out / "m.cut00.dfc.json").write_text('{"verdict": "parsed"}')
    (out / "notes.txt").write_text("the user's")
    first = json.loads((out / "partition.json").read_text())
    assert main(["partition", str(path), "--out", str(out)]) == 0
    assert (out / "m.cut00.dfc.json").read_text() == '{"verdict": "parsed"}' and (out / "notes.txt").exists()
    assert json.loads((out / "partition.json").read_text()) == first and hidden(tmp_path) == []
    assert all((out / s["file"]).is_file() for s in first["segments"])


def test_a_second_cut_into_the_first_cuts_folder_keeps_its_input(tmp_path, capsys):
    out = tmp_path / "parts"
    assert (
        main(["partition", str(save(chain("m", ["conv", "sin", "conv"]), tmp_path / "m.onnx")), "--out", str(out)]) == 0
    )
    segment = out / "m.00.device.onnx"
    before = segment.read_bytes()
    assert main(["partition", str(segment), "--out", str(out)]) == 0
    assert segment.read_bytes() == before and (out / "m.00.device.00.device.onnx").is_file()
    assert not (out / "m.01.host.onnx").exists()  # the first cut's own files went; its input stayed


def test_a_users_folder_holding_a_partition_json_is_not_deleted(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "partition.json").write_text("the user's own")
    (theirs / "data.bin").write_bytes(b"\0" * 8)
    path = save(chain("m", ["conv"]), tmp_path / "m.onnx")
    assert main(["partition", str(path), "--out", str(theirs)]) == 2
    assert "not a partition of this suite" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in theirs.iterdir()) == ["data.bin", "partition.json"]


def test_out_as_a_link_is_written_through_and_out_dot_is_refused_by_name(tmp_path, monkeypatch, capsys):
    path = save(chain("m", ["conv"]), tmp_path / "m.onnx")
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    assert main(["partition", str(path), "--out", str(link)]) == 0
    assert link.is_symlink() and (real / "partition.json").is_file()
    assert main(["partition", str(path), "--out", str(link)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "m.onnx", "real"]  # no dangling .old-* link
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["partition", "m.onnx", "--out", "."]) == 2
    assert "error: . is the current folder" in one_line(capsys.readouterr().err)


_KILLED_PARTITION = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {repo!r})
from weftlib.gate.cut import partition
def slow_proof(*args, **kwargs):
    print("proving", flush=True)
    time.sleep(60)
partition.prove = slow_proof
from weftlib.gate.__main__ import main
sys.exit(main(["partition", {model!r}, "--out", {out!r}]))
"""


def test_a_killed_partition_leaves_no_half_built_folder(tmp_path, capsys):
    path = save(chain("m", ["conv", "sin", "conv", "sin", "conv"]), tmp_path / "m.onnx")
    out = tmp_path / "parts"
    assert main(["partition", str(path), "--out", str(out)]) == 0
    before = sorted(p.name for p in out.iterdir())
    script = _KILLED_PARTITION.format(repo=str(REPO), model=str(path), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "proving"  # the segments are written
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert hidden(tmp_path) == [] and sorted(p.name for p in out.iterdir()) == before
    assert proc.returncode == 130 and "interrupted (SIGTERM)" in err


@pytest.mark.parametrize("limit, reason", [(dict(ir=12), "IR version 12 > 10"), (dict(opset=24), "opset 24 outside")])
def test_a_file_the_gate_fails_whole_has_no_device_segment(limit, reason, tmp_path, capsys):
    path = save(model([conv("x", "c", "/C"), relu("c", "y", "/R")], **limit), tmp_path / "m.onnx")
    assert main(["device", str(path)]) == 1 and reason in capsys.readouterr().out
    out = tmp_path / "parts"
    assert main(["partition", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 device segment(s) of 1" in printed and f"no device segment: {WHOLE_FILE}{reason}" in printed
    report = json.loads((out / "partition.json").read_text())
    assert [s["runs_on"] for s in report["segments"]] == ["host"] and report["proven"]
    assert set(report["moved_to_host"]) == {"/C", "/R"}


def test_no_device_segment_of_any_cut_is_a_graph_the_gate_fails(ops, tmp_path):
    graphs = [
        chain("middle", ["conv", "relu", "sin", "conv"]),
        chain("two", ["conv", "sin", "conv", "hardswish", "conv"]),
        chain("start", ["sin", "conv", "relu", "conv"]),
        model([conv("x", "c", "/C"), relu("c", "y", "/R")], ir=12),
        model([conv("x", "c", "/C"), relu("c", "y", "/R")], opset=24),
        model([conv("x", "c", "/C"), relu("c", "y", "/R")]),
    ]
    devices = 0
    for i, graph in enumerate(graphs):
        path = save(graph, tmp_path / f"g{i}.onnx")
        part = write_partition(path, ops, tmp_path / f"g{i}")
        for s in part.device_segments:
            devices += 1
            verdict = device_gate(tmp_path / f"g{i}" / s.file, ops)
            assert verdict.verdict != "fail", (s.file, verdict.problems, verdict.findings)
    assert devices >= 5  # the graphs the gate passes do have device segments


def test_probes_twice_keep_the_results_and_refuse_a_result_of_a_changed_probe(ops, tmp_path):
    out = tmp_path / "probes"
    first = write_probes(out, ops)
    probe = first.probes[0]
    (out / f"{probe.stem}.dfc.json").write_text('{"verdict": "parsed"}')
    (out / "session-notes.md").write_text("ran on the DFC host")
    second = write_probes(out, ops)
    assert (out / f"{probe.stem}.dfc.json").read_text() == '{"verdict": "parsed"}'
    assert (out / "session-notes.md").exists() and second.probes == first.probes and hidden(tmp_path) == []
    older = onnx.load(str(out / probe.file))
    older.doc_string = "an older probe"  # the graph the result is of differs from the one the pack writes now
    onnx.save(older, str(out / probe.file))
    with pytest.raises(ValueError, match=r"the DFC results \[.*\] are of graphs or cuts this pack changes"):
        write_probes(out, ops)
    assert onnx.load(str(out / probe.file)).doc_string == "an older probe" and hidden(tmp_path) == []


def test_notebook_05_and_06_packs_keep_their_results_when_written_again(ops, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    path = save(chain("m", ["conv", "sin", "conv"]), src / "m.onnx")
    pack = tmp_path / "dfc_pack"
    write_dfc_pack([path], pack)
    (pack / "m.dfc.json").write_text("{}")
    write_dfc_pack([path], pack)
    assert (pack / "m.dfc.json").read_text() == "{}" and (pack / MARKER).is_file()
    partitions = cut_all([path], ops, tmp_path / "segments")
    cuts = tmp_path / "cut_pack"
    pack_cuts(partitions, cuts, default_arch())
    assert partitions[path].segments[0].runs_on == Side.DEVICE
    (cuts / "m.cut00.dfc.json").write_text("{}")
    pack_cuts(partitions, cuts, default_arch())
    assert (cuts / "m.cut00.dfc.json").read_text() == "{}"
    manifest = json.loads((cuts / MANIFEST).read_text())
    manifest["cuts"]["m.cut00"]["end_node_names"] = ["/l2/Conv"]  # the result is of another cut
    (cuts / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"\['m.cut00.dfc.json'\] are of graphs or cuts this pack changes"):
        pack_cuts(partitions, cuts, default_arch())
    cut_all([path], ops, tmp_path / "segments")  # 06's segments are written by the same rule, again
    assert (tmp_path / "segments" / "m" / "partition.json").is_file() and hidden(tmp_path / "segments") == []


def test_a_device_segment_the_gate_would_fail_refuses_the_cut(ops, tmp_path, monkeypatch):
    """The guard behind that promise: were the file's own objections not sent to the host first, the cut
    would be refused, never written."""
    from weftlib.gate.cut import partition as partition_module

    monkeypatch.setattr(partition_module, "file_problems", lambda *args: [])
    path = save(model([conv("x", "c", "/C"), relu("c", "y", "/R")], ir=12), tmp_path / "m.onnx")
    with pytest.raises(
        ValueError, match=r"device segment m\.00\.device\.onnx is a graph the gate fails: IR version 12"
    ):
        write_partition(path, ops, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@pytest.mark.parametrize("hard_links", [True, False])
def test_a_model_packed_from_the_pack_folder_itself_stays_there(tmp_path, monkeypatch, hard_links):
    pack = tmp_path / "pack"
    write_dfc_pack([save(chain("a", ["conv"]), tmp_path / "a.onnx")], pack)
    mine = save(chain("mine", ["conv", "sin"]), pack / "mine.onnx")  # a user's graph, put into the pack
    before = mine.read_bytes()
    if not hard_links:  # a file system without them: the pack copies the graph
        monkeypatch.setattr("os.link", lambda *args: (_ for _ in ()).throw(OSError("no hard links here")))
    write_dfc_pack([mine], pack)
    assert mine.read_bytes() == before and not (pack / "a.onnx").exists() and hidden(tmp_path) == []
