"""The time a cut buys: the device model fitted to the zoo's hailo10h rows and held out by family, a cut's
estimate with its band on a small graph built here, the pay-off verdict at its boundaries, the torch-free
interleaved timing, and `gate partition` printing the estimate. No assertion here is on a measured time."""

from __future__ import annotations

import math

import onnx
import pytest

from tests.test_gate_partition import chain, cut_of
from weftlib.gate.__main__ import main
from weftlib.gate.cut.coverage import node_macs
from weftlib.gate.estimate import device_model, payoff
from weftlib.gate.estimate.calibration import zoo_calibration, zoo_rows
from weftlib.gate.estimate.device_model import CalibrationError, CalibrationRow, calibrate, fit, held_out
from weftlib.gate.estimate.figures import LINK_RATE, OPS_PER_MAC, TRANSFER_OVERHEAD
from weftlib.gate.estimate.graph_figures import figures_of
from weftlib.gate.estimate.host_time import HostTimes
from weftlib.gate.record.zoo import REPOSITORY, ZooArch, fps_rows
from weftlib.gate.vocabulary import PaysOff
from weftlib.measure import others
from weftlib.onnx_core.walk import index_model


def law(gops: float, params: float, noise: float = 0.0) -> float:
    """A device that follows FPS = 500 x GOPS^-0.5 x params^-0.25 exactly (times exp(noise))."""
    return 500 * gops**-0.5 * params**-0.25 * math.exp(noise)


def rows_of(noise=None, params_matter=True) -> list[CalibrationRow]:
    """Twelve networks in four families, every figure shared by two families or more (so none held out lies below
    the others' range, where the fit reads it at the floor); `noise` (family -> log offset) spoils the law."""
    rows = []
    for i, family in enumerate("abcd"):
        for j in range(3):
            gops, params = 2.0**j, 1.0 + 7 * ((i + j) % 4)
            fps = law(gops, params if params_matter else 1.0, (noise or {}).get(family, 0.0))
            rows.append(CalibrationRow(f"{family}{j}", family, fps, gops, params, 224 * 224 * 3 * (i + j + 1)))
    return rows


# ------------------------------------------------------------------------------------------ the fit


def test_the_fit_recovers_a_power_law_and_holding_out_a_family_costs_nothing_when_every_family_obeys_it():
    model = fit(rows_of(), ("gops", "params_m"))
    assert model.coefficients == pytest.approx((math.log(500), -0.5, -0.25), abs=1e-9)
    error = held_out(rows_of(), ("gops", "params_m"))
    assert error.families == 4 and len(error.errors) == 12
    assert error.median == pytest.approx(0, abs=1e-9) and error.band == pytest.approx(1.0)


def test_the_held_out_error_is_each_family_predicted_by_the_others():
    rows = rows_of(noise={"a": 0.4, "b": -0.2})
    error = held_out(rows, ("gops", "params_m"))
    by_hand = {}
    for family in "abcd":
        model = fit([r for r in rows if r.family != family], ("gops", "params_m"))
        for r in (r for r in rows if r.family == family):
            by_hand[r.network] = abs(math.log(r.fps * model.seconds(r)))
    assert error.errors == pytest.approx(by_hand)
    values = sorted(by_hand.values())
    assert error.median == pytest.approx((values[5] + values[6]) / 2)
    assert error.p90 >= error.median > 0 and error.band == pytest.approx(math.exp(error.p90))


def test_a_term_is_taken_only_when_the_held_out_families_confirm_it():
    assert calibrate(rows_of()).chosen == "operations, parameters"  # parameters explain FPS: taken
    assert calibrate(rows_of(params_matter=False)).chosen == "operations"  # they do not: left out


def test_the_fit_refuses_rows_it_cannot_take():
    rows = rows_of()
    with pytest.raises(CalibrationError, match="cannot fit 3 coefficients"):
        fit(rows[:3], ("gops", "params_m"))
    bad = [*rows[:-1], CalibrationRow("zero", "d", 10.0, 0.0, 1.0, 1)]
    with pytest.raises(CalibrationError, match="zero: gops must be positive"):
        fit(bad, ("gops",))
    with pytest.raises(CalibrationError, match="two families"):
        held_out([r for r in rows if r.family == "a"] * 2, ("gops",))


