"""`params/device_ops.yaml` as data: the allowlist, the known blockers, and the evidence behind each entry.

The allowlist is a claim about the Dataflow Compiler. Keeping it as data with its evidence beside every op
lets notebook 04 check the claim against what was recorded, and lets a pairing say which entry to move.
A typo in the file must stop the gate (a misspelled op silently widens or narrows it), so every key is
checked and every error names the file, the entry and what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import REPO_ROOT

DEFAULT_PATH = REPO_ROOT / "params" / "device_ops.yaml"
CONDITIONS = ("constant_index", "gelu_pattern", "last_axis")
# parsed / rejected: the DFC was seen to do so; miscompiled: it parsed but did not compute the op (counted
# against an allowlisting); documented: a vendor table lists the op as supported (weighed below any observation).
SEEN = ("parsed", "rejected", "miscompiled", "documented")
OBSERVED = ("parsed", "rejected", "miscompiled")
# unjudged: the DFC failed before reading any operator (input layers), so the graph judged none of its ops.
VERDICTS = ("parsed", "rejected", "unjudged")
TOP_KEYS = {"target", "compiler", "device_ops", "known_blockers", "recorded_verdicts"}
OP_KEYS = {"evidence", "note", "condition", "reason"}
EVIDENCE_KEYS = {"seen", "dfc", "arch", "source", "note", "condition_met"}
VERDICT_KEYS = {"graph", "dfc", "arch", "verdict", "blocked_by", "contains", "source", "note"}


class DeviceOpsError(ValueError):
    """The allowlist file cannot be trusted: the message names the file, the entry and the problem."""


@dataclass(frozen=True)
class Evidence:
    """One observation of the DFC on an op, a vendor table's word on it ("documented"), or none ("assumed")."""

    seen: str
    dfc: str = "unknown"
    arch: str = "unknown"
    source: str = ""
    note: str = ""
    condition_met: bool | None = None


@dataclass(frozen=True)
class OpEntry:
    """An op in DEVICE_OPS or KNOWN_BLOCKERS with why it is there."""

    op: str
    listed: str  # "device_ops" or "known_blockers"
    evidence: tuple[Evidence, ...]
    condition: str | None = None
    note: str = ""


@dataclass(frozen=True)
class RecordedVerdict:
    """A whole-graph DFC verdict from a public run."""

    graph: str
    dfc: str
    arch: str
    verdict: str
    source: str
    blocked_by: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class DeviceOps:
    """The allowlist, the blockers, the compiler's graph limits and the recorded verdicts."""

    entries: dict[str, OpEntry]
    target_dfc: str = "unknown"  # the file's `target` says which; an allowlist built from names knows none
    target_arch: str = "unknown"
    max_ir_version: int = 10
    opsets: tuple[int, int] = (13, 23)
    verdicts: tuple[RecordedVerdict, ...] = ()
    source: str = "<memory>"

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == "device_ops")

    @property
    def blockers(self) -> frozenset[str]:
        return frozenset(op for op, e in self.entries.items() if e.listed == "known_blockers")

    def condition(self, op: str) -> str | None:
        entry = self.entries.get(op)
        return entry.condition if entry is not None and entry.listed == "device_ops" else None

    def status(self, op: str) -> str:
        """ "allowed", "blocker" or "unlisted"."""
        entry = self.entries.get(op)
        if entry is None:
            return "unlisted"
        return "allowed" if entry.listed == "device_ops" else "blocker"

    @classmethod
    def from_names(cls, names: Any, **limits: Any) -> DeviceOps:
        """An allowlist with no evidence (tests, ad-hoc CLI use)."""
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise DeviceOpsError(f"allow: expected an iterable of op names, got {names!r}")
        entries = {n: OpEntry(n, "device_ops", (Evidence("assumed"),)) for n in names}
        return cls(entries=entries, **limits)


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
    entries: dict[str, OpEntry] = {}
    for listed in ("device_ops", "known_blockers"):
        block = where.mapping(top[listed], listed, None)
        for op, body in block.items():
            if op in entries:
                raise where.error(f"{listed}.{op}", f"{op} is in both device_ops and known_blockers")
            entries[op] = _op_entry(where, listed, op, body)
    verdicts = tuple(
        _verdict(where, i, v)
        for i, v in enumerate(where.sequence(top.get("recorded_verdicts", []), "recorded_verdicts"))
    )
    return DeviceOps(
        entries=entries,
        target_dfc=where.text(target["dfc"], "target.dfc"),
        target_arch=where.text(target["arch"], "target.arch"),
        max_ir_version=where.integer(compiler.get("max_ir_version", 10), "compiler.max_ir_version"),
        opsets=_opsets(where, compiler.get("opsets", [13, 23])),
        verdicts=verdicts,
        source=source,
    )


