"""What notebook 04 shows of the DiT block: its tables (op inventories, what each change removes, the
variants, RFD 1154's published figures beside this run's) and the sentences that conclude them, kept apart from
building, exporting and evaluating the variants (`variants`, `evaluation`) so the notebook only calls and asserts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from .evaluation import VariantResult
from .graph_reading import head_splits, op_origins
from .variants import CHANGES

if TYPE_CHECKING:
    from .as_written import ExportAttempt
    from .model import FlowSource, LayerSize
    from .upstream import UpstreamBlock


def op_changes(before: dict[str, int], after: dict[str, int]) -> dict[str, dict[str, int]]:
    """What a change did to an op inventory: ops whose count fell (removed, by how many) and rose (added)."""
    ops = sorted(set(before) | set(after))
    delta = {op: after.get(op, 0) - before.get(op, 0) for op in ops}
    return {
        "removed": {op: -d for op, d in delta.items() if d < 0},
        "added": {op: d for op, d in delta.items() if d > 0},
    }


def op_table(inventories: dict[str, dict[str, int]], allowed: Sequence[str] | frozenset[str]) -> list[dict[str, Any]]:
    """op -> count per graph, with whether DEVICE_OPS lists it; ops outside DEVICE_OPS first."""
    names = sorted({op for inv in inventories.values() for op in inv}, key=lambda op: (op in allowed, op))
    return [
        {"op": op, "in DEVICE_OPS": op in allowed, **{g: inv.get(op, 0) for g, inv in inventories.items()}}
        for op in names
    ]


# Published figures for the same instance (2 blocks x 384 channels, random weights, real-valued RoPE):
# weftspun/request-for-discussion, RFD 1154 details, "The export, measured" and "Real-valued RoPE".
class Published(TypedDict):
    """RFD 1154's figures for its instance, as it states them."""

    parameters: str
    nodes: int
    distinct_ops: int
    outside_device_ops: list[str]
    torchscript: str
    dynamo: str


RFD_1154: Published = {
    "parameters": "8.44 M",
    "nodes": 544,
    "distinct_ops": 28,
    "outside_device_ops": ["Cos", "ReduceL2", "Sin"],
    "torchscript": "aten::view_as_complex is not supported",
    "dynamo": "DispatchError on aten.unsqueeze: no decomposition for complex-valued input",
}


def outside_table(result: VariantResult, ops: Any) -> list[dict[str, Any]]:
    """Each op of the graph outside DEVICE_OPS: count, listing (unlisted or known blocker, with its reason),
    the evidence recorded for it, and the torch modules its nodes come from."""
    from weftlib import gate

    evidence = {row["name"]: row for row in gate.evidence_table(ops) if row["kind"] == gate.Subject.OP}
    origins = op_origins(result.report.path, result.outside)
    return [
        {
            "op": op,
            "count": use.count,
            "listed": ops.status(op),
            "predicted": evidence.get(op, {}).get("prediction", "unjudged (unlisted)"),
            "reason": use.blocker,
            "evidence": evidence.get(op, {}).get("sources", "") or "none recorded",
            "from": ", ".join(origins[op]),
        }
        for op, use in sorted(result.verdict.outside.items())
    ]


def glued_count(result: VariantResult, heads: int, head_dim: int) -> tuple[int, int]:
    """(head splits glued to their Transpose, head splits) in the exported graph (see `head_splits`)."""
    rows = head_splits(result.report.path, heads, head_dim)
    return sum(r["glued to its Transpose"] for r in rows), len(rows)


def variant_rows(results: Sequence[VariantResult], heads: int, head_dim: int) -> list[dict[str, Any]]:
    """One row per exported variant: what changed, its equality with the model as written and onnxruntime's
    with torch, its size, input ranks, head splits glued, the ops outside DEVICE_OPS, the gate's prediction."""
    rows = []
    for r in results:
        glued, splits = glued_count(r, heads, head_dim)
        rows.append(
            {
                "graph": r.name,
                "layout": r.layout,
                "changes": ", ".join(r.changes) or "none",
                "max |diff| vs model": r.max_abs_diff,
                "onnx vs torch": r.report.max_abs_diff,
                "nodes": r.report.node_count,
                "input ranks": r.ranks,
                "head splits glued": f"{glued} of {splits}",
                "outside DEVICE_OPS": ", ".join(r.outside) or "none",
                "predicted": r.verdict.verdict,
                "file": r.report.path.name,
            }
        )
    return rows


