"""A DFC result belongs to a graph, not a name (issue 43): the parse writes the sha256 of the graph file it read,
the pack gives each parse its graph's hash, and `pair` and `evidence` refuse the result of another graph (rc 2,
one line); a raw log carries no hash and is paired by the model name it prints, marked unbound. Both read a
result in time linear in its size. The DFC's Python API is the TEST DOUBLE of tests/test_gate_probes.py."""

from __future__ import annotations

import gc
import json
import shlex
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from tests.test_gate_graphs import save, with_op
from tests.test_gate_probes import ARCH, install_dfc
from weftlib.gate import device_gate, load_device_ops, pair
from weftlib.gate.__main__ import main
from weftlib.gate.compiler import dfc_runner
from weftlib.gate.compiler.dfc_log import DfcError, DfcResult, file_sha256, load_dfc_result
from weftlib.gate.compiler.pack import MANIFEST, SCRIPT, write_dfc_pack
from weftlib.gate.compiler.pairing import UNBOUND
from weftlib.gate.compiler.probe_graphs import Probe
from weftlib.gate.vocabulary import DfcVerdict, PairVerdict, Subject


def graphs(tmp_path: Path) -> tuple[Path, Path]:
    """The original (a Sin the gate refuses) and its fixed graph (no Sin), saved under one name in two folders,
    as a fixed graph is packed for the DFC under its original's name."""
    (tmp_path / "fixed").mkdir()
    original = save(with_op("Sin", "/x/Sin"), tmp_path / "m.onnx")
    fixed = save(with_op("Relu", "/x/Relu2"), tmp_path / "fixed" / "m.onnx")
    return original, fixed


def run_script_line(pack: Path, line: str) -> int:
    """One `docker run` line of run_dfc.sh, run here with the double: the parse the image would run."""
    inner = shlex.split(line.split(" || ", maxsplit=1)[0])
    args = inner[inner.index("weftlib.gate.compiler.dfc_runner") + 1 :]
    args = [a.replace("/pack", str(pack)) for a in args]
    return dfc_runner.main(args)


def test_the_pack_gives_each_parse_its_graphs_hash_and_the_result_carries_it(tmp_path, monkeypatch, capsys):
    original, fixed = graphs(tmp_path)
    pack = write_dfc_pack([fixed], tmp_path / "pack", ARCH).folder
    digest = file_sha256(fixed)
    assert json.loads((pack / MANIFEST).read_text())["sha256"] == {"m.onnx": digest}
    (line,) = [x for x in (pack / SCRIPT).read_text().splitlines() if x.startswith("docker run")]
    assert f"--sha256 {digest}" in line
    install_dfc(monkeypatch, {})
    assert run_script_line(pack, line) == 0
    result = load_dfc_result(pack / "m.dfc.json")
    assert (result.verdict, result.model, result.sha256) == (DfcVerdict.PARSED, "m", digest)
    # a graph changed after the pack was written is not parsed as the pack's: one line, rc 2, no result
    (pack / "m.dfc.json").unlink()
    shutil.copyfile(original, pack / "m.onnx")
    capsys.readouterr()
    assert run_script_line(pack, line) == 2
    err = capsys.readouterr().err
    assert "not the graph the pack wrote" in err and len(err.strip().splitlines()) == 1
    assert not (pack / "m.dfc.json").exists()


