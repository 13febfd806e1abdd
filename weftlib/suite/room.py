"""Room on disk for a run, checked before the run starts rather than found missing part-way through.

A run of the full plan keeps about 11 GB (NAF's 512² graphs, their recorded runs and 05's DFC pack), and every
`make appendix` keeps its own run folder under outputs/runs/ (the published appendix hard-links its files), so
runs accumulate until a later one stops in its second notebook, minutes in, with the disk full. The room a run
needs is what the last run of the same plan kept (`RunSummary.disk_bytes`, measured by `kept_bytes` when its
index is written): a first run has no such figure and is not held back.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..formatting import format_value

HEADROOM = 1.10  # a run may keep a little more than the last one did (another NAF, another grid's voxels)


class NoRoom(OSError):
    """The disk a run would write to has less room than the last run of the same plan kept (nothing written)."""


def kept_bytes(folder: Path) -> int:
    """Bytes the files under `folder` hold, each file once however many hard links it has (its blocks, not its
    apparent size: a sparse file holds less than it says)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:  # gone while walked
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def free_bytes(path: Path) -> int:
    """Free bytes on the file system that would hold `path` (its nearest existing folder)."""
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    return shutil.disk_usage(existing).free


def _size(n: int) -> str:
    return format_value(n, "B")


def check_room(out: Path, needed: int, measured_in: Path, runs: Path) -> None:
    """Raise NoRoom when the disk holding `out` has less free than `needed` (the bytes the last run of the plan,
    `measured_in`, kept) with `HEADROOM`; the message says what `runs` (earlier run folders) holds."""
    want, free = int(needed * HEADROOM), free_bytes(out)
    if free >= want:
        return
    earlier = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    held = f"; {runs} holds {len(earlier)} earlier runs, {_size(sum(map(kept_bytes, earlier)))}" if earlier else ""
    raise NoRoom(
        f"not enough disk for this run: {_size(free)} free where it would write ({out}), and the last run"
        f" of this plan kept {_size(needed)} ({measured_in}){held}. Remove runs you no longer need"
        " (`make clean-outputs` removes every output), or give --out on a disk with room"
    )