class _Where:
    """Builds errors that name the file and the entry."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, place: str, problem: str) -> DeviceOpsError:
        return DeviceOpsError(f"{self.source}: {place}: {problem}")

    def mapping(
        self, value: Any, place: str, keys: set[str] | None, required: set[str] = frozenset()
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

    def text(self, value: Any, place: str) -> str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or str(value) == "":
            raise self.error(place, f"expected a non-empty string, got {value!r}")
        return str(value)


def _opsets(where: _Where, value: Any) -> tuple[int, int]:
    pair = where.sequence(value, "compiler.opsets")
    if len(pair) != 2:
        raise where.error("compiler.opsets", f"expected [lowest, highest], got {pair!r}")
    low, high = (where.integer(v, "compiler.opsets") for v in pair)
    if low > high:
        raise where.error("compiler.opsets", f"lowest {low} is above highest {high}")
    return low, high


def _op_entry(where: _Where, listed: str, op: Any, body: Any) -> OpEntry:
    place = f"{listed}.{op}"
    if not isinstance(op, str) or not op[:1].isalpha():
        raise where.error(place, f"an op name must be an ONNX op type, got {op!r}")
    body = where.mapping(body, place, OP_KEYS, required={"evidence"})
    condition = body.get("condition")
    if condition is not None and (listed != "device_ops" or condition not in CONDITIONS):
        raise where.error(
            f"{place}.condition",
            f"{condition!r} is not a condition the gate checks (device_ops only; known: {list(CONDITIONS)})",
        )
    raw = body["evidence"]
    if raw == "assumed":
        evidence: tuple[Evidence, ...] = (Evidence("assumed"),)
    else:
        items = where.sequence(raw, f"{place}.evidence")
        if not items:
            raise where.error(f"{place}.evidence", "empty; write `evidence: assumed` when nothing was seen")
        evidence = tuple(_evidence(where, f"{place}.evidence[{i}]", e, condition) for i, e in enumerate(items))
    note = str(body.get("note", body.get("reason", "")))
    return OpEntry(op=op, listed=listed, evidence=evidence, condition=condition, note=note)


def _evidence(where: _Where, place: str, item: Any, condition: str | None) -> Evidence:
    item = where.mapping(item, place, EVIDENCE_KEYS, required={"seen", "source"})
    if item["seen"] not in SEEN:
        raise where.error(f"{place}.seen", f"{item['seen']!r}; valid: {list(SEEN)} (or `evidence: assumed`)")
    met = item.get("condition_met")
    if met is not None and (condition is None or not isinstance(met, bool)):
        raise where.error(f"{place}.condition_met", "only a true/false for an op that has a `condition`")
    return Evidence(
        seen=item["seen"],
        dfc=where.text(item.get("dfc", "unknown"), f"{place}.dfc"),
        arch=where.text(item.get("arch", "unknown"), f"{place}.arch"),
        source=where.text(item["source"], f"{place}.source"),
        note=str(item.get("note", "")),
        condition_met=met,
    )


def _verdict(where: _Where, index: int, item: Any) -> RecordedVerdict:
    place = f"recorded_verdicts[{index}]"
    item = where.mapping(item, place, VERDICT_KEYS, required={"graph", "dfc", "arch", "verdict", "source"})
    if item["verdict"] not in VERDICTS:
        raise where.error(f"{place}.verdict", f"{item['verdict']!r}; valid: {list(VERDICTS)}")
    ops = {
        k: tuple(where.text(o, f"{place}.{k}") for o in where.sequence(item.get(k, []), f"{place}.{k}"))
        for k in ("blocked_by", "contains")
    }
    if item["verdict"] == "rejected" and not ops["blocked_by"]:
        raise where.error(place, "a rejected graph needs `blocked_by` (the ops the DFC named)")
    return RecordedVerdict(
        graph=where.text(item["graph"], f"{place}.graph"),
        dfc=where.text(item["dfc"], f"{place}.dfc"),
        arch=where.text(item["arch"], f"{place}.arch"),
        verdict=item["verdict"],
        source=where.text(item["source"], f"{place}.source"),
        note=str(item.get("note", "")),
        **ops,
    )
