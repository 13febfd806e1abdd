"""What 03 says and shows: the benchmark's printed summary, the conclusion sentence, and the tables and records
it shows, built from measured values and the exports' reports (the notebook and the benchmark script only print
and show them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from weftlib.formatting import MAX_ANSWER_WORDS, format_value, word_count

if TYPE_CHECKING:  # pandas is imported by the callers that hold the tables
    import pandas as pd

    from weftlib.gate import GateResult

FAITHFUL_PREFIX, LAYOUT_PREFIX = "conv_", "layout_"


def format_benchmark(result: dict[str, Any]) -> str:
    """The compact, self-explaining summary the benchmark script prints."""
    w, rows = result["work"], result["rows"]
    r0 = rows[0] if rows else {}
    book = result.get("rulebook")
    given = (
        [
            f"'auto' and 'compact' are handed the rulebook (`sparse.rulebook`, {book['pairs']:,} pairs in "
            f"{book['chunk_rows']}-voxel chunks, {book['bytes'] / 2**20:.0f} MiB), built once per voxel set "
            "before the timed layers; the other methods the table"
        ]
        if book
        else []
    )
    lines = [
        f"one submanifold conv layer: {r0.get('shape')} {r0.get('res')}, N = {w['N']:,}, C = {r0.get('C')}, "
        f"{r0.get('dtype')}, {r0.get('threads')} threads, kernel map given; median of "
        f"{' or '.join(sorted({str(r['repeats']) for r in rows})) or '?'} fresh processes",
        *given,
        f"work: {w['flops_occupied'] / 1e12:.3f} TFLOP on taps with a neighbour "
        f"({w['flops_occupied'] / w['flops_all_taps']:.2f} of the {w['flops_all_taps'] / 1e12:.3f} of all taps)",
        "limit: the lower bound, those FLOPs at the sgemm rate or the compulsory bytes (features and weight read "
        "once, output written once, the kernel map as given) at the copy rate, both measured right before and "
        "after each row (the nearer kept); contended: the two differed by over 25 % or other work took a "
        "quarter core",
        f"{'method':<11}{'chunk':>7}{'median s':>10}{'limit s':>9}{'of limit':>10}{'GFLOP/s':>9}{'of sgemm':>10}"
        f"{'peak GiB':>10}{'peak/model':>12}{'sgemm':>7}{'copy':>6}  contended",
    ]
    for r in rows:
        lines.append(
            f"{r['method']:<11}{r['chunk_rows'] or 'auto'!s:>7}{r['median_seconds']:>10.2f}{r['limit_seconds']:>9.2f}"
            f"{r['of_limit']:>10.2f}{r['useful_gflops']:>9.0f}{r['of_sgemm']:>10.2f}"
            f"{r['peak_bytes'] / 2**30:>10.2f}{r['peak_over_model']:>12.2f}{r['sgemm_gflops']:>7.0f}"
            f"{r['copy_gbps']:>6.1f}  {'yes' if r['contended'] else 'no'}"
        )
    spc = result.get("spconv")
    if spc is None and result.get("spconv_status") == "not asked":
        lines.append("spconv: not run (--spconv-threads 0, or not fp32)")
    elif spc is None:
        lines.append("spconv: not installed (optional; pip install spconv to compare)")
    else:
        lines.append(
            f"spconv {spc['version']} SubMConv3d, {spc['threads']} thread(s), rulebook reused: "
            f"{spc['seconds']:.2f} s ({spc['of_limit']:.2f} of its limit at {spc['threads']} thread(s)"
            f"{', contended' if spc['contended'] else ''}); max |spconv - ours| {format_value(spc['max_abs_diff_vs_ours'], digits=2)}"
        )
    return "\n".join(lines)


def scatter_ops_text(ops: dict[str, int]) -> str:
    """The data-indexed ops of an export's op counts, as 'Gather x27, ScatterND x27'."""
    return ", ".join(f"{op} x{n}" for op, n in sorted(ops.items()) if op in {"ScatterND", "Gather", "GatherND"})


