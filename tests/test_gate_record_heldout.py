"""The gate held to runs it was not built from, and no refusal broader than the record.

Leave one source out: the gate, with every piece of evidence from one source taken away, is judged on that
source's cases. Every refusal the listing predicts lists the public parses nearest to it (the same op or
pattern, parsed), and does not fire on any of them."""

from __future__ import annotations

import pytest

from weftlib.gate import load_device_ops
from weftlib.gate import public_record as P
from weftlib.gate import record_backtest as B
from weftlib.gate.rules import RULES
from weftlib.gate.standing import op_key


@pytest.fixture(scope="module")
def ops():
    return load_device_ops()


@pytest.fixture(scope="module")
def loso(ops):
    return B.leave_one_source_out(ops)


def test_source_key_is_the_short_name_a_source_is_cited_by():
    assert B.source_key("ADR; RFS (fold_static_tile.py)") == "ADR"
    assert B.source_key("QVL (vit/probe4d.py)") == "QVL"
    assert B.source_key("LEMU") == "LEMU"


def test_removing_a_source_removes_its_evidence_and_only_its(ops):
    held_out = B.without_source(ops, "WDT")
    assert [e.case for e in ops.rules["channels_last_transpose"].evidence] == ["wdt-convnext-530", "wdt-convnext-520"]
    assert held_out.rules["channels_last_transpose"].evidence == ()
    assert held_out.rules["head_split_glued"].evidence == ops.rules["head_split_glued"].evidence
    assert held_out.cases == ops.cases


def test_every_source_is_held_out_once_and_judged_on_its_own_cases(ops, loso):
    rebuilt = {n for n, c in ops.cases.items() if c.rebuilt}
    assert sorted(r["case"] for r in loso) == sorted(rebuilt)
    assert all(B.source_key(str(r["source"])) == r["held out"] for r in loso)


def test_held_out_agreement_among_judged_cases_is_at_least_90_percent(loso):
    figures = B.agreement(loso)
    assert figures["agrees"] + figures["disagrees"] + figures["unjudged"] == figures["cases"]
    assert figures["agreement_judged"] is not None and figures["agreement_judged"] >= 0.9, figures


def test_held_out_is_not_in_sample_a_source_alone_behind_a_rule_leaves_its_cases_unjudged(loso):
    by_case = {r["case"]: r for r in loso}
    # WDT is the only source of the channels-last rules: without it, its refusals are unjudged, not agreed
    assert by_case["wdt-convnext-530"]["agreement"] == B.UNJUDGED
    assert by_case["wdt-vit-530"]["agreement"] == B.UNJUDGED


def test_every_refusal_lists_its_nearest_public_parses_and_does_not_fire_on_them(ops):
    assert B.refusals_on_nearest(ops) == []
    for subject in B.refusing_subjects(ops):
        nearest = B.NEAREST_PARSES[subject]
        assert nearest, subject
        if isinstance(nearest, tuple):
            assert all(ops.cases[n].outcome == "parsed" and n in P.BUILDERS for n in nearest), subject


def test_the_nearest_parses_name_only_rules_and_ops_that_exist(ops):
    known = set(RULES) | {op_key(op) for op in ops.entries}
    assert set(B.NEAREST_PARSES) <= known


def test_negative_control_a_refusal_that_fires_on_a_public_parse_is_caught(ops, monkeypatch):
    monkeypatch.setitem(B.NEAREST_PARSES, "channels_last_transpose", ("rfd-backbone-one-window", "qvl-block-tokens"))
    assert B.refusals_on_nearest(ops) == []
    monkeypatch.setitem(B.NEAREST_PARSES, "layernorm_untracked", ("wdt-vit-530",))
    assert B.refusals_on_nearest(ops) == ["layernorm_untracked: 'wdt-vit-530' is not a rebuilt public parse"]
    monkeypatch.delitem(B.NEAREST_PARSES, "batch_axis")
    assert "batch_axis: refused, with no nearest public parses listed" in B.refusals_on_nearest(ops)


def test_negative_control_a_refusal_rule_widened_to_a_parsed_layout_fires(ops, monkeypatch):
    """Matching every rank-4 Transpose (dropping the head-split exclusion) fires on the glued head splits of
    qvl-block-tokens, which parsed: the check catches it."""
    from weftlib.gate import rules as R

    rule = R.RULES["channels_last_transpose"]
    wide = R.Rule(rule.name, rule.judges, lambda ctx, node: "any Transpose", rule.example)
    monkeypatch.setitem(R.RULES, "channels_last_transpose", wide)
    problems = B.refusals_on_nearest(ops)
    assert any(
        p.startswith("channels_last_transpose: fires on the public parse 'rfd-backbone-one-window'") for p in problems
    )
