"""The backtest with the real exporters' graphs: the vendor's model-zoo parses and the record's cases rebuilt by an
exporter join the hand-built cases, and the zoo's parses become evidence for what they exercise.

- Cases. Every zoo network with a recipe whose hailo10h (else hailo15h) page states a DFC 5.x is a parse on the
  newest 5.x version that page states; a record case with a recipe is judged on its exporter's graph instead of
  its hand-built likeness (one row per case: one observation is not two). The graphs come by path:
  `cached_graphs` reads them from the rebuild cache (`weftlib.rebuild.rebuilt`) and never exports, naming what
  is missing (the tests' path); 05 takes them from `rebuilt.rebuild_all`, which exports only what is missing.
- Evidence. A zoo parse is an observation of every op entry and graph rule that judged a node of its graph
  (`zoo_evidence`): `seen: parsed` at the page's DFC and arch, cited to the `ZOO` source. The vendor is one origin
  with its op tables (`USDA` in params/device_ops.yaml), so holding the vendor out removes both. The evidence is
  weighed by `weftlib.gate.record.standing` as it stands: a DFC 5.2.0 parse on hailo10h is another 5.x than the
  target's, so it is shown beside the target's observations and never decides alone; a hailo15h parse is off
  the target's arch and only shown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from ..gate.predict import backtest as record_backtest
from ..gate.predict.nodes import GraphPrediction, predict
from ..gate.record import zoo
from ..gate.record.allowlist import Case, DeviceOps, Evidence
from ..gate.record.public_record import BUILDERS
from ..gate.record.standing import op_key
from ..gate.vocabulary import Agreement, Outcome, Prediction, Seen, Stage
from ..onnx_core.walk import Graph, index_model, read_structure
from . import rebuilt
from .recipes import RECIPES, Recipe

ZOO_KEY = "ZOO"  # the short name of the zoo's source in params/device_ops.yaml (origin: the vendor, as USDA's)
ARCHS = (zoo.ZooArch.HAILO10H, zoo.ZooArch.HAILO15H)  # the arch whose observation a case stands on, in order


class GraphKind(StrEnum):
    """What built the graph a case is judged on."""

    EXPORTER = "exporter"  # the real exporter, cut at the zoo's nodes (`weftlib.rebuild`)
    HAND_BUILT = "hand-built"  # a likeness built node by node (`weftlib.gate.record.public_record.BUILDERS`)


class NotCached(LookupError):
    """A rebuilt graph the backtest needs is not in the cache (the backtest never exports)."""


@dataclass(frozen=True)
class Judged:
    """A case and the graph it is judged on: `kind` says whether an exporter or a hand built it."""

    case: Case
    graph: Graph
    kind: GraphKind


def zoo_case(observation: zoo.ParseObservation, recipe: Recipe) -> Case | None:
    """The parse a zoo network's pages record on DFC 5.x (hailo10h first, else hailo15h), or None where none does:
    the newest 5.x version a page of that arch states, cited to that page at the last commit it stated it."""
    for arch in ARCHS:
        seen = observation.seen_on(arch)
        if seen:
            newest = max(seen, key=lambda s: tuple(int(p) for p in str(s.dfc_version).split(".")))
            return Case(
                name=observation.network,
                graph=f"{recipe.model} exported by {recipe.exporter} at {'x'.join(map(str, recipe.shape))}, "
                f"opset {recipe.opset}, cut at the zoo's parser nodes",
                dfc=str(newest.dfc_version),
                arch=str(arch),
                stage=Stage.COMPILE,
                outcome=Outcome.PARSED,
                source=f"{ZOO_KEY} {newest.page} @{newest.last_commit[:7]} ({observation.network})",
                note=recipe.source,
            )
    return None


def exported_cases(ops: DeviceOps) -> dict[str, tuple[Case, Recipe]]:
    """Every case an exporter rebuilds: the zoo's 5.x parses and the record's cases with a recipe, by name."""
    observations = {o.network: o for o in zoo.parse_observations()}
    found: dict[str, tuple[Case, Recipe]] = {}
    for name, recipe in RECIPES.items():
        if recipe.record_case:
            found[recipe.record_case] = (ops.cases[recipe.record_case], recipe)
        elif name in observations and (case := zoo_case(observations[name], recipe)) is not None:
            found[name] = (case, recipe)
    return found


def cached_graphs(names: list[str] | None = None, root: Path | None = None) -> dict[str, Path]:
    """The cut graphs of the named recipes (default all) from the cache, never exported here; a `NotCached`
    naming what is missing and how to build it."""
    wanted = names if names is not None else list(RECIPES)
    missing = [name for name in wanted if not rebuilt.cached(RECIPES[name], root)]
    if missing:
        raise NotCached(
            f"{len(missing)} rebuilt graph(s) not cached ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): "
            "build them once with "
            "weftlib.rebuild.rebuilt.rebuild_all() or the exports tests (pytest -m exports)"
        )
    return {name: rebuilt.rebuild(RECIPES[name], root).path for name in wanted}


def judged_cases(ops: DeviceOps, graphs: dict[str, Path]) -> dict[str, Judged]:
    """Every case the backtest judges, by name: the record's rebuilt cases (on the exporter's graph where a recipe
    stands for the case and `graphs` holds it, else on the hand-built one) and the zoo's parses in `graphs`."""
    exported = exported_cases(ops)
    recipe_of = {case.name: recipe.network for case, recipe in exported.values()}
    out: dict[str, Judged] = {}
    for name, case in ops.cases.items():
        if name in recipe_of and recipe_of[name] in graphs:
            out[name] = Judged(case, read_structure(graphs[recipe_of[name]]), GraphKind.EXPORTER)
        elif case.rebuilt:
            out[name] = Judged(case, index_model(BUILDERS[name]()), GraphKind.HAND_BUILT)
    for name, (case, recipe) in exported.items():
        if name not in ops.cases and recipe.network in graphs:
            out[name] = Judged(case, read_structure(graphs[recipe.network]), GraphKind.EXPORTER)
    return out


