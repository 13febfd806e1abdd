"""A DFC pack: a folder of ONNX graphs and the one script that parses all of them in the DFC's image.

The folder holds the graphs, a `manifest.json`, a `run_dfc.sh` that parses every graph in the target DFC's
image (`dfc_target.image()`) and writes `<stem>.dfc.json` beside it, and `dfc_tool/`, the files the parse needs
(`dfc_runner`, `dfc_log` and the words they use, `gate.vocabulary`). Every path in the script is relative to the folder, so the folder can be copied to
wherever Docker and the image are, run there, and copied back; `results_in` reads the results back. Written
again into the same folder, a pack keeps the results of the graphs it leaves unchanged.

The manifest's `sha256` holds each graph's hash (`dfc_log.file_sha256`, of the file's bytes), and the script gives
it to every parse (`dfc_runner --sha256`): the parse refuses a graph changed since, and its result carries the
hash, so the pairing and the evidence read it as the result of that graph and no other.
"""

from __future__ import annotations

import filecmp
import json
import os
import shlex
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...onnx_core.parity import PROOF_FOLDER
from ..folder_swap import FolderRefused, building
from ..vocabulary import FolderKind
from .dfc_log import DfcResult, file_sha256, load_dfc_result
from .dfc_runner import check_arch
from .dfc_target import default_arch, image

MANIFEST = "manifest.json"
SCRIPT = "run_dfc.sh"
TOOL = "dfc_tool"
PACK_KIND = "weftlib.gate/dfc-pack"


@dataclass(frozen=True)
class DfcPack:
    """A folder of graphs with the one script that parses all of them and the manifest that lists them."""

    folder: Path
    script: Path
    manifest: Path
    graphs: tuple[str, ...]  # file names, relative to `folder`
    arch: str = field(default_factory=default_arch)

    @property
    def command(self) -> str:
        """What to run where Docker and the image are (from anywhere: the script finds its own folder)."""
        return f"bash {shlex.quote(str(self.script))}"


def write_dfc_pack(
    models: Sequence[str | os.PathLike],
    folder: str | os.PathLike,
    arch: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
    cuts: dict[str, dict[str, Any]] | None = None,
) -> DfcPack:
    """Copy `models` (and their `.parity.json`) into `folder` and write the script, the tool and the manifest.

    `folder` follows the suite's folder rule (`folder_swap.building`): built beside it and swapped in whole,
    over nothing but an earlier pack; the DFC's results and any other file found there are kept (refused when
    a result is of a graph or cut this pack changes: `stale_results`), and a model read from it stays. Stems
    must be unique (the DFC names results by stem). `arch` defaults to the allowlist's target arch. `cuts`:
    more parses of the same graphs, each a cut (result stem -> {"graph": a file of the pack,
    "start_node_names", "end_node_names", "net_input_shapes"} as `translate_onnx_model` takes them); each
    cut's result lands as `<result stem>.dfc.json`.
    """
    paths = [Path(m) for m in models]
    with building(folder, FolderKind.DFC_PACK, inputs=paths, vet=stale_results) as build:
        pack = pack_into(paths, build, arch, extra=extra, cuts=cuts)
    folder = Path(folder)
    return DfcPack(
        folder=folder, script=folder / SCRIPT, manifest=folder / MANIFEST, graphs=pack.graphs, arch=pack.arch
    )


def pack_into(
    models: Sequence[Path],
    folder: Path,
    arch: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
    cuts: dict[str, dict[str, Any]] | None = None,
) -> DfcPack:
    """`write_dfc_pack`'s work, written straight into `folder` (a folder being built: `folder_swap.building`)."""
    arch = check_arch(arch or default_arch())
    names: list[str] = []
    for model in models:
        if not model.is_file():
            raise FileNotFoundError(f"models: {model} does not exist")
        target = folder / model.name
        if target.name in names:
            raise ValueError(f"models: two graphs are named {model.name}; the DFC names its results by stem")
        if model.resolve() != target.resolve():
            _place(model, target)
            parity = model.with_suffix(".parity.json")
            if parity.is_file():
                shutil.copyfile(parity, target.with_suffix(".parity.json"))
            _place_record(model.with_suffix(PROOF_FOLDER), target.with_suffix(PROOF_FOLDER))
        names.append(target.name)
    _write_tool(folder / TOOL)
    script = folder / SCRIPT
    cuts = cuts or {}
    wanted: set[Any] = {c.get("graph") for c in cuts.values()}  # a cut's fields are read from YAML
    unknown = sorted(wanted - set(names))
    if unknown:
        raise ValueError(f"cuts: graphs {unknown} are not in the pack")
    hashes = {name: file_sha256(folder / name) for name in names}
    script.write_text(script_text(names, arch, cuts, hashes))
    script.chmod(0o755)
    manifest = folder / MANIFEST
    manifest.write_text(
        json.dumps(
            {
                "kind": PACK_KIND,
                "image": image(),
                "arch": arch,
                "script": SCRIPT,
                "graphs": names,
                "sha256": hashes,
                "cuts": cuts,
                **(extra or {}),
            },
            indent=2,
        )
    )
    return DfcPack(folder=folder, script=script, manifest=manifest, graphs=tuple(names), arch=arch)


