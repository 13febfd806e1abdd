"""The DFC's results on the probes, turned into the edit to `params/device_ops.yaml` (a unified diff).

Only an answer about a probe's own nodes becomes evidence; the YAML is edited round-trip by ruamel.yaml, so
every comment and every other line of the file stays as it was. A result that carries the hash of another graph
than its probe's file is refused outright (a ValueError: nothing is read from the folder); an unbound one (a raw
log) counts by the model name it prints, as in `pairing`.
"""

from __future__ import annotations

import difflib
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...onnx_core.walk import read_graph
from ..record.allowlist import DEFAULT_PATH, load_device_ops
from ..vocabulary import DfcVerdict, FailureCause, Listing, Seen, Subject
from .dfc_log import DfcResult, failure_cause
from .pack import MANIFEST, read_pack, results_in
from .pairing import bound_elsewhere, same_model
from .probe_graphs import Probe


def probe_finding(  # noqa: PLR0911 - a decision ladder, read top to bottom; each rung returns its finding
    probe: Probe, result: DfcResult | None, folder: Path
) -> tuple[dict[str, Any] | None, str]:
    """(the evidence item a probe's DFC result adds, or None; what was found). Only an answer about the
    probe's own nodes becomes evidence: a failure on the wrapping layers, before any operator, or
    inconclusive, does not."""
    if result is None:
        return None, "no DFC result yet"
    if result.model is not None and not same_model(result.model, probe.stem):
        return None, f"refused: the result is about model {result.model!r}, not {probe.stem!r}"
    base = {
        "dfc": result.dfc_version or "unknown",
        "arch": result.arch or "unknown",
        "source": f"weftlib.gate probes: {probe.file}, DFC result {probe.stem}.dfc.json",
    }
    if result.verdict == DfcVerdict.PARSED:
        return {"seen": Seen.PARSED, **base}, Seen.PARSED
    if result.verdict != DfcVerdict.REJECTED:
        return None, f"unjudged: {result.verdict} ({result.reason})"
    graph, _ = read_graph(folder / probe.file)
    node_ops = graph.node_ops() if graph is not None else {}
    cause = failure_cause(result, node_ops)
    if cause != FailureCause.OPERATOR:
        return None, f"unjudged: {cause} ({result.exception or result.reason})"
    named = {e.node or "" for e in result.errors}
    if named & set(probe.nodes) or (probe.subject == Subject.OP and any(node_ops.get(n) == probe.name for n in named)):
        note = "; ".join(f"{e.cls}: {e.message}" for e in result.errors)[:300]
        return {"seen": Seen.REJECTED, **base, "note": note}, Seen.REJECTED
    return None, f"unjudged: the DFC rejected {sorted(n for n in named if n)}, not the nodes asked about"


def evidence_diff(folder: str | os.PathLike, ops_path: str | os.PathLike | None = None) -> tuple[str, list[dict]]:
    """The unified diff to `params/device_ops.yaml` that the probe results in `folder` imply, and one row per
    probe (subject, finding, the evidence item added)."""
    folder = Path(folder)
    manifest = read_pack(folder)
    probes = [Probe.from_entry(p, folder / MANIFEST) for p in manifest.get("probes", []) or []]
    if not probes:
        raise ValueError(f"{folder}: the manifest lists no probes")
    results = results_in(folder, [p.stem for p in probes])
    path = Path(ops_path) if ops_path else DEFAULT_PATH
    ops = load_device_ops(path)
    for probe in probes:
        result = results.get(probe.stem)
        if result is not None and (why := bound_elsewhere(result, folder / probe.file)):
            raise ValueError(f"probe {probe.label}: {why}")
    rows, additions = [], []
    for probe in probes:
        item, finding = probe_finding(probe, results.get(probe.stem), folder)
        section = (
            Listing.GRAPH_RULES
            if probe.subject == Subject.RULE
            else ops.entries[probe.name].listed
            if probe.name in ops.entries
            else ""
        )
        if item is not None and not section:
            finding += " (the op is not listed: add it to device_ops or known_blockers with this evidence)"
        elif item is not None:
            additions.append((section, probe.name, item))
        rows.append({"subject": probe.label, "finding": finding, "evidence": json.dumps(item) if item else ""})
    text = path.read_text()
    new = with_evidence(text, additions) if additions else text
    diff = "".join(
        difflib.unified_diff(
            text.splitlines(True), new.splitlines(True), fromfile=str(path), tofile=f"{path} (with the probe results)"
        )
    )
    return diff, rows


def with_evidence(text: str, additions: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """`text` (the YAML of params/device_ops.yaml) with each (section, entry, item) evidence item appended,
    edited round-trip by ruamel.yaml so every comment and every other line stays as it was."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString as Quoted

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # the file keeps each evidence item on one line
    yaml.indent(mapping=2, sequence=4, offset=2)
    data = yaml.load(text)
    for section, name, item in additions:
        entry = data[section][name]
        if not isinstance(entry.get("evidence"), list):
            entry["evidence"] = CommentedSeq()
        flow = CommentedMap({k: Quoted(v) if isinstance(v, str) else v for k, v in item.items()})
        flow.fa.set_flow_style()
        entry["evidence"].append(flow)
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