def change_rows(results: Sequence[VariantResult], base: str = "tokens") -> list[dict[str, Any]]:
    """What each exact change does alone, against the `base` variant: the ops it removes and adds (counts)."""
    by_name = {r.name: r for r in results}
    if base not in by_name:
        raise ValueError(f"base: no variant {base!r} among {sorted(by_name)}")
    before = by_name[base].report.ops
    rows = []
    for r in results:
        if r.name == base or r.layout != by_name[base].layout:
            continue
        delta = op_changes(before, r.report.ops)
        rows.append(
            {
                "graph": r.name,
                "change": "; ".join(CHANGES[c] for c in r.changes) if len(r.changes) == 1 else "all of them",
                "removes": ", ".join(f"{op} x{n}" for op, n in delta["removed"].items()) or "nothing",
                "adds": ", ".join(f"{op} x{n}" for op, n in delta["added"].items()) or "nothing",
                "nodes": f"{by_name[base].report.node_count} -> {r.report.node_count}",
            }
        )
    return rows


# ------------------------------------------------------------------------------------- the notebook's rows


def attempt_rows(attempts: Mapping[str, ExportAttempt]) -> list[dict[str, Any]]:
    """One row per exporter tried on the model as written: whether it took it, its first error line, seconds."""
    return [
        {"exporter": a.exporter, "ok": a.ok, "first error": a.error, "seconds": round(a.seconds, 1)}
        for a in attempts.values()
    ]


def rope_rows(rope_diff: float, control_diff: float) -> list[dict[str, Any]]:
    """Real-valued RoPE and its one-wrong-sign control, each against the complex form as written."""
    return [
        {"form": "real RoPE vs complex", "max |diff|": rope_diff},
        {"form": "control (one sign flipped) vs complex", "max |diff|": control_diff},
    ]


def beyond_rfd_1154(faithful: VariantResult) -> list[str]:
    """Ops of the faithful graph outside DEVICE_OPS that RFD 1154 did not count there, sorted."""
    return sorted(set(faithful.outside) - set(RFD_1154["outside_device_ops"]))


def rfd_1154_rows(faithful: VariantResult, blocks: int, channels: int, parameters: int) -> list[dict[str, Any]]:
    """RFD 1154's published figures for its 2 x 384 instance beside this run's faithful graph."""
    published = RFD_1154
    return [
        {"figure": "blocks x channels", "RFD 1154": "2 x 384", "this run": f"{blocks} x {channels}"},
        {"figure": "parameters", "RFD 1154": published["parameters"], "this run": f"{parameters:,}"},
        {"figure": "nodes", "RFD 1154": published["nodes"], "this run": faithful.report.node_count},
        {"figure": "distinct ops", "RFD 1154": published["distinct_ops"], "this run": len(faithful.report.ops)},
        {
            "figure": "outside DEVICE_OPS",
            "RFD 1154": ", ".join(published["outside_device_ops"]),
            "this run": ", ".join(faithful.outside),
        },
    ]


def differences_sentence(faithful: VariantResult, origins: Mapping[str, Sequence[str]], blocks: int) -> str:
    """Why this run's faithful graph differs from RFD 1154's figures, read from the node origins (`origins`:
    op -> the torch modules its nodes come from, for Cos and every op in `beyond_rfd_1154`)."""
    extra = beyond_rfd_1154(faithful)
    return (
        f"**Differences, from the node origins.** `Cos` and `Sin` come from `{', '.join(origins['Cos'])}` only: the "
        "timestep embedding takes cos/sin of the run-time input t. RFD 1154 counted them as introduced by its RoPE "
        "patch; here the RoPE table stays what the model holds, a constant buffer computed at construction, so the "
        "real-valued rotation reads constants and adds no Cos/Sin. `ReduceL2` is the qk RMS norm's `F.normalize`; "
        "RFD 1154 counted it outside DEVICE_OPS, and the allowlist now admits it on the vendor's layer table for the "
        "target DFC alone (evidence `documented`, never observed on the target), so it is a probe for notebook 05, "
        "not a blocker. "
        + "".join(
            f"`{op}` (x{faithful.verdict.outside[op].count}) comes from `{', '.join(origins[op])}`. " for op in extra
        )
        + "Those are exporter lowerings: `F.normalize` divides by a norm `expand`ed to the input's shape, and "
        "torch's `scaled_dot_product_attention` casts its scale like the query (`CastLike`). "
        f"The node count ({faithful.report.node_count} at {blocks} block(s) vs {RFD_1154['nodes']} at 2) differs "
        "with depth and with the exporter's folding; RFD 1154 does not state its exporter settings."
    )


