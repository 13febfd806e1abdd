"""The DFC runner path, with a TEST DOUBLE of `hailo_sdk_client` injected into sys.modules.

The real client only installs on Linux x86-64 inside the DFC image; the double reproduces its Python API
surface (`ClientRunner(hw_arch=...).translate_onnx_model(...)`, `save_har(path)`, and the exception class
path `hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException`) so the runner's
handling of each outcome is tested here. It proves nothing about the real compiler.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from tests.test_gate_graphs import attention, save
from weftlib.gate import DfcUnavailable, check_arch, docker_command, run_dfc
from weftlib.gate.__main__ import main
from weftlib.gate.compiler.dfc_target import image, target

DFC, ARCH = target()  # the allowlist's target (params/device_ops.yaml)


class ParsingWithRecommendationException(Exception):
    """Test double of the DFC's exception (same name, module path set below)."""


def install_double(monkeypatch, behaviour: str) -> list:
    """Inject a fake hailo_sdk_client whose ClientRunner does `behaviour`; returns the calls it saw."""
    calls: list = []

    class ClientRunner:
        def __init__(self, hw_arch):
            calls.append(("init", hw_arch))

        def translate_onnx_model(self, path, name, start_node_names=None, end_node_names=None, net_input_shapes=None):
            calls.append(("translate", Path(path).name, name, end_node_names))
            if behaviour == "reject":
                raise ParsingWithRecommendationException(
                    "Parsing failed. The errors found in the graph are:\n"
                    " UnsupportedSoftmaxLayerError in op /attn/Softmax: Unsupported softmax\n"
                    "Please try to parse the model again, using these end node names: /attn/MatMul"
                )
            if behaviour == "index_error":
                raise IndexError("list index out of range")
            return object(), {}

        def save_har(self, path):
            calls.append(("save_har", Path(path).name))
            if behaviour == "har":
                Path(path).write_bytes(b"HAR test double")

    client = types.ModuleType("hailo_sdk_client")
    client.ClientRunner = ClientRunner
    client.__version__ = f"{DFC}-test-double"
    exceptions = types.ModuleType("hailo_sdk_client.model_translator.exceptions")
    ParsingWithRecommendationException.__module__ = exceptions.__name__
    exceptions.ParsingWithRecommendationException = ParsingWithRecommendationException
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", client)
    monkeypatch.setitem(sys.modules, "hailo_sdk_client.model_translator.exceptions", exceptions)
    return calls


def test_success_with_har_is_parsed(tmp_path, monkeypatch):
    calls = install_double(monkeypatch, "har")
    model = save(attention(), tmp_path / "attn-1.onnx")
    result = run_dfc(model)  # the default arch: the target of params/device_ops.yaml
    assert result.verdict == "parsed" and Path(result.har).read_bytes() == b"HAR test double"
    assert (result.arch, result.dfc_version) == (ARCH, f"{DFC}-test-double")
    assert calls == [("init", ARCH), ("translate", "attn-1.onnx", "attn_1", None), ("save_har", f"attn-1.{ARCH}.har")]


def test_success_without_har_is_not_a_pass(tmp_path, monkeypatch):
    install_double(monkeypatch, "no_har")
    model = save(attention(), tmp_path / "attn.onnx")
    model.with_suffix(f".{ARCH}.har").write_bytes(b"stale")  # a HAR from an earlier run must not count
    result = run_dfc(model, ARCH)
    assert result.verdict == "unrecognised" and "no HAR" in result.reason


def test_parsing_with_recommendation_is_a_rejection_with_nodes(tmp_path, monkeypatch):
    install_double(monkeypatch, "reject")
    result = run_dfc(save(attention(), tmp_path / "attn.onnx"), ARCH)
    assert result.verdict == "rejected"
    assert [(e.cls, e.node) for e in result.errors] == [("UnsupportedSoftmaxLayerError", "/attn/Softmax")]
    assert result.end_nodes == ("/attn/MatMul",)
    assert result.exception.startswith("ParsingWithRecommendationException: Parsing failed")


def test_plain_exception_from_the_parser_is_a_rejection_naming_no_op(tmp_path, monkeypatch):
    install_double(monkeypatch, "index_error")
    result = run_dfc(save(attention(), tmp_path / "attn.onnx"), ARCH)
    assert result.verdict == "rejected"
    assert [(e.cls, e.node, e.op) for e in result.errors] == [("IndexError", None, None)]


def test_dfc_cli_writes_json_with_the_double(tmp_path, monkeypatch):
    install_double(monkeypatch, "reject")
    out = tmp_path / "r.json"
    assert main(["dfc", str(save(attention(), tmp_path / "attn.onnx")), "--arch", ARCH, "--out", str(out)]) == 1
    assert json.loads(out.read_text())["verdict"] == "rejected"


def test_without_the_client_the_cli_prints_the_docker_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", None)  # import now raises ImportError
    model = save(attention(), tmp_path / "attn.onnx")
    with pytest.raises(DfcUnavailable) as info:
        run_dfc(model, ARCH)
    assert info.value.command == docker_command(model, ARCH)
    assert main(["dfc", str(model), "--arch", ARCH, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert docker_command(model, ARCH, out=str(tmp_path / "r.json")) in err  # the printed line honours --out
    assert "--out /model/r.json" in err and f"hailo parser onnx /model/attn.onnx --hw-arch {ARCH}" in err
    elsewhere = tmp_path / "results" / "r.json"
    elsewhere.parent.mkdir()
    assert main(["dfc", str(model), "--arch", ARCH, "--out", str(elsewhere)]) == 2
    err = capsys.readouterr().err
    assert f"-v {elsewhere.parent}:/out" in err and "--out /out/r.json" in err
    assert main(["dfc", str(model), "--arch", ARCH, "--out", str(tmp_path / "no" / "such" / "r.json")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_docker_command_mounts_the_model_folder_and_runs_the_gate(tmp_path):
    model = save(attention(), tmp_path / "my model.onnx")
    command = docker_command(model, "hailo15h")
    assert command.startswith("docker run --rm -v ")
    assert f" -v {tmp_path}:/model " in command and f" {image()} " in command
    assert command.endswith(
        "python -m weftlib.gate dfc '/model/my model.onnx' --arch hailo15h --out '/model/my model.dfc.json'"
    )


@pytest.mark.parametrize(
    "arch, match",
    [
        ("hailo8", "needs DFC 3.x"),
        ("hailo8l", "needs DFC 3.x"),
        ("hailo8r", "needs DFC 3.x"),
        ("hailo11", "unknown hw arch"),
    ],
)
def test_arch_refusal(tmp_path, arch, match, capsys):
    with pytest.raises(ValueError, match=match):
        check_arch(arch)
    assert main(["dfc", str(save(attention(), tmp_path / "a.onnx")), "--arch", arch]) == 2
    assert match in capsys.readouterr().err