def _zoo_cases(judged: dict[str, Judged]) -> dict[str, Judged]:
    return {name: j for name, j in judged.items() if j.case.source.startswith(f"{ZOO_KEY} ")}


def zoo_evidence(ops: DeviceOps, judged: dict[str, Judged]) -> DeviceOps:
    """The listing with each zoo parse added as an observation (`seen: parsed` at its DFC and arch) of every op
    entry and graph rule that judged a node or input of its graph. Input and graph rules count too; an op entry
    only where it exists (a parse is no reason to list an op), and a rule only where it has an entry."""
    if ZOO_KEY not in ops.sources:
        raise KeyError(f"{ops.source}: `sources` has no {ZOO_KEY!r} (the vendor's model zoo, the vendor's origin)")
    added: dict[str, list[Evidence]] = {}
    for name, item in _zoo_cases(judged).items():
        case = item.case
        note = f"the vendor parsed {name}; its exporter's graph, rebuilt by weftlib.rebuild"
        seen = Evidence(Seen.PARSED, case.dfc, case.arch, f"{case.source} [{name}]", note)
        for key in sorted({f.key for f in predict(item.graph, ops).judgements}):
            added.setdefault(key, []).append(seen)
    entries = {
        op: replace(entry, evidence=entry.evidence + tuple(added.get(op_key(op), ())))
        for op, entry in ops.entries.items()
    }
    rules = {
        name: replace(rule, evidence=rule.evidence + tuple(added.get(name, ()))) for name, rule in ops.rules.items()
    }
    return replace(ops, entries=entries, rules=rules)


def _row(item: Judged, prediction: GraphPrediction, ops: DeviceOps) -> dict[str, object]:
    row = record_backtest.row(item.case, prediction, ops)
    causes = sorted(
        {f.subject for f in prediction.findings if f.prediction == Prediction.UNJUDGED and not f.downstream}
    )
    return {**row, "graph": item.kind, "origin": ops.origin(item.case.source), "unjudged by": ", ".join(causes)}


def backtest(ops: DeviceOps, judged: dict[str, Judged], listing: DeviceOps | None = None) -> list[dict[str, object]]:
    """In sample: every case judged by the listing with the zoo's evidence in it (a row as
    `weftlib.gate.predict.backtest.judge` writes it, with the graph's kind and the case's origin). `listing`:
    `zoo_evidence(ops, judged)` made once for this and `leave_one_origin_out` (it judges every zoo graph)."""
    listing = listing or zoo_evidence(ops, judged)
    return [_row(item, predict(item.graph, listing), listing) for item in judged.values()]


