#!/usr/bin/env python3
"""Git clean filter for notebooks: what git stores has no outputs, no execution counts and no run metadata.

Run metadata includes what a kernel reports about itself when JupyterLab saves (`language_info`'s version,
mimetype, codemirror mode, lexer): only the language's name is kept, so opening and saving a notebook in Lab
leaves `git status` clean.

Configured by `make` (any target that sets up .venv) in the local repository config:
    git config filter.nbstrip.clean "python3 scripts/nbstrip.py"
and switched on for `notebooks/*.ipynb` by .gitattributes. Exploring in JupyterLab autosaves outputs into the
working files; this filter keeps them out of every commit and out of `git status`. Standard library only, so
it runs before (and without) the project's virtual environment. Input that needs no stripping is passed
through byte for byte; input that is not a notebook is passed through unchanged too (git must never lose a
file because a filter failed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable

CELL_METADATA_DROPPED = ("execution", "papermill", "scrolled", "collapsed", "ExecuteTime")
NOTEBOOK_METADATA_DROPPED = ("papermill", "widgets")
LANGUAGE_INFO_KEPT = ("name",)  # the rest of language_info is the running kernel's, not the notebook's


def _drop(meta: object, keys: Iterable[str]) -> bool:
    """Remove `keys` from a metadata mapping in place; True when anything was removed."""
    if not isinstance(meta, dict):
        return False
    found = [key for key in keys if key in meta]
    for key in found:
        del meta[key]
    return bool(found)


def strip(text: str) -> str:
    """The notebook JSON `text` without outputs, execution counts and run metadata, written as nbformat
    writes it (sorted keys, indent 1, a final newline); `text` itself when there is nothing to strip."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return text
    changed = False
    for cell in nb["cells"]:
        if not isinstance(cell, dict):
            continue
        if cell.get("cell_type") == "code":
            if cell.get("outputs"):
                cell["outputs"] = []
                changed = True
            if cell.get("execution_count") is not None:
                cell["execution_count"] = None
                changed = True
        changed |= _drop(cell.get("metadata"), CELL_METADATA_DROPPED)
    changed |= _drop(nb.get("metadata"), NOTEBOOK_METADATA_DROPPED)
    changed |= drop_kernel_info(nb)
    if not changed:
        return text
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False, separators=(",", ": ")) + "\n"


def drop_kernel_info(nb: dict) -> bool:
    """Keep only `LANGUAGE_INFO_KEPT` of the notebook's `language_info`, in place; True when anything went."""
    meta = nb.get("metadata")
    info = meta.get("language_info") if isinstance(meta, dict) else None
    return _drop(info, [key for key in info if key not in LANGUAGE_INFO_KEPT]) if isinstance(info, dict) else False


def pre_save_hook(model: dict, **kwargs: object) -> None:
    """jupyter_server's pre-save hook (lab/jupyter_server_config.py): a notebook saved from Lab loses the
    kernel's `language_info` before it is written, so a save that changed nothing else leaves the file as git
    has it, byte for byte. Outputs stay in the working file; the clean filter keeps them out of commits."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        drop_kernel_info(model["content"])


def post_save_hook(model: dict, os_path: str, **kwargs: object) -> None:
    """jupyter_server's post-save hook (lab/jupyter_server_config.py): a notebook whose filtered content is
    what git holds is re-staged, so `git status` stops calling it modified. Git compares sizes before it runs
    a clean filter, and a save with outputs changes the size: without this, `git status` says ` M` while
    `git diff` is empty. The outputs stay in the working file; only the index's record of the file is renewed."""
    if model.get("type") == "notebook":
        restage_if_unchanged(os_path)


def restage_if_unchanged(path: str) -> bool:
    """`git add` the file when git tracks it and `git diff` (which runs the clean filter) finds it unchanged;
    True when it did. Nothing happens outside a git checkout, for an untracked file, or for a real change."""
    folder, name = os.path.split(os.path.abspath(path))

    def git(*args: str) -> int:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, check=False).returncode

    try:
        if git("ls-files", "--error-unmatch", "--", name) or git("diff", "--quiet", "--", name):
            return False
        return git("add", "--", name) == 0
    except OSError:  # no git here: the save itself stands
        return False


def with_kernel_info(model: dict, language_info: dict) -> None:
    """A notebook as the server hands it to Lab: its `language_info` filled in with the running kernel's
    (`language_info` of the same language), in memory only. Lab writes the kernel's `language_info` into a
    notebook when the kernel starts; a notebook that already holds it is left unchanged, so its tab does not
    show unsaved changes before any edit. `pre_save_hook` drops the filled-in keys again on save."""
    content = model.get("content") if model.get("type") == "notebook" else None
    meta = content.get("metadata") if isinstance(content, dict) else None
    info = meta.get("language_info") if isinstance(meta, dict) else None
    if isinstance(info, dict) and info.get("name") == language_info.get("name"):
        info.update({key: value for key, value in language_info.items() if key not in info})


def main() -> int:
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        sys.stdout.buffer.write(data)
        return 0
    sys.stdout.buffer.write(strip(text).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
