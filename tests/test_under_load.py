"""The default plan passes while every core is kept busy by a CPU burner this test starts.

This is not a timing test: it holds that no claim of the suite turns noise into a failure. A time claim
measured on a contended machine is shown as not judged (`measure.claims`), a memory claim does not move with
CPU load, and every other claim is exact. The burner is checked too: the run must have seen its own rows
contended, or the load never reached it and the test proved nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from weftlib.suite import params, runner
from weftlib.suite.record import load_metrics, timing_quality

pytestmark = pytest.mark.notebook
PLAN = params.load_plan(params.REPO_ROOT / "params" / "default.yaml")
BURN_SECONDS = 1800  # each burner stops by itself after this, should the test be killed before its teardown
_SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """One spinning Python process per core, at the suite's own priority, for the test's duration."""
    cores = os.cpu_count() or 2
    burners = [
        subprocess.Popen([sys.executable, "-c", _SPIN.format(seconds=BURN_SECONDS)], stdin=subprocess.DEVNULL)
        for _ in range(cores)
    ]
    try:
        yield cores
    finally:
        for proc in burners:
            proc.kill()
        for proc in burners:
            proc.wait(timeout=30)


def test_the_default_plan_passes_with_every_core_busy(busy_cores, tmp_path):
    result = runner.run_suite(PLAN, out=tmp_path / "run", appendix=tmp_path / "appendix", log=print)
    failed = [f"{nb.name}: {nb.describe_error()}" for nb in result.notebooks if nb.status != "passed"]
    assert not failed, "a notebook failed under load:\n" + "\n".join(failed)
    quality = {nb.name: timing_quality(load_metrics(result.run_dir, nb.name)) for nb in result.notebooks}
    contended = {name: q["contended_rows"] for name, q in quality.items() if q["contended_rows"]}
    assert contended, f"{busy_cores} burners, yet no timed row was contended: the load never reached the run"
    unjudged = {n: q["claims"]["not_judged"] for n, q in quality.items() if q["claims"]["not_judged"]}
    assert unjudged, "every time claim was judged on a contended machine"