def kv_rows(kv: Mapping[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """One row per attention: its query heads and its K/V heads (`kv_heads`)."""
    return [{"attention": name, "query heads": q, "K/V heads": k} for name, (q, k) in kv.items()]


# -------------------------------------------------------------------------------- the notebook's sentences


def _blocks(blocks: int, channels: int) -> str:
    return f"{blocks} block{'s' if blocks > 1 else ''} x {channels} channels"


def upstream_largest(upstream: UpstreamBlock) -> str:
    """The largest layer at upstream width, by parameters, with its MACs."""
    s = upstream.largest
    return f"{s.name} {list(s.weight_shape)}: {s.parameters:,} parameters, {s.macs:,} MACs"


def upstream_sentence(upstream: UpstreamBlock | None) -> str:
    """The block at upstream width in one sentence, or that it was not exported in this run."""
    if upstream is None:
        return "**Upstream width not exported in this run** (`upstream_width` is off; the appendix plan sets it)."
    big, busy = upstream.largest, upstream.busiest
    return (
        f"**Upstream width**: {upstream.channels} channels, {upstream.heads} heads of {upstream.head_dim}, MLP hidden "
        f"{upstream.mlp_hidden}: {upstream.parameters:,} parameters in one block. Largest layer by parameters "
        f"`{big.name}` {list(big.weight_shape)} ({big.parameters:,} parameters, {big.macs:,} MACs); by MACs "
        f"`{busy.name}` {list(busy.weight_shape)} ({busy.parameters:,} parameters, {busy.macs:,} MACs)."
    )


def answer_sentence(
    label: str,
    blocks: int,
    channels: int,
    rope_diff: float,
    results: Mapping[str, VariantResult],
    glued: Mapping[str, tuple[int, int]],
    upstream: UpstreamBlock | None,
    predicted: str,
) -> str:
    """Notebook 04's answer: how the block exports, what its faithful graph and its tokens layout with every
    exact change leave for the device (`results`, `glued`: by variant name), and the gate's predictions."""
    faithful, every = results["faithful"], results["tokens+all"]
    at_upstream = (
        f"; one block at upstream width has {upstream.parameters:,} parameters, its largest layer "
        f"{upstream.largest.name} {list(upstream.largest.weight_shape)}"
        if upstream is not None
        else ""
    )
    return (
        f"The DiT block ({label}, {_blocks(blocks, channels)}) exports only with RoPE in real "
        f"arithmetic (max |diff| {rope_diff:g}); the faithful graph ({faithful.report.node_count} nodes) has "
        f"{', '.join(faithful.outside)} outside DEVICE_OPS, inputs of rank "
        f"{', '.join(str(r) for r in faithful.ranks.values())} and {glued['faithful'][1]} head splits none glued to "
        f"its Transpose; on the tokens layout, exact changes leave {len(every.outside)} ops outside, input ranks "
        f"{', '.join(str(r) for r in every.ranks.values())} and {glued['tokens+all'][0]} of {glued['tokens+all'][1]} "
        f"head splits glued{at_upstream}. Predictions from the public record: {predicted}"
    )


def short_answer(results: Mapping[str, Any]) -> str:
    """Notebook 04's answer at a glance (at most 40 words): the block exports exactly, the faithful graph's
    verdict and the rules refusing it, and which exact variant is predicted to parse or what the closest waits
    on (`results`: variant name -> its `GateResult`, the faithful graph as "faithful")."""
    from weftlib.formatting import MAX_ANSWER_WORDS, word_count
    from weftlib.gate.predict import explain
    from weftlib.gate.vocabulary import GateVerdict, Prediction

    faithful = results["faithful"]
    word = {GateVerdict.FAIL: "refused", GateVerdict.PASS: "predicted to parse"}.get(faithful.verdict, faithful.verdict)
    against = list(explain.blocking(faithful, Prediction.REFUSED, causes_only=True)) or list(
        explain.blocking(faithful, Prediction.UNJUDGED, causes_only=True)
    )
    head = f"It exports exactly (RoPE in real arithmetic), the faithful block is {word}" + (
        f" by {explain.named(against)};" if against and faithful.verdict != GateVerdict.PASS else ";"
    )
    budget = MAX_ANSWER_WORDS - word_count(head)
    return f"{head} {explain.short_prediction(dict(results), ['faithful'], budget)}."


def geometry_sentence(blocks: int, channels: int, upstream_exported: bool) -> str:
    """The geometry the answer rests on, "reduced: " unless it is upstream's own 30 x 1536."""
    return (
        ("" if (blocks, channels) == (30, 1536) else "reduced: ")
        + f"{_blocks(blocks, channels)}, 8^3 grid "
        + (
            "(upstream 30 x 1536; one block at 1536 exported too)"
            if upstream_exported
            else "(upstream 30 x 1536; the op set does not depend on size)"
        )
    )


def rests_on(sources: str, blocks: int, channels: int, upstream_exported: bool) -> dict[str, str]:
    """What notebook 04's answer rests on: the checkouts (`provenance.sources`), the geometry, and the DFC
    (not run here: 04's device verdict is the gate's prediction, paired with the DFC in notebook 05)."""
    return {
        "sources": sources,
        "geometry": geometry_sentence(blocks, channels, upstream_exported),
        "dfc": "not run here: the device verdict is the gate's prediction from the public record, paired with "
        "the DFC in notebook 05",
    }


# ------------------------------------------------------------------------------ the notebook's records


def source_record(source: FlowSource) -> dict[str, Any]:
    """Where the model came from, as recorded: its label, checkout root, config file, arguments, backend."""
    return {
        "label": source.label,
        "root": str(source.root),
        "config": str(source.config_file),
        "args": source.args,
        "attention_backend": source.backend,
    }


def input_shapes(inputs: Sequence[Any]) -> dict[str, list[int]]:
    """Graph input name -> the shape of the forward's example input for it."""
    from .model import INPUT_NAMES, flat

    return {name: list(t.shape) for name, t in zip(INPUT_NAMES, flat(inputs), strict=True)}


def shape_rows(shapes: Mapping[str, Sequence[int]]) -> list[dict[str, Any]]:
    """One row per graph input: its shape and rank."""
    return [{"input": k, "shape": v, "rank": len(v)} for k, v in shapes.items()]


def op_standing(result: VariantResult, ops: Any, op: str) -> dict[str, Any]:
    """How many nodes of `op` the graph has, how DEVICE_OPS lists it, and what its evidence was seen as."""
    return {
        "count": result.report.ops.get(op, 0),
        "allowlist": ops.status(op),
        "evidence": [e.seen for e in ops.entries[op].evidence],
    }


def gate_line(result: VariantResult, refused: Mapping[str, str]) -> str:
    """The gate's prediction for one graph and the rules that refuse it (`gate.reasons`), in one line."""
    return f"{result.verdict.verdict}: refused by {', '.join(refused)}"


def variant_figures(results: Sequence[VariantResult]) -> dict[str, dict[str, Any]]:
    """Figure -> graph name -> value, for each exported graph: its ops outside DEVICE_OPS, node count, input
    ranks, max |diff| against the model as written, export seconds, file name and size, prediction, op counts,
    and the gate's result itself (`gate`)."""
    return {
        "outside": {r.name: r.outside for r in results},
        "nodes": {r.name: r.report.node_count for r in results},
        "input_ranks": {r.name: r.ranks for r in results},
        "max_abs_diff": {r.name: r.max_abs_diff for r in results},
        "export_seconds": {r.name: round(r.report.export_seconds, 2) for r in results},
        "onnx_files": {r.name: r.report.path.name for r in results},
        "file_bytes": {r.name: r.report.file_bytes for r in results},
        "verdicts": {r.name: r.verdict.verdict for r in results},
        "ops": {r.name: r.report.ops for r in results},
        "gate": {r.name: r.verdict for r in results},
    }


def glued_counts(results: Sequence[VariantResult], heads: int, head_dim: int) -> dict[str, tuple[int, int]]:
    """Graph name -> (head splits glued to their Transpose, head splits) (`glued_count`)."""
    return {r.name: glued_count(r, heads, head_dim) for r in results}


def upstream_record(upstream: UpstreamBlock) -> dict[str, int]:
    """The block's geometry at upstream width: channels, heads, head width, MLP hidden width."""
    return {
        "channels": upstream.channels,
        "heads": upstream.heads,
        "head_dim": upstream.head_dim,
        "mlp_hidden": upstream.mlp_hidden,
    }


def layer_rows(layers: Sequence[LayerSize]) -> list[dict[str, Any]]:
    """One row per linear layer (`layer_sizes`): name, weight shape, parameters, rows, MACs."""
    return [vars(s) for s in layers]


def graph_files(results: Sequence[VariantResult]) -> list[str]:
    """The ONNX file names the graphs were exported to, sorted (what notebook 05 finds in the folder)."""
    return sorted(r.report.path.name for r in results)
