"""bench: geometry rules, inputs that make 'lowres' exact, and rows that report (not hide) what ran."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from weftlib import attention, measure
from weftlib.attention import benchmark, equality, geometry


def test_geometry_refuses_inconsistent_sizes():
    with pytest.raises(ValueError, match="low"):
        geometry.Geometry("bad", (20, 20), dilation=3, kernel=3, low=(5, 5))
    with pytest.raises(ValueError, match="kernel x dilation"):
        geometry.Geometry("bad", (8, 8), kernel=5, dilation=2)
    with pytest.raises(ValueError, match="multiple"):
        geometry.naf_geometry(size=100, low=32)


def test_naf_geometry_is_nafs_call():
    g = geometry.naf_geometry()
    assert (g.size, g.low, g.dilation, g.kernel, g.heads, g.dim, g.v_dim) == ((512, 512), (32, 32), 16, 9, 4, 64, 256)
    assert geometry.methods_for(g) == attention.METHODS
    assert "lowres" not in geometry.methods_for(geometry.grid((16,))[0])
    # natten's dense [B, chunks*heads, HW, HW] fp32 scores at 512^2: far beyond any CPU
    assert g.natten_dense_bytes() == 4 * 4 * 4 * (512 * 512) ** 2


def test_make_inputs_lowres_is_nearest_upsampling():
    g = geometry.Geometry("t", (12, 9), 2, 8, 16, 3, 3, 1, (4, 3))
    x = geometry.make_inputs(g)
    assert x["k"].shape == (1, 12, 9, 2, 8) and x["v_low"].shape == (1, 4, 3, 2, 16)
    assert torch.equal(attention.upsample_nearest(x["v_low"], 3), x["v"])
    assert torch.equal(geometry.make_inputs(g)["q"], x["q"]), "inputs must be deterministic"
    assert geometry.method_args(g, "lowres", x)[1] is x["k_low"]


def test_equality_against_natten_small():
    rows = equality.equality(geometry.Geometry("t", (9, 10), 2, 8, 24, 3, 2))
    assert [r["method"] for r in rows] == ["masked", "gather", "matmul", "shift"]
    assert all(r["max_abs_diff"] <= 1e-5 for r in rows), rows


pytestmark = pytest.mark.usefixtures("quick_rates")  # tests/conftest.py


# The measured sweeps below each export and time a geometry in several processes (seconds apiece), so the tests
# that read the same sweep share one, built once per module; each sweep takes a different path through
# `measure_geometry` (in this process or in measuring children; natten's output or the fallback's as reference).
SMALL = geometry.Geometry("t", (8, 8), 2, 8, 8, 3)


@pytest.fixture(scope="module", autouse=True)
def small_graphs_exported_once():
    """SMALL's graph of each formulation exported once a module (a dynamo export is ~2 CPU-s) and copied into
    every later sweep's folder: the same file, so each sweep's onnxruntime rows still run and compare a graph of
    their own folder. The first sweep to want one exports it as `measure_geometry` does; a failed export is
    never kept, and other geometries export as always."""
    real, made = benchmark.export_all, {}

    def export_all(geom, methods, inputs, folder, **kwargs):
        methods = list(methods)
        if geom != SMALL:
            return real(geom, methods, inputs, folder, **kwargs)
        key = tuple(sorted(kwargs.items()))
        fresh = real(geom, [m for m in methods if (m, key) not in made], inputs, folder, **kwargs)
        made.update({(m, key): e for m, e in fresh.items() if e.report is not None})
        out = {}
        for method in methods:
            if method in fresh:
                out[method] = fresh[method]
                continue
            kept = made[(method, key)]
            for part in kept.path.parent.glob(f"{kept.path.stem}.*"):  # the graph and what was written beside it
                shutil.copy2(part, Path(folder) / part.name)
            path = Path(folder) / kept.path.name
            out[method] = dataclasses.replace(kept, path=path, report=dataclasses.replace(kept.report, path=path))
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(benchmark, "export_all", export_all)
        yield


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """natten and shift timed in this process, two samples each: (the rows, their ONNX folder)."""
    folder = tmp_path_factory.mktemp("in_process")
    rows = benchmark.measure_geometry(SMALL, ["shift"], folder=folder, repeats=2, natten_repeats=2, memory=False)
    return rows, folder


@pytest.fixture(scope="module")
def in_process_without_natten(tmp_path_factory):
    """natten's dense scores over its limit, gather and shift timed in this process: shift's output answers."""
    folder = tmp_path_factory.mktemp("without_natten")
    limit = SMALL.natten_dense_bytes() - 1
    return benchmark.measure_geometry(
        SMALL, ["gather", "shift"], folder=folder, repeats=1, memory=False, natten_max_bytes=limit
    )


def _in_children(folder, **limit):
    """gather and shift (and natten unless `limit` skips it) each in its measuring child: (the rows, the
    `peak_rss_subprocess` calls as (method, backend, their other arguments))."""
    real, seen = measure.peak_rss_subprocess, []

    def recorded(target, kwargs=None, **rest):
        seen.append(((kwargs or {}).get("method"), (kwargs or {}).get("backend"), rest))
        return real(target, kwargs, **rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measure, "peak_rss_subprocess", recorded)
        rows = benchmark.measure_geometry(
            SMALL, ["gather", "shift"], folder=folder, repeats=1, natten_repeats=2, memory=True, **limit
        )
    return rows, seen


@pytest.fixture(scope="module")
def in_children(tmp_path_factory):
    """`_in_children` with natten as the reference, two natten samples from its one child."""
    return _in_children(tmp_path_factory.mktemp("in_children"))


def _row(rows, method, backend):
    (row,) = [r for r in rows if (r["method"], r["backend"]) == (method, backend)]
    return row


def test_measure_geometry_rows(in_process):
    rows, folder = in_process
    assert [(r["method"], r["backend"], r["status"]) for r in rows] == [
        ("natten", "natten", "ok"),
        ("shift", "torch", "ok"),
        ("shift", "onnxruntime", "ok"),
    ]
    assert all(r["seconds"] > 0 for r in rows)
    assert all(r["max_abs_diff"] <= 1e-5 and r["reference"] == "natten" for r in rows[1:])
    assert rows[2]["onnx_bytes"] == (folder / "t_shift.onnx").stat().st_size
    ratio = benchmark.speedups(rows)[0]
    assert ratio["natten_over_torch"] == pytest.approx(rows[0]["seconds"] / rows[1]["seconds"])
    assert "| t | 64 | shift | onnxruntime | ok |" in benchmark.to_markdown(rows)


def test_natten_skipped_when_dense_scores_too_big(in_process_without_natten):
    rows = in_process_without_natten
    assert rows[0]["status"].startswith("skipped") and rows[0]["seconds"] is None
    shift = _row(rows, "shift", "torch")
    assert shift["reference"] == "shift" and shift["max_abs_diff"] == 0.0


def test_masked_refusal_is_reported_not_raised(tmp_path, monkeypatch):
    from weftlib.attention import formulations

    monkeypatch.setattr(formulations, "MASKED_MAX_SCORES", 10)
    rows = benchmark.measure_geometry(
        SMALL,
        ["masked"],
        folder=tmp_path,
        repeats=1,
        memory=False,
        run_natten=False,
    )
    assert rows[0]["status"].startswith("refused") and rows[1]["status"].startswith("not exported")


def test_naf_geometry_limits_its_formulations_and_refuses_unknown_ones():

    geom = geometry.naf_geometry(size=32, low=8, kernel=3, methods=["lowres", "gather"])
    assert geom.methods == ("lowres", "gather")
    with pytest.raises(ValueError, match="unknown formulation"):
        geometry.naf_geometry(size=32, low=8, kernel=3, methods=["fast"])


def test_naf_geometry_exports_only_lowres_and_keeps_full_resolution_rows_in_torch(tmp_path):
    g = geometry.naf_geometry(size=24, low=6, dim=8, v_dim=16, kernel=3, methods=["shift", "lowres"], repeats=1)
    assert g.export_methods == ("lowres",) and g.repeats == 1
    assert geometry.naf_geometry().repeats is None  # by default the sweep's repeats: medians at 512^2 too
    rows = benchmark.measure_geometry(g, folder=tmp_path, repeats=3, natten_repeats=2, memory=False)
    assert {r["repeats"] for r in rows if r["backend"] != "natten" and r["seconds"]} == {1}  # the geometry's
    status = {(r["method"], r["backend"]): r["status"] for r in rows}
    assert status[("shift", "torch")] == "ok" and status[("shift", "onnxruntime")].startswith("not exported")
    assert status[("lowres", "onnxruntime")] == "ok"
    natten_row = rows[0]
    assert natten_row["method"] == "natten" and natten_row["spread"] is not None and natten_row["spread"] >= 0
    assert all(r["max_abs_diff"] <= 1e-5 for r in rows if r["max_abs_diff"] is not None)


RATES = {"sgemm_gflops": 100.0, "copy_gbps": 10.0}


def test_compulsory_bytes_read_each_input_once_and_write_the_output_once():
    g = geometry.naf_geometry()
    tokens, low = 512 * 512, 32 * 32
    assert g.compulsory_bytes("shift") == 4 * 4 * (tokens * 64 + tokens * (64 + 256) + tokens * 256)
    assert g.compulsory_bytes("lowres") == 4 * 4 * (tokens * 64 + low * (64 + 256) + tokens * 256)
    # the no-reuse traffic (every neighbour read once per query) is 40x the compulsory bytes here: no bound
    assert g.no_reuse_bytes() == 4 * tokens * 81 * 4 * (64 + 256) > 40 * g.compulsory_bytes("shift")


def test_with_bounds_takes_the_larger_of_bytes_and_flops_at_the_rows_own_rates():
    g = geometry.naf_geometry()
    rows = [
        {"geometry": g.name, "method": "shift", "backend": "torch", "seconds": 21.74, **RATES},
        {"geometry": g.name, "method": "lowres", "backend": "torch", "seconds": 9.0, "sgemm_gflops": 1e4},
        {"geometry": g.name, "method": "gather", "backend": "onnxruntime", "seconds": None},
    ]
    rows[1]["copy_gbps"] = 1.0  # a slow copy rate: bytes set this row's bound
    shift, lowres, untimed = benchmark.with_bounds(rows, [g])
    flops_s = g.attention_flops() / 100e9
    assert flops_s > g.compulsory_bytes("shift") / 10e9  # at these rates the FLOPs are the longer side
    assert shift["bound_seconds"] == pytest.approx(flops_s) and shift["bound_by"] == "flops"
    assert shift["over_bound"] == pytest.approx(21.74 / flops_s) and shift["no_reuse_GB"] == g.no_reuse_bytes() / 1e9
    assert lowres["bound_by"] == "bytes" and lowres["bound_seconds"] == pytest.approx(
        g.compulsory_bytes("lowres") / 1e9
    )
    assert untimed["bound_seconds"] is None and untimed["over_bound"] is None


def test_a_row_that_beats_its_bound_is_refused():
    g = geometry.naf_geometry()
    bound = g.attention_flops() / 100e9
    beaten = {"geometry": g.name, "method": "matmul", "backend": "torch", "seconds": 0.9 * bound, **RATES}
    with pytest.raises(measure.BoundBeaten, match=r"naf_512 matmul .torch.*below its lower bound"):
        benchmark.with_bounds([beaten], [g])
    (ok,) = benchmark.with_bounds([{**beaten, "seconds": bound}], [g])  # at the bound exactly: allowed
    assert ok["over_bound"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="without its rates"):
        benchmark.with_bounds([{**beaten, "sgemm_gflops": None}], [g])


def test_with_bounds_skips_rows_that_did_not_run_whether_none_or_nan():
    g = geometry.naf_geometry()
    rows = [
        {"geometry": g.name, "method": "gather", "backend": "torch", "seconds": float("nan")},
        {"geometry": g.name, "method": "shift", "backend": "torch", "seconds": None},
        {"geometry": g.name, "method": "matmul", "backend": "torch", "seconds": 3.0, **RATES},
    ]
    out = benchmark.with_bounds(rows, [g])
    assert [r["over_bound"] is not None for r in out] == [False, False, True]


def test_timed_rows_carry_their_rates_and_whether_the_machine_was_quiet(in_process):
    rows, _ = in_process
    for r in rows:
        assert isinstance(r["contended"], bool) and r["rates_from"] in ("before", "after")
        assert r["sgemm_gflops"] > 0 and r["copy_gbps"] > 0 and r["rate_change"] >= 0
        nearer = r["rates_" + r["rates_from"]]
        assert r["sgemm_gflops"] == pytest.approx(nearer["sgemm_gflops"], abs=1e-3)
    assert all(r["over_bound"] >= 1 for r in benchmark.with_bounds(rows, [SMALL]))


def test_natten_in_its_measuring_child_gives_peak_output_and_samples_from_the_same_calls(in_children):
    rows, _ = in_children
    natten_row, shift_row = rows[0], _row(rows, "shift", "torch")
    assert natten_row["status"] == "ok" and natten_row["peak_bytes"] >= 0 and natten_row["repeats"] == 2
    assert natten_row["spread"] is not None and isinstance(natten_row["contended"], bool)
    assert shift_row["reference"] == "natten" and shift_row["max_abs_diff"] <= 1e-5  # the child's saved output
    for r in rows[1:]:  # the formulation too: peak, samples and output from its one measuring child
        assert r["status"] == "ok" and r["peak_bytes"] >= 0 and r["repeats"] == 1 and r["max_abs_diff"] <= 1e-5


def test_without_natten_the_fallback_is_timed_first_and_its_output_is_the_reference(in_process_without_natten):
    rows = in_process_without_natten
    assert [(r["method"], r["backend"]) for r in rows][1:3] == [("gather", "torch"), ("gather", "onnxruntime")]
    assert {r["reference"] for r in rows[1:]} == {"shift"}
    assert rows[3]["max_abs_diff"] == 0.0 and rows[1]["max_abs_diff"] <= 1e-5


def test_a_row_out_of_time_is_stopped_with_the_machines_verdict_not_dropped(tmp_path, monkeypatch):
    """A measuring child past its timeout leaves a row that says so and whether the machine was busy meanwhile
    (02 does not judge a stop while contended; a stop on a quiet machine still fails its assertion)."""
    import time

    real = measure.peak_rss_subprocess

    def out_of_time(target, kwargs=None, **rest):
        if (kwargs or {}).get("backend") != "torch":
            return real(target, kwargs, **rest)
        now = time.perf_counter()
        raise measure.MeasurementStopped(target, 900, (now - 0.1, now), cpu_seconds=0.2)

    monkeypatch.setattr(measure, "peak_rss_subprocess", out_of_time)
    # no natten row: the stop is the torch child's, and a real natten child is measured by `in_children`
    rows = benchmark.measure_geometry(SMALL, ["shift"], folder=tmp_path, repeats=1, memory=True, run_natten=False)
    torch_row, ort_row = rows
    assert torch_row["status"].startswith(benchmark.STOPPED) and "took over 900 s" in torch_row["status"]
    assert torch_row["seconds"] is None and isinstance(torch_row["contended"], bool)
    assert torch_row["rates_from"] in ("before", "after") and torch_row["others_cores"] is not None
    assert ort_row["status"] == "not exported: torch did not run"


def test_a_child_that_raised_is_a_sentence_on_the_page_not_its_exception_class(monkeypatch):
    """The measuring child's traceback ends in `ValueError: ...`: the row's status keeps the sentence, without the
    class name, so the appendix page shows no exception class (issue 45; the full appendix showed one)."""
    from tests.unreadable import raw_values

    said = "method='masked' holds a dense [1, 4, 16384, 16384] score tensor (4.00 GiB), above its limit"

    def raising(*args, **kwargs):
        raise RuntimeError(
            f'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: {said}'
        )

    monkeypatch.setattr(measure, "peak_rss_subprocess", raising)
    result, status = benchmark._peak("torch", "masked", geometry.grid([16], kernel=3)[0], 1, 2**30)
    assert result is None and status == f"failed: M{said[1:]}"
    assert raw_values(f"<td>{status}</td>") == []


@pytest.mark.parametrize("natten", [True, False])
def test_only_the_reference_is_saved_and_every_other_child_answers_its_difference(tmp_path, in_children, natten):
    """Measuring memory, the reference's child (natten's, or the fallback's when natten is skipped) saves its
    output once; every other child reads it in place and sends back only its largest difference (at NAF's
    geometry each output is a gigabyte: one saved and loaded per row cost seconds)."""
    limit = {"natten_max_bytes": SMALL.natten_dense_bytes() - 1}
    rows, seen = in_children if natten else _in_children(tmp_path, **limit)
    saved = [(m, b, r["save"]) for m, b, r in seen if r.get("save")]
    assert [(m, b) for m, b, _ in saved] == [("natten", "natten") if natten else ("shift", "torch")]
    others = [r for m, b, r in seen if not r.get("save")]
    assert len(others) == (4 if natten else 3) and all(
        r["check_kwargs"] == {"reference": str(saved[0][2])} for r in others
    )
    compared = [r for r in rows if r["method"] != "natten"]
    assert all(r["max_abs_diff"] is not None and r["max_abs_diff"] <= 1e-5 for r in compared)
    assert {r["reference"] for r in compared} == {"natten" if natten else "shift"}
