"""`params/device_ops.yaml` as data: the public record of DFC runs, the op entries, the graph rules, and the
evidence behind each.

The allowlist is a claim about the Dataflow Compiler. Keeping it as data with its evidence beside every op
and every graph pattern lets the gate weigh what was seen (`weftlib.gate.record.standing`), lets notebook 05 check
the listing against that evidence, and lets a pairing say which entry to move. A typo in the file must stop
the gate (a misspelled op silently widens or narrows it), so every key is checked (the file's shape is
`weftlib.gate.record.schema`) and every error names the file, the entry and what is valid.

- `public_record`: one entry per public DFC outcome (a graph, the DFC version and arch, what happened, the
  nodes it named); `weftlib.gate.record.public_record` rebuilds each as a graph, and the tests run the gate on it.
- `device_ops` / `known_blockers`: the hand-kept listing of op types, each with its evidence. An op marked
  `by_pattern` is judged only through the graph rules that cover its nodes (a Reshape parses as a glued head
  split and is refused as a view): a node of it that no rule covers is unjudged.
- `graph_rules`: one entry per rule of `weftlib.gate.predict.rules`, with its evidence in the same form.

An evidence item may cite a `case` of the public record; its DFC version, arch and source then come from
the case, so each fact is written once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...paths import REPO_ROOT
from ..vocabulary import Listing, Outcome, Seen, Stage
from . import schema as allowlist_schema

if TYPE_CHECKING:
    from .schema import AllowlistFile, EvidenceItem

DEFAULT_PATH = REPO_ROOT / "params" / "device_ops.yaml"


def source_key(text: str) -> str:
    """The short name a case or an evidence item is cited by: the first word of its `source` ("ADR; RFS
    (...)" -> "ADR"), which `sources` in params/device_ops.yaml spells out."""
    return re.split(r"[\s;,(]", text.strip(), maxsplit=1)[0]


class DeviceOpsError(ValueError):
    """The allowlist file cannot be trusted: the message names the file, the entry and the problem."""


@dataclass(frozen=True)
class Evidence:
    """One observation of the DFC, a vendor table's word ("documented"), or none ("assumed").

    `inferred`: the item is a deduction from an observation, not the observation itself (it is weighed, and
    the rule it backs gets a probe). `retracted`: the source's own correction of the item (shown, not weighed).
    """

    seen: Seen
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
    listed: Listing  # device_ops or known_blockers
    evidence: tuple[Evidence, ...]
    note: str = ""
    by_pattern: bool = False


@dataclass(frozen=True)
class RuleEntry:
    """A graph rule's evidence (the detector itself lives in `weftlib.gate.predict.rules`)."""

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
    stage: Stage
    outcome: Outcome
    source: str
    error: str = ""
    refused_at: tuple[str, ...] = ()  # node names of the rebuilt graph that the DFC named
    note: str = ""
    rebuilt: bool = True  # False: recorded, but the record does not say enough to rebuild it as a graph

    @property
    def refused(self) -> bool:
        return self.outcome != Outcome.PARSED


@dataclass(frozen=True)
class DeviceOps:
    """The listing, the rules' evidence, the public record and the compiler's graph limits."""

    entries: dict[str, OpEntry]
    rules: dict[str, RuleEntry]
    cases: dict[str, Case]
    max_ir_version: int  # the file's `compiler` limits: the highest ONNX IR the DFC reads
    opsets: tuple[int, int]  # and the default-domain opsets it parsed, lowest and highest
    target_dfc: str = "unknown"  # the file's `target` says which; an allowlist built from names knows none
    target_arch: str = "unknown"
    source: str = "<memory>"
    sources: dict[str, str] = field(default_factory=dict)  # short name -> the source in full
    origins: dict[str, str] = field(default_factory=dict)  # short name -> its origin (author or organisation)
    compile_figures: tuple[dict[str, Any], ...] = ()  # a layer's size against what the compiler did with it

    def origin(self, text: str) -> str:
        """The origin of the source `text` cites: its entry's in `sources`, else the owner of a repository it
        names ("weftspun/rf-detr-cpp docs/..." -> "weftspun"), else ""."""
        key = source_key(text)
        return self.origins.get(key) or (key.split("/", maxsplit=1)[0] if "/" in key else "")

    @property
    def case_origins(self) -> dict[str, tuple[str, ...]]:
        """Each origin the public record's cases come from, with their source keys (the record's independent
        sources: one author's several keys count once)."""
        keys: dict[str, set[str]] = {}
        for case in self.cases.values():
            keys.setdefault(self.origin(case.source), set()).add(source_key(case.source))
        return {origin: tuple(sorted(k)) for origin, k in sorted(keys.items())}

    def cited(self, *texts: str) -> dict[str, str]:
        """The short source names these texts cite, spelled out (for a reader of a finding or a table)."""
        words = set(re.findall(r"[A-Z][A-Z0-9]+", " ".join(texts)))
        return {key: full for key, full in self.sources.items() if key in words}

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == Listing.DEVICE_OPS)

    @property
    def blockers(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == Listing.KNOWN_BLOCKERS)

    def status(self, op: str) -> str:
        """ "allowed", "blocker" or "unlisted"."""
        entry = self.entries.get(op)
        if entry is None:
            return "unlisted"
        return "allowed" if entry.listed == Listing.DEVICE_OPS else "blocker"

    @classmethod
    def from_names(cls, names: Any, **limits: Any) -> DeviceOps:
        """An allowlist with no evidence (tests, ad-hoc CLI use): each named op counts as documented for
        the given target, so it predicts a parse; every graph rule stays without evidence (unjudged).
        The target DFC and the compiler's limits are the committed file's unless given; the arch is any."""
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise DeviceOpsError(f"allow: expected an iterable of op names, got {names!r}")
        file = committed()
        given = {
            "target_dfc": file.target_dfc,
            "target_arch": "any",
            "max_ir_version": file.max_ir_version,
            "opsets": file.opsets,
            **limits,
        }
        doc = (Evidence(Seen.DOCUMENTED, given["target_dfc"], "unknown", "named by the caller"),)
        entries = {n: OpEntry(n, Listing.DEVICE_OPS, doc) for n in names}
        return cls(entries=entries, rules={}, cases={}, **given)