def leave_one_origin_out(
    ops: DeviceOps, judged: dict[str, Judged], listing: DeviceOps | None = None
) -> list[dict[str, object]]:
    """Held out: for each origin (the vendor one of them, its zoo and its tables together), the listing with the
    zoo's evidence (`listing`, as `backtest` takes it) and then without every source of that origin, judged on
    that origin's cases."""
    listing = listing or zoo_evidence(ops, judged)
    rows = []
    for origin in sorted({listing.origin(item.case.source) for item in judged.values()}):
        without = record_backtest.without_origin(listing, origin)
        for item in judged.values():
            if listing.origin(item.case.source) == origin:
                rows.append({**_row(item, predict(item.graph, without), without), "held out": origin})
    return rows


def by_origin(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """`weftlib.gate.predict.backtest.agreement` per held-out origin, and over all of them ("all origins")."""
    origins = sorted({str(r["held out"]) for r in rows})
    figures = {o: record_backtest.agreement([r for r in rows if r["held out"] == o]) for o in origins}
    return {**figures, "all origins": record_backtest.agreement(rows)}


def kinds(judged: dict[str, Judged]) -> dict[str, int]:
    """How many cases each kind of graph stands for, and how many are the zoo's."""
    zoo_count = len(_zoo_cases(judged))
    exported = sum(j.kind == GraphKind.EXPORTER for j in judged.values())
    return {"cases": len(judged), "zoo parses": zoo_count, "record, exporter": exported - zoo_count,
            "record, hand-built": len(judged) - exported}  # fmt: skip


# Issue 42's targets: (share of the judged cases that agree, share of the cases judged), in sample and held out.
TARGETS: dict[str, tuple[float, float]] = {"in sample": (1.0, 0.85), "each origin held out": (0.95, 0.70)}


def targets(in_sample: dict[str, object], held_out: dict[str, object]) -> list[dict[str, object]]:
    """Each figure beside its target (`TARGETS`) and whether it is met: one row per figure."""
    rows = []
    for name, figures in (("in sample", in_sample), ("each origin held out", held_out)):
        for (measure, word), target in zip(
            (("agreement_judged", "agreement"), ("coverage", "coverage")), TARGETS[name]
        ):
            value = figures[measure]
            met = isinstance(value, float | int) and value >= target
            rows.append({"backtest": name, "figure": word, "measured": value, "target": target, "met": met})
    return rows


def unmet(rows: list[dict[str, object]], figure: str) -> list[str]:
    """The `targets` rows of `figure` ("agreement" or "coverage") not met, in words."""
    return [
        f"{r['backtest']}: {r['figure']} {r['measured']} < {r['target']}"
        for r in rows
        if r["figure"] == figure and not r["met"]
    ]


def zoo_dfcs(rows: list[dict[str, object]]) -> list[str]:
    """The DFC versions the zoo's cases among `rows` are on, each once, sorted."""
    return sorted({str(r["dfc"]) for r in rows if str(r["source"]).startswith(f"{ZOO_KEY} ")})


def unjudged_causes(rows: list[dict[str, object]]) -> dict[str, int]:
    """The rules and ops behind the unjudged cases (each case's first-hand unjudged findings, not those
    downstream of them), with how many unjudged cases each leaves so, most first."""
    counts = Counter(
        cause
        for r in rows
        if r["agreement"] == Agreement.UNJUDGED
        for cause in str(r.get("unjudged by", "")).split(", ")
        if cause
    )
    return dict(counts.most_common())


def targets_sentence(
    rows: list[dict[str, object]], target_dfc: str, zoo_dfcs: list[str], causes: dict[str, int]
) -> str:
    """The `targets` rows in one paragraph: which are met, and for those that are not, why not: the rules and
    ops that leave the most cases unjudged (`unjudged_causes`), and the DFC versions the zoo's parses are on."""
    met = [f"{r['backtest']} {r['figure']} {r['measured']} (target {r['target']})" for r in rows if r["met"]]
    words = "Met: " + ("; ".join(met) if met else "none") + "."
    missed = unmet(rows, "agreement") + unmet(rows, "coverage")
    if missed:
        most = ", ".join(f"{cause} ({count})" for cause, count in list(causes.items())[:6])
        versions = ", ".join(sorted(set(zoo_dfcs)))
        words += (
            f" Not met: {'; '.join(missed)}. The unjudged cases rest on rules and ops no DFC {target_dfc} run "
            f"decides (most often: {most or 'none'}); the zoo's parses are on DFC {versions or 'no version'}, "
            f"{'not the target' if target_dfc not in zoo_dfcs else 'among them the target'}: the weighing shows "
            "another 5.x's parse beside the target's observations and never lets it decide alone. No rule is "
            "broadened to reach a target."
        )
    return words
