"""A graph's prediction in words: which rules and ops refuse it or leave it unjudged, what each rests on, and
the sentence each graph notebook (02, 03, 04) ends with.
"""

from __future__ import annotations

from .device import GateResult


def blocking(result: GateResult, prediction: str, causes_only: bool = False) -> dict[str, int]:
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
        if f.prediction == "refused":
            out.setdefault(f.subject, [])
            out[f.subject] += [c for c in f.cites if c not in out[f.subject]]
    return {k: ", ".join(v) for k, v in out.items()}


def prediction_rows(results: dict[str, GateResult]) -> list[dict[str, object]]:
    """One row per named graph: its prediction, and the rules and ops that refuse it or leave it unjudged."""
    return [
        {
            "graph": name,
            "prediction": r.verdict,
            "refused by": ", ".join(f"{k} x{n}" for k, n in blocking(r, "refused").items()) or "-",
            "unjudged by": ", ".join(f"{k} x{n}" for k, n in blocking(r, "unjudged").items()) or "-",
            "problems": "; ".join(r.problems),
        }
        for name, r in results.items()
    ]


def prediction_sentence(results: dict[str, GateResult], faithful: list[str]) -> str:
    """The three things each graph notebook ends with, from the gate's results: the prediction for the
    faithful graphs, the rule and source behind each refusal (consequences of an earlier refusal said apart),
    and which exact variant is predicted to parse, or what still blocks the closest one."""
    from .rules import RULES

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
    passing = [n for n, r in variants.items() if r.verdict == "pass"]
    if passing:
        parts.append(f"predicted to parse: {', '.join(passing)}")
    elif variants:
        name, r = min(variants.items(), key=lambda kv: (kv[1].verdict == "fail", len(kv[1].findings)))
        still = blocking(r, "refused", causes_only=True) or blocking(r, "unjudged", causes_only=True)
        parts.append(
            f"no variant is predicted to parse; the closest, {name}, is {r.verdict} by {', '.join(still) or 'its limits'}"
        )
    return "; ".join(parts)
