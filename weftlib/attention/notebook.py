"""Notebook 02's model: the names its `parameters` cell takes and the keys it records (`notebook_model`)."""

from __future__ import annotations

from typing import Any

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import NAF_HUB, Count, Grid, OneOf, Pair, Positive, Threads, Tolerance


def _methods() -> tuple[str, ...]:
    from .neighborhood import METHODS

    return tuple(METHODS)


def _references() -> tuple[str, ...]:
    return ("natten", *_methods())


class Parameters(ParameterModel):
    """02's `parameters` cell."""

    threads = Parameter(Threads)
    eq_size = Parameter(Pair)
    eq_kernel = Parameter(Count)
    eq_dilation = Parameter(Count)
    eq_low = Parameter(Pair)
    eq_low_kernel = Parameter(Count)
    heads = Parameter(Count)
    dim = Parameter(Count)
    v_dim = Parameter(Count)
    equality_atol = Parameter(Tolerance)
    bench_sizes = Parameter(list[Count])
    bench_kernel = Parameter(Count)
    bench_dim = Parameter(Count)
    bench_naf = Parameter(list[Pair])  # [size, low] per NAF geometry
    bench_naf_methods = Parameter(OneOf(_methods, many=True))
    bench_repeats = Parameter(Count)
    bench_memory = Parameter()
    naf_memory_gib = Parameter(Positive)
    natten_max_gib = Parameter(Positive)
    naf_channels = Parameter(Count)
    naf_qk_dim = Parameter(Count)
    naf_heads = Parameter(Count)
    naf_kernel = Parameter(Count)
    naf_low = Parameter(Count)
    naf_ratio = Parameter(Count)
    naf_method = Parameter(OneOf(_methods))
    naf_reference = Parameter(OneOf(_references))
    export_atol = Parameter(Tolerance)
    hub_dir = Parameter(NAF_HUB)
    hub_entry = Parameter()
    hub_kwargs = Parameter(dict[str, Any])
    naf_rope_heads = Parameter(Count)
    naf_eq_low = Parameter(Count)
    naf_eq_ratio = Parameter(Count)
    naf_rewrite_grid = Parameter(Grid)


class Record(RecordModel):
    """What 02 records."""

    equality = Metric(list, "every formulation against natten")
    equality_worst_abs_diff = Metric(float, "worst |formulation - natten|, fp32")
    bench_rows = Metric(list)
    bench_worst_abs_diff = Metric(float)
    speedups = Metric(list)
    best_speedup_over_natten = Metric(dict)
    naf_full_resolution_over_bound = Metric(dict, unit="x")
    naf_full_resolution_peak_gib = Metric(dict)
    naf_full_resolution_contended = Metric(list)
    naf_full_resolution_stopped_contended = Metric(list)
    export_summary = Metric(dict)
    naf_sources = Metric(str)
    naf_attention_layer = Metric(dict)
    naf_rope_inputs = Metric(dict)
    naf_vs_natten_worst = Metric(float, "NAF upsampler and attention layer, every variant vs natten")
    naf_controls_least_diff = Metric(float)
    naf_equality = Metric(list)
    naf_export = Metric(dict)
    naf_attention_export = Metric(dict)
    naf_reference = Metric(str)
    naf_nodes = Metric(dict, "NAF graphs, nodes")
    naf_torch_vs_reference = Metric(float)
    naf_onnx_vs_torch = Metric(float)
    naf_outside_ops = Metric(dict)
    naf_outside = Metric(list)
    device_layout_skipped = Metric(list)
    faithful_verdicts = Metric(dict, "faithful graphs, predicted")
    faithful_refused_by = Metric(dict)
    faithful_input_predictions = Metric(dict)
    faithful_verdicts_by_method = Metric(dict)
    faithful_refused_by_method = Metric(dict)
    naf_device_gate = Metric(dict)
    faithful_predictions = Metric(list)
    faithful_findings_count = Metric(dict)
    image_equality_worst_abs_diff = Metric(float)
    image_equality_offset_dropped = Metric(float)
    image_equality = Metric(list)
    image_layout_verdicts = Metric(dict, "image layout, predicted")
    image_layout_ops = Metric(list)
    image_layout_rules = Metric(list)
    image_layout_vs_shift_worst = Metric(float)
    image_layout_onnx_vs_torch_worst = Metric(float)
    image_layout_nodes = Metric(dict)
    image_layout_exports = Metric(list)
    image_layout_rests_on = Metric(list)
    naf_variant_verdicts = Metric(dict, "NAF graphs, predicted")
    naf_families_left = Metric(dict)
    naf_rewrites_vs_reference = Metric(float)
    naf_variant_exports = Metric(list)
    naf_variant_outside = Metric(list)
    naf_predictions = Metric(str)
    naf_predicted_to_parse = Metric(list, "NAF variants predicted to parse")
    naf_prediction_rows = Metric(list)
    device_predictions = Metric(str)
    faithful_unjudged_by = Metric(dict)


ATTENTION = NotebookModel("02_export_attention", Parameters, Record, __name__)
