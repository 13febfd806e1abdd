"""03's 1024 benchmark spends its processes and calls where they change a figure: one fresh process per method
(its first call the peak, its later calls the timing samples), spconv checked on a call it made anyway, the
default layer's samples stopping once two agree, and the children's inputs on memory-backed scratch."""

from __future__ import annotations

import pytest

from weftlib import measure
from weftlib.measure import bracket, timing
from weftlib.sparse import benchmark, conv, memory, voxels


def test_one_fresh_process_per_method_gives_the_peak_and_every_sample(monkeypatch):
    spawned = []
    real = measure.peak_rss_subprocess

    def counted(*args, **kwargs):
        spawned.append(kwargs.get("repeats", 1))
        return real(*args, **kwargs)

    monkeypatch.setattr(memory.measure, "peak_rss_subprocess", counted)
    row = benchmark.benchmark(
        "sphere", 16, 8, "im2col", "float32", threads=1, repeats=3, n=len(voxels.voxel_set("sphere", 16))
    )
    assert spawned == [3], "each repeat started its own process"
    assert row["repeats"] == len(row["seconds"]) == 3  # milliseconds a call: never settled, every repeat taken
    assert row["peak_bytes"] > 0 and row["peak_over_model"] == row["peak_bytes"] / row["model_bytes"]


def test_a_measured_row_keeps_its_process_samples_and_the_first_call_as_its_time():
    n = len(voxels.voxel_set("sphere", 16))
    row = memory.measured_row("accumulate", "sphere", 16, 8, n, "float32", threads=1, repeats=2)
    assert len(row["samples"]) == 2 and row["samples"][0] == row["seconds"]
    table = memory.measure_table([("sphere", 16, "accumulate")], {("sphere", 16): n}, 8, progress=False)
    assert "samples" not in table.columns  # one call per case: the table keeps its columns


def test_spconv_is_checked_on_the_call_that_built_its_rulebook(monkeypatch):
    spconv = pytest.importorskip("spconv.pytorch")
    forwards = []
    real = spconv.SubMConv3d.forward

    def counted(self, *args, **kwargs):
        forwards.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(spconv.SubMConv3d, "forward", counted)

    def one_sample(run, repeats):
        run()
        return [1.0]

    monkeypatch.setattr(bracket, "sample_adaptive", one_sample)  # what the spconv row's bracket samples with
    got = benchmark.spconv_seconds(voxels.voxel_set("sphere", 16), 16, 8, repeats=3)
    assert got is not None and got["max_abs_diff_vs_ours"] <= 1e-4
    assert len(forwards) == 2  # the first call (rulebook built, and checked) and one sample: no call only to check


def test_the_default_layer_stops_at_two_samples_that_agree(monkeypatch):
    layers = []
    real = conv.submanifold_conv3d

    def counted(*args, **kwargs):
        layers.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark.conv, "submanifold_conv3d", counted)
    monkeypatch.setattr(timing, "settled", lambda samples, *_: len(samples) >= 2)
    got = benchmark.default_pipeline("sphere", 16, 8, threads=1, repeats=3, spconv_threads=None)
    assert len(layers) == 1 + 2  # one warm-up, then two samples that agree; not all three
    assert got["layer"]["best_seconds"] <= got["layer"]["seconds"]


def test_children_inputs_go_to_memory_backed_scratch_when_it_has_room(tmp_path):
    assert measure.scratch_root(1, tmp_path) == str(tmp_path)
    assert measure.scratch_root(1 << 62, tmp_path) is None  # too little room: the default folder
    assert measure.scratch_root(1, tmp_path / "missing") is None