def test_the_calibration_holds_every_hailo10h_network_of_the_zoo_each_citing_its_row():
    published = fps_rows(ZooArch.HAILO10H)
    rows = zoo_rows()
    assert len(rows) == len(published) >= 60
    for row, zoo in zip(rows, published):
        assert (row.network, row.fps, row.gops, row.params_m) == (zoo.network, zoo.fps_batch1, zoo.ops_g, zoo.params_m)
        assert row.source == f"{REPOSITORY}/{zoo.page}@{zoo.commit}" and row.family == zoo.family
        assert row.input_elements == math.prod(zoo.input_shape)
    cal = zoo_calibration()
    assert len(cal.rows) == len(rows) and cal.error.families == len({r.family for r in rows}) > 10
    slopes = dict(zip(cal.model.terms, cal.model.coefficients[1:]))
    assert slopes["gops"] < 0  # more work, fewer frames a second
    assert set(cal.candidates) == set(device_model.CANDIDATES) and cal.candidates[cal.chosen] is cal.error


# ------------------------------------------------------------------------------------------ a cut


def test_a_cuts_estimate_is_its_segments_fit_with_the_band_plus_its_bytes_at_the_link_rate(ops, tmp_path):
    part, path, _ = cut_of(chain("est", ["conv", "relu", "sin", "conv", "conv"]), ops, tmp_path)
    graph = index_model(onnx.shape_inference.infer_shapes(onnx.load(str(path)), data_prop=True))
    conv = next(n for n in graph.nodes if n.op_type == "Conv")
    assert node_macs(conv, graph) == 8 * 8 * 4 * 4  # 1x1, 8 -> 8 channels on 4x4
    first = figures_of(graph, part.device_segments[0].nodes)
    assert first.gops == pytest.approx(OPS_PER_MAC * 8 * 8 * 4 * 4 / 1e9) and first.layers == {"Conv": 1}
    assert first.params_m == pytest.approx(8 * 8 / 1e6) and first.input_elements == 8 * 4 * 4  # no bias

    cal = calibrate(rows_of(noise={"a": 0.5, "c": -0.3}))
    host = HostTimes(whole=1e-3, segments={"x": 2e-4}, repeats=5, others_cores=0.0, contended=False)
    e = payoff.estimate_cut(part, graph, cal, host)
    device = sum(cal.model.seconds(figures_of(graph, s.nodes)) for s in part.device_segments)
    assert e.device == pytest.approx(device) and len(part.device_segments) == 2
    assert (e.device_low, e.device_high) == pytest.approx((device / cal.error.band, device * cal.error.band))
    assert e.transfer == pytest.approx(part.coverage.bytes_crossing / LINK_RATE.value) and not TRANSFER_OVERHEAD.known
    assert e.total == pytest.approx(2e-4 + e.transfer + device) and e.ratio == pytest.approx(1e-3 / e.total)
    assert e.outside and all("below" in o for o in e.outside)  # a 4x4 conv is far smaller than any zoo network
    assert e.verdict == payoff.pays_off(1e-3, e.total_low, e.total_high)
    lines = payoff.sources(cal)
    assert any("held out" in line for line in lines) and any("unknown" in line for line in lines)


def test_the_pay_off_verdict_at_its_boundaries():
    assert payoff.pays_off(10.0, 4.0, 9.99) == PaysOff.YES  # even the slow end beats the host
    assert payoff.pays_off(10.0, 4.0, 10.0) == PaysOff.WITHIN_ERROR  # the slow end ties it: not a yes
    assert payoff.pays_off(10.0, 10.0, 20.0) == PaysOff.WITHIN_ERROR  # the fast end ties it: not a no
    assert payoff.pays_off(10.0, 10.01, 20.0) == PaysOff.NO
    assert payoff.pays_off(10.0, 1.0, 2.0, contended=True) == PaysOff.CONTENDED
    assert payoff.pays_off(10.0, 1.0, 2.0, device=False) == PaysOff.NO_DEVICE


# ------------------------------------------------------------------------------------------ the host


