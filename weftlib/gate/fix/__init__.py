"""`gate fix`: exact rewrites of an ONNX graph toward what the DFC parses, each answering a finding of the
device gate, the result proven equal to the original in onnxruntime.

`fix_model` gates the graph, applies the library's rewrites (onnxscript rewrite rules, `library`) aimed at
the refused and unjudged nodes, gates again until no rewrite applies, checks the inputs and outputs are
kept, and proves the fixed graph equal (`proof`: to the original, or where the original's own float32
rounding is the larger, to it with the replaced nodes in float64, `exact`). `write_fix` writes
`<stem>.fixed.onnx` and `fix.json` into a folder swapped in whole (`folder_swap`), so a failure leaves
nothing half written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from ..folder_swap import building
from ..predict.device import device_gate
from ..predict.graph_checks import proof_problem
from ..record.allowlist import DeviceOps, load_device_ops
from ..vocabulary import FolderKind
from .base import ExactRewrite
from .exact import exact_reference
from .library import answered_keys, default_library
from .loop import Applied, rewrite_until_settled, to_ir, to_proto
from .proof import RELATIVE, Proof, prove
from .report import Fix, interface, unanswered


class FixError(ValueError):
    """A model `gate fix` cannot work on (unreadable, malformed); the message says why."""


def fix_model(
    model_path: str | os.PathLike,
    ops: DeviceOps | None = None,
    *,
    library: Sequence[ExactRewrite] | None = None,
    examples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    tolerance: float = RELATIVE,
) -> Fix:
    """The fixed graph of `model_path` and its record (nothing is written; see `write_fix`)."""
    ops = ops or load_device_ops()
    library = list(default_library() if library is None else library)
    before = device_gate(model_path, ops)
    if not before.read:  # unreadable, malformed, rejected by the ONNX checker: each problem names the file
        raise FixError("; ".join(before.problems))
    model = onnx.load(os.fspath(model_path))  # its external data from beside it, as the gate found it
    unproven = proof_problem(model)
    if unproven:
        raise FixError(f"{model_path}: {unproven}")
    try:
        onnx.checker.check_model(model)
        fixed, gates, applied = rewrite_until_settled(model, ops, library, Path(model_path).stem)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise FixError(f"{model_path}: malformed model: {exc}") from exc
    if interface(fixed) != interface(model):
        raise FixError(f"{model_path}: the rewrites changed the graph's inputs or outputs (a rewrite's bug)")
    region = {name for a in applied for name in a.replaced}
    reference = exact_reference(to_proto(to_ir(model)), region) if region else None
    with tempfile.TemporaryDirectory(prefix="weftlib-fix-") as scratch:
        path, exact = Path(scratch) / "fixed.onnx", Path(scratch) / "exact.onnx"
        onnx.save(fixed, path)
        if reference is not None:
            onnx.save(reference, exact)
        proof = prove(model_path, path, examples, tolerance=tolerance, reference=exact if reference else None)
    after = gates[-1]
    declined = {node: why for rewrite in library for node, why in rewrite.declined.items()}
    left = unanswered(after, answered_keys(library), declined)
    return Fix(str(model_path), fixed, before, after, tuple(applied), tuple(left), proof)


def write_fix(fix: Fix, out: str | os.PathLike) -> Path:
    """`out/<stem>.fixed.onnx` and `out/fix.json`, written by the suite's folder rule (`folder_swap.building`:
    swapped in whole, only over a folder of the same kind, a user's files and the input model kept); returns
    the fixed graph's path."""
    name = f"{Path(fix.source).stem}.fixed.onnx"
    with building(Path(out), FolderKind.FIX, inputs=[fix.source]) as folder:
        onnx.save(fix.fixed, folder / name)
        (folder / "fix.json").write_text(json.dumps(fix.as_json(name), indent=2) + "\n")
    return Path(out) / name


__all__ = [
    "RELATIVE",
    "Applied",
    "ExactRewrite",
    "Fix",
    "FixError",
    "Proof",
    "default_library",
    "fix_model",
    "prove",
    "write_fix",
]
