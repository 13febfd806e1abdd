"""Time and peak memory, measured the way the appendix reports them, one job per module:

- `timing`: medians of repeats (one slow repeat from a busy neighbour does not move a median), stopped early
  once long calls agree, and torch's thread count for a measurement;
- `peak`: peak memory of one call in a fresh process forked from a server, and the allocator settings the
  runner gives every kernel;
- `limits`: the machine's sgemm and copy rates, measured in the same run, and the lower bound they give a time
  (`limit_seconds`: compulsory bytes at the copy rate or FLOPs at the sgemm rate), which it must not beat;
- `bracket`: those rates measured around every timed block, so a row says whether the machine was quiet;
- `claims`: a claim about time or memory judged so that noise cannot break it (time on minima of interleaved
  repeats, not judged when contended; memory against the model plus an allocator allowance).

Callers use the names below as `measure.<name>`.
"""

from .bracket import CONTENDED, Bracket, BracketChain, best_rates
from .claims import (
    ALLOWANCE_PAGES,
    JUDGE_RATIO_ABOVE,
    Claim,
    ClaimFailed,
    ClaimStatus,
    check_all,
    claims_rows,
    failed,
    huge_page_bytes,
    interleaved_ratio,
    peak_allowance,
    peak_claim,
    time_claim,
)
from .limits import (
    BoundBeaten,
    MachineLimits,
    Rates,
    bound_of,
    check_bound,
    copy_gbps,
    limit_seconds,
    machine_limits,
    sgemm_gflops,
)
from .others import AGREE, LONG_CALL_S, settled, spread
from .peak import ALLOCATOR_ENV, MeasurementStopped, measure_here, peak_rss_subprocess, scratch_root
from .timing import median_seconds, sample_adaptive, sample_seconds, torch_threads

__all__ = [
    "AGREE",
    "ALLOCATOR_ENV",
    "ALLOWANCE_PAGES",
    "CONTENDED",
    "JUDGE_RATIO_ABOVE",
    "LONG_CALL_S",
    "BoundBeaten",
    "Bracket",
    "BracketChain",
    "Claim",
    "ClaimFailed",
    "ClaimStatus",
    "MachineLimits",
    "MeasurementStopped",
    "Rates",
    "best_rates",
    "bound_of",
    "check_all",
    "check_bound",
    "claims_rows",
    "copy_gbps",
    "failed",
    "huge_page_bytes",
    "interleaved_ratio",
    "limit_seconds",
    "machine_limits",
    "measure_here",
    "median_seconds",
    "peak_allowance",
    "peak_claim",
    "peak_rss_subprocess",
    "sample_adaptive",
    "sample_seconds",
    "scratch_root",
    "settled",
    "sgemm_gflops",
    "spread",
    "time_claim",
    "torch_threads",
]
