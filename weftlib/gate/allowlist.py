"""`params/device_ops.yaml` as data: the public record of DFC runs, the op entries, the graph rules, and the
evidence behind each.

The allowlist is a claim about the Dataflow Compiler. Keeping it as data with its evidence beside every op
and every graph pattern lets the gate weigh what was seen (`weftlib.gate.standing`), lets notebook 05 check
the listing against that evidence, and lets a pairing say which entry to move. A typo in the file must stop
the gate (a misspelled op silently widens or narrows it), so every key is checked and every error names the
file, the entry and what is valid.

- `public_record`: one entry per public DFC outcome (a graph, the DFC version and arch, what happened, the
  nodes it named); `weftlib.gate.public_record` rebuilds each as a graph, and the tests run the gate on it.
- `device_ops` / `known_blockers`: the hand-kept listing of op types, each with its evidence. An op marked
  `by_pattern` is judged only through the graph rules that cover its nodes (a Reshape parses as a glued head
  split and is refused as a view): a node of it that no rule covers is unjudged.
- `graph_rules`: one entry per rule of `weftlib.gate.rules`, with its evidence in the same form.

An evidence item may cite a `case` of the public record; its DFC version, arch and source then come from
the case, so each fact is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..paths import REPO_ROOT

DEFAULT_PATH = REPO_ROOT / "params" / "device_ops.yaml"
# parsed / rejected: the DFC was seen to do so (a crash in the parser counts as rejected); miscompiled: it
# parsed but did not compute the op (counted against); documented: a vendor table lists it as supported.
SEEN = ("parsed", "rejected", "miscompiled", "documented")
OBSERVED = ("parsed", "rejected", "miscompiled")
OUTCOMES = ("parsed", "refused", "crashed", "miscompiled")  # miscompiled: parsed, but not computed
STAGES = ("translate", "optimize", "compile", "ran")
TOP_KEYS = {
    "target",
    "compiler",
    "sources",
    "compile_record",
    "public_record",
    "device_ops",
    "known_blockers",
    "graph_rules",
}
COMPILE_KEYS = {"layer", "params", "dfc", "result", "source"}
OP_KEYS = {"evidence", "note", "reason", "by_pattern"}
RULE_KEYS = {"what", "evidence", "note"}
EVIDENCE_KEYS = {"seen", "dfc", "arch", "source", "note", "case", "inferred", "retracted"}
CASE_KEYS = {"graph", "dfc", "arch", "stage", "outcome", "error", "refused_at", "source", "note", "rebuilt"}


class DeviceOpsError(ValueError):
    """The allowlist file cannot be trusted: the message names the file, the entry and the problem."""


@dataclass(frozen=True)
class Evidence:
    """One observation of the DFC, a vendor table's word ("documented"), or none ("assumed").

    `inferred`: the item is a deduction from an observation, not the observation itself (it is weighed, and
    the rule it backs gets a probe). `retracted`: the source's own correction of the item (shown, not weighed).
    """

    seen: str
    dfc: str = "unknown"
    arch: str = "unknown"
    source: str = ""
    note: str = ""
    case: str = ""
    inferred: bool = False
    retracted: str = ""


@dataclass(frozen=True)
class OpEntry:
    """An op in DEVICE_OPS or KNOWN_BLOCKERS with why it is there."""

    op: str
    listed: str  # "device_ops" or "known_blockers"
    evidence: tuple[Evidence, ...]
    note: str = ""
    by_pattern: bool = False


@dataclass(frozen=True)
class RuleEntry:
    """A graph rule's evidence (the detector itself lives in `weftlib.gate.rules`)."""

    name: str
    what: str
    evidence: tuple[Evidence, ...]
    note: str = ""


@dataclass(frozen=True)
class Case:
    """One public DFC outcome: the graph it was about, what the DFC did, the nodes it named."""

    name: str
    graph: str
    dfc: str
    arch: str
    stage: str
    outcome: str
    source: str
    error: str = ""
    refused_at: tuple[str, ...] = ()  # node names of the rebuilt graph that the DFC named
    note: str = ""
    rebuilt: bool = True  # False: recorded, but the record does not say enough to rebuild it as a graph

    @property
    def refused(self) -> bool:
        return self.outcome != "parsed"


