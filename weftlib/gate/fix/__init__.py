"""`gate fix`: exact rewrites of an ONNX graph toward what the DFC parses, each answering a finding of the
device gate, the result proven equal to the original in onnxruntime.

`fix_model` gates the graph, applies the library's rewrites (onnxscript rewrite rules, `library`) aimed at
the refused and unjudged nodes, gates again until no rewrite applies, checks the inputs and outputs are
kept and the result is valid at the original's IR and opset (`valid`), and proves the fixed graph equal
(`proof`: to the original, or where the original's own float32 rounding is the larger, to it with the replaced
nodes in float64, `exact`; every output on a set where the original is finite, every rewritten node reached,
`reach`). With `recorded`, a graph whose exporter recorded a run beside it (`recorded`: NAF's 512² graphs of
02) is proven on that run at full geometry and on random sets at a reduced geometry of the same builder, fixed by
the same rewrites; anything missing or not fitting is named and the full proof runs. `write_fix` writes `<stem>.fixed.onnx` and `fix.json` into a folder swapped in whole (`folder_swap`),
so a failure leaves nothing half written; a fixed graph is written only when proven, and nothing at all when no
rewrite applied.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ...onnx_core import parity
from ..compiler.dfc_log import file_sha256
from ..folder_swap import building
from ..predict.device import device_gate
from ..predict.graph_checks import proof_problem
from ..record.allowlist import DeviceOps, load_device_ops
from ..run_graphs import fixed_identity, identity
from ..vocabulary import FolderKind
from .base import ExactRewrite
from .exact import exact_reference
from .library import answered_keys, default_library
from .loop import Applied, rewrite_until_settled, to_ir, to_proto
from .proof import RELATIVE, Proof, ProofVerdict, joined, prove, prove_on_record
from .reach import nested_nodes
from .recorded import KeptRun, Record, fixed_otherwise, keep_beside, misfit, not_the_same_graph
from .recorded import read as read_record
from .report import Fix, interface, unanswered
from .sets import mismatch
from .valid import at_ir, refusal

FIXED_SUFFIX = ".fixed.onnx"  # `write_fix`'s name for a fixed graph, after the original's stem


class FixError(ValueError):
    """A model `gate fix` cannot work on (unreadable, malformed, example inputs that do not fit it); the message
    says why."""


def fix_model(
    model_path: str | os.PathLike,
    ops: DeviceOps | None = None,
    *,
    library: Sequence[ExactRewrite] | None = None,
    examples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    tolerance: float = RELATIVE,
    recorded: bool = False,
) -> Fix:
    """The fixed graph of `model_path` and its record (nothing is written; see `write_fix`). Every file it
    makes on the way (each round's graph for the gate, the graphs the proof runs, their profiles) lives in one
    temporary folder, removed on return, on error and on interrupt. `recorded`: prove on the run recorded
    beside the graph where there is one (`Plan.RECORDED`), else say why not and prove in full."""
    ops = ops or load_device_ops()
    library = list(default_library() if library is None else library)
    spare = copy.deepcopy(library) if recorded else []  # unused rewrites, for the reduced graph
    before = device_gate(model_path, ops)
    if not before.read:  # unreadable, malformed, rejected by the ONNX checker: each problem names the file
        raise FixError("; ".join(before.problems))
    model = onnx.load(os.fspath(model_path))  # its external data from beside it, as the gate found it
    unproven = proof_problem(model)
    if unproven:
        raise FixError(f"{model_path}: {unproven}")
    if examples and (why := mismatch(examples, model)):
        raise FixError(f"{model_path}: {why}")
    sidecar = Path(model_path).with_suffix(".parity.json")
    with tempfile.TemporaryDirectory(prefix="weftlib-fix-") as scratch:
        try:
            onnx.checker.check_model(model)
            fixed, gates, applied = rewrite_until_settled(
                model, ops, library, Path(model_path).stem, sidecar=sidecar, scratch=scratch
            )
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            raise FixError(f"{model_path}: malformed model: {exc}") from exc
        if interface(fixed) != interface(model):
            raise FixError(f"{model_path}: the rewrites changed the graph's inputs or outputs (a rewrite's bug)")
        run = None
        if applied:
            fixed = at_ir(fixed, model)
            plan = _Plan(ops, spare, recorded, examples)
            proof, run = _prove(model_path, model, fixed, applied, plan, tolerance, Path(scratch))
        else:
            proof = Proof.skipped("the graph is the original, nothing to prove", tolerance, unchanged=True)
    after = gates[-1]
    declined = {node: why for rewrite in library for node, why in rewrite.declined.items()}
    left = unanswered(after, answered_keys(library), declined)
    return Fix(str(model_path), fixed, before, after, tuple(applied), tuple(left), proof, run)


@dataclass(frozen=True)
class _Plan:
    """What the proof may use beside the two graphs: the gate's ops and unused rewrites (for a reduced graph),
    whether to read a recorded run, the caller's example sets."""

    ops: DeviceOps
    spare: Sequence[ExactRewrite]
    recorded: bool
    examples: Mapping[str, Mapping[str, np.ndarray]] | None


def _prove(
    model_path: str | os.PathLike,
    model: onnx.ModelProto,
    fixed: onnx.ModelProto,
    applied: Sequence[Applied],
    plan: _Plan,
    tolerance: float,
    scratch: Path,
) -> tuple[Proof, KeptRun | None]:
    """The proof of `fixed` against the original, in `scratch`: not run where the checker refuses the fixed graph
    at the original's IR and opset (`valid`); else run with the rewritten nodes inside subgraphs to reach (the
    produced ones in the fixed graph, the replaced ones in the original as the rewrites read it, `named`): on
    the recorded run and the reduced graph where `plan.recorded` finds them fitting, else in full. With a proof
    on the record that proves, the fixed graph's run on the recorded inputs, kept for 06 (`recorded.KeptRun`)."""
    path, exact, named_path = scratch / "fixed.onnx", scratch / "exact.onnx", scratch / "named.onnx"
    onnx.save(fixed, path)
    why = refusal(fixed, model, path)
    if why:
        return Proof.skipped(why, tolerance), None
    named = to_proto(to_ir(model))
    region = {name for a in applied for name in a.replaced}
    reference = exact_reference(named, region)
    if reference is not None:
        onnx.save(reference, exact)
    produced = {name for a in applied for name in a.produced} & nested_nodes(fixed)
    replaced = region & nested_nodes(named)
    if replaced:
        onnx.save(named, named_path)
    kept = {
        "tolerance": tolerance,
        "reference": exact if reference is not None else None,
        "produced": produced,
        "replaced": replaced,
        "named": named_path if replaced else None,
        "scratch": scratch,
    }
    record, why = read_record(model_path) if plan.recorded else (None, "")
    if record is not None:
        outputs: dict[str, np.ndarray] = {}
        proof, why = _on_record(record, model, path, applied, plan, kept | {"keep": outputs})
        if proof is not None:
            ran = KeptRun(record.inputs, outputs, file_sha256(path)) if proof.proven and outputs else None
            return proof, ran
    try:
        full = prove(model_path, path, plan.examples, **kept)  # type: ignore[arg-type]
    except ValueError as exc:  # an input the proof cannot feed (a string, a sequence)
        raise FixError(f"{model_path}: {exc}") from exc
    return (dataclasses.replace(full, plan_note=f"in full: {why}") if why else full), None


def _on_record(
    record: Record, model: onnx.ModelProto, fixed: Path, applied: Sequence[Applied], plan: _Plan, kept: dict[str, Any]
) -> tuple[Proof | None, str]:
    """`Plan.RECORDED`'s proof, or None and why it cannot stand (the record or the reduced graph not fitting,
    the rewrites fixing the reduced graph otherwise, or the sets leaving the fix unjudged): the reduced graph
    is fixed by unused copies of the same rewrites and proven on random sets; the fixed graph on the recorded
    set."""
    why = misfit(record, model)
    small = onnx.ModelProto()
    if why is None:
        try:
            small = onnx.load(os.fspath(record.reduced))
            why = not_the_same_graph(small, model)
        except Exception as exc:  # OSError, protobuf's DecodeError: a file that is no ONNX graph
            why = f"the reduced graph cannot be read ({type(exc).__name__}: {exc})"
    if why is not None:
        return None, why
    try:
        twin = fix_model(record.reduced, plan.ops, library=plan.spare, tolerance=kept["tolerance"])
    except FixError as exc:
        return None, f"the reduced graph cannot be fixed ({exc})"
    why = fixed_otherwise(applied, twin.rewrites, model, small) or (
        f"reduced: {twin.proof.not_run}" if twin.proof.not_run else None
    )
    if why is not None:
        return None, why
    full = prove_on_record(fixed, record.inputs, record.outputs, record.origin(), **kept)
    proof = joined(full, twin.proof, f"reduced graph by {record.builder} ({record.folder.name}/)")
    if proof.verdict not in (ProofVerdict.PROVEN, ProofVerdict.NOT_EQUAL):
        return None, f"the recorded run and the reduced graph's sets leave it {proof.verdict}: {proof.summary()}"
    return proof, ""


def write_fix(fix: Fix, out: str | os.PathLike) -> Path | None:
    """`out/<stem>.fixed.onnx` and `out/fix.json`, written by the suite's folder rule (`folder_swap.building`:
    swapped in whole, only over a folder of the same kind, a user's files and the input model kept); returns
    the fixed graph's path, with its parity file beside it (`<stem>.parity.json`): the original's export check where
    there is one (the graphs compute the same in onnxruntime, so it holds for both) and the fixed graph's identity,
    `fixed` of the original (`run_graphs.fixed_identity`: the original's notebook, formulation and geometry). A fix whose graph is not offered (`Fix.offered`: unproven, refuted, invalid) writes
    `fix.json` alone, saying why, and returns None; a fix with no rewrite writes nothing and returns None. A fixed
    graph proven on a recorded run has its own run there kept beside it (`<stem>.fixed.proof/run.npz`, bound to
    the file written: `recorded.keep_beside`), the reference of 06's proof of its cut."""
    if not fix.rewrites:
        return None
    name = f"{Path(fix.source).stem}{FIXED_SUFFIX}" if fix.offered else None
    original = parity.read(fix.source) or {}  # proven equal in onnxruntime: the original's export check holds too
    fixed = fixed_identity(identity(fix.source), Path(fix.source).stem)
    with building(Path(out), FolderKind.FIX, inputs=[fix.source]) as folder:
        if name is not None:
            onnx.save(fix.fixed, folder / name)
            check = {key: original[key] for key in parity.CHECK_KEYS} if set(parity.CHECK_KEYS) <= set(original) else {}
            parity.write(folder / name, check, fixed.as_json())
            if fix.run is not None:  # its proof's run on the recorded inputs, for 06's proof of its cut
                keep_beside(fix.run, folder / name)
        (folder / "fix.json").write_text(json.dumps(fix.as_json(name), indent=2) + "\n")
    return Path(out) / name if name is not None else None


__all__ = [
    "FIXED_SUFFIX",
    "RELATIVE",
    "Applied",
    "ExactRewrite",
    "Fix",
    "FixError",
    "Proof",
    "ProofVerdict",
    "default_library",
    "fix_model",
    "prove",
    "write_fix",
]
