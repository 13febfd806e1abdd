"""A folder written whole or not at all: built beside its target and swapped in at the end.

The probe pack and the partition both replace an earlier folder of their own; built this way, a failure half
way leaves the earlier folder as it was, and a success leaves none of the earlier folder's files behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def building(target: Path) -> Iterator[Path]:
    """A fresh folder beside `target` to build in; on success it replaces `target` (an earlier one is moved
    aside first, then deleted), on any failure it is removed and `target` is left as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield build
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(build, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
