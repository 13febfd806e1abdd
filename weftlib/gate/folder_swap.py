"""The one rule for every folder the suite writes (the probe pack, a partition, notebook 05's and 06's packs,
`gate fix --out`): built whole beside its target and swapped in, never over what the suite did not write.

- The folder is built in a hidden sibling (`.<name>.build-<pid>-<random>`) and swapped in only when whole; a
  failure, Ctrl-C, SIGTERM or SIGHUP while building removes the sibling and leaves the target as it was, and
  while swapping (a few renames) the signal waits until the swap is done.
- A target is written over only when it is absent, empty, or carries this suite's marker (`MARKER`) of the
  same kind. The marker lists the files the suite wrote there; every other file in it (the DFC's
  `<stem>.dfc.json` beside its graph, a user's notes, the input model itself) is carried into the new
  folder, never deleted. A file of theirs in the way of a new one is refused, by name.
- A target given as a symlink is written through: the link stays and names the new folder.
- One writer at a time: a write holds an exclusive lock (`fcntl.flock`) on `.<name>.lock` beside the target from
  before it reads the target until its swap is done, and removes it then. A second write of the same target
  (another process, or a thread) is refused at once with one line naming the holder's pid, never queued behind a
  writer that may be paused: two writers interleaving their renames would each swap out the other's folder, and
  a user's file carried into one of them would be deleted with it. A file the user drops into the target while
  it is being swapped (after the files to keep were listed) is carried too, never deleted with the old folder.

A SIGKILL cannot be caught: its sibling is named with the dead pid, and the next write of the same target
finishes what it left (`_recover`): a half-built folder removed, a swap completed or undone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..workers import pid_alive
from .vocabulary import FolderKind

MARKER = ".weftlib-folder.json"
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: the new folder gets the mode a plain mkdir would (mkdtemp's is 0o700)
Vet = Callable[[Path, Path, list[str]], None]  # (old folder, new folder, the files kept) -> raise to refuse


class FolderRefused(ValueError):
    """A target folder the suite may not write (not its own, a file, a link to nowhere); the message says why."""


@contextlib.contextmanager
def building(
    target: str | os.PathLike, kind: FolderKind, *, inputs: Iterable[str | os.PathLike] = (), vet: Vet | None = None
) -> Iterator[Path]:
    """A fresh folder beside `target` to build in, swapped in whole at the end (module docstring).

    `kind` names what the folder is (a probe pack, a partition); a folder of another kind is refused. `inputs`:
    files the build reads, never deleted (one inside `target` is carried over unless the new folder holds the
    same file). `vet(old, new, kept)` may refuse the swap (a kept DFC result of a graph the new pack changes)."""
    target = resolve_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target), _Signals() as signals:
        _recover(target)
        owned = _owned_files(target, kind)
        build = Path(tempfile.mkdtemp(prefix=f".{target.name}.build-{os.getpid()}-", dir=target.parent))
        try:
            build.chmod(0o777 & ~_UMASK)  # a pack is run in a container that writes its results into it
            yield build
            (build / MARKER).write_text(json.dumps({"kind": kind, "files": _files(build)}, indent=1))
            listed = set(_files(target)) if target.is_dir() else set()
            kept = _kept(target, owned, build, {Path(p).resolve() for p in inputs})
            if vet is not None and target.is_dir():
                vet(target, build, kept)
            with signals.deferred():
                _swap(target, build, kept, listed)
        except BaseException:
            with signals.deferred(reraise=False):  # a second Ctrl-C does not stop the clean-up half way
                shutil.rmtree(build, ignore_errors=True)
            raise


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """Hold the exclusive lock on `target` (module docstring) for the block; refuse at once when another write
    holds it. The lock file is removed on the way out; a writer that opened it before then finds the file it
    locked is no longer the one at the path and locks that one instead."""
    path = target.with_name(f".{target.name}.lock")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise FolderRefused(
                f"{target} is being written by another process{by}; wait for it to finish, or give another folder"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # the holder before us removed it: lock the file now at the path
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def resolve_target(target: str | os.PathLike) -> Path:
    """`target` as an absolute path to write: through a symlink to a folder, never the current folder itself
    (the shell would be left in a deleted one), a folder without a parent, or a place that cannot be written."""
    path = Path(os.path.abspath(Path(target).expanduser()))
    if path.is_symlink():
        real = path.resolve()
        if not real.exists():
            raise FolderRefused(f"{target} is a link to {real}, which does not exist; give a folder")
        path = real
    if path.exists() and not path.is_dir():
        raise FolderRefused(f"{target} is a file, not a folder")
    if path.parent == path or Path.cwd().resolve().is_relative_to(path.resolve()):
        raise FolderRefused(f"{target} is the current folder or holds it; give a new folder inside it")
    above = next(p for p in path.parents if p.exists())
    if not above.is_dir():
        raise FolderRefused(f"{target}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise FolderRefused(f"{target}: cannot write into {above} (not writable)")
    return path


def _owned_files(target: Path, kind: FolderKind) -> set[str]:
    """The files the suite wrote into `target` (relative paths, from its marker); a clear refusal for a
    folder it did not write or wrote as something else."""
    if not target.is_dir() or not any(target.iterdir()):
        return set()
    try:
        marker = json.loads((target / MARKER).read_text())
        other, files = marker["kind"], set(marker["files"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise FolderRefused(
            f"{target} is not empty and not a {kind} of this suite (no readable {MARKER}); give an empty or new "
            "folder, or move its files out"
        ) from None
    if other != kind:
        raise FolderRefused(f"{target} is a {other} of this suite, not a {kind}; give another folder")
    return files


def _files(folder: Path) -> list[str]:
    """Every file (and symlink) under `folder`, relative, in sorted order; folders are implied."""
    out = []
    for root, dirs, names in os.walk(folder):
        here = Path(root)
        links = [d for d in dirs if (here / d).is_symlink()]
        dirs[:] = [d for d in dirs if d not in links]
        out += [(here / n).relative_to(folder).as_posix() for n in [*names, *links]]
    return sorted(out)


def _kept(target: Path, owned: set[str], build: Path, inputs: set[Path]) -> list[str]:
    """The files of `target` that the new folder carries over: every file the suite did not write, and every
    input (unless the new folder holds that very file); refused when one is in the way of a new file."""
    if not target.is_dir():
        return []
    kept, clash = [], []
    for rel in _files(target):
        old, new = target / rel, build / rel
        if rel == MARKER or (rel in owned and old.resolve() not in inputs):
            continue
        if new.exists() and old.exists() and (os.path.samefile(old, new) or old.resolve() in inputs):
            continue  # the new folder holds this very file (a hard link) or the input's copy: nothing to carry
        if new.exists() or new.is_symlink() or any((build / p).is_file() for p in Path(rel).parents):
            clash.append(rel)
        kept.append(rel)
    if clash:
        raise FolderRefused(f"{target}: files not written by this suite are in the way of new ones: {clash}")
    return kept


def _swap(target: Path, build: Path, kept: list[str], listed: set[str]) -> None:
    """Move the kept files into `build`, then `build` into the place of `target`; undone on any error. The old
    folder is then removed, after any file it gained since its files were `listed` (a user's, dropped in while
    the folder was swapped) is moved into the new one; one in the way of a new file leaves the old folder in
    place (the next write names it)."""
    moved: list[str] = []
    old = target.with_name(f".{target.name}.old-{os.getpid()}-{build.name.rsplit('-', 1)[-1]}")
    try:
        for rel in kept:
            (build / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(target / rel, build / rel)
            moved.append(rel)
        if target.exists():
            os.rename(target, old)
        try:
            os.rename(build, target)
        except OSError:
            if old.exists():
                os.rename(old, target)
            raise
    except OSError:
        for rel in reversed(moved):
            os.rename(build / rel, target / rel)
        raise
    late = [rel for rel in _files(old) if rel not in listed] if old.is_dir() else []
    for rel in late:
        if not (target / rel).exists() and not (target / rel).is_symlink():
            with contextlib.suppress(OSError):  # in the way of a new file: it stays in the old folder
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                os.rename(old / rel, target / rel)
    if not (late and set(_files(old)) - listed):
        shutil.rmtree(old, ignore_errors=True)


_SIBLING = re.compile(r"\.(?P<name>.+)\.(?P<what>build|old)-(?P<pid>\d+)-[a-z0-9_]+")


def _recover(target: Path) -> None:
    """Finish what a killed write of `target` left (its pid gone): a half-built folder is removed; a whole one
    killed while swapping is swapped in, or the files it had carried are put back; the old folder is put back
    where the target is missing, else removed when it holds only what the suite wrote."""
    stale = []
    for sibling in target.parent.glob(f".{_glob_escape(target.name)}.*-*-*"):
        m = _SIBLING.fullmatch(sibling.name)
        if m and m["name"] == target.name and not pid_alive(int(m["pid"])):
            stale.append((m["what"] == "old", sibling))
    for is_old, sibling in sorted(stale):  # the builds first
        listed = _listed(sibling)
        if not target.exists() and (is_old or listed is not None):
            os.rename(sibling, target)  # the old folder, or a whole new one the kill left unswapped
        elif not is_old and listed is not None:
            _put_back(sibling, listed, target)
        elif not is_old or (listed is not None and set(_files(sibling)) <= listed | {MARKER}):
            shutil.rmtree(sibling, ignore_errors=True)  # half-built, or only the suite's own old files
        elif any(sibling.iterdir()):
            raise FolderRefused(f"{sibling} was left by a killed write of {target}: move back what you need, delete it")
        else:
            sibling.rmdir()


def _put_back(build: Path, listed: set[str], target: Path) -> None:
    """Move the files a killed swap had carried into `build` (those its marker does not list) back to
    `target`, then remove `build`."""
    for rel in (r for r in _files(build) if r not in listed and r != MARKER):
        if (target / rel).exists():
            raise FolderRefused(f"{build / rel} and {target / rel} both exist: a killed write left them; keep one")
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        os.rename(build / rel, target / rel)
    shutil.rmtree(build, ignore_errors=True)


def _listed(folder: Path) -> set[str] | None:
    """The files a folder's marker lists; None without a readable marker."""
    try:
        return set(json.loads((folder / MARKER).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def _glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


@contextlib.contextmanager
def signals_as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt (named, e.g. "SIGTERM") as Ctrl-C does, for the block (main
    thread only; a signal the process was told to ignore, as `nohup` does SIGHUP, stays ignored): a command
    stopped by any of them unwinds as from Ctrl-C, its temporary folders removed and a folder being built
    dropped, and can exit 130 with one line."""
    saved: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                saved[sig] = signal.signal(sig, _raise_named)
    try:
        yield
    finally:
        for each, handler in saved.items():
            signal.signal(each, handler)


def _raise_named(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


class _Signals:
    """Ctrl-C, SIGTERM and SIGHUP raise KeyboardInterrupt while the folder is built (so it is removed), and
    wait while it is swapped in (`deferred`), for the length of one `building` (main thread only)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _Signals:
        self.saved: dict[int, Any] = {}
        self.pending: int | None = None
        self.deferring = False
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # a process told to ignore one still does
                    self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.deferring:
            self.pending = signum
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextlib.contextmanager
    def deferred(self, *, reraise: bool = True) -> Iterator[None]:
        """Signals wait until the block is done; then the last one is raised (unless `reraise` is False)."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
        if reraise and self.pending is not None:
            raise KeyboardInterrupt(signal.Signals(self.pending).name)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