def test_the_fixed_graphs_parse_saved_under_the_originals_name_is_refused(tmp_path, monkeypatch, capsys):
    """The hostile case: a "parsed" for the fixed graph, named like the original, made the pairing say
    "DEVICE_OPS too strict" and `move in op:Sin`."""
    original, fixed = graphs(tmp_path)
    install_dfc(monkeypatch, {})
    assert dfc_runner.main([str(fixed), "--arch", ARCH, "--out", str(tmp_path / "m.dfc.json")]) == 0
    capsys.readouterr()
    assert main(["pair", str(original), "--dfc", str(tmp_path / "m.dfc.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "of another graph" in captured.err and "move in" not in captured.err
    gate = device_gate(original, load_device_ops())
    refused = pair(gate, load_dfc_result(tmp_path / "m.dfc.json"), original, by_hand=True)
    assert refused.verdict == PairVerdict.FOREIGN_RESULT and refused.edits == () and not refused.judged
    # the same result pairs with its own graph, whatever either file is called
    elsewhere = shutil.copyfile(fixed, tmp_path / "renamed.onnx")
    assert main(["pair", str(elsewhere), "--dfc", str(tmp_path / "m.dfc.json")]) == 0
    assert "matched by graph hash" in capsys.readouterr().out


def test_a_raw_log_is_unbound_and_paired_by_the_model_name_it_prints(tmp_path, capsys):
    original, _ = graphs(tmp_path)
    log = tmp_path / "m.dfc.log"
    log.write_text(
        "[info] Translation started on ONNX model m\n[info] Translation completed on ONNX model m\n"
        "[info] Saved HAR to: /model/m.har\n"
    )
    assert load_dfc_result(log).sha256 is None
    assert main(["pair", str(original), "--dfc", str(log)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(PairVerdict.TOO_STRICT) and f"matched {UNBOUND}" in out


def test_a_result_with_a_malformed_hash_is_refused_cleanly(tmp_path, capsys):
    original, _ = graphs(tmp_path)
    bad = tmp_path / "m.dfc.json"
    bad.write_text(json.dumps({"kind": "weftlib.gate/dfc-result", "verdict": "parsed", "model": "m", "sha256": "ab"}))
    assert main(["pair", str(original), "--dfc", str(bad)]) == 2
    assert "`sha256` must be 64" in capsys.readouterr().err


def probe_pack(tmp_path: Path) -> Path:
    """A pack of one probe (op Sin), as `write_probes` writes it."""
    probe = save(with_op("Sin", "/x/Sin"), tmp_path / "probe_Sin.onnx")
    entry = Probe(subject=Subject.OP, name="Sin", file=probe.name, why="asked here", nodes=("/x/Sin",))
    return write_dfc_pack([probe], tmp_path / "pack", ARCH, extra={"probes": [asdict(entry)]}).folder


def test_evidence_refuses_a_result_of_another_graph_in_a_probes_place(tmp_path, monkeypatch, capsys):
    pack = probe_pack(tmp_path)
    install_dfc(monkeypatch, {})
    (tmp_path / "other").mkdir()
    other = save(with_op("Relu", "/x/Relu2"), tmp_path / "other" / "probe_Sin.onnx")  # another graph, same name
    assert dfc_runner.main([str(other), "--arch", ARCH, "--out", str(pack / "probe_Sin.dfc.json")]) == 0
    capsys.readouterr()
    assert main(["evidence", str(pack)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "op Sin" in captured.err and "of another graph" in captured.err
    # the probe's own result is read as before
    assert (
        dfc_runner.main([str(pack / "probe_Sin.onnx"), "--arch", ARCH, "--out", str(pack / "probe_Sin.dfc.json")]) == 0
    )
    capsys.readouterr()
    assert main(["evidence", str(pack)]) == 0
    assert "op Sin: parsed" in capsys.readouterr().out


# ---- linear time in the result's size


class Counted(str):
    """A node name that counts how often it is compared for equality: a step that scans the names seen so far
    for each new one compares n²/2 times."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_pairing_compares_each_named_node_a_bounded_number_of_times(tmp_path):
    path = save(with_op("Relu", "/x/Relu"), tmp_path / "m.onnx")
    gate = device_gate(path, load_device_ops())
    n = 3000
    errors = tuple(DfcError("UnsupportedOperationError", Counted(f"/n/{i}"), None, "bad") for i in range(n))
    result = DfcResult(DfcVerdict.REJECTED, errors=errors, model="m", reason="rejected")
    Counted.compared = 0
    paired = pair(gate, result, path)
    assert len(paired.unresolved_nodes) == n  # each named node, each once: none in the graph
    assert Counted.compared <= 4 * n, Counted.compared  # was n²/2 (4.5 million): a list searched per node


def big_log(folder: Path, n: int) -> Path:
    """A raw DFC log naming `n` nodes in errors and `n` recommended end nodes (a thousand per line)."""
    lines = [
        "[info] Translation started on ONNX model m",
        "hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException: Parsing failed. "
        "The errors found in the graph are:",
        *(f" UnsupportedOperationError in op /n/{i}: bad\\n\\n" for i in range(n)),
        *(
            "Please try to parse the model again, using these end node names: "
            + ", ".join(f"/e/{i}" for i in range(k, k + 1000))
            for k in range(0, n, 1000)
        ),
    ]
    path = folder / f"m{n}.dfc.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_reading_and_pairing_a_result_grows_linearly_with_its_size(tmp_path):
    """CPU time at 10k and 40k names: linear is 4x; the quadratic steps were over 14x. A ratio, never a
    time, and a generous bound (8x), so a busy machine cannot break it; the best of three runs each."""
    path = save(with_op("Relu", "/x/Relu"), tmp_path / "m.onnx")
    gate = device_gate(path, load_device_ops())

    def cost(n: int) -> float:
        log = big_log(tmp_path, n)
        best = float("inf")
        for _ in range(3):
            gc.collect()
            start = time.process_time()
            result = load_dfc_result(log)
            paired = pair(gate, result, path)
            best = min(best, time.process_time() - start)
        assert len(paired.unresolved_nodes) == n and len(result.end_nodes) == n  # the last run's, not a fourth read
        return best

    small, large = cost(10_000), cost(40_000)
    assert large / small < 8, (small, large)
