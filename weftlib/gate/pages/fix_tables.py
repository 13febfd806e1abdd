"""`gate fix` over a run's graphs, for notebooks 05 and 06: each graph fixed into its own folder, one row per
graph (refusals before and after, the rewrites, the proof), and the fixed faithful graphs beside the hand-made
exact variants."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..cut.segments import Partition
from ..fix import Fix, fix_model, write_fix
from ..record.allowlist import DeviceOps

FORMULATIONS = ("masked", "gather", "matmul", "shift", "lowres", "im2col", "accumulate", "scatter")
"""The formulations a faithful export's stem ends with: natten swapped for one of `attention.neighborhood.METHODS`
(02: `<geometry>_<method>`, `naf_<method>`, `naf_attention_<method>`) or a sparse method of
`sparse.conv.SPARSE_METHODS` (03: `conv_<method>`). The gate may not import those packages; a test holds the
two lists equal."""
VARIANT_MARK = "__"  # `<faithful stem>__<variant>`: an exact rewrite (02's NAF variants, 04's `tokens+<change>`)


def is_faithful(stem: str) -> bool:
    """Whether a graph of the run is a faithful export by the name its notebook gives it: the model as
    written (04: `dit_faithful`, `dit_upstream_faithful`) or with only natten or the sparse convolution
    swapped for a proven formulation (02, 03). A variant carries `VARIANT_MARK` or a layout's name instead
    (`image_16p2`, `naf_device`, `conv_gathered`, `dit_tokens`)."""
    return VARIANT_MARK not in stem and stem.endswith(("_faithful", *(f"_{m}" for m in FORMULATIONS)))


def faithful(models: Sequence[Path], skip: Sequence[str] = ()) -> list[str]:
    """The stems of every faithful graph of the run (`is_faithful`), in the models' order, less `skip`."""
    return [m.stem for m in models if is_faithful(m.stem) and m.stem not in skip]


def absent(models: Sequence[Path], stems: Sequence[str]) -> list[str]:
    """The stems in `stems` no model of the run has (a run with other graphs: named, never skipped silently)."""
    found = {m.stem for m in models}
    return [s for s in stems if s not in found]


def fix_all(
    models: Sequence[Path], stems: Sequence[str], ops: DeviceOps, folder: str | os.PathLike, *, strict: bool = True
) -> dict[str, Fix]:
    """Each model whose stem is in `stems` fixed and written to `folder/<stem>/`. A stem not found raises when
    `strict`, else is left out (the caller names it: `absent`)."""
    missing = absent(models, stems)
    if missing and strict:
        raise ValueError(f"graphs to fix not exported in this run: {missing}")
    found = {m.stem: m for m in models}
    out = {}
    for stem in (s for s in stems if s in found):
        out[stem] = fix_model(found[stem], ops)
        write_fix(out[stem], Path(folder) / stem)
    return out


def offered(fixes: Mapping[str, Fix]) -> dict[str, Fix]:
    """The fixes whose graph the proof found equal to the original: only those are offered beside the faithful
    graph (gated, compared, cut); the others are named with `unproven`, as `gate fix` exits 1 on them."""
    return {stem: fix for stem, fix in fixes.items() if fix.proof.proven}


def unproven(fixes: Mapping[str, Fix]) -> dict[str, dict[str, float]]:
    """Stem -> the worst relative difference the proof found and its tolerance, for each fix it did not find
    equal (no input set ran: the worst is infinite)."""
    return {
        stem: {"worst": max(fix.proof.worst, default=float("inf")), "tolerance": fix.proof.tolerance}
        for stem, fix in fixes.items()
        if not fix.proof.proven
    }


def fixed_paths(fixes: Mapping[str, Fix], folder: str | os.PathLike) -> list[Path]:
    """Where `fix_all` wrote each fixed graph."""
    return [Path(folder) / stem / f"{stem}.fixed.onnx" for stem in fixes]


def proven_fixed(folder: str | os.PathLike) -> dict[str, Path]:
    """Stem -> fixed graph, for each fix `fix_all` wrote under `folder` (05's) whose proof held: what 06 cuts,
    read from each `fix.json` rather than fixed a second time. A missing folder has none."""
    out = {}
    for record in sorted(Path(folder).glob("*/fix.json")) if Path(folder).is_dir() else []:
        data = json.loads(record.read_text())
        if data["proof"]["proven"]:
            out[record.parent.name] = record.parent / str(data["fixed"])
    return out


