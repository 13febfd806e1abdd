"""The DFC's verdict on each graph of a run: read from a folder of result files (found by file stem; the
pairing then refuses one whose hash is another graph's), else from the parser when it is installed here, else
none, saying which.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..vocabulary import DfcSource, DfcVerdict
from .dfc_log import DfcResult, load_dfc_result
from .dfc_runner import dfc_available
from .dfc_target import run_dfc

RESULT_SUFFIXES = (".json", ".log", ".txt")


def result_files(results_dir: str | os.PathLike) -> dict[str, Path]:
    """DFC result files in `results_dir` keyed by the model stem they are for (`<stem>.dfc.json`, `<stem>.log`).

    JSON wins over a raw log for the same stem.
    """
    files: dict[str, Path] = {}
    for path in sorted(Path(results_dir).iterdir(), key=lambda p: (p.suffix != ".json", p.name)):
        if path.is_file() and path.suffix.lower() in RESULT_SUFFIXES:
            stem = path.name[: -len(path.suffix)]
            stem = stem[: -len(".dfc")] if stem.endswith(".dfc") else stem
            files.setdefault(stem, path)
    return files


def collect_dfc(models: Sequence[Path], results_dir: str, arch: str) -> tuple[dict[Path, DfcResult | None], DfcSource]:
    """DFC results per model: from `results_dir` (matched by stem), else from the parser, else None.

    Returns the results and how they were obtained ("results_dir", "parser" or "not run").
    """
    if results_dir:
        if not Path(results_dir).is_dir():
            raise FileNotFoundError(f"dfc_results_dir: {results_dir} is not a folder")
        files = result_files(results_dir)
        return {m: load_dfc_result(files[m.stem]) if m.stem in files else None for m in models}, DfcSource.RESULTS_DIR
    if dfc_available()[0]:
        return {m: _run_safely(m, arch) for m in models}, DfcSource.PARSER
    return {m: None for m in models}, DfcSource.NOT_RUN


def _run_safely(model: Path, arch: str) -> DfcResult:
    try:
        return run_dfc(model, arch)
    except Exception as exc:  # a crash of the tooling is not a verdict on the graph
        return DfcResult(DfcVerdict.UNRECOGNISED, reason=f"running the parser failed: {type(exc).__name__}: {exc}")