@lru_cache(maxsize=1)
def committed() -> DeviceOps:
    """`params/device_ops.yaml` as committed, read once (what `DeviceOps.from_names` takes its target from)."""
    return load_device_ops()


def load_device_ops(path: str | Path | None = None) -> DeviceOps:
    """Read and check the allowlist file (default `params/device_ops.yaml`)."""
    import yaml  # imported here so the DFC runner works in an image without PyYAML

    from ...yaml_text import SAFE_LOADER, too_deep

    source = Path(path) if path else DEFAULT_PATH
    try:
        data = yaml.load(source.read_text(), Loader=SAFE_LOADER)
    except (OSError, UnicodeDecodeError) as exc:
        raise DeviceOpsError(f"{source}: cannot read the allowlist: {exc}") from exc
    except (yaml.YAMLError, RecursionError) as exc:
        if too_deep(exc):
            raise DeviceOpsError(f"{source}: nested deeper than YAML can be read; not an allowlist") from None
        raise DeviceOpsError(f"{source}: not valid YAML: {exc}") from exc
    return parse_device_ops(data, str(source))


def parse_device_ops(data: Any, source: str = "<memory>") -> DeviceOps:
    """Check an already-loaded mapping and build `DeviceOps`; every problem names its place."""
    checked = allowlist_schema.check(data)
    if isinstance(checked, list):
        raise DeviceOpsError("\n".join(f"{source}: {place}: {problem}" for place, problem in checked))
    build = _Builder(source, checked)
    return DeviceOps(
        entries=build.entries(),
        rules=build.rules(),
        cases=build.cases,
        sources={key: body.cite for key, body in checked.sources.items()},
        origins={key: body.origin for key, body in checked.sources.items()},
        compile_figures=tuple(figure.model_dump() for figure in checked.compile_record),
        target_dfc=checked.target.dfc,
        target_arch=checked.target.arch,
        max_ir_version=checked.compiler.max_ir_version,
        opsets=checked.compiler.opsets,
        source=source,
    )


class _Builder:
    """The records from the checked file, and the checks that need the whole file (cited cases, one listing
    per op), with errors that name the file and the entry."""

    def __init__(self, source: str, checked: AllowlistFile) -> None:
        self.source, self.file = source, checked
        self.cases = {name: Case(name=name, **body.model_dump()) for name, body in checked.public_record.items()}
        for name, case in self.cases.items():
            if checked.sources and source_key(case.source) not in checked.sources:
                raise self.error(
                    f"public_record.{name}.source",
                    f"{source_key(case.source)!r} is not in `sources` (each case names its source and so its origin)",
                )

    def error(self, place: str, problem: str) -> DeviceOpsError:
        return DeviceOpsError(f"{self.source}: {place}: {problem}")

    def entries(self) -> dict[str, OpEntry]:
        entries: dict[str, OpEntry] = {}
        for listed, block in (
            (Listing.DEVICE_OPS, self.file.device_ops),
            (Listing.KNOWN_BLOCKERS, self.file.known_blockers),
        ):
            for op, body in block.items():
                if op in entries:
                    raise self.error(f"{listed}.{op}", f"{op} is in both device_ops and known_blockers")
                evidence = self.evidence(f"{listed}.{op}.evidence", body.evidence)
                note = body.note if "note" in body.model_fields_set else body.reason
                entries[op] = OpEntry(op, listed, evidence, note, body.by_pattern)
        return entries

    def rules(self) -> dict[str, RuleEntry]:
        return {
            name: RuleEntry(name, body.what, self.evidence(f"graph_rules.{name}.evidence", body.evidence), body.note)
            for name, body in self.file.graph_rules.items()
        }

    def evidence(self, place: str, items: tuple[EvidenceItem, ...] | None) -> tuple[Evidence, ...]:
        if items is None:
            return (Evidence(Seen.ASSUMED),)
        return tuple(self.item(f"{place}[{i}]", item) for i, item in enumerate(items))

    def item(self, place: str, item: EvidenceItem) -> Evidence:
        """One evidence item, its DFC version, arch and source taken from the case it cites."""
        lent = {"dfc": "unknown", "arch": "unknown", "source": ""}
        if item.case:
            case = self.cases.get(item.case)
            if case is None:
                raise self.error(f"{place}.case", f"{item.case!r} is not in public_record")
            if item.seen == Seen.PARSED and case.refused:
                raise self.error(place, f"seen: parsed, yet case {item.case!r} was {case.outcome}")
            lent = {"dfc": case.dfc, "arch": case.arch, "source": f"{case.source} [{item.case}]"}
        return Evidence(
            seen=item.seen,
            dfc=item.dfc or lent["dfc"],
            arch=item.arch or lent["arch"],
            source=item.source or lent["source"],
            note=item.note,
            case=item.case,
            inferred=item.inferred,
            retracted=item.retracted,
        )
