"""The memory model's arithmetic, and measured peaks (fresh subprocesses) against it."""

from __future__ import annotations

import pytest
import torch

from weftlib import measure, sparse
from weftlib.sparse import benchmark, footprint, memory, summary, voxels, workloads


def test_components_at_the_1024_headline_are_the_rfd_numbers():
    parts = footprint.components(1024, 4_940_720, 64, 64, "float16")
    assert parts["dense_tensor"] == 128 * 2**30  # RFD 1129: one 64-channel fp16 tensor on 2^30 cells, 128 GiB
    assert parts["dense_conv_in_out"] == 256 * 2**30


def test_byte_formulas_are_the_sizes_of_the_real_tensors():
    """The model's sizes against tensors the code really builds (neighbour table, features, gathered rows)."""
    import torch

    coords = voxels.voxel_set("sphere", 16)
    nbr = sparse.kernel_map(coords)
    feats = torch.randn(len(coords), 8, dtype=torch.float16)
    n, e = len(coords), feats.element_size()
    parts = footprint.components(16, n, 8, 8, "float16")
    assert parts["neighbor_table"] == nbr.nbytes == sparse.kernel_map_bytes(n)
    assert parts["im2col_buffer"] == feats[nbr.clamp(min=0)].nbytes
    assert parts["dense_tensor"] == sparse.densify(feats, coords, 16).nbytes
    assert footprint.features_bytes(n, 8, e) == feats.nbytes


def test_peak_model_orders_and_chunking():
    """What the measurements below cannot show at CI size: chunking bounds im2col, dense grows with res^3."""
    n, c = 1000, 16
    whole = memory.peak_model("im2col", 64, n, c, c, "float32")
    assert memory.peak_model("im2col", 64, n, c, c, "float32", chunk_rows=100) < whole
    assert memory.peak_model("im2col", 64, n, c, c, "float32", chunk_rows=n) == whole
    assert memory.peak_model("accumulate", 64, n, c, c, "float32") < memory.peak_model(
        "scatter", 64, n, c, c, "float32"
    )
    grow = memory.peak_model("dense", 128, n, c, c, "float16") - memory.peak_model("dense", 64, n, c, c, "float16")
    assert grow == 7 * footprint.components(64, n, c, c, "float16")["dense_conv_in_out"]  # (128/64)^3 - 1 grids more


def test_model_table_puts_dense_first_and_ratios_against_it():
    table = memory.model_table(1024, 3_000_000, 64, 64, "float16")
    assert table["method"].tolist() == list(sparse.METHODS)
    assert table["dense_over_method"].iloc[0] == 1.0
    assert (table["dense_over_method"].iloc[1:] > 10).all()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: memory.peak_model("hash", 8, 1, 1, 1), "method must be one of"),
        (lambda: footprint.components(8, 1, 1, 1, "bfloat16"), "dtype must be one of"),
        (lambda: memory.measure_table([("sphere", 64, "accumulate")], {}, 8, progress=False), "no voxel count"),
        (lambda: benchmark.benchmark(res=8, repeats=0), "repeats"),
    ],
)
def test_argument_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_split_transfer_and_decoder_stages():
    moved = footprint.split_transfer(1000, 64, 32, "float16")
    assert moved["to_device_bytes"] == footprint.components(8, 1000, 64, 32, "float16")["im2col_buffer"]
    assert moved["total_bytes"] == moved["to_device_bytes"] + moved["to_host_bytes"]
    stages = footprint.decoder_transfers({64: 10, 512: 1000, 1024: 4000})
    assert stages["res"].tolist() == [64, 512, 1024] and stages["C"].tolist() == [1024, 128, 64]


@pytest.mark.parametrize("method, chunk", [("accumulate", None), ("scatter", None), ("im2col", 4096)])
def test_measured_peak_is_within_the_model(method, chunk):
    n = len(voxels.voxel_set("sphere", 64))
    row = memory.measured_row(method, "sphere", 64, 32, n, "float32", threads=1, chunk_rows=chunk)
    assert row["N"] == n and row["model_bytes"] > 4 * 2**20
    assert 0.8 <= row["measured_over_model"] <= 1.25, row


def test_measurement_sees_a_model_that_is_wrong():
    """The same measurement judged against a model missing the output buffer must fall outside 1.25x."""
    n = len(voxels.voxel_set("sphere", 64))
    row = memory.measured_row("accumulate", "sphere", 64, 32, n, "float32")
    assert row["measured_bytes"] / (n * 32 * 4) > 1.6  # one N x C buffer is far from the measured two


