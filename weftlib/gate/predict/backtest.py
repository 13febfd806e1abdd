"""The gate tested against the public record: the device gate run on every rebuilt outcome (`public_record`),
each row saying whether it agrees with what the DFC did:

- on the target DFC, a parse must be predicted to parse, and a refusal must be predicted refused with every
  node the DFC named among the refused;
- on another DFC 5.x, a refusal must never be predicted to parse (unjudged is allowed: the target may
  differ); a parse there is shown.

That is fit: the rules were written with those cases in view. `leave_one_origin_out` is the held-out
figure: each origin (an author or organisation, `sources` in params/device_ops.yaml) judged by a gate without
the evidence of any of its sources, since one author's several sources are not independent
(`leave_one_source_out` holds out one short name at a time, which leaks). `refusals_on_nearest` checks that no
refusal fires on the public parses nearest to it (`NEAREST_PARSES`), and `limits_on_public_parses` that no
graph-level limit of the compiler fires on a rebuilt public parse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import onnx

from ...onnx_core.walk import index_model
from ..record.allowlist import Case, DeviceOps, Evidence, source_key
from ..record.public_record import BUILDERS
from ..record.standing import op_key, op_standing, reach, rule_standing
from ..vocabulary import Agreement, GateVerdict, Outcome, Prediction, Reach, Seen
from .device import graph_limits
from .nodes import GraphPrediction, predict


def judge(case: Case, model: onnx.ModelProto, ops: DeviceOps) -> dict[str, object]:
    """One row: the gate's verdict on the rebuilt `case`, and whether it agrees with the recorded outcome."""
    return row(case, predict(index_model(model), ops), ops)


def row(case: Case, prediction: GraphPrediction, ops: DeviceOps) -> dict[str, object]:
    """`judge`'s row from a prediction already made (the graph may be a hand-built one or an exporter's)."""
    where = reach_of(case, ops)
    refused_nodes = {f.node for f in prediction.refused()}
    named = sorted({f"{f.subject} @ {f.node}" for f in prediction.findings})
    missing = [n for n in case.refused_at if n not in refused_nodes]
    agreement = _agreement(case, prediction.verdict, where, bool(missing))
    return {
        "case": case.name,
        "source": case.source,
        "dfc": case.dfc,
        "arch": case.arch,
        "reach": where,
        "outcome": case.outcome,
        "prediction": prediction.verdict,
        "agreement": agreement,
        "refused nodes missed": ", ".join(missing),
        "findings": "; ".join(named),
    }


def _agreement(case: Case, verdict: GateVerdict, where: Reach, missing: bool) -> Agreement:
    """The module docstring's contract for one case (`missing`: a node the DFC named is not among the refused)."""
    if not case.refused:
        return {GateVerdict.PASS: Agreement.AGREES, GateVerdict.FAIL: Agreement.DISAGREES}.get(
            verdict, Agreement.UNJUDGED
        )
    if verdict == GateVerdict.PASS:
        return Agreement.DISAGREES
    if where == Reach.TARGET and (verdict != GateVerdict.FAIL or missing):
        return Agreement.DISAGREES if verdict == GateVerdict.FAIL else Agreement.UNJUDGED
    return Agreement.AGREES if verdict == GateVerdict.FAIL else Agreement.UNJUDGED


def reach_of(case: Case, ops: DeviceOps) -> Reach:
    return reach(Evidence(Seen.PARSED, case.dfc, case.arch), ops.target_dfc, ops.target_arch)


def backtest(ops: DeviceOps) -> list[dict[str, object]]:
    """The gate on every rebuilt outcome of the public record (cases with no builder are named, not run)."""
    rows = []
    for name, case in ops.cases.items():
        if not case.rebuilt:
            continue
        if name not in BUILDERS:
            raise KeyError(
                f"public_record.{name}: marked rebuilt, but weftlib.gate.record.public_record has no builder"
            )
        rows.append(judge(case, BUILDERS[name](), ops))
    return rows


