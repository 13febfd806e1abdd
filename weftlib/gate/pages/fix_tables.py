"""The rows notebooks 05 and 06 show of `gate fix` over a run's graphs (`run.fixing`): per graph the refusals
before and after, the rewrites and the proof; each fixed faithful graph beside its hand-made exact variant; and
the device's share of each fixed graph's cut against the original's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..cut.segments import Partition
from ..fix import Fix, Proof
from ..fix.sets import THE_ORIGINAL
from ..run_graphs import fixed_of
from ..vocabulary import GateVerdict

NO_RULE = "none"  # what a row names when no rule is left


def _rules(rows: list[dict[str, object]]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["rule"])] = counts.get(str(row["rule"]), 0) + 1
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counts.items())) or NO_RULE


def proof_sets(proof: Proof) -> str:
    """Which sets proved it, in words: how many at each geometry and what their outputs were held to, and why
    the full proof ran where a recorded run could not stand in (`fix.recorded`)."""
    counts: dict[tuple[str, str], int] = {}
    for o in proof.origins:
        held = "the recorded outputs" if o.reference != THE_ORIGINAL else "the original"
        counts[(str(o.geometry), held)] = counts.get((str(o.geometry), held), 0) + 1
    text = ", ".join(f"{n} at {geometry} geometry against {held}" for (geometry, held), n in counts.items())
    return "; ".join(t for t in (text or "none", proof.plan_note) if t)


def fix_rows(fixes: Mapping[str, Fix]) -> list[dict[str, object]]:
    """Per graph: verdict and refused nodes before and after, the rewrites, what stays unanswered, the proof."""
    rows = []
    for stem, fix in fixes.items():
        before, after = fix.as_json("")["before"], fix.as_json("")["after"]
        assert isinstance(before, dict) and isinstance(after, dict)
        rows.append(
            {
                "graph": stem,
                "before": f"{before['verdict']}: {len(before['refused'])} refused, {len(before['unjudged'])} unjudged",
                "after": f"{after['verdict']}: {len(after['refused'])} refused, {len(after['unjudged'])} unjudged",
                "rewrites": ", ".join(sorted({f"{a.rewrite} ({', '.join(a.answers)})" for a in fix.rewrites}))
                or "none",
                "unanswered": _rules(list(fix.unanswered)),
                "proven": fix.proof.proven,
                "worst relative diff": max(fix.proof.worst) if fix.proof.worst else float("nan"),
                "proof": fix.proof.summary() if fix.proof.worst else "no input set ran",
                "proof sets": proof_sets(fix.proof),
            }
        )
    return rows


def variant_rows(fixes: Mapping[str, Fix], variants: Mapping[str, str], gates: Mapping[str, object]) -> list[dict]:
    """Each fixed faithful graph beside its hand-made exact variant (`variants`: faithful stem -> variant stem,
    `gates`: variant stem -> its GateResult): both verdicts, and what the fix leaves unanswered."""
    rows = []
    for stem, variant in variants.items():
        if stem not in fixes or variant not in gates:
            continue  # not in this run: `absent` names it
        fix, hand = fixes[stem], gates[variant]
        rows.append(
            {
                "faithful graph": stem,
                "fixed": fix.after.verdict,
                "hand-made variant": variant,
                "variant": getattr(hand, "verdict", "?"),
                "as the variant": fix.after.verdict == getattr(hand, "verdict", None),
                "refusals no rewrite answers": _rules(list(fix.unanswered)),
            }
        )
    return rows


def holds(rows: list[dict]) -> list[dict]:
    """The comparison's claim: each fixed graph is predicted to parse as its variant is, or the table names
    the refusals no rewrite answers. Returns the rows where neither holds (a refusal left unnamed)."""
    return [r for r in rows if r["fixed"] == GateVerdict.FAIL and r["refusals no rewrite answers"] == NO_RULE]


def coverage_rows(
    before: Mapping[Path, Partition], after: Mapping[Path, Partition], fixes: Iterable[str]
) -> list[dict[str, object]]:
    """Per fixed graph: the device's share of the nodes and MACs cut as exported and cut after the fix (each fixed
    graph set beside the one its identity says it fixes, `run_graphs.fixed_of`)."""
    original = {p.stem: part for p, part in before.items()}
    fixed = {fixed_of(p): part for p, part in after.items()}
    rows = []
    for stem in fixes:
        old, new = original[stem].coverage, fixed[stem].coverage
        rows.append(
            {
                "graph": stem,
                "nodes on device before": f"{old.nodes[0]} of {old.nodes[1]}",
                "nodes on device after": f"{new.nodes[0]} of {new.nodes[1]}",
                "MACs on device before": f"{old.share('macs'):.1%}",
                "MACs on device after": f"{new.share('macs'):.1%}",
                "device segments before": len(original[stem].device_segments),
                "device segments after": len(fixed[stem].device_segments),
                "fixed cut proven": fixed[stem].proven,
            }
        )
    return rows
