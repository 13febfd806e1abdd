"""`gate fix` over a run's graphs, for notebooks 05 and 06: which graphs are faithful exports (as each graph's
exporter wrote in its parity file, `run_graphs.GraphIdentity`; never read from a file name), each one fixed and
written into its own folder, the fixes the proof offers, and the fixed graphs read back for 06 to cut. The rows
05 and 06 show of them are `pages.fix_tables`."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...console import progress as tqdm
from ..fix import FIXED_SUFFIX, Fix, ProofVerdict, fix_model, write_fix
from ..record.allowlist import DeviceOps
from ..run_graphs import fixed_of, of_kind
from ..vocabulary import GraphKind, Prediction
from .by_size import map_by_size


def faithful(models: Sequence[Path], skip: Sequence[str] = ()) -> list[str]:
    """The stems of every faithful graph of the run, in the models' order, less `skip`: each graph whose identity
    says so (the model as written, or with only natten or the sparse convolution swapped for a formulation). A
    graph of unknown identity (no parity file, a user's ONNX) is gated, but not taken for a faithful export."""
    return [m.stem for m in of_kind(models, GraphKind.FAITHFUL) if m.stem not in skip]


def absent(models: Sequence[Path], stems: Sequence[str]) -> list[str]:
    """The stems in `stems` no model of the run has (a run with other graphs: named, never skipped silently)."""
    found = {m.stem for m in models}
    return [s for s in stems if s not in found]


def fix_all(
    models: Sequence[Path], stems: Sequence[str], ops: DeviceOps, folder: str | os.PathLike, *, strict: bool = True
) -> dict[str, Fix]:
    """Each model whose stem is in `stems` fixed and written to `folder/<stem>/` (`write_fix`: the fixed graph
    only where offered, `fix.json` alone where not, nothing where no rewrite applied), proven on the run its
    exporter recorded beside it where there is one (`fix.recorded`). A stem not found raises
    when `strict`, else is left out (the caller names it: `absent`). The small graphs are fixed two at a time
    (`by_size`)."""
    missing = absent(models, stems)
    if missing and strict:
        raise ValueError(f"graphs to fix not exported in this run: {missing}")
    found = {m.stem: m for m in models}
    todo = [found[s] for s in stems if s in found]
    bar = tqdm(None, total=len(todo), desc="gate fix", unit="graph")

    def one(model: Path) -> Fix:
        fix = fix_model(model, ops, recorded=True)  # a run recorded beside it: `fix.recorded`
        write_fix(fix, Path(folder) / model.stem)
        return dataclasses.replace(fix, run=None)  # its outputs are written: not copied back from a worker

    done = map_by_size(one, todo, progress=lambda _: bar.update())
    bar.close()
    return {m.stem: fix for m, fix in zip(todo, done, strict=True)}


def offered(fixes: Mapping[str, Fix]) -> dict[str, Fix]:
    """The fixes whose result stands: each fixed graph the proof found equal to the original (`Fix.offered`),
    offered beside the faithful graph (gated, compared, cut), and each graph no rewrite changed, whose verdict
    is the original's (gated and compared; nothing written, so 06 cuts it once, as the original). The others are
    named with `unproven`, as `gate fix` exits 1 or 3 on them."""
    return {stem: fix for stem, fix in fixes.items() if fix.offered or not fix.rewrites}


def unproven(fixes: Mapping[str, Fix]) -> dict[str, dict[str, object]]:
    """Stem -> the proof's verdict, the worst relative difference it found and its tolerance, for each fixed graph
    it did not find equal (no input set ran: the worst is infinite; the proof names what no set proved)."""
    return {
        stem: {
            "worst": max(fix.proof.worst, default=float("inf")),
            "tolerance": fix.proof.tolerance,
            **({} if fix.proof.verdict == ProofVerdict.NOT_EQUAL else {"proof": fix.proof.summary()}),
        }
        for stem, fix in fixes.items()
        if fix.rewrites and not fix.proof.proven
    }


def fixed_paths(fixes: Mapping[str, Fix], folder: str | os.PathLike) -> list[Path]:
    """Where `fix_all` wrote each offered fixed graph."""
    return [Path(folder) / stem / f"{stem}{FIXED_SUFFIX}" for stem, fix in fixes.items() if fix.offered]


def proven_fixed(folder: str | os.PathLike) -> dict[str, Path]:
    """Original stem -> fixed graph, for each fix `fix_all` wrote under `folder` (05's) whose proof held: what 06
    cuts, read from each `fix.json` rather than fixed a second time, each keyed by the graph its identity says
    it fixes (`run_graphs.fixed_of`). A missing folder has none."""
    out = {}
    for record in sorted(Path(folder).glob("*/fix.json")) if Path(folder).is_dir() else []:
        data = json.loads(record.read_text())
        if data["proof"]["proven"] and data["fixed"]:
            fixed = record.parent / str(data["fixed"])
            out[fixed_of(fixed)] = fixed
    return out


def fixed_verdicts(fixes: Mapping[str, Fix]) -> dict[str, str]:
    """Faithful stem -> the gate's verdict on its fixed graph (pass, fail, unjudged): what the run's verdict
    table and figure show after `gate fix` (`suite.verdicts`)."""
    return {stem: fix.after.verdict for stem, fix in fixes.items()}


def unnamed_refusals(fixes: Mapping[str, Fix]) -> list[str]:
    """The graphs whose fixed version has a refusal `unanswered` does not name (it must name every one)."""
    return [
        stem
        for stem, fix in fixes.items()
        if [(u["node"], u["rule"]) for u in fix.unanswered]
        != [(f.node, f.key) for f in fix.after.findings if f.prediction == Prediction.REFUSED]
    ]