def held(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The rows that break the backtest's contract: a target outcome not agreed with, or a refusal on
    another DFC 5.x predicted to parse."""
    return [
        r
        for r in rows
        if (r["reach"] == Reach.TARGET and r["agreement"] != Agreement.AGREES)
        or (r["reach"] == Reach.SIBLING and r["outcome"] != Outcome.PARSED and r["prediction"] == GateVerdict.PASS)
    ]


# ------------------------------------------------------------------------- held out: leave one source out


def _without(ops: DeviceOps, gone: Callable[[str], bool]) -> DeviceOps:
    """The listing with every piece of evidence whose source `gone` names taken out: the items citing one of
    its cases and the items whose own source it is. (The cases stay: they are what the gate is judged on.)"""
    cases = {name for name, case in ops.cases.items() if gone(case.source)}

    def kept(items: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
        return tuple(e for e in items if e.case not in cases and not (e.source and gone(e.source)))

    entries = {op: replace(entry, evidence=kept(entry.evidence)) for op, entry in ops.entries.items()}
    rules = {name: replace(rule, evidence=kept(rule.evidence)) for name, rule in ops.rules.items()}
    return replace(ops, entries=entries, rules=rules)


def without_source(ops: DeviceOps, key: str) -> DeviceOps:
    """The listing without the evidence of source `key` (one short name)."""
    return _without(ops, lambda text: source_key(text) == key)


def without_origin(ops: DeviceOps, origin: str) -> DeviceOps:
    """The listing without the evidence of every source of `origin` (an author or organisation)."""
    return _without(ops, lambda text: ops.origin(text) == origin)


def _held_out(ops: DeviceOps, group: Callable[[str], str], without: Callable[[DeviceOps, str], DeviceOps]) -> list:
    rebuilt = {name: case for name, case in ops.cases.items() if case.rebuilt}
    rows = []
    for held in sorted({group(case.source) for case in rebuilt.values()}):
        listing = without(ops, held)
        for name, case in rebuilt.items():
            if group(case.source) == held:
                rows.append({**judge(case, BUILDERS[name](), listing), "held out": held})
    return rows


def leave_one_source_out(ops: DeviceOps) -> list[dict[str, object]]:
    """For each source (short name), the gate with that source's evidence removed, judged on that source's
    rebuilt cases (a row per case, as `backtest` writes it, with the source held out). One author's other
    sources stay in: this leaks, `leave_one_origin_out` does not."""
    return _held_out(ops, source_key, without_source)


def leave_one_origin_out(ops: DeviceOps) -> list[dict[str, object]]:
    """The held-out backtest: for each origin, the gate with the evidence of all its sources removed, judged
    on that origin's rebuilt cases ("held out" names the origin)."""
    return _held_out(ops, ops.origin, without_origin)


def agreement(rows: list[dict[str, object]]) -> dict[str, object]:
    """How far the verdicts agree with the outcomes: counts, and the share agreed among the cases the gate
    judged (pass or fail). Unjudged is counted apart: it sends a graph to a probe, not to a rewrite."""
    agrees = sum(r["agreement"] == Agreement.AGREES for r in rows)
    disagrees = sum(r["agreement"] == Agreement.DISAGREES for r in rows)
    judged = agrees + disagrees
    return {
        "cases": len(rows),
        "sources": len({r["source"] and source_key(str(r["source"])) for r in rows}),
        Agreement.AGREES: agrees,
        Agreement.DISAGREES: disagrees,
        Agreement.UNJUDGED: len(rows) - judged,
        "agreement_judged": round(agrees / judged, 4) if judged else None,
        "agreement_all": round(agrees / len(rows), 4) if rows else None,
        "coverage": round(judged / len(rows), 4) if rows else None,  # the share the gate judged at all
        "disagreed_cases": sorted(str(r["case"]) for r in rows if r["agreement"] == Agreement.DISAGREES),
    }


def record_origins(ops: DeviceOps) -> dict[str, object]:
    """How independent the public record is: its cases, its sources (short names) and its origins (authors
    or organisations; one author's several sources count once), over all cases and over the rebuilt ones."""
    rebuilt = [case for case in ops.cases.values() if case.rebuilt]
    return {
        "cases": len(ops.cases),
        "rebuilt": len(rebuilt),
        "sources": len({source_key(case.source) for case in ops.cases.values()}),
        "origins": len(ops.case_origins),
        "origins_rebuilt": len({ops.origin(case.source) for case in rebuilt}),
        "by_origin": {origin: ", ".join(keys) for origin, keys in ops.case_origins.items()},
    }


# ------------------------------------------------------------- no refusal broader than the record

# Every refusal the listing predicts (a rule, or an op entry, whose standing is refused) beside the public
# parses nearest to it: cases with the same op or pattern that parsed. A string instead of cases says why the
# record holds none. `refusals_on_nearest` checks the refusal does not fire on any of them.
NEAREST_PARSES: dict[str, tuple[str, ...] | str] = {
    "graph_without_input": ("measured-passing", "ugv-conv-relu"),
    "input_static_shape": ("llm-qwen2-block", "qvl-block-tokens"),
    "input_rank_1": ("clef-swiglu", "qvl-block-unbatched", "llm-toy-single-head"),
    "head_split_interrupted": ("llm-qwen2-block", "qvl-block-tokens", "clef-head-axis-shortcut"),
    "image_channel_split": ("rfd-backbone-one-window", "ugv-conv-relu", "benchy-yolov8-det-530"),
    "reshape_5d_to_4d": ("rfd-backbone-one-window", "qvl-block-tokens"),
    "batch_axis": ("rfd-isolated-cls-concat", "rfd-backbone-one-window", "qvl-block-unbatched"),
    "lone_transpose_0213": ("qvl-block-tokens", "llm-qwen2-block"),
    "softmax_untracked": ("qvl-block-tokens", "clef-attention-core"),
    "layernorm_untracked": (
        "qvl-layernorm-fused",
        "rfd-isolated-layernorm",
        "rfd-backbone-one-window",
        "l10h-minilm-encoder",
    ),
    "layernorm_fed_by_concat": ("rfd-backbone-one-window", "rfd-isolated-layernorm"),
    "concat_no_format": ("rfd-isolated-cls-concat", "clef-rope-swap-sign", "benchy-yolov8-det-530"),
    "rotate_half_partial": ("llm-qwen2-block", "clef-rope-swap-sign"),
    "reduce_minus2_dropped": ("clef-reducesum-channels", "qvl-layernorm-decomposed"),
    "onehot_broken": ("onehot-chain",),
    "conv_rank_3": (
        "ugv-conv-relu",
        "lemu-conv-relu-conv",
        "edge-dwpw-family",
        "benchy-yolov8-det-530",
        "keff-resnet50-full-530",
    ),
    "channels_last_transpose": (
        "rfd-backbone-one-window",
        "onehot-chain",
        "ugv-conv-relu",
        "edge-residual-family",
        "qvl-block-tokens",
        "benchy-yolov8-det-530",
        "keff-resnet50-full-530",
    ),
    "image_nhwc_to_tokens": ("rfd-backbone-one-window", "rbn-vit-base-zoo"),
    "op:Expand": "no public run parsed a live Expand on DFC 5.x (folded away, it never reaches the parser)",
    "op:ConstantOfShape": "no public run parsed a live ConstantOfShape on DFC 5.x",
    "op:Cast": "no public run checked a value-changing Cast that came back right",
    "op:Sin": "no public run parsed Sin on DFC 5.x",
    "op:Cos": "no public run parsed Cos on DFC 5.x",
    "op:Not": "no public run parsed a boolean op on DFC 5.x",
    "op:And": "no public run parsed a boolean op on DFC 5.x",
    "op:Greater": "no public run parsed Greater on DFC 5.x (the vendor's table lists it; the harness refused it)",
    "op:Less": "no public run parsed Less on DFC 5.x (the vendor's table lists it; the harness refused it)",
    "op:IsInf": "no public run parsed IsInf on DFC 5.x",
    "op:IsNaN": "no public run parsed IsNaN on DFC 5.x",
    "op:Where": "no public run parsed a live Where on DFC 5.x (inside a real export it folds away)",
    "op:GatherElements": "no public run parsed GatherElements on DFC 5.x",
    "op:TopK": "no public run parsed TopK on DFC 5.x",
    "op:ScatterND": "no public run parsed ScatterND on DFC 5.x",
    "op:GridSample": "no public run parsed GridSample on DFC 5.x",
}


def limits_on_public_parses(ops: DeviceOps) -> list[str]:
    """Each graph-level limit of the compiler (`weftlib.gate.predict.device.graph_limits`: IR, opsets, domains) that
    fires on a rebuilt public parse of DFC 5.x. Empty: none."""
    major = ops.target_dfc.split(".", maxsplit=1)[0]
    return [
        f"{name}: {problem}"
        for name, case in ops.cases.items()
        if case.rebuilt and not case.refused and case.dfc.split(".", maxsplit=1)[0] in (major, "unknown")
        for problem in graph_limits(index_model(BUILDERS[name]()), ops)
    ]


def refusing_subjects(ops: DeviceOps) -> list[str]:
    """The rules and op entries (as `op_key`) whose standing on the target is refused."""
    subjects = [op_key(op) for op in ops.entries if op_standing(op, ops).prediction == Prediction.REFUSED]
    return subjects + [name for name in ops.rules if rule_standing(name, ops).prediction == Prediction.REFUSED]


def refusals_on_nearest(ops: DeviceOps) -> list[str]:
    """Each way a refusal is broader than the record: a refusal with no nearest parses listed, a listed case
    that is not a rebuilt parse, or a refusal that fires on one of its nearest parses. Empty: none."""
    problems = []
    for subject in refusing_subjects(ops):
        nearest = NEAREST_PARSES.get(subject)
        if nearest is None:
            problems.append(f"{subject}: refused, with no nearest public parses listed")
            continue
        for name in () if isinstance(nearest, str) else nearest:
            case = ops.cases.get(name)
            if case is None or case.refused or name not in BUILDERS:
                problems.append(f"{subject}: {name!r} is not a rebuilt public parse")
                continue
            fired = [f.node for f in predict(index_model(BUILDERS[name]()), ops).refused() if f.key == subject]
            if fired:
                problems.append(f"{subject}: fires on the public parse {name!r} at {fired}")
    return problems
