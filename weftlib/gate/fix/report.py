"""What `gate fix` found and did, as `fix.json` holds it: the gate before and after, each rewrite, each
refusal no rewrite answers (with its rule and why), and the proof. `fixed` names the fixed graph only where it
is offered (rewritten, valid, proven); otherwise it is null and the proof says why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import onnx

from ..predict.device import EXIT_CODES, GateResult
from ..vocabulary import GateVerdict, Prediction
from .loop import Applied
from .proof import Proof, ProofVerdict
from .recorded import KeptRun


def gate_summary(result: GateResult) -> dict[str, object]:
    """The verdict and the refused and unjudged findings, each with its node, op and rule."""

    def rows(prediction: Prediction) -> list[dict[str, object]]:
        return [
            {"node": f.node, "op": f.op, "rule": f.key, "downstream": f.downstream}
            for f in result.findings
            if f.prediction == prediction
        ]

    return {
        "verdict": result.verdict,
        Prediction.REFUSED: rows(Prediction.REFUSED),
        Prediction.UNJUDGED: rows(Prediction.UNJUDGED),
        "problems": list(result.problems),
    }


def unanswered(after: GateResult, answered: dict[str, list[str]], declined: dict[str, str]) -> list[dict[str, object]]:
    """Each refusal left in the fixed graph, with its rule and why no rewrite took it (`declined`: node ->
    the precondition a rewrite aimed at it found failing)."""
    out: list[dict[str, object]] = []
    for f in after.findings:
        if f.prediction != Prediction.REFUSED:
            continue
        if f.downstream:
            why = "a consequence of an earlier refusal (its input lost its format), not a cause of its own"
        elif f.node in declined:
            why = declined[f.node]
        elif f.key in answered:
            why = f"{', '.join(answered[f.key])} answer {f.key}, but this node is not in the pattern they rewrite"
        else:
            why = f"no exact rewrite in the library answers {f.key}"
        out.append({"node": f.node, "op": f.op, "rule": f.key, "why": why})
    return out


@dataclass(frozen=True)
class Fix:
    """One graph fixed: the model it came from, the fixed model, the gates, the rewrites and the proof."""

    source: str
    fixed: onnx.ModelProto
    before: GateResult
    after: GateResult
    rewrites: tuple[Applied, ...]
    unanswered: tuple[dict[str, object], ...]
    proof: Proof
    run: KeptRun | None = field(default=None, compare=False, repr=False)  # the fixed graph on a recorded run

    @property
    def offered(self) -> bool:
        """Whether the fixed graph is offered (written as `<stem>.fixed.onnx`): rewritten, valid and proven."""
        return bool(self.rewrites) and self.proof.proven

    @property
    def exit_code(self) -> int:
        """As `gate device` on what stands: the fixed graph's verdict where it is offered (0 predicted to parse,
        1 refusals remain, 3 only unjudged), the original's where no rewrite applied; 1 where the proof found
        the fixed graph different (or the checker refused it), 3 where it could not judge it."""
        if not self.rewrites:
            return EXIT_CODES[self.before.verdict]
        if self.proof.verdict == ProofVerdict.UNJUDGED:
            return EXIT_CODES[GateVerdict.UNJUDGED]
        return EXIT_CODES[self.after.verdict] if self.proof.proven else EXIT_CODES[GateVerdict.FAIL]

    def as_json(self, fixed_file: str | None) -> dict[str, object]:
        """The record; `fixed_file` is None where no fixed graph is offered."""
        return {
            "model": self.source,
            "fixed": fixed_file,
            "exit_code": self.exit_code,
            "before": gate_summary(self.before),
            "after": gate_summary(self.after),
            "rewrites": [a.as_json() for a in self.rewrites],
            "unanswered": list(self.unanswered),
            "proof": self.proof.as_json(),
        }


def interface(model: onnx.ModelProto) -> list[tuple[str, int, tuple[object, ...]]]:
    """Each real input and output: name, element type, shape (what the fixed graph must keep)."""
    weights = {t.name for t in model.graph.initializer}

    def row(v: onnx.ValueInfoProto) -> tuple[str, int, tuple[object, ...]]:
        t = v.type.tensor_type
        return v.name, t.elem_type, tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim)

    values: Sequence[onnx.ValueInfoProto] = [v for v in model.graph.input if v.name not in weights]
    return [row(v) for v in values] + [row(v) for v in model.graph.output]