def route(dense_bytes: int, device_memory_gib: float, res: int) -> str:
    """03's verdict in its first words: scatter when the densified layer exceeds the device's memory."""
    return (
        "Scatter, not densify" if dense_bytes > device_memory_gib * 2**30 else f"Densify fits at this size ({res} grid)"
    )


def short_sentence(
    *, res: int, peaks: dict[str, int], device_memory_gib: float, named: Mapping[str, GateResult], faithful: list[str]
) -> str:
    """03's answer at a glance (at most 40 words): densify or scatter, the densified peak against the lightest
    sparse route's, and which device layout is predicted to parse (`named`, `faithful`: `named_verdicts`,
    `faithful_names`)."""
    from weftlib.gate.predict import explain

    dense = peaks["dense"]
    sparse_peaks = {m: b for m, b in peaks.items() if m != "dense"}
    lightest = min(sparse_peaks, key=sparse_peaks.__getitem__)
    verdict = route(dense, device_memory_gib, res)
    where = "" if f"({res} grid)" in verdict else f" at the {res} grid"
    head = (
        f"{verdict}: one layer{where} needs {format_value(dense, 'B')} densified against "
        f"{format_value(sparse_peaks[lightest], 'B')} by {lightest}, with {device_memory_gib:g} GiB on the device;"
    )
    return f"{head} {explain.short_prediction(dict(named), faithful, MAX_ANSWER_WORDS - word_count(head))}."


def conclusion_sentence(
    *,
    res: int,
    channels: int,
    dtype: str,
    n: int,
    peaks: dict[str, int],
    device_memory_gib: float,
    table_bytes: int,
    scatter_ops: dict[str, int],
    predicted: str,
) -> str:
    """03's answer from measured and modelled values: densify or scatter for one `channels`-wide layer at the
    `res` grid, given each method's modelled peak (`peaks`, the dense route's included), the device's
    memory, the host-built table and the scatter export's op counts; byte counts as the run record spells them."""

    def format_bytes(count: int) -> str:
        return format_value(count, "B")

    dense = peaks["dense"]
    sparse_peaks = {m: b for m, b in peaks.items() if m != "dense"}
    lightest = min(sparse_peaks, key=sparse_peaks.__getitem__)
    verdict = route(dense, device_memory_gib, res)
    return (
        f"{verdict}: one {channels}-channel {dtype} layer at the {res} grid ({n:,} occupied voxels) "
        f"needs {format_bytes(dense)} densified against {format_bytes(sparse_peaks[lightest])} "
        f"for the lightest sparse route ({lightest}, {dense / sparse_peaks[lightest]:.0f}x less), with "
        f"{device_memory_gib:g} GiB on the device; the cost of scattering is a host-built neighbour table of "
        f"{format_bytes(table_bytes)} and data-indexed ops in the graph ({scatter_ops_text(scatter_ops)}) that the "
        f"device gate does not take. Predictions from the public record: {predicted}."
    )


MEASURED_COLUMNS = ("shape", "res", "N", "method", "C", "dtype", "chunk_rows", "model_MiB", "measured_MiB")
TIMES_COLUMNS = ("method", "given", "seconds", "spread", "over_fastest", "rulebook_build_seconds")


def measured_view(measured: pd.DataFrame) -> pd.DataFrame:
    """`memory.measure_table`'s rows as 03 shows them: model and measured peaks in MiB, with their ratio."""
    mib = measured.assign(model_MiB=measured["model_bytes"] / 2**20, measured_MiB=measured["measured_bytes"] / 2**20)
    return mib[[*MEASURED_COLUMNS, "measured_over_model", "seconds"]]


