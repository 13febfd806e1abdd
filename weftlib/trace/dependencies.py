"""The dependency audit: declared by the host vs. found in its source vs. imported at run time.

A distribution that is imported but declared nowhere, and arrives through a hub load, is the hidden
dependency the RFD asks about.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .calls import CallChain, CallTrace, ImportEvent
from .scan import declared_dependencies, normalize, static_scan


@dataclass(frozen=True)
class AuditRow:
    """One third-party distribution seen at run time or declared by the host."""

    distribution: str
    declared: tuple[str, ...]
    install_hints: tuple[str, ...]
    host_imports: tuple[str, ...]
    imported: bool
    first_importer: str
    arrived_via: str
    through_hub: bool
    flag: str


def _distribution_of(top_level: str, mapping: Mapping[str, list[str]]) -> str | None:
    """The installed distribution providing a top-level module; None for stdlib and local code."""
    if top_level in sys.stdlib_module_names or top_level not in mapping:
        return None
    return normalize(mapping[top_level][0])


def _through_hub(chain: CallChain) -> bool:
    """Whether a stack passes through a torch.hub entry point (a hubconf.py, or torch.hub itself)."""
    return any(os.path.basename(f.file) == "hubconf.py" or f.module == "torch.hub" for f in chain.frames)


def _runtime_evidence(traces: Sequence[CallTrace], mapping: Mapping[str, list[str]]) -> dict[str, list[Any]]:
    """Per distribution, the direct import events and target chains that show it running, in order."""
    evidence: dict[str, list[Any]] = {}
    for trace in traces:
        for event in trace.imports:
            if event.direct and (dist := _distribution_of(event.top_level, mapping)) is not None:
                evidence.setdefault(dist, []).append(event)
        if trace.entered and (dist := _distribution_of(trace.target, mapping)) is not None:
            evidence.setdefault(dist, []).extend(trace.chains[:1])
    return evidence


def _flag(declared: bool, imported: bool, host_imports: bool, through_hub: bool) -> str:
    if imported and not declared:
        return "undeclared: imported at run time, not in the host's manifest"
    if imported and not host_imports and through_hub:
        return "declared, but only reached through a hub load (no import in the host)"
    if declared and not imported:
        return "declared, not imported in the traced calls"
    return ""


def _audit_row(
    host: Path, dist: str, modules: Sequence[str], events: list[Any], declared: Mapping[str, list[str]]
) -> AuditRow:
    row_declared = tuple(declared.get(dist, ()))
    hints = tuple(
        f"{h.kind} {h.path}:{h.line}"
        for h in static_scan(host, dist)
        if h.kind in ("install", "requirement") and f"{h.path}:{h.line}" not in row_declared
    )
    imports = tuple(f"{h.path}:{h.line}" for m in modules for h in static_scan(host, m) if h.kind == "import")
    first = events[0] if events else None
    chain = first.chain if isinstance(first, ImportEvent) else first
    hub = any(_through_hub(e.chain if isinstance(e, ImportEvent) else e) for e in events)
    imported = first is not None
    return AuditRow(
        distribution=dist,
        declared=row_declared,
        install_hints=hints,
        host_imports=imports,
        imported=imported,
        first_importer=first.importer if isinstance(first, ImportEvent) else "",
        arrived_via=str(chain) if chain is not None else "",
        through_hub=hub,
        flag=_flag(bool(row_declared), imported, bool(imports), hub),
    )


def audit(host_root: str | os.PathLike, traces: Sequence[CallTrace], extra: Iterable[str] = ()) -> list[AuditRow]:
    """Declared (host manifest) vs. found (static scan of the host) vs. imported (traced run), per distribution.

    Rows cover every third-party distribution imported or entered during `traces`, every distribution the
    host declares, and the names in `extra`. `arrived_via` is the stack of the first import (or call) seen.
    """
    host = Path(host_root)
    if not host.is_dir():
        raise FileNotFoundError(f"host_root: {str(host_root)!r} is not a directory")
    if isinstance(traces, CallTrace) or not all(isinstance(t, CallTrace) for t in traces):
        raise TypeError("traces: expected a sequence of CallTrace results from trace_calls")
    mapping = importlib.metadata.packages_distributions()
    declared = declared_dependencies(host)
    evidence = _runtime_evidence(traces, mapping)
    names = sorted(set(evidence) | set(declared) | {normalize(e) for e in extra})
    modules: dict[str, list[str]] = {}
    for module, dists in mapping.items():
        if module.isidentifier() and not module.startswith("_"):
            modules.setdefault(normalize(dists[0]), []).append(module)
    return [_audit_row(host, d, modules.get(d, [d.replace("-", "_")]), evidence.get(d, []), declared) for d in names]