def test_interleaved_takes_rounds_of_every_call_and_marks_a_busy_machine(monkeypatch):
    order = []
    readings = iter([(100.0, 10.0), (100.0, 10.0)])  # nothing else ran
    monkeypatch.setattr(others, "cpu_seconds", lambda: next(readings))
    samples, quiet = others.interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3, warmup=1)
    assert order == ["a", "b"] * 4 and [len(s) for s in samples.values()] == [3, 3]
    assert quiet == {"others_cores": 0.0, "contended": False}
    readings = iter([(100.0, 10.0), (1e6, 10.0)])  # others took every core the whole time
    monkeypatch.setattr(others, "cpu_seconds", lambda: next(readings))
    assert others.interleaved({"a": lambda: None}, 2, warmup=0)[1]["contended"] is True
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        others.interleaved({"a": lambda: None}, 0)


def test_gate_partition_prints_the_estimate_with_its_sources(tmp_path, capsys):
    path = tmp_path / "cli.onnx"
    onnx.save(chain("cli", ["conv", "relu", "sin", "conv"]), str(path))
    assert main(["partition", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "time per inference: host alone" in out and "(measured here)" in out and "(an estimate" in out
    verdict = next(line for line in out.splitlines() if "device pays off:" in line)
    assert verdict.split("device pays off: ", 1)[1] in {str(v) for v in PaysOff}  # "not judged: contended" too
    assert f"{len(zoo_rows())} networks" in out and "held out" in out and "source: overhead per transfer" in out
    assert main(["partition", str(path), "--out", str(tmp_path / "quiet"), "--no-estimate"]) == 0
    assert "time per inference" not in capsys.readouterr().out


def test_every_figure_has_its_source_and_the_link_is_four_pcie3_lanes():
    assert LINK_RATE.value == pytest.approx(4 * 8e9 * 128 / 130 / 8) and "PCIe" in LINK_RATE.source
    assert TRANSFER_OVERHEAD.value is None and "unknown" in TRANSFER_OVERHEAD.text()
    assert all(f.source for f in (LINK_RATE, TRANSFER_OVERHEAD))


def test_the_segment_files_are_found_where_the_very_cut_was_written(ops, tmp_path):
    from weftlib.gate.run import cutting

    path = tmp_path / "found.onnx"
    onnx.save(chain("found", ["conv", "relu", "sin", "conv"]), str(path))
    parts = cutting.cut_all([path], ops, tmp_path / "segments")
    assert cutting.segment_folders(parts, tmp_path / "after", tmp_path / "segments") == {
        path: tmp_path / "segments" / "found"
    }
    other = cutting.cut_all([path], ops, tmp_path / "after")  # the same cut written elsewhere: the first wins
    assert cutting.segment_folders(other, tmp_path / "after", tmp_path / "segments")[path].parent.name == "after"
    forced = cutting.write_partition(path, ops, tmp_path / "forced" / "found", host={"/l0/Conv"})
    with pytest.raises(ValueError, match="found: no folder"):
        cutting.segment_folders({path: forced}, tmp_path / "segments")


def test_a_host_segment_handed_a_shape_is_timed_on_what_the_chain_hands_it(tmp_path, capsys):
    """torch's MultiheadAttention export computes shapes on the host and hands them on as int64 tensors: a host
    segment timed on random values would Reshape to a random shape and fail (it did, with a traceback, on a
    newcomer's model); timed on what the chain hands it, partition ends proven with its estimate."""
    import warnings

    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.stem(x)
            b, c, h, w = y.shape
            t = y.flatten(2).transpose(1, 2)
            a, _ = self.attn(t, t, t, need_weights=False)
            return a.transpose(1, 2).reshape(b, c, h, w)

    path = tmp_path / "mha.onnx"
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (torch.randn(1, 3, 8, 8),), str(path), opset_version=17, dynamo=False)
    assert main(["partition", str(path), "--out", str(tmp_path / "cut")]) == 0
    out = capsys.readouterr().out
    assert "proven" in out and "time per inference: host alone" in out


def _count_sessions(monkeypatch) -> list[str]:
    """Every onnxruntime session the host timing opens, and the chain's (which must not open any here)."""
    from weftlib.gate.cut import proof
    from weftlib.gate.estimate import host_time

    opened: list[str] = []
    real = host_time.runtime.session
    monkeypatch.setattr(host_time.runtime, "session", lambda path, *a, **k: opened.append(str(path)) or real(path))
    monkeypatch.setattr(proof, "_session", lambda path: pytest.fail(f"the chain ran: {path}"))
    return opened


def test_a_cut_that_is_the_graph_itself_is_timed_once(ops, tmp_path, monkeypatch):
    """Nothing on the device: the one host segment is the whole graph, so its time is the whole's, taken once
    (at NAF's geometry the attention layer's graph takes seconds a call; it was timed twice and run once more)."""
    from weftlib.gate.estimate import host_time

    part, path, folder = cut_of(chain("host", ["sin", "sin"]), ops, tmp_path)
    assert not part.device_segments and host_time.is_whole(part)
    opened = _count_sessions(monkeypatch)
    host = host_time.host_times(part, path, folder)
    assert opened == [str(path)] and host.segments == {part.segments[0].file: host.whole}


def test_a_cut_with_no_host_segment_runs_no_chain(ops, tmp_path, monkeypatch):
    from weftlib.gate.estimate import host_time

    part, path, folder = cut_of(chain("device", ["conv", "relu", "conv"]), ops, tmp_path)
    assert len(part.segments) == len(part.device_segments) == 1 and not host_time.is_whole(part)
    opened = _count_sessions(monkeypatch)
    host = host_time.host_times(part, path, folder)
    assert opened == [str(path)] and host.segments == {} and host.host_segments == 0.0


def test_a_cut_with_host_and_device_segments_still_times_each_host_segment(ops, tmp_path):
    from weftlib.gate.estimate import host_time

    part, path, folder = cut_of(chain("mixed", ["conv", "sin", "conv"]), ops, tmp_path)
    assert not host_time.is_whole(part)
    host = host_time.host_times(part, path, folder, repeats=2)
    hosts = [s.file for s in part.segments if s not in part.device_segments]
    assert list(host.segments) == hosts and all(t > 0 for t in host.segments.values())


def test_every_timed_session_runs_without_the_memory_plan(ops, tmp_path, monkeypatch):
    """onnxruntime's memory plan is allocated as one block on a session's second call, the one timed after the
    warm-up: at NAF's 512² that call took 1.7 to 2.5 times the steady state. The whole graph and each host segment
    are timed on sessions without it."""
    import onnxruntime

    from weftlib.gate.estimate import host_time

    part, path, folder = cut_of(chain("mixed", ["conv", "sin", "conv"]), ops, tmp_path)
    real, opened = host_time.runtime.session, []

    def spied(path, *a, **k):
        opened.append(real(path, *a, **k))
        return opened[-1]

    monkeypatch.setattr(host_time.runtime, "session", spied)
    host_time.host_times(part, path, folder, repeats=2)
    as_written = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL  # the chain's own sessions for the device segments
    timed = [s for s in opened if s.get_session_options().graph_optimization_level != as_written]
    assert len(timed) == 2 and not any(s.get_session_options().enable_mem_pattern for s in timed)
    assert real(path).get_session_options().enable_mem_pattern  # the default elsewhere: the plan kept


def test_host_samples_stop_once_two_calls_of_a_second_agree(monkeypatch):
    """On a fake clock: each call takes the next duration; short calls or disagreeing ones take every repeat."""
    from weftlib.gate.estimate import host_time

    clock = [0.0]
    durations = iter([1.5, 1.45, 1.5, 0.9, 1.5, 1.1, 1.5, 0.2, 0.2, 0.2, 0.2, 0.2])

    def run():
        clock[0] += next(durations)

    monkeypatch.setattr(host_time.time, "perf_counter", lambda: clock[0])
    assert host_time.settled_samples(run, 5)[0] == pytest.approx([1.5, 1.45])  # over SETTLE_S, within 10 %
    assert host_time.settled_samples(run, 3)[0] == pytest.approx([1.5, 0.9, 1.5])  # 0.9 is under SETTLE_S
    assert host_time.settled_samples(run, 2)[0] == pytest.approx([1.1, 1.5])  # disagree: every repeat (two)
    assert len(host_time.settled_samples(run, 5)[0]) == 5  # short calls: every repeat
    with pytest.raises(ValueError, match="repeats"):
        host_time.settled_samples(run, 0)
