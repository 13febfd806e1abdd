"""Notebook 01's model: the names its `parameters` cell takes and the keys it records (`notebook_model`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import NAF_HUB, PIXAL3D, Count


class Parameters(ParameterModel):
    """01's `parameters` cell."""

    host_root = Parameter(PIXAL3D)
    hub_dir = Parameter(NAF_HUB)
    hub_entry = Parameter()
    hub_kwargs = Parameter(dict[str, Any])
    dependency = Parameter()
    config_variable = Parameter()
    embed_dim = Parameter(Count)
    batch = Parameter(Count)
    channels = Parameter(Count)
    image_size = Parameter(Count)
    feature_grid = Parameter(Annotated[int, Field(ge=9)])  # the 9x9 neighbourhood must fit
    output_size = Parameter(Count)
    timing_size = Parameter(Count)
    timing_repeats = Parameter(Count)


class Record(RecordModel):
    """What 01 records."""

    inputs = Metric(dict)
    static_hits = Metric(list)
    host_code_lines_naming_dependency = Metric(int)
    host_hub_loads = Metric(list)
    chains = Metric(list)
    natten_chain = Metric(str)
    forward_raised = Metric(str)
    error_chain = Metric(str)
    na2d_call = Metric(dict)
    hub_load_imports = Metric(list)
    audit = Metric(list)
    dependency_audit_flag = Metric(str)
    natten_environment = Metric(dict)
    backend_verdicts = Metric(list)
    config_source = Metric(str)
    proj_channels_rule = Metric(list)
    configs = Metric(list)
    mismatches = Metric(list)
    strict_error_flag_off = Metric(str)
    flag_off_mismatch = Metric(list)
    tracing_overhead = Metric(list)
    tracing_fixed_overhead_us = Metric(float)
    tracing_forward_traced_over_plain = Metric(float)


TRACE = NotebookModel("01_trace_natten", Parameters, Record, __name__)