def test_kernel_map_peak_is_about_twice_its_table():
    n = len(voxels.voxel_set("sphere", 128))
    row = memory.measure_kernel_map("sphere", 128, n)
    assert 1.0 <= row["measured_over_table"] <= 2.2, row


def test_conv_work_counts_the_taps_that_have_a_neighbour_and_the_summary_names_them():
    coords = voxels.voxel_set("sphere", 16)
    nbr = sparse.kernel_map(coords)
    work = benchmark.conv_work(nbr, 8, 4, "float32")
    pairs = int((nbr >= 0).sum())
    assert work["flops_occupied"] == 2 * pairs * 8 * 4 and work["flops_all_taps"] == 2 * len(coords) * 27 * 8 * 4
    # compulsory: features in and out and the weight, once; the kernel map in the form a method is given
    assert work["layer_bytes"] == len(coords) * (8 + 4) * 4 + 27 * 8 * 4 * 4 and work["table_bytes"] == nbr.nbytes
    rates = {"sgemm_gflops": 100.0, "copy_gbps": 10.0, "contended": False}
    row = {"shape": "sphere", "res": 16, "C": 8, "dtype": "float32", "threads": 1, "repeats": 1, "method": "auto"}
    row.update(chunk_rows=None, median_seconds=0.5, peak_bytes=2**20, peak_over_model=1.0, **rates)
    row.update(benchmark.against_limit(row, work, work["table_bytes"], "sphere 16 auto"))
    assert row["limit_by"] == "bytes" and row["limit_seconds"] == pytest.approx(
        (work["layer_bytes"] + nbr.nbytes) / 10e9
    )
    assert row["of_limit"] == pytest.approx(row["limit_seconds"] / 0.5) and row["of_sgemm"] < row["of_limit"]
    text = summary.format_benchmark(
        {"work": work, "rows": [row], "spconv": None, "spconv_status": "not asked", "rulebook": None}
    )
    assert "lower bound" in text and "auto" in text and "spconv: not run" in text and "  no" in text


def test_a_layer_faster_than_its_bound_is_refused():
    work = {"flops_occupied": 4e11, "layer_bytes": 10**9}
    fast = {"median_seconds": 1.0, "sgemm_gflops": 200.0, "copy_gbps": 20.0}  # the bound is 4e11 / 2e11 = 2 s
    with pytest.raises(measure.BoundBeaten, match="bunny 1024 auto: 1 s is below its lower bound 2 s"):
        benchmark.against_limit(fast, work, 0, "bunny 1024 auto")
    assert benchmark.against_limit({**fast, "median_seconds": 4.0}, work, 0, "ok")["of_limit"] == pytest.approx(0.5)


def test_children_read_the_voxels_and_table_the_parent_built_once():
    n = len(voxels.voxel_set("sphere", 64))
    with workloads.child_inputs() as folder:
        workloads.save_inputs(folder, "sphere", 64)
        coords, table = workloads._voxels_and_table("sphere", 64, inputs_dir=str(folder))
        row = memory.measured_row("accumulate", "sphere", 64, 32, n, "float32", inputs_dir=folder)
    assert not folder.exists()  # removed on exit
    assert torch.equal(coords, voxels.voxel_set("sphere", 64)) and torch.equal(
        table, workloads.kernel_map_of("sphere", 64)
    )
    assert 0.8 <= row["measured_over_model"] <= 1.25, row
    assert workloads.kernel_map_of("sphere", 64) is workloads.kernel_map_of("sphere", 64)  # built once


def test_compact_peak_is_within_its_model():
    n = len(voxels.voxel_set("sphere", 64))
    row = memory.measured_row("compact", "sphere", 64, 32, n, "float32", threads=1)
    assert 0.8 <= row["measured_over_model"] <= 1.25, row


def test_time_methods_hands_the_rulebook_to_auto_and_compact_only():
    coords = voxels.voxel_set("sphere", 16)
    df = benchmark.time_methods(
        coords, sparse.kernel_map(coords), 16, 8, ["auto", "compact", "im2col"], repeats=1, progress=False
    )
    assert df.set_index("method")["given"].to_dict() == {"auto": "rulebook", "compact": "rulebook", "im2col": "table"}
    assert df.attrs["rulebook_seconds"] > 0 and df["over_fastest"].min() == 1.0
    assert df["contended"].isin([True, False]).all() and (df["sgemm_gflops"] > 0).all()  # each row bracketed
    only_table = benchmark.time_methods(coords, sparse.kernel_map(coords), 16, 8, ["im2col"], repeats=1, progress=False)
    assert only_table.attrs["rulebook_seconds"] is None
