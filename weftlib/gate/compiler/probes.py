"""One DFC session judges every unjudged op and rule: the probe pack, one proven probe per subject.

`to_probe` says what the record leaves unjudged; `write_probes` writes a probe graph for each
(`probe_graphs`), proves it (checker-clean and run once in onnxruntime: `proving`), and packs them for the
DFC (`dfc_pack`); `evidence_diff` (`probe_evidence`) turns the DFC's results on them into the edit to
`params/device_ops.yaml`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx

from ..folder_swap import building
from ..record.allowlist import DeviceOps, load_device_ops
from ..record.evidence import unjudged
from ..record.standing import op_key, op_standing, probe_stem, read_key
from ..vocabulary import FolderKind, Prediction, Subject
from .pack import MANIFEST, SCRIPT, DfcPack, pack_into, stale_results
from .probe_graphs import OP_PROBES, Probe, op_probe, op_probe_nodes, rule_probe
from .proving import prove


@dataclass(frozen=True)
class ProbePack:
    """The probes written, the ops that could not be built (named, never dropped), and their DFC pack."""

    pack: DfcPack
    probes: tuple[Probe, ...]
    unbuilt: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.pack.folder

    @property
    def script(self) -> Path:
        return self.pack.script


def to_probe(ops: DeviceOps, extra: Iterable[str] = ()) -> dict[str, str]:
    """subject -> why: every op entry and rule the record leaves unjudged (or rests on an inference), and
    every op in `extra` (ops an export uses) that is unjudged. Op subjects read as `standing.op_key` writes them."""
    why = unjudged(ops)
    for op in extra:
        entry = ops.entries.get(op)
        if entry is not None and entry.by_pattern:
            continue  # its nodes are judged by rules, and the unjudged rules are probed
        standing = op_standing(op, ops)
        if standing.prediction == Prediction.UNJUDGED:
            why.setdefault(op_key(op), f"used by an export; {standing.prediction}: {standing.basis}")
    return dict(sorted(why.items()))


def write_probes(
    out: str | os.PathLike, ops: DeviceOps | None = None, *, extra: Iterable[str] = (), arch: str | None = None
) -> ProbePack:
    """Write one proven probe per unjudged op and rule, and the pack, into `out`.

    `out` follows the suite's folder rule (`folder_swap.building`): absent, empty, or an earlier probe pack,
    built beside it and swapped in whole; the DFC's results in it are kept where their probe is unchanged
    (refused otherwise: `dfc_pack.stale_results`), and so is every file the suite did not write."""
    ops = ops if ops is not None else load_device_ops()
    with building(out, FolderKind.PROBE_PACK, vet=stale_results) as build:
        pack = _write_probes_into(build, ops, extra, arch)
    target = Path(out)
    moved = DfcPack(
        folder=target, script=target / SCRIPT, manifest=target / MANIFEST, graphs=pack.pack.graphs, arch=pack.pack.arch
    )
    return ProbePack(pack=moved, probes=pack.probes, unbuilt=pack.unbuilt)


def _write_probes_into(folder: Path, ops: DeviceOps, extra: Iterable[str], arch: str | None) -> ProbePack:
    probes, unbuilt = [], {}
    for subject, why in to_probe(ops, extra).items():
        kind, name = read_key(subject)
        file = f"{probe_stem(subject)}.onnx"
        try:
            if kind == Subject.OP:
                if name not in OP_PROBES:
                    unbuilt[subject] = "no probe builder (named, not dropped): " + why
                    continue
                model, note = op_probe(name)
                nodes: tuple[str, ...] = op_probe_nodes(model, name)
            else:
                model, nodes = rule_probe(name, ops)
                note = ops.rules[name].what if name in ops.rules else ""
            prove(model)
            onnx.save(model, str(folder / file))
        except Exception as exc:  # a probe that does not prove itself is never handed to the DFC
            (folder / file).unlink(missing_ok=True)
            unbuilt[subject] = f"probe not proven: {type(exc).__name__}: {exc}"
            continue
        probes.append(Probe(subject=kind, name=name, file=file, why=why, nodes=nodes, note=note))
    pack = pack_into(
        [folder / p.file for p in probes],
        folder,
        arch,
        extra={"probes": [asdict(p) for p in probes], "unbuilt": unbuilt, "allowlist": ops.source},
    )
    return ProbePack(pack=pack, probes=tuple(probes), unbuilt=unbuilt)
