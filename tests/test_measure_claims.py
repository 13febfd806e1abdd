"""Claims about time and memory (`measure.claims`): noise cannot break them, a regression still does."""

from __future__ import annotations

import pandas as pd
import pytest

from weftlib import measure
from weftlib.measure import ClaimStatus
from weftlib.sparse import memory
from weftlib.suite import record

MiB = 2**20


def test_the_allowance_is_whole_huge_pages_of_this_kernel():
    assert measure.peak_allowance() == measure.ALLOWANCE_PAGES * measure.huge_page_bytes()
    assert measure.huge_page_bytes() >= 4096


def test_a_small_layers_allocator_pages_do_not_fail_it():
    """Issue 30's figures: the bunny at 64, accumulate 6.8 MB modelled and 11.1 MB measured (1.63x)."""
    claim = measure.peak_claim("bunny 64 accumulate", 11.1e6, 6.8e6, 1.25, allowance=16 * MiB)
    assert claim.status is ClaimStatus.HOLDS and claim.form.startswith("ratio + allowance")
    assert claim.figures["ratio"] == pytest.approx(11.1 / 6.8)


def test_a_method_that_doubled_its_buffers_fails_at_a_size_the_allowance_is_small_beside():
    assert measure.peak_claim("x", 68e6, 34e6, 1.25, allowance=16 * MiB).status is ClaimStatus.FAILS
    assert measure.peak_claim("x", 17e6, 34e6, 1.25, allowance=4 * MiB).status is ClaimStatus.FAILS  # half


def test_large_models_are_held_to_the_ratio_alone():
    big = 10 * 16 * MiB
    assert measure.peak_claim("x", 1.2 * big, big, 1.25, allowance=16 * MiB).form == "ratio"
    assert measure.peak_claim("x", 1.2 * big, big, 1.25, allowance=16 * MiB).status is ClaimStatus.HOLDS
    assert measure.peak_claim("x", 1.3 * big, big, 1.25, allowance=16 * MiB).status is ClaimStatus.FAILS
    assert measure.peak_claim("x", 0.7 * big, big, 1.25, allowance=16 * MiB).status is ClaimStatus.FAILS


def test_an_upper_bound_only_claim_ignores_a_small_peak():
    assert measure.peak_claim("km", 0.0, 4e6, 2.2, allowance=MiB, lower=False).status is ClaimStatus.HOLDS
    assert measure.peak_claim("km", 30e6, 4e6, 2.2, allowance=MiB, lower=False).status is ClaimStatus.FAILS


def test_peak_claim_refuses_a_meaningless_model_or_limit():
    with pytest.raises(ValueError, match="model"):
        measure.peak_claim("x", 1.0, 0.0, 1.25)
    with pytest.raises(ValueError, match="limit"):
        measure.peak_claim("x", 1.0, 1.0, 0.5)


def test_interleaved_ratio_is_taken_on_the_minima():
    """A busy neighbour stretched one plain sample: the median ratio would read 0.6, the minima 1.5."""
    assert measure.interleaved_ratio([1.5, 1.6, 1.5], [1.0, 5.0, 5.0]) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        measure.interleaved_ratio([], [1.0])
    with pytest.raises(ValueError):
        measure.interleaved_ratio([1.0], [0.0])


def test_a_contended_time_claim_is_not_judged_and_never_fails():
    claim = measure.time_claim("t", "traced < 2x plain", 2.003, below=2, contended=True)
    assert claim.status is ClaimStatus.CONTENDED and not claim.judged
    assert claim.check() is claim and measure.failed([claim]) == []


def test_a_quiet_time_claim_is_judged_both_ways():
    assert measure.time_claim("t", "s", 1.5, below=2, contended=False).status is ClaimStatus.HOLDS
    failing = measure.time_claim("t", "s", 2.5, below=2, contended=False)
    assert failing.status is ClaimStatus.FAILS
    with pytest.raises(measure.ClaimFailed, match="t: s"):
        measure.check_all([failing])
    assert measure.time_claim("t", "s", 0.9, above=1.0, contended=False).status is ClaimStatus.FAILS
    with pytest.raises(ValueError, match="bound"):
        measure.time_claim("t", "s", 1.0, contended=False)


def test_check_bound_judges_only_quiet_rows():
    with pytest.raises(measure.BoundBeaten):
        measure.check_bound(0.5, 1.0, "row")
    assert measure.check_bound(0.5, 1.0, "row", contended=True) == pytest.approx(0.5)


def test_peak_claims_name_each_measured_row():
    rows = pd.DataFrame(
        [
            {"shape": "sphere", "res": 32, "method": "im2col", "measured_bytes": 40e6, "model_bytes": 34e6},
            {"shape": "sphere", "res": 32, "method": "auto", "measured_bytes": 90e6, "model_bytes": 34e6},
        ]
    )
    claims = memory.peak_claims(rows, 1.25, "bench")
    assert [c.name for c in claims] == ["bench sphere 32 im2col", "bench sphere 32 auto"]
    assert [c.status for c in claims] == [ClaimStatus.HOLDS, ClaimStatus.FAILS]


def test_the_record_counts_judged_and_unjudged_claims(tmp_path):
    rec = record.Recorder("nb", tmp_path)
    rec.claims(
        [
            measure.time_claim("a", "s", 1.0, below=2, contended=False),
            measure.time_claim("b", "s", 3.0, below=2, contended=True),
        ]
    )
    rec.claims([measure.time_claim("a", "s", 1.1, below=2, contended=False)])  # judged again: replaced
    quality = record.timing_quality(record.load_metrics(tmp_path, "nb"))
    assert quality["claims"]["judged"] == ["a"]
    assert quality["claims"]["not_judged"] == {"b": "not judged: contended"}
    assert quality["text"].endswith("claims judged 1 of 2 (b not judged: contended)")