def stale_results(old: Path, new: Path, kept: list[str]) -> None:
    """Refuse to keep a DFC result (`<stem>.dfc.json` / `.dfc.log`) that the new pack would read as the
    result of a graph or cut it changes, or of one the old pack did not hold: it would describe another graph."""
    try:
        before = read_pack(old)
    except (FileNotFoundError, ValueError):
        before = {}
    after = json.loads((new / MANIFEST).read_text())
    graphs = {Path(name).stem: name for name in after["graphs"]}
    stale = []
    for rel in kept:
        stem = _result_stem(rel)
        if stem in after["cuts"]:
            cut = after["cuts"][stem]
            same = (before.get("cuts") or {}).get(stem) == cut and _same_graph(cut["graph"], before, old, new)
        elif stem in graphs:
            same = _same_graph(graphs[stem], before, old, new)
        else:
            continue  # not read by this pack
        if not same:
            stale.append(rel)
    if stale:
        raise FolderRefused(
            f"{old}: the DFC results {stale} are of graphs or cuts this pack changes; move them out of the folder "
            "and write the pack again"
        )


def _result_stem(rel: str) -> str | None:
    for suffix in (".dfc.json", ".dfc.log"):
        if rel.endswith(suffix) and "/" not in rel:
            return rel[: -len(suffix)]
    return None


def _same_graph(name: str, before: dict[str, Any], old: Path, new: Path) -> bool:
    """Whether the graph `name` of the new pack is the one the old pack held, byte for byte."""
    a, b = old / name, new / name
    if name not in (before.get("graphs") or []) or not (a.is_file() and b.is_file()):
        return False
    return os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False)


def _place_record(source: Path, target: Path) -> None:
    """The run an exporter recorded beside a graph (`<stem>.proof/`, `gate.fix.recorded`), placed beside its copy
    file by file: 05 fixes the pack's copies, and a fix is proven on that record where there is one."""
    if not source.is_dir():
        return
    target.mkdir(exist_ok=True)
    for item in source.iterdir():
        if item.is_file():
            _place(item, target / item.name)


def _place(source: Path, target: Path) -> None:
    """A copy of `source` at `target`: a hard link where the file system allows (large graphs, same disk),
    else a byte copy; either way the pack holds the file itself."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def script_text(
    graphs: Sequence[str],
    arch: str,
    cuts: dict[str, dict[str, Any]] | None = None,
    hashes: dict[str, str] | None = None,
) -> str:
    """The bash script: one `docker run` per graph and per cut, everything relative to the script's own folder;
    each parse is given its graph's hash (`hashes`: file name -> sha256) to check and to carry into its result."""
    dfc_image = image()
    lines = [
        "#!/usr/bin/env bash",
        f"# Parse every graph of this folder with the Hailo DFC in {dfc_image} ({arch}); each result lands",
        "# beside its graph as <stem>.dfc.json. Copy the whole folder anywhere Docker and the image are.",
        "# Then: python -m weftlib.gate evidence <this folder>  (probes), or notebook 05 with",
        "# dfc_results_dir set to this folder.",
        "set -u",
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        "status=0",
    ]
    parses: list[tuple[str, str, dict[str, Any]]] = [(name, Path(name).stem, {}) for name in graphs]
    parses += [(cut["graph"], stem, cut) for stem, cut in (cuts or {}).items()]
    for name, stem, cut in parses:
        inner = [
            "python",
            "-m",
            "weftlib.gate.compiler.dfc_runner",
            f"/pack/{name}",
            "--arch",
            arch,
            "--out",
            f"/pack/{stem}.dfc.json",
            *_translate_options(cut),
            *(["--sha256", hashes[name]] if hashes and name in hashes else []),
        ]
        lines.append(
            f'docker run --rm -v "$HERE:/pack" -e PYTHONPATH=/pack/{TOOL} -w /pack {dfc_image} '
            f"{shlex.join(inner)} || status=1"
        )
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


def _translate_options(args: dict[str, Any]) -> list[str]:
    """`dfc_runner` options for a cut: node names and the input shapes, as `translate_onnx_model` takes them."""
    options: list[str] = []
    for key in ("start_node_names", "end_node_names"):
        if args.get(key):
            options += [f"--{key.replace('_', '-')}", *args[key]]
    if args.get("net_input_shapes"):
        options += ["--net-input-shapes", json.dumps(args["net_input_shapes"], separators=(",", ":"))]
    return options


def _write_tool(tool: Path) -> None:
    """The parse's own code and its words (`vocabulary`, which imports nothing), and nothing else: a package
    whose `gate/__init__` imports nothing heavy."""
    here = Path(__file__).resolve().parent
    package = tool / "weftlib" / "gate" / "compiler"
    package.mkdir(parents=True, exist_ok=True)
    (tool / "weftlib" / "__init__.py").write_text('"""The DFC parse only (copied from weftlib)."""\n')
    (tool / "weftlib" / "gate" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    for name in ("dfc_runner.py", "dfc_log.py"):
        shutil.copyfile(here / name, package / name)
    shutil.copyfile(here.parent / "vocabulary.py", tool / "weftlib" / "gate" / "vocabulary.py")  # their words


def read_pack(folder: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a pack folder; a clear error when the folder is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder")
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's reach
        raise ValueError(
            f"{folder}: no readable {MANIFEST} ({exc}); write the pack with `python -m weftlib.gate probes --out DIR`"
        ) from exc
    if not isinstance(data, dict) or data.get("kind") != PACK_KIND:
        raise ValueError(f"{path}: not a DFC pack manifest")
    return data


def results_in(folder: str | os.PathLike, stems: Iterable[str]) -> dict[str, DfcResult]:
    """The DFC result files (`<stem>.dfc.json`, else `<stem>.dfc.log`) found for `stems` in `folder`."""
    folder = Path(folder)
    found = {}
    for stem in stems:
        for name in (f"{stem}.dfc.json", f"{stem}.dfc.log"):
            if (folder / name).is_file():
                found[stem] = load_dfc_result(folder / name)
                break
    return found
