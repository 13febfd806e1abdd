"""A recipe rebuilt once: exported, cut and kept in the cache, keyed by exporter version, model, shape and opset.

The cache is a folder per key under `cache_root()` (`WEFT_REBUILD_CACHE`, else the user's cache folder,
`$XDG_CACHE_HOME/weftlib/rebuilt`), outside the checkout and never committed. A key's folder holds the cut graph
(`cut.onnx`, its weights beside it in `cut.onnx.data`: the backtest reads the 50 graphs' structure, not their
5.8 GB of weights, `walk.read_structure`), the export's node names (`exported_nodes.txt`, against which the zoo's parser nodes are read each
time, `cutting.provenance`) and `rebuilt.json` (node counts, seconds); it is written beside and renamed into
place whole, so an interrupted export leaves nothing half-written, and a second run reads it back.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import onnx

from ..workers import map_forked
from . import cutting, exporters
from .recipes import RECIPES, Recipe

CACHE_ENV = "WEFT_REBUILD_CACHE"
WEIGHTS = "cut.onnx.data"  # the cut graph's initializers over onnx's 1 KB threshold, beside `cut.onnx`
KEPT = ("cut.onnx", WEIGHTS)  # what stays of the export: the cut graph and its weights
LAYOUT = 2  # of a key's folder: 2 since the weights are kept beside the graph (a folder of layout 1 is not read)


@dataclass(frozen=True)
class Rebuilt:
    """One network rebuilt: the cut graph's path, how far it is known to be the zoo's, what it took."""

    network: str
    path: Path
    provenance: cutting.Provenance
    exporter_version: str
    nodes_exported: int
    nodes_cut: int
    export_seconds: float  # on the machine that filled the cache
    cached: bool  # read back from the cache in this run

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "path": str(self.path)}


def cache_root() -> Path:
    """Where rebuilt graphs are kept: `$WEFT_REBUILD_CACHE`, else `$XDG_CACHE_HOME/weftlib/rebuilt` (~/.cache)."""
    if given := os.environ.get(CACHE_ENV):
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "weftlib" / "rebuilt"


def cache_key(recipe: Recipe) -> str:
    """The recipe's folder name: its network, and a digest of exporter versions, model, shape, opset, cut."""
    version = exporters.exporter_version(recipe.exporter)
    what = [version, recipe.model, list(recipe.shape), recipe.opset, recipe.simplify, recipe.start, list(recipe.ends)]
    what.append(LAYOUT)
    what.append(sorted((k, str(v)) for k, v in recipe.kwargs.items()))
    digest = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:16]
    return f"{recipe.network}-{digest}"


def rebuild(recipe: Recipe, root: Path | None = None) -> Rebuilt:
    """The recipe's cut graph, from the cache or exported now (and cached)."""
    folder = (root or cache_root()) / cache_key(recipe)
    record = folder / "rebuilt.json"
    names = folder / "exported_nodes.txt"
    if cached(recipe, root):
        data = json.loads(record.read_text())
        shown = cutting.provenance(names.read_text().splitlines(), recipe)
        data.update(path=folder / "cut.onnx", provenance=shown, cached=True)
        return Rebuilt(**data)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        start = time.perf_counter()
        exported = onnx.load(str(exporters.export(recipe, work)))
        seconds = time.perf_counter() - start
        cut = cutting.cut(exported, recipe)
        onnx.save(cut, str(work / "cut.onnx"), save_as_external_data=True, location=WEIGHTS)
        (work / WEIGHTS).touch()  # written by the save when a tensor is over the threshold; always there
        exported_names = [n.name for n in exported.graph.node]
        built = Rebuilt(
            recipe.network, folder / "cut.onnx", cutting.provenance(exported_names, recipe),
            exporters.exporter_version(recipe.exporter), len(exported.graph.node), len(cut.graph.node),
            round(seconds, 1), cached=False,
        )  # fmt: skip
        for extra in work.iterdir():
            if extra.name not in KEPT:  # the full export and the exporter's leftovers
                shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
        (work / "exported_nodes.txt").write_text("\n".join(exported_names))
        record_data = {k: v for k, v in built.as_json().items() if k not in ("path", "provenance", "cached")}
        (work / "rebuilt.json").write_text(json.dumps(record_data, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        work.rename(folder)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return built


def cached(recipe: Recipe, root: Path | None = None) -> bool:
    """Whether the recipe's cut graph is in the cache."""
    folder = (root or cache_root()) / cache_key(recipe)
    return all((folder / name).is_file() for name in (*KEPT, "rebuilt.json", "exported_nodes.txt"))


def rebuild_all(
    names: list[str] | None = None, root: Path | None = None, workers: int | None = None
) -> dict[str, Rebuilt]:
    """Every recipe (or those named) rebuilt or read back, by network. The ones not cached are exported in
    forked workers (`weftlib.workers`, one per core: an export is mostly single-threaded Python)."""
    unknown = sorted(set(names or ()) - set(RECIPES))
    if unknown:
        raise KeyError(f"no recipe for {unknown[0]!r}; known: {', '.join(sorted(RECIPES))}")
    wanted = [RECIPES[name] for name in (names or list(RECIPES))]
    map_forked(functools.partial(rebuild, root=root), [r for r in wanted if not cached(r, root)], workers)
    return {recipe.network: rebuild(recipe, root) for recipe in wanted}
