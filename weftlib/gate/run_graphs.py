"""The graphs of a run: its notebooks' artefact folders, the ONNX files in them, which notebooks left none
(05 and 06 stop on any, instead of judging a subset), each graph's name in a table, and each graph's identity
as its exporter wrote it in the parity file beside it (`GraphIdentity`): what the gate knows a graph to be,
never read from its file name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from .. import metrics_file
from ..onnx_core import parity
from .vocabulary import GraphKind

UNKNOWN = "unknown (no identity in a parity file: not exported by the suite)"  # a user's ONNX, as a table says it


@dataclass(frozen=True)
class GraphIdentity:
    """What an exported graph is, written once by its exporter into its parity file (`parity.IDENTITY`).

    `notebook` exported it; `kind` says whether it is the model as written (faithful), an exact rewrite by hand of
    a faithful graph (variant) or `gate fix`'s rewrite (fixed); `formulation` is the one natten or the sparse
    convolution was swapped for ("" where none was); `geometry` the size it was exported at; `variant_of` the stem
    of the graph a variant or a fixed graph computes the same as ("" for a faithful graph)."""

    notebook: str
    kind: GraphKind
    formulation: str = ""
    geometry: str = ""
    variant_of: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            if not isinstance(getattr(self, f.name), str):
                raise TypeError(f"GraphIdentity.{f.name}: expected a string, got {getattr(self, f.name)!r}")
        if self.kind not in tuple(GraphKind):
            raise ValueError(f"GraphIdentity.kind: expected one of {[k.value for k in GraphKind]}, got {self.kind!r}")
        object.__setattr__(self, "kind", GraphKind(self.kind))
        if not self.notebook and self.kind != GraphKind.FIXED:  # a fix of a user's ONNX has none
            raise ValueError(f"GraphIdentity.notebook: the notebook that exported a {self.kind} graph is required")
        if self.kind == GraphKind.FAITHFUL and self.variant_of:
            raise ValueError(f"GraphIdentity: a faithful graph is no variant, got variant_of={self.variant_of!r}")
        if self.kind != GraphKind.FAITHFUL and not self.variant_of:
            raise ValueError(
                f"GraphIdentity.variant_of: a {self.kind} graph must name the graph it computes the same as"
            )

    def as_json(self) -> dict[str, str]:
        """The identity as the parity file holds it (`onnx_core.export.export(identity=...)`)."""
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: object) -> GraphIdentity:
        """The identity a parity file holds; a ValueError naming what is wrong with it."""
        names = {f.name for f in fields(cls)}
        if not isinstance(data, Mapping) or not set(data) <= names or "kind" not in data:
            raise ValueError(f"a graph identity is an object with the keys {sorted(names)}, got {data!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(str(exc)) from exc

    def __str__(self) -> str:
        parts = [self.notebook[:2], self.formulation, self.geometry, f"of {self.variant_of}" if self.variant_of else ""]
        return f"{self.kind} ({', '.join(p for p in parts if p)})"


def fixed_identity(original: GraphIdentity | None, stem: str) -> GraphIdentity:
    """The identity of `gate fix`'s rewrite of the graph `stem` whose identity is `original` (None: a user's
    ONNX, so the fixed graph names no notebook)."""
    if original is None:
        return GraphIdentity("", GraphKind.FIXED, variant_of=stem)
    return GraphIdentity(original.notebook, GraphKind.FIXED, original.formulation, original.geometry, stem)


def identity(model: str | os.PathLike) -> GraphIdentity | None:
    """The identity the exporter wrote in `model`'s parity file; None where it wrote none (a user's ONNX, a graph
    exported before identities were written): such a graph is gated as any other, of unknown identity. A parity
    file holding a malformed identity raises a ValueError naming the file."""
    data = parity.read(model)
    if data is None or parity.IDENTITY not in data:
        return None
    try:
        return GraphIdentity.from_json(data[parity.IDENTITY])
    except ValueError as exc:
        raise ValueError(f"{parity.path(model).name}: {exc}") from exc


def identities(models: Iterable[str | os.PathLike]) -> dict[Path, GraphIdentity | None]:
    """Each model -> its identity (`identity`; None: unknown)."""
    return {Path(m): identity(m) for m in models}


def of_kind(models: Iterable[str | os.PathLike], kind: GraphKind) -> list[Path]:
    """The models whose identity says they are of `kind`, in their order (one of unknown identity never is)."""
    return [path for path, found in identities(models).items() if found is not None and found.kind == kind]


def unknown_identity(models: Iterable[str | os.PathLike]) -> list[str]:
    """The stems of the models of unknown identity (no identity in a parity file), in their order."""
    return [path.stem for path, found in identities(models).items() if found is None]


def fixed_of(model: str | os.PathLike) -> str:
    """The stem of the graph `model` is `gate fix`'s rewrite of, as its identity says; a ValueError naming the
    file where its identity does not say it is a fixed graph."""
    found = identity(model)
    if found is None or found.kind != GraphKind.FIXED:
        raise ValueError(f"{Path(model).name}: not a fixed graph by its identity ({found or UNKNOWN})")
    return found.variant_of


def kind_label(model: str | os.PathLike) -> str:
    """A graph's identity as a table or the command line says it, `UNKNOWN` for a graph without one."""
    try:
        found = identity(model)
    except ValueError as exc:
        return f"unreadable identity: {exc}"
    return str(found) if found is not None else UNKNOWN


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
