"""The graphs of a run: its notebooks' artefact folders, the ONNX files in them, which notebooks left none
(05 and 06 stop on any, instead of judging a subset), and each graph's name in a table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import metrics_file


def notebook_folders(run_dir: str | os.PathLike, notebooks: Sequence[str]) -> dict[str, Path]:
    """Each listed notebook -> its artefact folder in the run (where its graphs are)."""
    return {name: Path(run_dir) / name for name in notebooks}


def find_models(folders: Iterable[str | os.PathLike]) -> list[Path]:
    """Every `*.onnx` under the given folders (recursively, sorted); missing folders contribute nothing."""
    found: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("*.onnx") if p.is_file())
    return found


def missing_outputs(folders: dict[str, Path]) -> list[str]:
    """Which listed notebooks left no outputs to gate: no `metrics.json` (it failed or did not run), or no
    `.onnx` file. Notebook 05 stops on any, instead of passing on a subset of the graphs."""
    missing = []
    for name, folder in folders.items():
        metrics = metrics_file.path(folder)
        if not metrics.is_file():
            missing.append(f"{name}: no {metrics.name} in {folder} (the notebook failed or did not run in this run)")
        elif metrics_file.conclusion(metrics_file.read(folder, name)) is None:
            # a notebook records its conclusion last: without it, it stopped part-way and its graphs are a subset
            missing.append(f"{name}: recorded no conclusion in {metrics} (the notebook stopped part-way)")
        elif not find_models([folder]):
            missing.append(f"{name}: no .onnx graph under {folder}")
    return missing


def graph_sources(folders: dict[str, Path]) -> str:
    """What the graphs of a run rest on, for 05's and 06's `rests_on["sources"]`: every part of the graph
    notebooks' own `rests_on["sources"]` (a checkout with its commit, or a stand-in), once, with the notebooks
    that named it; a notebook that recorded none is named as unknown. A part starting "stand-in" keeps its
    word first, so the answer reads "answered on a stand-in" exactly when a graph came from one."""
    named: dict[str, list[str]] = {}
    for name, folder in folders.items():
        concluded = metrics_file.conclusion(metrics_file.read(folder, name)) or {}
        sources = str(concluded.get("rests_on", {}).get("sources", "")).strip()
        parts = [p.strip() for p in sources.split(";") if p.strip()] or [f"unknown ({name} recorded no sources)"]
        for part in parts:
            named.setdefault(part, []).append(name[:2])
    return "; ".join(f"{part} ({', '.join(notebooks)})" for part, notebooks in named.items())


def graph_label(path: Path, root: str | os.PathLike) -> str:
    """A graph's name in a table: its path under the run folder `root`, else its file name."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name