def times_view(times: pd.DataFrame) -> pd.DataFrame:
    """`benchmark.time_methods`'s rows as 03 shows them: the rulebook's build time beside the rows given it."""
    built = times.attrs["rulebook_seconds"]
    shown = times.assign(rulebook_build_seconds=[built if g == "rulebook" else None for g in times["given"]])
    return shown[[*TIMES_COLUMNS, "rate_change", "contended"]]


def split_view(split: pd.DataFrame) -> pd.DataFrame:
    """`footprint.decoder_transfers`'s rows with the bytes each way in GiB."""
    return split.assign(to_device_GiB=split["to_device_bytes"] / 2**30, to_host_GiB=split["to_host_bytes"] / 2**30)


def bench_table(result: dict[str, Any]) -> pd.DataFrame:
    """`benchmark.benchmark_against_limits`'s rows, one per method (the index)."""
    import pandas as pd

    return pd.DataFrame(result["rows"]).set_index("method")


def export_parity(reports: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per exported method (`ExportReport`s): whether onnxruntime reproduced torch, by how much, and the file's size."""
    return {
        m: {"parity_ok": r.parity_ok, "max_abs_diff": r.max_abs_diff, "file_bytes": r.file_bytes}
        for m, r in reports.items()
    }


def named_verdicts(
    reports: dict[str, Any], layouts: dict[str, Any], verdicts: Mapping[Any, GateResult]
) -> dict[str, GateResult]:
    """The gate's word on each graph under the name 03 gives it: `conv_<method>` for the faithful exports
    (`ExportReport`s), `layout_<name>` for the device layouts (each with its `report`); `verdicts` by path."""
    return {
        **{f"{FAITHFUL_PREFIX}{m}": verdicts[r.path] for m, r in reports.items()},
        **{f"{LAYOUT_PREFIX}{k}": verdicts[e.path] for k, e in layouts.items()},
    }


def faithful_names(named: dict[str, Any]) -> list[str]:
    """The faithful exports' names among `named_verdicts`, in order (the prediction sentence leads with them)."""
    return [n for n in named if n.startswith(FAITHFUL_PREFIX)]


def pipeline_text(pipeline: dict[str, Any], verdict: str) -> str:
    """03's headline in words: the default two-line pipeline's map, built once per voxel set, and one layer
    against its lower bound and against spconv (`benchmark.default_pipeline`), with its claim's `verdict`."""
    p, m, lay, spc = pipeline, pipeline["map"], pipeline["layer"], pipeline["spconv"]
    spread = "n/a" if lay["spread"] is None else f"{lay['spread']:.2f}"
    versus = (
        f"{p['over_spconv']:.2f} of spconv {spc['version']} SubMConv3d on {spc['threads']} thread(s) "
        f"({spc['seconds']:.2f} s, its pairs built once and reused; max |spconv - ours| "
        f"{format_value(spc['max_abs_diff_vs_ours'], digits=2)})"
        if spc
        else "spconv not installed"
    )
    below = lay.get("below_reference")
    held = "" if below is None else f" (the run's best rates up to {below:.0%} above its samples)"
    return (
        f"default pipeline (`table = kernel_map(coords, 3)`, then `submanifold_conv3d(feats, table, weight)`): "
        f"{p['shape']} {p['res']}, {p['N']:,} voxels, C = {p['C']}, fp32, {p['threads']} threads.\n"
        f"map, once per voxel set: table {m['table_seconds']:.2f} s + pair form {m['pairs_seconds']:.2f} s "
        f"({m['pairs']:,} pairs, built by the first layer and kept for the table).\n"
        f"one layer: {lay['seconds']:.2f} s (median, spread {spread}; fastest {lay['best_seconds']:.2f} s, "
        f"{p['over_bound']:.2f}x its lower bound "
        f"({p['bound_seconds']:.2f} s: {p['bound_by']}, sgemm {lay['sgemm_gflops']:.0f} GFLOP/s, copy "
        f"{lay['copy_gbps']:.1f} GB/s)); {versus}.\n{verdict}{held}"
    )
