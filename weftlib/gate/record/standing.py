"""Weighing evidence into one of three predictions: parse, refused, or unjudged.

The order, for an op entry or a graph rule alike:

1. An observation on the target (its DFC version, its arch or an unstated one) decides. Observations there
   that disagree leave it unjudged.
2. Otherwise the vendor's table for the target DFC (`documented`) predicts a parse, unless an observation on
   another DFC 5.x for the same arch disagrees with it: then it is unjudged, never a silent pass.
3. Otherwise it is unjudged: nothing was observed on the target (an observation on another 5.x alone is
   shown with its outcome, but it is not the target).

Evidence from another major version or arch (Hailo-8 parts need DFC 3.x), and evidence whose source
retracted it, is shown and not weighed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..vocabulary import OBSERVED, Prediction, Reach, Seen, Subject
from .allowlist import Evidence

if TYPE_CHECKING:
    from .allowlist import DeviceOps

_OP_KEY = "op:"


def op_key(op: str) -> str:
    """How an edit to the listing, a probe and the gate's counts key an op's own standing: "op:<type>" (a
    graph rule is keyed by its name)."""
    return _OP_KEY + op


def read_key(key: str) -> tuple[Subject, str]:
    """(op, type) for an `op_key`, else (rule, name)."""
    return (Subject.OP, key[len(_OP_KEY) :]) if key.startswith(_OP_KEY) else (Subject.RULE, key)


def probe_stem(key: str) -> str:
    """The stem of the probe that asks about `key` (an `op_key` or a rule's name): `probe_<op>`, or
    `probe_rule_<rule>`; the probe pack names its files so, and an answer names the probe that settles it."""
    kind, name = read_key(key)
    return f"probe_{name}" if kind == Subject.OP else f"probe_rule_{name}"


_RANK = {Prediction.PARSE: 0, Prediction.UNJUDGED: 1, Prediction.REFUSED: 2}


def worst(predictions: Iterable[Prediction]) -> Prediction:
    """The strongest objection: refused over unjudged over parse (parse when there is nothing)."""
    return max(predictions, key=_RANK.__getitem__, default=Prediction.PARSE)


@dataclass(frozen=True)
class Standing:
    """A prediction and what it rests on: `basis` in words, the items weighed and the ones only shown."""

    prediction: Prediction
    basis: str
    weighed: tuple[Evidence, ...] = ()
    shown: tuple[Evidence, ...] = ()

    @property
    def inferred(self) -> bool:
        """The prediction rests on an inference (a probe should turn it into an observation)."""
        return any(e.inferred for e in self.weighed)

    @property
    def citations(self) -> tuple[str, ...]:
        """Short references to what was weighed: the public-record cases, else the sources' short names."""
        refs = [e.case or e.source.split(" ")[0].rstrip(";,") for e in self.weighed if e.case or e.source]
        return tuple(dict.fromkeys(refs))

    @property
    def sources(self) -> str:
        return "; ".join(dict.fromkeys(e.source for e in self.weighed + self.shown if e.source))


def reach(ev: Evidence, target_dfc: str, target_arch: str) -> Reach:
    """Target, sibling (another DFC of the same major, same arch or unstated), or off."""
    arch_ok = ev.arch in (target_arch, "unknown")
    if ev.dfc == target_dfc and arch_ok:
        return Reach.TARGET
    major = target_dfc.split(".", maxsplit=1)[0]
    if ev.dfc == "unknown":
        return Reach.SIBLING if ev.arch == target_arch else Reach.OFF
    if ev.dfc.split(".")[0] == major and arch_ok:
        return Reach.SIBLING
    return Reach.OFF


def _outcome(ev: Evidence) -> Prediction:
    return Prediction.PARSE if ev.seen in (Seen.PARSED, Seen.DOCUMENTED) else Prediction.REFUSED


def _word(prediction: Prediction) -> str:
    """A weighed outcome as a sentence says what was seen: parsed or refused."""
    return "parsed" if prediction == Prediction.PARSE else "refused"


def _versions(items: Iterable[Evidence]) -> str:
    return ", ".join(dict.fromkeys(f"DFC {e.dfc}" for e in items))


def weigh(  # noqa: PLR0911 - the module docstring's order as a ladder, read top to bottom
    evidence: Iterable[Evidence], target_dfc: str, target_arch: str
) -> Standing:
    """The prediction `evidence` supports for the target (see the module docstring for the order)."""
    items = [e for e in evidence if e.seen != Seen.ASSUMED]
    shown = tuple(e for e in items if e.retracted or reach(e, target_dfc, target_arch) == Reach.OFF)
    live = [e for e in items if e not in shown]
    on_target = [e for e in live if e.seen in OBSERVED and reach(e, target_dfc, target_arch) == Reach.TARGET]
    siblings = [e for e in live if e.seen in OBSERVED and reach(e, target_dfc, target_arch) == Reach.SIBLING]
    docs = [e for e in live if e.seen == Seen.DOCUMENTED and reach(e, target_dfc, target_arch) != Reach.OFF]
    everything = tuple(on_target + siblings + docs)
    if on_target:
        outcomes = {_outcome(e) for e in on_target}
        rest = tuple(siblings + docs) + shown
        if len(outcomes) > 1:
            return Standing(Prediction.UNJUDGED, f"observations on DFC {target_dfc} disagree", tuple(on_target), rest)
        (outcome,) = outcomes
        return Standing(outcome, f"{_word(outcome)} on DFC {target_dfc}", tuple(on_target), rest)
    sibling_outcomes = {_outcome(e) for e in siblings}
    if docs:
        if sibling_outcomes <= {Prediction.PARSE}:
            also = f", and parsed on {_versions(siblings)}" if siblings else ""
            return Standing(Prediction.PARSE, f"the vendor's table for DFC {target_dfc}{also}", everything, shown)
        return Standing(
            Prediction.UNJUDGED,
            f"the vendor's table lists it, yet {_versions(siblings)} refused it: nothing on DFC {target_dfc}",
            everything,
            shown,
        )
    if siblings:
        words = " and ".join(sorted({_word(o) for o in sibling_outcomes}))
        return Standing(
            Prediction.UNJUDGED,
            f"nothing observed on DFC {target_dfc} ({words} on {_versions(siblings)})",
            everything,
            shown,
        )
    if shown:
        return Standing(
            Prediction.UNJUDGED, f"nothing observed on DFC {target_dfc} (only {_shown_words(shown)})", (), shown
        )
    return Standing(Prediction.UNJUDGED, "nothing recorded", (), ())


def _shown_words(shown: tuple[Evidence, ...]) -> str:
    parts = []
    for e in shown:
        if e.retracted:
            parts.append(f"a {e.seen} item retracted by its source")
        else:
            parts.append(f"{e.seen} on DFC {e.dfc} ({e.arch})")
    return "; ".join(dict.fromkeys(parts))


def op_standing(op: str, ops: DeviceOps) -> Standing:
    """An op type's standing from its own entry (an unlisted op has none: unjudged)."""
    entry = ops.entries.get(op)
    if entry is None:
        return Standing(Prediction.UNJUDGED, "not listed in params/device_ops.yaml")
    return weigh(entry.evidence, ops.target_dfc, ops.target_arch)


def rule_standing(rule: str, ops: DeviceOps) -> Standing:
    """A graph rule's standing from its entry (a rule with no entry has no evidence: unjudged)."""
    entry = ops.rules.get(rule)
    if entry is None:
        return Standing(Prediction.UNJUDGED, "no evidence recorded for this rule")
    standing = weigh(entry.evidence, ops.target_dfc, ops.target_arch)
    if not entry.evidence:
        return Standing(Prediction.UNJUDGED, f"silent: {entry.note}")
    return standing
