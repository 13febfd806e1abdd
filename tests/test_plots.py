"""The notebooks' figures, built by weftlib on small data: the axes, artists and labels each must show (no
image comparison; the published SVG bytes are what the notebooks save)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from weftlib import sparse, trace
from weftlib.attention import plots as attention_plots
from weftlib.sparse import memory
from weftlib.sparse import plots as sparse_plots


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _frame(name, target=True):
    return trace.Frame("/x/naf.py", 7, name, "natten.functional", target, target)


def test_call_chains_figure_draws_every_node_and_edge_of_the_tree():
    chains = [
        trace.CallChain((_frame("up", False), _frame("na2d"), _frame("generic"))),
        trace.CallChain((_frame("up", False), _frame("na2d"), _frame("cutlass_fna_generic"))),
    ]
    run = trace.CallTrace(target="natten", chains=chains)
    fig = trace.plot_call_chains(run, highlight="cutlass_fna_generic")
    (ax,) = fig.axes
    nodes, edges = trace.chain_tree(chains)
    boxes = [t for t in ax.texts if t.get_text()]
    assert [t.get_text() for t in boxes] == [n[2] for n in nodes]
    assert len(ax.texts) - len(boxes) == len(edges)  # one arrow (an empty annotation) per edge
    shaded = {t.get_text(): t.get_bbox_patch().get_facecolor() for t in boxes}
    assert shaded["cutlass_fna_generic"] == matplotlib.colors.to_rgba("mistyrose")
    assert shaded["naf.py:7"] == matplotlib.colors.to_rgba("white")  # outside the target
    assert ax.get_title() == "Call chains into natten (shaded: inside natten)" and not ax.axison
    assert tuple(fig.get_size_inches()) == pytest.approx((2.6 * 3, 0.42 * 2 + 1.2))
    titled = trace.plot_call_chains(run, title="one forward pass")
    assert titled.axes[0].get_title() == "one forward pass"
    with pytest.raises(ValueError, match="never entered natten"):
        trace.plot_call_chains(trace.CallTrace(target="natten"))


def _bench_rows():
    rows = [
        {"geometry": g, "tokens": t, "method": m, "backend": b, "seconds": t * 1e-6 * k, "status": "ok"}
        for g, t in (("grid_12", 144), ("grid_16", 256), ("naf_512", 262144))
        for k, (m, b) in enumerate((("matmul", "torch"), ("matmul", "onnxruntime"), ("shift", "torch")), 1)
    ]
    rows += [
        {
            "geometry": "grid_16",
            "tokens": 256,
            "method": "natten",
            "backend": "natten",
            "seconds": None,
            "status": "ok",
        },
        {
            "geometry": "grid_12",
            "tokens": 144,
            "method": "gather",
            "backend": "torch",
            "seconds": 0.1,
            "status": "out of memory",
        },
    ]
    return pd.DataFrame(rows)


def test_latency_figure_has_one_line_per_method_and_backend_at_the_named_grids():
    fig = attention_plots.plot_latency(_bench_rows(), ["grid_12", "grid_16"], "kernel 3, 2 threads")
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"matmul (torch)", "matmul (onnxruntime)", "shift (torch)"}  # no untimed or failed row
    assert list(lines["shift (torch)"].get_xdata()) == [144, 256]  # the NAF geometry is not on this plot
    assert list(lines["shift (torch)"].get_ydata()) == pytest.approx([144 * 3e-6, 256 * 3e-6])
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "query tokens (H x W)",
        "median seconds per call",
        "kernel 3, 2 threads",
    )
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(lines)
    with pytest.raises(ValueError, match="no timed row"):
        attention_plots.plot_latency(_bench_rows(), ["grid_99"], "none")


def test_op_inventory_figure_stacks_each_formulation_s_nodes_by_op():
    ops = {"gather": {"Gather": 4, "MatMul": 2}, "shift": {"Slice": 9, "Mul": 3, "Add": 3}}
    fig = attention_plots.plot_op_inventory(ops, "op inventory at grid_16")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gather", "shift"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(legend) == sorted({op for o in ops.values() for op in o})
    heights = {}
    for container, op in zip(ax.containers, legend):
        assert len(container.patches) == len(ops)
        heights.update({(m, op): p.get_height() for m, p in zip(ops, container.patches)})
    assert all(heights[m, op] == ops[m].get(op, 0) for m in ops for op in legend)
    assert (ax.get_ylabel(), ax.get_title()) == ("nodes", "op inventory at grid_16")
    with pytest.raises(ValueError, match="no exported formulation"):
        attention_plots.plot_op_inventory({}, "none")


def test_memory_figure_shows_model_measurement_ram_and_device():
    counts = {(s, r): int(6 * r * r * (1.2 if s == "bunny" else 1.0)) for s in ("sphere", "bunny") for r in (16, 32)}
    counts[("sphere", 64)] = 6 * 64 * 64  # the headline shape was not counted at 64: no point there
    setting = {
        "measure_shape": "sphere",
        "measure_channels": 8,
        "measure_dtype": "float32",
        "headline_shape": "bunny",
        "headline_channels": 16,
        "headline_dtype": "float16",
    }
    curves = sparse_plots.memory_curves(counts, [16, 32, 64], chunk_rows=64, **setting)
    assert len(curves) == 2 * len(sparse.METHODS) and set(curves["res"]) == {16, 32}
    im2col = curves[(curves["method"] == "im2col") & (curves["res"] == 32)].iloc[0]
    assert im2col["measure_setting"] == memory.peak_model(
        "im2col", 32, counts[("sphere", 32)], 8, 8, "float32", chunk_rows=64
    )
    assert im2col["headline_setting"] == memory.peak_model("im2col", 32, counts[("bunny", 32)], 16, 16, "float16")
    measured = pd.DataFrame(
        [{"shape": "sphere", "res": 16, "method": m, "measured_bytes": 1e6} for m in ("dense", "accumulate")]
        + [{"shape": "bunny", "res": 16, "method": "accumulate", "measured_bytes": 2e6}]
    )
    fig = sparse_plots.plot_memory_vs_resolution(
        curves, measured, ram_bytes=24 * 2**30, device_memory_gib=8.0, **setting
    )
    left, right = fig.axes
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in (left, right))
    left_labels = [line.get_label() for line in left.get_lines()]
    assert left_labels == [f"{m} (model)" for m in sorted(sparse.METHODS)] + [
        "accumulate (measured)",
        "dense (measured)",
    ]
    assert (left.get_title(), left.get_xlabel(), left.get_ylabel()) == (
        "sphere, C=8, float32 (im2col chunked)",
        "grid resolution",
        "peak bytes",
    )
    right_lines = {line.get_label(): line for line in right.get_lines()}
    assert list(right_lines["this machine's RAM"].get_ydata()) == [24 * 2**30] * 2
    assert list(right_lines["device memory (8.0 GiB)"].get_ydata()) == [8 * 2**30] * 2
    assert set(right_lines) - {"this machine's RAM", "device memory (8.0 GiB)"} == set(sparse.METHODS)
    assert right.get_title() == "bunny, C=16, float16 (model; im2col unchunked)"
    colour = {line.get_label(): line.get_color() for line in left.get_lines()}
    assert colour["accumulate (model)"] == colour["accumulate (measured)"] == right_lines["accumulate"].get_color()
    assert all(a.get_legend() is not None for a in (left, right))
    with pytest.raises(ValueError, match="no modelled point"):
        sparse_plots.plot_memory_vs_resolution(curves.iloc[:0], measured, ram_bytes=1, device_memory_gib=1.0, **setting)
