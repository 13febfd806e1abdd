"""05's fixes and 06's cuts take the small graphs two at a time and the large ones (NAF's 512², DiT's upstream
graphs) alone, read from the file's header; the results are the same, in the models' order."""

from __future__ import annotations

import os

import onnx
import pytest

from tests.test_gate_partition import chain
from weftlib.gate.run import by_size, cutting


def _saved(model: onnx.ModelProto, folder, name: str):
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def test_large_is_read_from_the_largest_graph_input_or_output_and_the_file_size(tmp_path, monkeypatch):
    small = _saved(chain("small", ["conv", "sin"]), tmp_path, "small")
    side = 1 << 11  # [1, 1, 2048, 2048]: 4 M elements, `LARGE_TENSOR`
    big = _saved(chain("big", ["sin"], x_shape=(1, 1, side, side)), tmp_path, "big")
    just_under = _saved(chain("under", ["sin"], x_shape=(1, 1, side, side - 1)), tmp_path, "under")
    assert [by_size.is_large(p) for p in (small, big, just_under)] == [False, True, False]
    monkeypatch.setattr(by_size, "LARGE_FILE", small.stat().st_size)
    assert by_size.is_large(small)


def test_small_graphs_run_in_forked_workers_the_large_ones_here_in_order(tmp_path):
    side = 1 << 11
    paths = [
        _saved(chain("a", ["conv", "sin"]), tmp_path, "a"),
        _saved(chain("big", ["sin"], x_shape=(1, 1, side, side)), tmp_path, "big"),
        _saved(chain("b", ["sin", "conv"]), tmp_path, "b"),
        _saved(chain("c", ["conv"]), tmp_path, "c"),
    ]
    seen = []
    out = by_size.map_by_size(lambda p: (p.stem, os.getpid()), paths, progress=seen.append)
    assert [stem for stem, _ in out] == ["a", "big", "b", "c"] and sorted(seen) == sorted(paths)
    here = os.getpid()
    assert dict(out)["big"] == here and all(pid != here for stem, pid in out if stem != "big")


def test_a_worker_error_is_raised_here_naming_the_graph(tmp_path):
    paths = [_saved(chain(n, ["conv"]), tmp_path, n) for n in "ab"]

    def fail(p):
        raise ValueError(f"{p.stem}: broken")

    with pytest.raises(Exception, match=r"[ab]: broken"):
        by_size.map_by_size(fail, paths)


def test_cut_all_two_at_a_time_gives_each_graph_the_cut_it_gets_alone(ops, tmp_path):
    paths = [
        _saved(chain(name, steps), tmp_path, name)
        for name, steps in [("a", ["conv", "sin", "conv"]), ("b", ["sin", "conv"]), ("c", ["conv", "relu"])]
    ]
    together = cutting.cut_all(paths, ops, tmp_path / "together")
    alone = {p: cutting.cut_all([p], ops, tmp_path / "alone")[p] for p in paths}
    assert list(together) == paths
    for p in paths:
        assert together[p].as_json()["segments"] == alone[p].as_json()["segments"] and together[p].proven
        assert (tmp_path / "together" / p.stem / "partition.json").is_file()
    before = cutting.before_merge(paths, ops, together)
    assert list(before) == paths and all(before[p].prediction == together[p].prediction for p in paths)