def _rules(rows: list[dict[str, object]]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["rule"])] = counts.get(str(row["rule"]), 0) + 1
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counts.items())) or "none"


def fixed_verdicts(fixes: Mapping[str, Fix]) -> dict[str, str]:
    """Faithful stem -> the gate's verdict on its fixed graph (pass, fail, unjudged): what the run's verdict
    table and figure show after `gate fix` (`suite.verdicts`)."""
    return {stem: fix.after.verdict for stem, fix in fixes.items()}


def fix_rows(fixes: Mapping[str, Fix]) -> list[dict[str, object]]:
    """Per graph: verdict and refused nodes before and after, the rewrites, what stays unanswered, the proof."""
    rows = []
    for stem, fix in fixes.items():
        before, after = fix.as_json("")["before"], fix.as_json("")["after"]
        assert isinstance(before, dict) and isinstance(after, dict)
        rows.append(
            {
                "graph": stem,
                "before": f"{before['verdict']}: {len(before['refused'])} refused, {len(before['unjudged'])} unjudged",
                "after": f"{after['verdict']}: {len(after['refused'])} refused, {len(after['unjudged'])} unjudged",
                "rewrites": ", ".join(sorted({f"{a.rewrite} ({', '.join(a.answers)})" for a in fix.rewrites}))
                or "none",
                "unanswered": _rules(list(fix.unanswered)),
                "proven": fix.proof.proven,
                "worst relative diff": max(fix.proof.worst) if fix.proof.worst else float("nan"),
                "proof": fix.proof.summary() if fix.proof.worst else "no input set ran",
            }
        )
    return rows


def variant_rows(fixes: Mapping[str, Fix], variants: Mapping[str, str], gates: Mapping[str, object]) -> list[dict]:
    """Each fixed faithful graph beside its hand-made exact variant (`variants`: faithful stem -> variant stem,
    `gates`: variant stem -> its GateResult): both verdicts, and what the fix leaves unanswered."""
    rows = []
    for stem, variant in variants.items():
        if stem not in fixes or variant not in gates:
            continue  # not in this run: `absent` names it
        fix, hand = fixes[stem], gates[variant]
        rows.append(
            {
                "faithful graph": stem,
                "fixed": fix.after.verdict,
                "hand-made variant": variant,
                "variant": getattr(hand, "verdict", "?"),
                "as the variant": fix.after.verdict == getattr(hand, "verdict", None),
                "refusals no rewrite answers": _rules(list(fix.unanswered)),
            }
        )
    return rows


def holds(rows: list[dict]) -> list[dict]:
    """The comparison's claim: each fixed graph is predicted to parse as its variant is, or the table names
    the refusals no rewrite answers. Returns the rows where neither holds (a refusal left unnamed)."""
    return [r for r in rows if r["fixed"] == "fail" and r["refusals no rewrite answers"] == "none"]


def unnamed_refusals(fixes: Mapping[str, Fix]) -> list[str]:
    """The graphs whose fixed version has a refusal `unanswered` does not name (it must name every one)."""
    return [
        stem
        for stem, fix in fixes.items()
        if [(u["node"], u["rule"]) for u in fix.unanswered]
        != [(f.node, f.key) for f in fix.after.findings if f.prediction == "refused"]
    ]


def coverage_rows(
    before: Mapping[Path, Partition], after: Mapping[Path, Partition], fixes: Iterable[str]
) -> list[dict[str, object]]:
    """Per fixed graph: the device's share of the nodes and MACs cut as exported and cut after the fix."""
    original = {p.stem: part for p, part in before.items()}
    fixed = {p.name.removesuffix(".fixed.onnx"): part for p, part in after.items()}
    rows = []
    for stem in fixes:
        old, new = original[stem].coverage, fixed[stem].coverage
        rows.append(
            {
                "graph": stem,
                "nodes on device before": f"{old.nodes[0]} of {old.nodes[1]}",
                "nodes on device after": f"{new.nodes[0]} of {new.nodes[1]}",
                "MACs on device before": f"{old.share('macs'):.1%}",
                "MACs on device after": f"{new.share('macs'):.1%}",
                "device segments before": len(original[stem].device_segments),
                "device segments after": len(fixed[stem].device_segments),
                "fixed cut proven": fixed[stem].proven,
            }
        )
    return rows
