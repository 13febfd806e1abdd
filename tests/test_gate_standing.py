"""The weighing: an observation on the target decides; the vendor's table, unless another DFC 5.x refused;
never a silent pass."""

from __future__ import annotations

from weftlib.gate.record.allowlist import Evidence
from weftlib.gate.record.standing import reach, weigh, worst
from weftlib.gate.vocabulary import Prediction

TARGET = ("5.3.0", "hailo10h")


def ev(seen: str, dfc: str = "5.3.0", arch: str = "hailo10h", **kw) -> Evidence:
    return Evidence(seen, dfc, arch, source=f"{seen} on {dfc}", **kw)


def test_reach_tells_target_sibling_and_off():
    assert reach(ev("parsed"), *TARGET) == "target"
    assert reach(ev("parsed", arch="unknown"), *TARGET) == "target"  # a 5.3.0 run has a 10/15-series arch
    assert reach(ev("parsed", dfc="5.4.0"), *TARGET) == "sibling"
    assert reach(ev("parsed", dfc="unknown"), *TARGET) == "sibling"
    assert reach(ev("parsed", dfc="unknown", arch="unknown"), *TARGET) == "off"
    assert reach(ev("rejected", dfc="3.x", arch="hailo8l"), *TARGET) == "off"
    assert reach(ev("parsed", arch="hailo15h"), *TARGET) == "off"


def test_an_observation_on_the_target_decides_over_everything_else():
    assert weigh([ev("parsed"), ev("rejected", dfc="5.4.0"), ev("documented")], *TARGET).prediction == Prediction.PARSE
    assert weigh([ev("rejected"), ev("documented")], *TARGET).prediction == Prediction.REFUSED
    assert weigh([ev("miscompiled")], *TARGET).prediction == Prediction.REFUSED  # parsed, not computed: counts against


def test_disagreement_on_the_target_is_unjudged():
    standing = weigh([ev("parsed"), ev("rejected")], *TARGET)
    assert standing.prediction == Prediction.UNJUDGED and "disagree" in standing.basis


def test_the_vendor_table_alone_predicts_a_parse_unless_another_5x_refused():
    assert weigh([ev("documented", arch="unknown")], *TARGET).prediction == Prediction.PARSE
    assert weigh([ev("documented"), ev("parsed", dfc="5.4.0")], *TARGET).prediction == Prediction.PARSE
    split = weigh([ev("documented"), ev("rejected", dfc="5.4.0")], *TARGET)
    assert split.prediction == Prediction.UNJUDGED and "5.4.0 refused" in split.basis


def test_another_5x_alone_or_nothing_is_unjudged():
    assert weigh([ev("rejected", dfc="5.4.0")], *TARGET).prediction == Prediction.UNJUDGED
    assert weigh([ev("parsed", dfc="5.4.0")], *TARGET).prediction == Prediction.UNJUDGED
    assert weigh([], *TARGET).prediction == Prediction.UNJUDGED
    assert weigh([Evidence("assumed")], *TARGET).prediction == Prediction.UNJUDGED


def test_off_target_and_retracted_items_are_shown_not_weighed():
    off = weigh([ev("rejected", dfc="3.x", arch="hailo8l")], *TARGET)
    assert off.prediction == Prediction.UNJUDGED and off.shown and not off.weighed
    retracted = weigh([ev("rejected", retracted="a harness artefact")], *TARGET)
    assert retracted.prediction == Prediction.UNJUDGED and "retracted" in retracted.basis
    # a retracted refusal next to a real parse: the parse decides alone
    assert weigh([ev("rejected", retracted="artefact"), ev("parsed")], *TARGET).prediction == Prediction.PARSE


def test_an_inference_is_weighed_and_says_so():
    standing = weigh([ev("rejected", inferred=True)], *TARGET)
    assert standing.prediction == Prediction.REFUSED and standing.inferred
    assert not weigh([ev("rejected")], *TARGET).inferred


def test_worst_takes_the_strongest_objection():
    assert worst([Prediction.PARSE, Prediction.UNJUDGED, Prediction.PARSE]) == Prediction.UNJUDGED
    assert worst([Prediction.UNJUDGED, Prediction.REFUSED]) == Prediction.REFUSED
    assert worst([]) == Prediction.PARSE


def test_an_op_key_reads_back_as_the_op_and_a_rule_name_as_the_rule():
    from weftlib.gate.record.standing import op_key, read_key

    assert op_key("Gather") == "op:Gather" and read_key(op_key("Gather")) == ("op", "Gather")
    assert read_key("softmax_untracked") == ("rule", "softmax_untracked")
