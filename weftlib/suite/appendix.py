"""The appendix swap: `outputs/appendix` is a symlink to a complete copy of a passing run, replaced in one
rename, so a reader never finds it missing nor half of a new run beside half of the old one, and a failed run
never reaches it. Only targets the suite made are touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from .files import locked


class PublishError(ValueError):
    """A run or a target folder that must not be published; nothing was written."""


LOCK_NAME = ".publish.lock"  # in the versions folder: the lock publishers take, and the mark that the suite made it
VERSION_NAME = re.compile(r"^\d{8}T\d{12}Z-\d+$")  # a copy publish_appendix made (UTC time, pid)


def versions_dir(appendix: Path) -> Path:
    """Where the published copies live: `.NAME.versions/` beside `NAME`, on the same file system, so the link
    can be swapped by a rename."""
    return appendix.parent / f".{appendix.name}.versions"


def _made_by_suite(versions: Path) -> bool:
    """A versions folder the suite made: it holds the publishers' lock file (made with the folder)."""
    if versions.is_symlink() or not versions.is_dir():
        return False
    lock = versions / LOCK_NAME
    return lock.is_file() and not lock.is_symlink()


def check_target(appendix: str | os.PathLike, run_dir: Path | None = None) -> Path:
    """The absolute path a run is published at; PublishError, naming the reason, for a target the suite did
    not create. Refused: the working directory, the checkout or a folder above either; a run folder or a path
    inside it; an existing folder, file or foreign symlink at the target; a versions folder the suite did not
    make. The target itself is never followed (it is the link to swap)."""
    from ..paths import REPO_ROOT

    given = Path(os.path.abspath(appendix))
    if given.name in ("", ".", ".."):
        raise PublishError(f"--appendix {appendix!s}: names no folder to publish to")
    target = given.parent.resolve() / given.name
    for path in {given, target}:
        for place, what in ((Path.cwd().resolve(), "the working directory"), (REPO_ROOT, "the repository root")):
            if path == place or path in place.parents:
                raise PublishError(
                    f"--appendix {appendix!s}: is {what} or a folder above it; publish to a folder of its own"
                )
    if run_dir is not None:
        run = Path(run_dir).resolve()
        if target == run or run in target.parents:
            raise PublishError(f"--appendix {target}: is the run folder or inside it; publish outside the run")
    existing = next(p for p in target.parents if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PublishError(
            f"--appendix {target}: {existing} cannot be written (a read-only checkout?); "
            "choose a writable --appendix, or --no-publish"
        )
    versions = versions_dir(target)
    if os.path.lexists(versions) and not _made_by_suite(versions):
        raise PublishError(
            f"{versions}: exists but the suite did not make it (no {LOCK_NAME}); nothing was published: "
            "move it away or choose another --appendix"
        )
    if target.is_symlink():
        linked = _link_target(target)
        if linked is None or linked.parent != versions or not VERSION_NAME.match(linked.name):
            raise PublishError(
                f"{target}: a symlink the suite did not create (it points to {os.readlink(target)}, not into "
                f"{versions.name}/); nothing was published: move it away or choose another --appendix"
            )
    elif os.path.lexists(target):
        kind = "folder" if target.is_dir() else "file"
        raise PublishError(
            f"{target}: a {kind} the suite did not create (a published copy is a symlink into {versions.name}/); "
            "nothing was published and nothing was moved: move it away or choose another --appendix"
        )
    return target


def _versions_folder(versions: Path) -> Path:
    """The versions folder, made with its lock file in one rename if it is not there yet (so no publisher
    ever sees it without the lock file)."""
    if not os.path.lexists(versions):
        versions.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{versions.name}.new-", dir=versions.parent))
        os.chmod(staging, 0o755)
        (staging / LOCK_NAME).touch()
        try:
            os.rename(staging, versions)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not versions.is_dir():
                raise
            # else another publisher made it first
    return versions / LOCK_NAME


def _copy_failure(exc: shutil.Error, run_dir: Path, appendix: Path) -> str:
    """One line for a copy that failed file by file: how many, why (each distinct reason once), the first."""
    failed = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []  # copytree's (src, dst, why)
    reasons = sorted({m.group(0) for *_, why in failed for m in [re.search(r"\[Errno \d+\] [^:'\"]+", why)] if m})
    first = f"; first: {failed[0][0]}" if failed else ""
    why = ", ".join(reasons) or str(exc)[:200]
    count = f" for {len(failed)} files" if failed else ""
    return (
        f"copying {run_dir} to publish it failed{count} ({why}){first}; "
        f"{appendix} is unchanged and the partial copy was removed"
    )


def _link_or_copy(src: str, dst: str) -> str:
    """A published file as a hard link to the run's own, a copy where the two folders cannot share one (another
    file system, a link limit). A full run is gigabytes (every graph, its segments and its DFC pack), copied in
    tens of seconds. Nothing writes a finished run's files in place: what the suite writes after the notebooks
    (the index, the summary, the HTML) it writes whole and renames over the old file (`files.write_atomic`),
    as JupyterLab saves a notebook, so a published link keeps what was published."""
    try:
        os.link(src, dst)
    except OSError:
        return shutil.copy2(src, dst)
    return dst


def publish_appendix(run_dir: Path, appendix: Path) -> Path:
    """Publish a copy of `run_dir` at `appendix` with no moment where `appendix` is missing or half-written.

    `appendix` is a symlink (relative, so `outputs/` can move) to a complete copy in `versions_dir(appendix)`,
    its files hard links to the run's where they can be (`_link_or_copy`).
    Publishers to one target take turns (a lock in the versions folder), so each copy stays whole until its
    own link swap is done. The new copy is written beside the old one, then a fresh link is renamed over the
    old link (`os.replace`, atomic on POSIX): a reader resolves either the old copy or the new one. A target
    the suite did not create is refused (`check_target`): nothing is adopted, moved or deleted. A failed copy
    is removed and leaves `appendix` as it was. Of the older copies only the one just replaced is kept (a
    reader part-way through it keeps its files); the suite's other copies, and those of killed publishers,
    are removed, and nothing else in the folder is touched. Returns the link's path.
    """
    appendix = check_target(appendix, run_dir)
    versions = versions_dir(appendix)
    with locked(_versions_folder(versions)):
        check_target(appendix, run_dir)  # again, now that no other publisher is between the check and the swap
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        version = versions / f"{stamp}-{os.getpid()}"
        try:
            shutil.copytree(run_dir, version, copy_function=_link_or_copy)
        except BaseException as exc:
            shutil.rmtree(version, ignore_errors=True)
            if isinstance(exc, shutil.Error):  # one entry per file: a full disk made a 80 kB message of it
                raise OSError(_copy_failure(exc, run_dir, appendix)) from None
            raise
        link = appendix.parent / f".{appendix.name}.link-{os.getpid()}"
        if os.path.lexists(link):  # left by a killed publisher of this pid; a symlink is removed, never followed
            link.unlink()
        os.symlink(os.path.relpath(version, appendix.parent), link)
        previous = _link_target(appendix)
        os.replace(link, appendix)
        for old in versions.iterdir():
            if old in (version, previous) or not VERSION_NAME.match(old.name):
                continue
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
    return appendix


def _link_target(link: Path) -> Path | None:
    """The folder a symlink names (without resolving further), or None when `link` is no symlink."""
    if not link.is_symlink():
        return None
    return Path(os.path.normpath(link.parent / os.readlink(link)))
