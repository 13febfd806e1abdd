"""The measurement harness must see a peak it did not cause and ignore one it was not asked to measure."""

import pytest

from weftlib import measure


def alloc_workload(megabytes: int, prealloc: int = 0):
    """Setup for the harness: `prealloc` MB before measuring (must not count), `megabytes` during."""
    import numpy as np

    kept = np.ones(prealloc * 2**20, dtype=np.uint8)

    def run():
        block = np.ones(megabytes * 2**20, dtype=np.uint8)
        return int(block[::4096].sum()) + int(kept[:1].sum())

    return run


def test_peak_counts_the_workload_not_the_setup():
    small = measure.peak_rss_subprocess("tests.test_measure:alloc_workload", {"megabytes": 8, "prealloc": 200})
    big = measure.peak_rss_subprocess("tests.test_measure:alloc_workload", {"megabytes": 300, "prealloc": 0})
    assert small["peak_bytes"] < 40 * 2**20
    assert small["baseline_bytes"] > 200 * 2**20
    assert 290 * 2**20 <= big["peak_bytes"] <= 340 * 2**20


def test_failing_child_raises_with_its_error():
    with pytest.raises(RuntimeError, match="unexpected keyword argument .wrong."):
        measure.peak_rss_subprocess("tests.test_measure:alloc_workload", {"wrong": 1})
    with pytest.raises(ValueError, match="module:function"):
        measure.peak_rss_subprocess("no_colon_here", {})


def test_median_ignores_the_warmup_and_one_outlier(monkeypatch):
    """On a fake clock (no timed assertion): each call of `fn` takes the next duration; the 9 s warm-up is not
    sampled, and the 5 s outlier among the repeats does not move the median."""
    clock = [0.0]
    durations = iter([9.0, 0.01, 0.01, 5.0, 0.02, 0.01])

    def fn():
        clock[0] += next(durations)

    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    assert measure.sample_seconds(fn, repeats=5, warmup=1) == pytest.approx([0.01, 0.01, 5.0, 0.02, 0.01])
    durations = iter([9.0, 0.01, 0.01, 5.0, 0.02, 0.01])
    assert measure.median_seconds(fn, repeats=5, warmup=1) == pytest.approx(0.01)


def test_machine_limits_are_positive_rates_and_the_roofline_takes_the_slower_side():
    limits = measure.machine_limits(threads=1, repeats=1)
    assert limits["sgemm_gflops"] > 0 and limits["copy_gbps"] > 0 and limits["load_average"] >= 0
    fake = {"sgemm_gflops": 100.0, "copy_gbps": 10.0}
    assert measure.limit_seconds(2e11, 1e9, fake) == pytest.approx(2.0)  # compute-bound
    assert measure.limit_seconds(1e9, 5e10, fake) == pytest.approx(5.0)  # data-bound
    with pytest.raises(ValueError, match="flops and bytes"):
        measure.limit_seconds(-1, 0, fake)
