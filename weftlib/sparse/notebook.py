"""Notebook 03's model: the names its `parameters` cell takes and the keys it records (`notebook_model`)."""

from __future__ import annotations

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import Count, OneOf, Positive, Threads


def _shapes() -> tuple[str, ...]:
    from .voxels import SHAPES

    return tuple(SHAPES)


def _dtypes() -> tuple[str, ...]:
    from .footprint import DTYPES

    return tuple(DTYPES)


SHAPE, SHAPES, DTYPE = OneOf(_shapes), OneOf(_shapes, many=True), OneOf(_dtypes)


class Parameters(ParameterModel):
    """03's `parameters` cell."""

    shapes = Parameter(SHAPES)
    count_resolutions = Parameter(list[Count])
    equality_res = Parameter(Count)
    equality_channels = Parameter(Count)
    measure_shape = Parameter(SHAPE)
    measure_resolutions = Parameter(list[Count])
    dense_max_res = Parameter(Count)
    sparse_only_resolutions = Parameter(list[Count])
    sparse_only_shapes = Parameter(SHAPES)
    measure_channels = Parameter(Count)
    measure_dtype = Parameter(DTYPE)
    measure_threads = Parameter(Threads)
    chunk_rows = Parameter(Count)
    ratio_limit = Parameter(Positive)
    headline_shape = Parameter(SHAPE)
    headline_res = Parameter(Count)
    headline_channels = Parameter(Count)
    headline_dtype = Parameter(DTYPE)
    time_res = Parameter(Count)
    time_repeats = Parameter(Count)
    bench_shape = Parameter(SHAPE)
    bench_res = Parameter(Count)
    bench_repeats = Parameter(Count)
    export_res = Parameter(Count)
    export_channels = Parameter(Count)
    device_memory_gib = Parameter(Positive)


class Record(RecordModel):
    """What 03 records."""

    n_exponent = Metric(dict)
    sphere_count_vs_area_rel_err = Metric(float)
    counts = Metric(list)
    equality_max_abs_err_fp32 = Metric(dict)
    measured = Metric(list)
    sparse_measured_over_model_max = Metric(float, "sparse peak, measured / model (max)", unit="x")
    sparse_measured_over_model_min = Metric(float)
    kernel_map_memory = Metric(dict)
    headline_components = Metric(dict)
    headline_N = Metric(int)
    headline_neighbor_table_bytes = Metric(int)
    headline_dense_bytes = Metric(int, unit="B")
    headline_accumulate_bytes = Metric(int, unit="B")
    headline_model = Metric(list)
    headline_measured = Metric(list)
    times = Metric(list)
    rulebook_seconds = Metric(float)
    layer_vs_machine_limit = Metric(dict)
    bench_auto_seconds = Metric(float, unit="s")
    bench_auto_over_im2col = Metric(float)
    bench_auto_of_limit = Metric(float)
    bench_contended = Metric(list)
    default_pipeline = Metric(dict)
    default_layer_over_bound = Metric(float, unit="x")
    default_layer_over_spconv = Metric(float)
    default_map_seconds = Metric(dict)
    byte_model_vs_tensors = Metric(dict)
    export_inventory = Metric(list)
    export_parity = Metric(dict)
    scatter_export_scatternd = Metric(int)
    accumulate_dynamic_gathers = Metric(int)
    split_transfers = Metric(list)
    device_layouts = Metric(list)
    device_gate_verdicts = Metric(list)
    device_gate_findings = Metric(list)
    predictions = Metric(list)
    prediction_sentence = Metric(str)
    layout_vs_faithful = Metric(dict)
    device_layout_predicted_pass = Metric(list)


SPARSE = NotebookModel("03_sparse_conv_memory", Parameters, Record, __name__)
