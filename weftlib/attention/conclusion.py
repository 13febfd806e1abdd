"""Notebook 02's answer, spelled from its measured values: one place for the sentence the appendix prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from weftlib.formatting import MAX_ANSWER_WORDS, format_value, word_count


def reference_name(reference: str) -> str:
    """What NAF's exports are compared with, as the answer names it."""
    if reference == "natten":
        return "natten (Flex backend)"
    return f"the '{reference}' formulation (equal to natten in section 1)"


def naf_geometry_text(
    out_size: Sequence[int],
    low: int,
    channels: int,
    rewrite_size: Sequence[int] | None = None,
    rewrite_grid: Sequence[int] | None = None,
) -> str:
    """NAF's geometry in this run, and the rewrites' when they ran at `rewrite_grid` ([low, ratio, channels])."""
    text = f"NAF {out_size[0]}x{out_size[1]} from a {low}x{low} grid of {channels} channels"
    if rewrite_grid and rewrite_size:
        text += (
            f" (the rewrites at {rewrite_size[0]}x{rewrite_size[1]} from {rewrite_grid[0]}x"
            f"{rewrite_grid[0]}, {rewrite_grid[2]} channels)"
        )
    return text


def answer(
    *,
    worst_equality: float,
    naf_kind: str,
    method: str,
    opset: int,
    upsampler_nodes: int,
    layer_name: str,
    layer_nodes: int,
    naf_vs_natten: float,
    naf_vs_reference: float,
    reference: str,
    naf_vs_torch: float,
    outside: str,
    image_worst: float,
    image_geometries: int,
    predicted: str,
    unjudged_by: Mapping[str, Sequence[str]],
    naf_predicted: str,
) -> str:
    """The answer sentence: equality with natten, NAF's whole export and what lies outside DEVICE_OPS, the image
    layout, and the gate's predictions (each difference to one significant digit, as the run record spells it)."""

    def fmt(value: float) -> str:
        return format_value(value, digits=1)

    unjudged = "".join(f"; {n} is unjudged by {', '.join(why)}" for n, why in unjudged_by.items())
    return (
        f"Yes: every formulation equals natten within {fmt(worst_equality)}, and NAF's "
        f"upsampler ({naf_kind}) exports whole through swap_natten('{method}') to one opset-{opset} ONNX "
        f"file ({upsampler_nodes:,} nodes, standard ops only; its attention layer `{layer_name}` alone "
        f"{layer_nodes:,}), equal to natten on the module within {fmt(naf_vs_natten)} and at NAF's geometry "
        f"within {fmt(naf_vs_reference)} of {reference_name(reference)}, onnxruntime within {fmt(naf_vs_torch)} "
        f"of torch; outside DEVICE_OPS the upsampler has {outside}. "
        f"The attention computed on images with no Reshape (weftlib.attention.image_shift) equals natten within "
        f"{fmt(image_worst)} and is predicted to parse at all {image_geometries} geometries it "
        f"was exported at. Predictions from the public record: {predicted}{unjudged}"
        f". For NAF's graphs with the exact rewrites of what it adds: {naf_predicted}."
    )


def short_answer(
    *, worst_equality: float, naf_vs_natten: float, naf_results: Mapping[str, Any], faithful: Sequence[str]
) -> str:
    """The answer at a glance (at most 40 words): equality with natten, and which of NAF's exact variants is
    predicted to parse or what the closest waits on (`naf_results`: graph name -> its `GateResult`, named as
    `naf_variants.VariantExport.name` does, "NAF upsampler, device"; `faithful`: the faithful graphs' names)."""
    from weftlib.gate.predict import explain

    def shown(name: str) -> str:  # "NAF upsampler, device" -> "NAF upsampler (device)"
        return name.replace(", ", " (", 1) + ")" if ", " in name else name

    results = {shown(name): result for name, result in naf_results.items()}
    head = (
        f"Yes: every formulation and NAF's upsampler and attention layer equal natten within "
        f"{format_value(max(worst_equality, naf_vs_natten), digits=1)} and export whole; of NAF's exact variants,"
    )
    budget = MAX_ANSWER_WORDS - word_count(head)
    return f"{head} {explain.short_prediction(results, [shown(n) for n in faithful], budget)}."
