"""Notebook 04's model: the names its `parameters` cell takes and the keys it records (`notebook_model`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import PIXAL3D, Count, Tolerance


class Parameters(ParameterModel):
    """04's `parameters` cell."""

    host_root = Parameter(PIXAL3D)
    blocks = Parameter(Count)
    channels = Parameter(Count)
    global_tokens = Parameter(Count)
    seed = Parameter(Annotated[int, Field(ge=0)])
    opset = Parameter(Count)
    atol = Parameter(Tolerance)
    exact_tol = Parameter(Tolerance)
    timestep_rank = Parameter(Literal[2, 3])  # the host timestep's input: [B, 256] or [B, 1, 256], never rank 1
    upstream_width = Parameter()


class Record(RecordModel):
    """What 04 records."""

    source = Metric(dict)
    parameters = Metric(int)
    input_shapes = Metric(dict)
    output_shape = Metric(list)
    as_written = Metric(list)
    as_written_errors = Metric(dict)
    real_rope_max_abs_diff = Metric(float)
    real_rope_control_max_abs_diff = Metric(float)
    faithful_nodes = Metric(int)
    faithful_distinct_ops = Metric(int)
    faithful_ops = Metric(dict)
    faithful_outside_device_ops = Metric(list)
    faithful_outside_table = Metric(list)
    faithful_input_ranks = Metric(dict)
    faithful_refused_by = Metric(dict)
    faithful_findings = Metric(list)
    faithful_device_gate = Metric(str, "faithful graph, predicted")
    reduce_l2_standing = Metric(dict)
    faithful_onnx_vs_torch = Metric(float)
    rfd_1154_comparison = Metric(list)
    outside_beyond_rfd_1154 = Metric(dict)
    variants = Metric(list)
    op_table = Metric(list)
    variant_outside = Metric(dict)
    variant_nodes = Metric(dict)
    variant_input_ranks = Metric(dict)
    variant_max_abs_diff = Metric(dict)
    variant_export_seconds = Metric(dict)
    head_splits_glued = Metric(dict)
    onnx_files = Metric(dict)
    variant_predictions = Metric(list)
    variant_verdicts = Metric(dict)
    change_table = Metric(list)
    head_splits_tokens = Metric(list)
    head_splits_all = Metric(list)
    kv_heads = Metric(dict)
    upstream_width = Metric(bool)
    upstream_block = Metric(dict)
    upstream_parameters = Metric(int)
    upstream_largest_layer = Metric(dict)
    upstream_busiest_layer = Metric(dict)
    upstream_largest = Metric(str, "upstream width, largest layer")
    upstream_layers = Metric(list)
    upstream_variants = Metric(list)
    upstream_export_seconds = Metric(dict)
    upstream_file_bytes = Metric(dict)
    upstream_verdicts = Metric(dict)
    exported_graphs = Metric(list)


DIT = NotebookModel("04_export_dit_block", Parameters, Record, __name__)
