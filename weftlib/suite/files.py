"""Files the suite writes into folders it does not own alone: written whole, and one writer at a time.

A temporary file beside the target is created by `tempfile` (O_EXCL, a random name), so a symlink or file
planted under a predictable name is never followed nor overwritten; the target is then replaced in one
`os.replace`. A lock is `fcntl.flock` on a lock file: held until the block ends, released by the kernel if
the process dies, so a killed publisher never leaves the next one waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: the mode a plain `open(..., "w")` would have given the file


def write_atomic(target: Path, text: str) -> Path:
    """Write `text` (UTF-8, LF as given) to `target` through a fresh temporary file in its folder."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            os.fchmod(fh.fileno(), 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (an existing regular file, never followed if a symlink)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
