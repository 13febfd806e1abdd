"""The measurement harness must see a peak it did not cause and ignore one it was not asked to measure."""

import time

import pytest

from weftlib import measure
from weftlib.measure import bracket


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


def killed_workload():
    """Setup for the harness: a run that dies the way the kernel's OOM killer kills."""
    import os
    import signal

    return lambda: os.kill(os.getpid(), signal.SIGKILL)


def test_a_child_killed_outright_is_reported_not_waited_for():
    with pytest.raises(RuntimeError, match=r"failed \(exit -9\):\nthe measuring process ended without a result"):
        measure.peak_rss_subprocess("tests.test_measure:killed_workload")


def spinning_workload(seconds: float):
    """Setup for the harness: a run that keeps one core busy for `seconds` (longer than the test's timeout)."""

    def run():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return run


def test_a_child_out_of_time_says_when_it_ran_and_what_cpu_it_used():
    """The stop carries its window and the child's own CPU, so a bracket can tell a slow machine from a hang."""
    before = time.perf_counter()
    with pytest.raises(measure.MeasurementStopped, match=r"took over 1\.5 s; stopped") as stop:
        measure.peak_rss_subprocess("tests.test_measure:spinning_workload", {"seconds": 30}, timeout=1.5)
    start, end = stop.value.window
    assert before <= start < end <= time.perf_counter()
    assert end - start >= 1.5
    assert 0 < stop.value.cpu_seconds <= (end - start) + 0.5  # one spinning thread: at most its wall time


def test_failing_child_raises_with_its_error():
    with pytest.raises(RuntimeError, match=r"unexpected keyword argument .wrong."):
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

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
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


def test_bound_of_names_the_side_that_sets_it_and_check_bound_refuses_a_beaten_one():
    fake = {"sgemm_gflops": 100.0, "copy_gbps": 10.0}
    assert measure.bound_of(2e11, 1e9, fake) == (pytest.approx(2.0), "flops")
    assert measure.bound_of(1e9, 5e10, fake) == (pytest.approx(5.0), "bytes")
    assert measure.check_bound(3.0, 2.0, "row") == pytest.approx(1.5)
    with pytest.raises(measure.BoundBeaten, match=r"row: 1\.9 s is below its lower bound 2 s"):
        measure.check_bound(1.9, 2.0, "row")


def _fake_bracket(monkeypatch, before, after, busy_s=0.0, own_s=0.0, wall=10.0, reference=None):
    """A Bracket on a fake clock and fake rates: `busy_s` machine CPU and `own_s` of this process in the block."""
    samples = iter([before, after])
    clock = iter([0.0, 1.0, 1.0 + wall, wall + 2.0])  # start, before done, after starts, end
    cpu = iter([(100.0, 50.0), *[(100.0 + busy_s, 50.0 + own_s)] * 2])  # enter; the after sample's start, end
    monkeypatch.setattr(bracket, "machine_limits", lambda threads=None, repeats=3: dict(next(samples)))
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bracket, "_cpu_seconds", lambda: next(cpu))
    with measure.Bracket(2, reference=reference) as block:
        pass
    return block


def _rates(sgemm, copy, load=1.0):
    return {"sgemm_gflops": sgemm, "copy_gbps": copy, "load_average": load, "threads": 2}


def test_bracket_marks_a_block_contended_when_its_rates_moved_more_than_a_quarter(monkeypatch):
    quiet = _fake_bracket(monkeypatch, _rates(200, 30), _rates(190, 29), busy_s=20.0, own_s=20.0)
    quiet.note(1.5, 10.5)  # the timed calls ended nearer the "after" sample
    v = quiet.verdict()
    assert v["contended"] is False and v["rates_from"] == "after" and v["sgemm_gflops"] == 190
    assert v["rate_change"] == pytest.approx(200 / 190 - 1) and v["others_cores"] == pytest.approx(0.0)
    # 03's layer in the appendix run of issue 21: sgemm 261 before, 169 after
    moved = _fake_bracket(monkeypatch, _rates(261, 23.6), _rates(169, 14.2))
    moved.note(1.2, 5.0)  # nearer "before": its rate is kept, never the better of the two by choice
    v = moved.verdict()
    assert v["contended"] is True and v["rates_from"] == "before" and v["sgemm_gflops"] == 261
    assert v["rates_after"]["sgemm_gflops"] == 169


def test_bracket_marks_a_block_contended_when_other_work_took_a_quarter_core(monkeypatch):
    steady = _fake_bracket(monkeypatch, _rates(150, 20), _rates(150, 20), busy_s=24.0, own_s=20.0, wall=10.0)
    v = steady.verdict()  # rates agree, but others took 4 CPU seconds over 12 s of wall time
    assert v["rate_change"] == 0 and v["others_cores"] == pytest.approx(4 / 12) and v["contended"] is True


def test_bracket_held_to_a_reference_marks_a_block_whose_rates_dipped_before_and_after_alike(monkeypatch):
    # 03's 1024 layer in a slow hour: sgemm 167 and 137, copy 30.5 and 33.3, where the same run had measured 198.5
    # and 50 on the same threads; the two samples differ by less than a quarter
    best = {"sgemm_gflops": 198.5, "copy_gbps": 50.0}
    low_before, low_after = _rates(166.8, 30.5), _rates(136.7, 33.25)
    alone = _fake_bracket(monkeypatch, low_before, low_after).verdict()
    assert alone["contended"] is False and alone["below_reference"] is None
    held = _fake_bracket(monkeypatch, low_before, low_after, reference=best).verdict()
    assert held["contended"] is True and held["below_reference"] == pytest.approx(50.0 / 30.5 - 1)
    near = _fake_bracket(monkeypatch, _rates(190, 45), _rates(185, 44), reference=best).verdict()
    assert near["contended"] is False and near["below_reference"] == pytest.approx(50.0 / 44 - 1)
    above = _fake_bracket(monkeypatch, _rates(210, 55), _rates(205, 52), reference=best).verdict()
    assert above["below_reference"] == 0.0 and above["contended"] is False


