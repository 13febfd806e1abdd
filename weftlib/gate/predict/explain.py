"""A graph's prediction in words: which rules and ops refuse it or leave it unjudged, what each rests on, and
the sentence each graph notebook (02, 03, 04) ends with.
"""

from __future__ import annotations

from ...formatting import word_count
from ..record.standing import probe_stem
from ..vocabulary import GateVerdict, Prediction
from .device import GateResult
from .rules import RULES


def blocking(result: GateResult, prediction: Prediction, causes_only: bool = False) -> dict[str, int]:
    """Rule (or "op <type>") -> how many of the graph's judgements it made with `prediction` (refused or
    unjudged), in graph order; `causes_only` leaves out the consequences of an earlier node's verdict."""
    out: dict[str, int] = {}
    for f in result.findings:
        if f.prediction == prediction and not (causes_only and f.downstream):
            out[f.subject] = out.get(f.subject, 0) + 1
    return out


def reasons(result: GateResult) -> dict[str, str]:
    """Each rule or op that refuses the graph -> what it rests on (public-record cases, or short source names)."""
    out: dict[str, list[str]] = {}
    for f in result.findings:
        if f.prediction == Prediction.REFUSED:
            out.setdefault(f.subject, [])
            out[f.subject] += [c for c in f.cites if c not in out[f.subject]]
    return {k: ", ".join(v) for k, v in out.items()}


def prediction_rows(results: dict[str, GateResult]) -> list[dict[str, object]]:
    """One row per named graph: its prediction, and the rules and ops that refuse it or leave it unjudged."""
    return [
        {
            "graph": name,
            "prediction": r.verdict,
            "refused by": ", ".join(f"{k} x{n}" for k, n in blocking(r, Prediction.REFUSED).items()) or "-",
            "unjudged by": ", ".join(f"{k} x{n}" for k, n in blocking(r, Prediction.UNJUDGED).items()) or "-",
            "problems": "; ".join(r.problems),
        }
        for name, r in results.items()
    ]


def closest(variants: dict[str, GateResult]) -> str:
    """The variant nearest to parsing: one predicted to parse, else unjudged before refused, then the fewest
    findings (the first such in order)."""
    return min(variants, key=lambda n: (variants[n].verdict == GateVerdict.FAIL, len(variants[n].findings)))


def prediction_sentence(results: dict[str, GateResult], faithful: list[str]) -> str:
    """The three things each graph notebook ends with, from the gate's results: the prediction for the
    faithful graphs, the rule and source behind each refusal (consequences of an earlier refusal said apart),
    and which exact variant is predicted to parse, or what still blocks the closest one."""
    parts = []
    for name in faithful:
        r = results[name]
        why = reasons(r)
        causes = [
            f"{rule} ({cites})" for rule, cites in why.items() if not getattr(RULES.get(rule), "downstream", False)
        ]
        after = [rule for rule in why if getattr(RULES.get(rule), "downstream", False)]
        text = f"{name} is predicted {r.verdict}" + (f", refused by {'; '.join(causes)}" if causes else "")
        parts.append(text + (f" (and, downstream of those, {', '.join(after)})" if after else ""))
    variants = {n: r for n, r in results.items() if n not in faithful}
    passing = [n for n, r in variants.items() if r.verdict == GateVerdict.PASS]
    if passing:
        parts.append(f"predicted to parse: {', '.join(passing)}")
    elif variants:
        name = closest(variants)
        r = variants[name]
        still = blocking(r, Prediction.REFUSED, causes_only=True) or blocking(r, Prediction.UNJUDGED, causes_only=True)
        parts.append(
            f"no variant is predicted to parse; the closest, {name}, is {r.verdict} by {', '.join(still) or 'its limits'}"
        )
    return "; ".join(parts)


def named(items: list[str]) -> str:
    """One or two names as a sentence says them ("a", "a and b"), more as the first two and a count ("a, b
    +3"): a short answer stays short on any graph."""
    if len(items) <= 2:
        return " and ".join(items)
    return f"{items[0]}, {items[1]} +{len(items) - 2}"


def short_prediction(results: dict[str, GateResult], faithful: list[str], budget: int | None = None) -> str:
    """`prediction_sentence` at a glance, for a short answer: which variants are predicted to parse, or what
    the closest one waits on (the unjudged rules and ops, with the probes that settle them) or is refused by.
    Over `budget` words, the same in counts instead of names."""
    variants = {n: r for n, r in results.items() if n not in faithful}
    if not variants:
        return "no variant was exported"
    passing = [n for n, r in variants.items() if r.verdict == GateVerdict.PASS]
    name = closest(variants)
    refused = list(blocking(variants[name], Prediction.REFUSED, causes_only=True))
    causes = [f for f in variants[name].findings if f.prediction == Prediction.UNJUDGED and not f.downstream]
    subjects = list(dict.fromkeys(f.subject for f in causes))
    probes = [f"`{probe_stem(k)}`" for k in dict.fromkeys(f.key for f in causes)]
    if passing:
        full = f"{named(passing)} {'is' if len(passing) == 1 else 'are'} predicted to parse"
        compact = f"{len(passing)} variants are predicted to parse"
    elif refused:
        full = f"no variant parses yet: the closest, {name}, is refused by {named(refused)}"
        compact = f"no variant parses yet: the closest, {name}, is refused by {len(refused)} rules"
    elif subjects:
        full = (
            f"no variant parses yet: {name} waits on {named(subjects)}, which the record leaves unjudged "
            f"(the probe{'s' if len(probes) > 1 else ''} {named(probes)} settle{'' if len(probes) > 1 else 's'} it)"
        )
        compact = f"no variant parses yet: {name} waits on {len(subjects)} unjudged rules and ops (see 05's probes)"
    else:
        full = compact = f"no variant parses yet: the closest, {name}, is {variants[name].verdict}"
    return compact if budget is not None and word_count(full) > budget else full
