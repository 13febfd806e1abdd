"""Forked workers: results in order, failures named, and torch usable in a worker after the parent used it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from weftlib import workers


def _pid_after(seconds: float) -> int:
    import time

    time.sleep(seconds)
    return os.getpid()


def test_jobs_run_in_forked_workers_and_come_back_in_order():
    done = []
    got = workers.map_forked(lambda x: (x * x, os.getpid()), [3, 1, 2], workers=2, progress=done.append)
    assert [v for v, _ in got] == [9, 1, 4] and sorted(done) == [1, 2, 3]
    assert os.getpid() not in {pid for _, pid in got}
    inline = workers.map_forked(lambda x: os.getpid(), [1, 2], workers=1)
    assert inline == [os.getpid()] * 2  # one worker: nothing forked
    assert workers.map_forked(_pid_after, [0.0])[0] == os.getpid()  # one job: nothing forked


def test_at_most_workers_run_at_once(tmp_path):
    def job(i):
        import time

        marker = tmp_path / f"running-{i}"
        marker.touch()
        time.sleep(0.3)
        alive = len(list(tmp_path.glob("running-*")))
        marker.unlink()
        return alive

    assert max(workers.map_forked(job, range(6), workers=2)) <= 2


def test_a_failing_job_is_named_and_later_jobs_do_not_start(tmp_path):
    def job(i):
        (tmp_path / f"started-{i}").touch()
        if i == 0:
            raise ValueError("job zero refuses")
        return i

    with pytest.raises(workers.WorkerError, match="ValueError: job zero refuses"):
        workers.map_forked(job, range(5), workers=2)
    assert len(list(tmp_path.glob("started-*"))) <= 3  # 0 and 1 ran; at most one more began before 0 was read


def test_a_worker_that_dies_is_reported():
    with pytest.raises(workers.WorkerError, match="died"):
        workers.map_forked(lambda i: os._exit(3), [1, 2], workers=2)
    with pytest.raises(ValueError, match="workers"):
        workers.map_forked(abs, [1], workers=0)


def test_torch_works_in_a_worker_after_the_parent_used_its_threads():
    """GNU OpenMP's pool does not survive a fork: without the worker's one-thread setting this hangs."""
    script = textwrap.dedent(
        """
        import torch
        from weftlib import workers
        torch.set_num_threads(2)
        a = torch.randn(512, 512)
        (a @ a).sum()
        print(workers.map_forked(lambda s: float((torch.ones(256, 256) @ torch.ones(256, 256)).sum()) + s, [0, 1], workers=2))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([256.0**3, 256.0**3 + 1])
