"""torch's op table is built once per process for the suite's exports, and what they write is unchanged."""

from __future__ import annotations

import contextlib

import torch
from torch.onnx._internal.exporter import _registration

from weftlib.onnx_core import export, exporter_registry


class _Block(torch.nn.Module):
    """Ops from several torchlib families: convolution, normalisation, attention's matmuls, a gather."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.norm = torch.nn.GroupNorm(2, 8)
        self.index = torch.nn.Parameter(torch.tensor([3, 1, 2, 0]), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(self.norm(self.conv(x)))
        q = y.flatten(2).transpose(1, 2)
        scores = torch.softmax(q @ q.transpose(1, 2) / 8**0.5, dim=-1)
        return (scores @ q)[:, self.index]


def _written(reuse: bool) -> bytes:
    torch.manual_seed(0)
    module, args = _Block().eval(), (torch.randn(1, 8, 6, 6),)
    with exporter_registry.reused() if reuse else contextlib.nullcontext():
        program = torch.onnx.export(module, args, dynamo=True, opset_version=18, external_data=False, optimize=False)
    assert program is not None
    return bytes(program.model_proto.SerializeToString())


def _counting(monkeypatch) -> list[int]:
    """Count torch's own builds of the table from here on, with nothing kept from earlier tests."""
    builds: list[int] = []
    build = exporter_registry._build

    def counted(cls, opset_version=18):
        builds.append(opset_version)
        return build(cls, opset_version)

    counted.builds = builds  # type: ignore[attr-defined]  # what a forked job reads of its own copy

    monkeypatch.setattr(exporter_registry, "_build", counted)
    monkeypatch.setattr(exporter_registry, "_kept", {})
    return builds


def test_a_graph_exported_through_the_kept_table_is_byte_equal_to_torchs_own(monkeypatch):
    builds = _counting(monkeypatch)
    alone = _written(reuse=False)
    builds.clear()
    first, second = _written(reuse=True), _written(reuse=True)
    assert first == alone and second == alone
    assert len(alone) > 1000
    assert builds == [18], "the two reused exports build one table between them"


def test_the_suites_exports_build_the_table_once_per_opset(monkeypatch):
    builds = _counting(monkeypatch)
    module, args = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), (torch.randn(2, 4),)
    for _ in range(3):
        ok, error, _seconds = export.attempt(module, args, dynamo=True)
        assert ok, error
    assert builds == [18]
    exporter_registry.warm(20)
    exporter_registry.warm(18)
    assert builds == [18, 20], "one table per opset"
    _registration.ONNXRegistry.from_torchlib(18)  # outside the suite's exports torch builds its own, as before
    assert builds == [18, 20, 18]


def test_what_one_export_registers_stays_in_its_own_copy(monkeypatch):
    _counting(monkeypatch)
    target = torch.ops.aten.gelu.default
    with exporter_registry.reused():
        mine = _registration.ONNXRegistry.from_torchlib(18)
        before = len(mine.get_decomps(target))
        mine.register_op(target, lambda x: x)
        assert len(mine.get_decomps(target)) == before + 1
        assert len(_registration.ONNXRegistry.from_torchlib(18).get_decomps(target)) == before


def test_a_new_onnxscript_registration_builds_a_new_table(monkeypatch):
    builds = _counting(monkeypatch)
    with exporter_registry.reused():
        _registration.ONNXRegistry.from_torchlib(18)
        _registration.ONNXRegistry.from_torchlib(18)
        count = exporter_registry._onnxscript_functions()
        monkeypatch.setattr(exporter_registry, "_onnxscript_functions", lambda: count + 1)
        _registration.ONNXRegistry.from_torchlib(18)
    assert builds == [18, 18]
    assert exporter_registry.kept_tables() == 2


def _export_in_child(width: int) -> int:
    """A forked job: one export through the suite, then how many tables were built in this process's memory
    (the parent's builds before the fork included)."""
    ok, error, _seconds = export.attempt(torch.nn.Linear(width, 2), (torch.randn(1, width),), dynamo=True)
    assert ok, error
    return len(exporter_registry._build.builds)  # type: ignore[attr-defined]


def test_export_jobs_forked_by_in_forks_inherit_the_table_built_before_the_fork(monkeypatch):
    builds = _counting(monkeypatch)
    assert export.in_forks(_export_in_child, [3, 4], workers=2) == [1, 1], "a forked job built its own table"
    assert builds == [18], "built once here, before the forks"