@dataclass(frozen=True)
class DeviceOps:
    """The listing, the rules' evidence, the public record and the compiler's graph limits."""

    entries: dict[str, OpEntry]
    rules: dict[str, RuleEntry]
    cases: dict[str, Case]
    target_dfc: str = "unknown"  # the file's `target` says which; an allowlist built from names knows none
    target_arch: str = "unknown"
    max_ir_version: int = 10
    opsets: tuple[int, int] = (13, 23)
    source: str = "<memory>"
    sources: dict[str, str] = field(default_factory=dict)  # short name -> the source in full
    compile_figures: tuple[dict[str, Any], ...] = ()  # a layer's size against what the compiler did with it

    def cited(self, *texts: str) -> dict[str, str]:
        """The short source names these texts cite, spelled out (for a reader of a finding or a table)."""
        import re

        words = set(re.findall(r"[A-Z][A-Z0-9]+", " ".join(texts)))
        return {key: full for key, full in self.sources.items() if key in words}

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == "device_ops")

    @property
    def blockers(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == "known_blockers")

    def status(self, op: str) -> str:
        """ "allowed", "blocker" or "unlisted"."""
        entry = self.entries.get(op)
        if entry is None:
            return "unlisted"
        return "allowed" if entry.listed == "device_ops" else "blocker"

    @classmethod
    def from_names(cls, names: Any, **limits: Any) -> DeviceOps:
        """An allowlist with no evidence (tests, ad-hoc CLI use): each named op counts as documented for
        the given target, so it predicts a parse; every graph rule stays without evidence (unjudged)."""
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise DeviceOpsError(f"allow: expected an iterable of op names, got {names!r}")
        target = {"target_dfc": limits.pop("target_dfc", "5.3.0"), "target_arch": limits.pop("target_arch", "any")}
        doc = (Evidence("documented", target["target_dfc"], "unknown", "named by the caller"),)
        entries = {n: OpEntry(n, "device_ops", doc) for n in names}
        return cls(entries=entries, rules={}, cases={}, **target, **limits)


def load_device_ops(path: str | Path | None = None) -> DeviceOps:
    """Read and check the allowlist file (default `params/device_ops.yaml`)."""
    import yaml  # imported here so the DFC runner works in an image without PyYAML

    source = Path(path) if path else DEFAULT_PATH
    try:
        data = yaml.safe_load(source.read_text())
    except OSError as exc:
        raise DeviceOpsError(f"{source}: cannot read the allowlist: {exc}") from exc
    except yaml.YAMLError as exc:
        raise DeviceOpsError(f"{source}: not valid YAML: {exc}") from exc
    return parse_device_ops(data, str(source))


def parse_device_ops(data: Any, source: str = "<memory>") -> DeviceOps:
    """Check an already-loaded mapping and build `DeviceOps`; every problem names its place."""
    where = _Where(source)
    top = where.mapping(data, "file", TOP_KEYS, required={"target", "device_ops", "known_blockers"})
    target = where.mapping(top["target"], "target", {"dfc", "arch"}, required={"dfc", "arch"})
    compiler = where.mapping(top.get("compiler", {}), "compiler", {"max_ir_version", "opsets"})
    cases = {
        str(name): _case(where, name, body)
        for name, body in where.mapping(top.get("public_record", {}), "public_record", None).items()
    }
    entries: dict[str, OpEntry] = {}
    for listed in ("device_ops", "known_blockers"):
        block = where.mapping(top[listed], listed, None)
        for op, body in block.items():
            if op in entries:
                raise where.error(f"{listed}.{op}", f"{op} is in both device_ops and known_blockers")
            entries[op] = _op_entry(where, listed, op, body, cases)
    rules = {
        str(name): _rule(where, name, body, cases)
        for name, body in where.mapping(top.get("graph_rules", {}), "graph_rules", None).items()
    }
    sources = {
        where.text(k, "sources"): where.text(v, f"sources.{k}")
        for k, v in where.mapping(top.get("sources", {}), "sources", None).items()
    }
    figures = tuple(
        {
            **where.mapping(f, f"compile_record[{i}]", COMPILE_KEYS, required=COMPILE_KEYS),
            "params": where.integer(f["params"], f"compile_record[{i}].params"),
        }
        for i, f in enumerate(where.sequence(top.get("compile_record", []), "compile_record"))
    )
    return DeviceOps(
        entries=entries,
        rules=rules,
        cases=cases,
        sources=sources,
        compile_figures=figures,
        target_dfc=where.text(target["dfc"], "target.dfc"),
        target_arch=where.text(target["arch"], "target.arch"),
        max_ir_version=where.integer(compiler.get("max_ir_version", 10), "compiler.max_ir_version"),
        opsets=_opsets(where, compiler.get("opsets", [13, 23])),
        source=source,
    )


