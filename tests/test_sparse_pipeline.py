"""The default two-line pipeline (issue 33): `kernel_map`, then layers on the bare table, run compact on one
rulebook kept for that table; the chunks run on every thread (`chunk_threads`)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from weftlib import measure, sparse
from weftlib.sparse import benchmark, chunk_threads, conv, pairs, voxels


def _layer(n: int, c: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((n, c), generator=gen), torch.randn((c, c, 3, 3, 3), generator=gen) / (27 * c) ** 0.5


def test_the_default_call_on_a_table_equals_conv3d_and_builds_its_rulebook_once():
    coords = voxels.voxel_set("sphere", 32)
    table = sparse.kernel_map(coords, 3)
    feats, weight = _layer(len(coords), 8)
    first = sparse.submanifold_conv3d(feats, table, weight)
    kept = conv.rulebook_of(table)
    second = sparse.submanifold_conv3d(feats, table, weight)
    assert conv.rulebook_of(table).sources is kept.sources, "a second layer built another rulebook"
    assert kept.table is table and kept.pairs == int((table >= 0).sum())
    ref = sparse.reference_conv3d(feats, coords, weight, 32)
    assert (first.double() - ref).abs().max().item() <= 1e-4 and torch.equal(first, second)


def test_the_kept_rulebook_follows_in_place_edits_and_never_keeps_the_table_alive():
    coords = voxels.voxel_set("sphere", 16)
    table = sparse.kernel_map(coords)
    before = conv.rulebook_of(table)
    table[:, 0] = -1  # an in-place edit: the kept pairs no longer describe the table
    after = conv.rulebook_of(table)
    assert after.sources is not before.sources and after.pairs == int((table >= 0).sum())
    assert conv.rulebook_of(table, chunk_rows=7).chunk_rows == 7  # other chunks asked: rebuilt
    gone = weakref.ref(table)
    del table, before, after
    gc.collect()
    assert gone() is None, "the kept rulebook kept its table alive"


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compact_on_threads_equals_compact_on_one(threads):
    coords = voxels.voxel_set("bunny", 32)
    table = sparse.kernel_map(coords)
    feats, weight = _layer(len(coords), 6, seed=threads)
    book = sparse.rulebook(table, 50)  # many chunks
    flat = conv._flat_weight(weight).contiguous()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = pairs.conv(feats, book, flat)
        torch.set_num_threads(threads)
        many = pairs.conv(feats, book, flat)
        rebuilt = pairs.build(table, 50)
        assert torch.get_num_threads() == threads, "the chunk threads left torch's thread count changed"
    finally:
        torch.set_num_threads(before)
    assert torch.allclose(one, many, atol=1e-6)
    assert torch.equal(rebuilt.sources, book.sources) and rebuilt.chunk_starts == book.chunk_starts


def test_run_chunks_runs_each_chunk_once_and_raises_a_threads_error():
    seen: list[int] = []

    def make_work():
        return seen.append

    chunk_threads.run_chunks(17, make_work, threads=3)
    assert sorted(seen) == list(range(17))
    assert chunk_threads.workers_for(2, threads=8) == 2 and chunk_threads.workers_for(0, threads=8) == 1

    def make_failing():
        def work(c: int) -> None:
            if c == 5:
                raise ValueError("chunk 5")

        return work

    with pytest.raises(ValueError, match="chunk 5"):
        chunk_threads.run_chunks(9, make_failing, threads=2)


def test_rulebook_rows_share_one_chunk_budget_among_the_threads():
    n = 10**6
    whole = sparse.auto_chunk_rows("compact", 27, 64, 4, n)
    assert conv.rulebook_rows(n, 27, 64, 4, threads=1) == whole
    assert conv.rulebook_rows(n, 27, 64, 4, threads=2) == max(64, whole // 2)
    assert conv.rulebook_rows(100, 27, 64, 4, threads=2) == 100  # a small set is one chunk


def test_default_pipeline_reports_the_map_once_and_the_layer_against_its_bound():
    got = benchmark.default_pipeline("sphere", 16, 8, threads=1, repeats=2, spconv_threads=None)
    assert got["map"]["table_seconds"] > 0 and got["map"]["pairs_seconds"] > 0
    assert got["map"]["pairs"] == got["work"]["pairs"]
    assert got["bound_seconds"] > 0 and got["layer"]["best_seconds"] <= got["layer"]["seconds"]
    assert got["spconv"] is None and got["over_spconv"] is None
    assert got["contended"] == got["layer"]["contended"]
    assert got["over_bound"] == got["layer"]["best_seconds"] / got["bound_seconds"]
    assert benchmark.pipeline_claims(got) == []  # below the 1024 grid: shown, not claimed
    at_scale = {**got, "res": 1024, "over_bound": 1.5, "contended": False}
    (claim,) = benchmark.pipeline_claims(at_scale)
    assert claim.status is measure.ClaimStatus.HOLDS
    assert benchmark.pipeline_claims({**at_scale, "over_bound": 2.5})[0].status is measure.ClaimStatus.FAILS
    assert benchmark.pipeline_claims({**at_scale, "over_bound": 0.9})[0].status is measure.ClaimStatus.FAILS
    busy = benchmark.pipeline_claims({**at_scale, "over_bound": 9.0, "contended": True})[0]
    assert busy.status is measure.ClaimStatus.CONTENDED and not busy.judged


def test_a_layer_bracketed_far_below_the_runs_best_rates_is_not_judged():
    """The rates the layer's block measured are held to `reference` (the run's best on the same threads): a
    machine that rates far below it ran the layer in a slow spell, and the claim on it is not judged."""
    unreachable = {"sgemm_gflops": 1e9, "copy_gbps": 1e9}
    got = benchmark.default_pipeline("sphere", 16, 8, threads=1, repeats=2, spconv_threads=None, reference=unreachable)
    assert got["layer"]["below_reference"] > measure.CONTENDED and got["contended"] is True
    (claim,) = benchmark.pipeline_claims({**got, "res": 1024, "over_bound": 9.0})
    assert claim.status is measure.ClaimStatus.CONTENDED
    own = measure.best_rates([{**got["layer"], "threads": 1, "contended": False}], 1)
    assert own is not None and own["sgemm_gflops"] > 0 and own["copy_gbps"] > 0


def test_spconv_on_the_same_voxels_equals_the_default_layer():
    pytest.importorskip("spconv.pytorch")
    got = benchmark.default_pipeline("sphere", 16, 8, threads=1, repeats=2, spconv_threads=1)
    spc = got["spconv"]
    assert spc["max_abs_diff_vs_ours"] <= 1e-4 and spc["threads"] == 1 and spc["version"]
    assert got["over_spconv"] == got["layer"]["seconds"] / spc["seconds"]


def test_the_grouped_gemm_and_the_per_offset_loop_give_one_result(monkeypatch):
    """float32 with 16-byte rows takes torch._grouped_mm; other operands the loop of mm; the same products."""
    coords = voxels.voxel_set("sphere", 16)
    table = sparse.kernel_map(coords)
    feats, weight = _layer(len(coords), 8)
    flat = conv._flat_weight(weight).contiguous()
    book = conv.rulebook(table, 64)
    assert pairs._groups(feats, flat) and not pairs._groups(feats.double(), flat.double())
    assert not pairs._groups(feats[:, :1].contiguous(), flat[:, :1, :1].contiguous())  # 4-byte rows
    grouped = pairs.conv(feats, book, flat)
    monkeypatch.setattr(pairs, "_groups", lambda *_: False)
    looped = pairs.conv(feats, book, flat)
    assert (grouped - looped).abs().max().item() <= 1e-6
    ref = sparse.reference_conv3d(feats, coords, weight, 16)
    assert (grouped.double() - ref).abs().max().item() <= 1e-4