def test_best_rates_takes_each_rate_at_its_best_over_the_quiet_rows_on_the_threads_asked():
    rows = [
        {"threads": 2, "rates_before": _rates(150, 50), "rates_after": _rates(198, 31), "contended": False},
        {"threads": 2, "rates_before": _rates(120, 40), "rates_after": None, "contended": False},
        {"threads": 2, "rates_before": _rates(260, 70), "rates_after": _rates(140, 35), "contended": True},  # a spike
        {"threads": 1, "rates_before": _rates(400, 90), "rates_after": _rates(400, 90), "contended": False},
        {"method": "untimed"},
    ]
    assert measure.best_rates(rows, 2) == {"sgemm_gflops": 198.0, "copy_gbps": 50.0}
    assert measure.best_rates(rows, 1) == {"sgemm_gflops": 400.0, "copy_gbps": 90.0}
    assert measure.best_rates(rows, 4) is None and measure.best_rates([], 2) is None
    assert measure.best_rates([rows[2]], 2) is None  # only a contended row: no reference


def test_bracket_has_no_verdict_before_it_ends():
    with pytest.raises(RuntimeError, match="not finished"):
        measure.Bracket().verdict()


def test_bracket_measures_real_rates_and_this_processes_cpu():
    with measure.Bracket(threads=1, repeats=1) as block:
        block.timed(lambda: sum(range(10_000)), repeats=2)
    v = block.verdict()
    assert v["sgemm_gflops"] > 0 and v["copy_gbps"] > 0 and isinstance(v["contended"], bool)
    assert v["others_cores"] is None or v["others_cores"] >= 0


def test_adaptive_samples_stop_at_two_that_agree_for_a_call_of_seconds(monkeypatch):
    """On a fake clock: each call takes the next duration."""
    clock = [0.0]
    durations = iter([64.0, 70.0, 70.0, 6.2, 5.5, 6.0])

    def fn():
        clock[0] += next(durations)

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    assert measure.sample_adaptive(fn, 3, first=66.0) == pytest.approx([66.0, 64.0])  # agree within 10 %: stop
    assert measure.sample_adaptive(fn, 3, first=50.0) == pytest.approx([50.0, 70.0, 70.0])  # disagree: go on
    assert measure.sample_adaptive(fn, 3) == pytest.approx([6.2, 5.5, 6.0])  # 6.2 and 5.5 are 12 % apart
    durations = iter([6.0, 5.8])
    assert measure.sample_adaptive(fn, 5) == pytest.approx([6.0, 5.8])  # over LONG_CALL_S and within 10 %
    durations = iter([1.0, 1.0, 1.0])
    assert len(measure.sample_adaptive(fn, 3)) == 3  # short calls: every repeat
    assert measure.spread([1.0, 1.2, 1.1]) == pytest.approx(0.2 / 1.1) and measure.spread([1.0]) is None
    assert not measure.settled([6.0]) and not measure.settled([1.9, 1.9]) and measure.settled([2.1, 2.2])
    assert measure.settled([4.9, 4.6])  # NAF's 512^2 rows (2 to 5 s a call) settle at two samples that agree
    with pytest.raises(ValueError, match="repeats"):
        measure.sample_adaptive(fn, 0)


def test_the_measuring_child_times_the_calls_that_give_the_peak_and_saves_the_first_result(tmp_path):
    got = measure.peak_rss_subprocess(
        "tests.test_measure:alloc_workload", {"megabytes": 64}, repeats=3, save=tmp_path / "out.npy"
    )
    assert len(got["samples"]) == 3 and got["samples"][0] == got["seconds"]
    assert got["window"][0] < got["window"][1] and 60 * 2**20 <= got["peak_bytes"] <= 100 * 2**20
    import numpy as np

    assert np.load(tmp_path / "out.npy").shape == ()  # alloc_workload returns an int


def minus(result, offset):
    """A check the measuring child runs on its first result (`peak_rss_subprocess(check=...)`)."""
    return result - offset


def test_the_measuring_child_judges_its_first_result_and_sends_back_only_the_answer():
    """At NAF's geometry an output is a gigabyte: the child answers what was asked of it (its difference from a
    reference, in 02), and nothing is saved unless asked."""
    got = measure.peak_rss_subprocess(
        "tests.test_measure:alloc_workload",
        {"megabytes": 1},
        check="tests.test_measure:minus",
        check_kwargs={"offset": 1},
    )
    assert got["checked"] == 256 - 1  # 1 MiB of ones, every 4096th byte summed, less the offset
    assert measure.peak_rss_subprocess("tests.test_measure:alloc_workload", {"megabytes": 1})["checked"] is None


def test_a_forked_measuring_process_counts_as_this_blocks_own_work(monkeypatch):
    """The forkserver's children are not this process's: their CPU, noted with the window, is not other work."""
    block = _fake_bracket(monkeypatch, _rates(190, 30), _rates(190, 30), busy_s=10.0, own_s=2.0, wall=10.0)
    block.note(1.0, 11.0, cpu_seconds=8.0)
    assert block.verdict()["others_cores"] == pytest.approx(0.0) and block.verdict()["contended"] is False


def test_torch_threads_restores_the_count_even_when_the_block_raises():
    import torch

    before = torch.get_num_threads()
    with measure.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), measure.torch_threads(1):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    with measure.torch_threads(None):
        assert torch.get_num_threads() == before