class _Where:
    """Builds errors that name the file and the entry."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, place: str, problem: str) -> DeviceOpsError:
        return DeviceOpsError(f"{self.source}: {place}: {problem}")

    def mapping(
        self, value: Any, place: str, keys: set[str] | None, required: frozenset[str] | set[str] = frozenset()
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(place, f"expected a mapping, got {type(value).__name__}")
        if keys is not None:
            unknown = sorted(set(map(str, value)) - keys)
            if unknown:
                raise self.error(place, f"unknown key(s) {unknown}; valid keys: {sorted(keys)}")
        missing = sorted(required - set(value))
        if missing:
            raise self.error(place, f"missing key(s) {missing}")
        return value

    def sequence(self, value: Any, place: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(place, f"expected a list, got {type(value).__name__}")
        return value

    def integer(self, value: Any, place: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(place, f"expected an integer, got {value!r}")
        return value

    def boolean(self, value: Any, place: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(place, f"expected true or false, got {value!r}")
        return value

    def text(self, value: Any, place: str) -> str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or str(value) == "":
            raise self.error(place, f"expected a non-empty string, got {value!r}")
        return str(value)

    def choice(self, value: Any, place: str, valid: tuple[str, ...]) -> str:
        if value not in valid:
            raise self.error(place, f"{value!r}; valid: {list(valid)}")
        return str(value)


def _opsets(where: _Where, value: Any) -> tuple[int, int]:
    pair = where.sequence(value, "compiler.opsets")
    if len(pair) != 2:
        raise where.error("compiler.opsets", f"expected [lowest, highest], got {pair!r}")
    low, high = (where.integer(v, "compiler.opsets") for v in pair)
    if low > high:
        raise where.error("compiler.opsets", f"lowest {low} is above highest {high}")
    return low, high


def _case(where: _Where, name: Any, body: Any) -> Case:
    place = f"public_record.{name}"
    body = where.mapping(body, place, CASE_KEYS, required={"graph", "dfc", "arch", "stage", "outcome", "source"})
    outcome = where.choice(body["outcome"], f"{place}.outcome", OUTCOMES)
    refused_at = tuple(
        where.text(n, f"{place}.refused_at") for n in where.sequence(body.get("refused_at", []), f"{place}.refused_at")
    )
    if outcome == "parsed" and refused_at:
        raise where.error(f"{place}.refused_at", "a parsed graph names no refused node")
    return Case(
        name=str(name),
        graph=where.text(body["graph"], f"{place}.graph"),
        dfc=where.text(body["dfc"], f"{place}.dfc"),
        arch=where.text(body["arch"], f"{place}.arch"),
        stage=where.choice(body["stage"], f"{place}.stage", STAGES),
        outcome=outcome,
        source=where.text(body["source"], f"{place}.source"),
        error=str(body.get("error", "")),
        refused_at=refused_at,
        note=str(body.get("note", "")),
        rebuilt=where.boolean(body.get("rebuilt", True), f"{place}.rebuilt"),
    )


def _evidence_list(where: _Where, place: str, raw: Any, cases: dict[str, Case], allow_empty: bool) -> tuple:
    if raw == "assumed":
        return (Evidence("assumed"),)
    items = where.sequence(raw, place)
    if not items and not allow_empty:
        raise where.error(place, "empty; write `evidence: assumed` when nothing was seen")
    return tuple(_evidence(where, f"{place}[{i}]", e, cases) for i, e in enumerate(items))


def _op_entry(where: _Where, listed: str, op: Any, body: Any, cases: dict[str, Case]) -> OpEntry:
    place = f"{listed}.{op}"
    if not isinstance(op, str) or not op[:1].isalpha():
        raise where.error(place, f"an op name must be an ONNX op type, got {op!r}")
    body = where.mapping(body, place, OP_KEYS, required={"evidence"})
    by_pattern = where.boolean(body.get("by_pattern", False), f"{place}.by_pattern")
    evidence = _evidence_list(where, f"{place}.evidence", body["evidence"], cases, allow_empty=by_pattern)
    note = str(body.get("note", body.get("reason", "")))
    return OpEntry(op=op, listed=listed, evidence=evidence, note=note, by_pattern=by_pattern)


def _rule(where: _Where, name: Any, body: Any, cases: dict[str, Case]) -> RuleEntry:
    place = f"graph_rules.{name}"
    body = where.mapping(body, place, RULE_KEYS, required={"what", "evidence"})
    evidence = _evidence_list(where, f"{place}.evidence", body["evidence"], cases, allow_empty=True)
    note = str(body.get("note", ""))
    if not evidence and not note:
        raise where.error(place, "no evidence: say in `note` what the record leaves silent")
    return RuleEntry(name=str(name), what=where.text(body["what"], f"{place}.what"), evidence=evidence, note=note)


def _evidence(where: _Where, place: str, item: Any, cases: dict[str, Case]) -> Evidence:
    item = where.mapping(item, place, EVIDENCE_KEYS, required={"seen"})
    seen = where.choice(item["seen"], f"{place}.seen", SEEN)
    case_name = str(item.get("case", ""))
    if case_name:
        if case_name not in cases:
            raise where.error(f"{place}.case", f"{case_name!r} is not in public_record")
        case = cases[case_name]
        if seen == "parsed" and case.refused:
            raise where.error(place, f"seen: parsed, yet case {case_name!r} was {case.outcome}")
        defaults = {"dfc": case.dfc, "arch": case.arch, "source": f"{case.source} [{case_name}]"}
    elif "source" not in item:
        raise where.error(place, "missing key(s) ['source'] (or cite a `case` of public_record)")
    else:
        defaults = {}
    return Evidence(
        seen=seen,
        dfc=where.text(item.get("dfc", defaults.get("dfc", "unknown")), f"{place}.dfc"),
        arch=where.text(item.get("arch", defaults.get("arch", "unknown")), f"{place}.arch"),
        source=where.text(item.get("source", defaults.get("source")), f"{place}.source"),
        note=str(item.get("note", "")),
        case=case_name,
        inferred=where.boolean(item.get("inferred", False), f"{place}.inferred"),
        retracted=str(item.get("retracted", "")),
    )
