"""Where each notebook's model lives (`notebook_model`), and the overview's own: the one list the `Recorder`,
the parameter checks (`schema`) and the tests look a notebook's model up in.

A question package's model is imported only when its notebook is looked up (the packages import torch), so a
plan's check costs the packages it names. A name not listed here (a test's scratch notebook) has no model, and
its records are not checked.
"""

from __future__ import annotations

import importlib

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import Positive

OVERVIEW_ROLE = "overview"  # what 00 records under `role`: the answer table has no row for it


class OverviewParameters(ParameterModel):
    """00's `parameters` cell."""

    appendix_ram_gib = Parameter(Positive)


class OverviewRecord(RecordModel):
    """What 00 records: the run, not an answer."""

    role = Metric(str)
    versions = Metric(dict)
    torch = Metric(str, "torch version")
    machine = Metric(dict)
    cpus_gpu = Metric(str, "machine")
    natten = Metric(dict)
    hailo_dfc = Metric(dict)
    natten_backend = Metric(str, "natten backend")
    dfc_here = Metric(bool, "Hailo DFC importable here")
    capabilities = Metric(list)
    git = Metric(dict)


OVERVIEW = NotebookModel("00_overview", OverviewParameters, OverviewRecord, __name__)

# notebook -> "module:attribute" of its model
WHERE = {
    OVERVIEW.notebook: f"{__name__}:OVERVIEW",
    "01_trace_natten": "weftlib.trace.notebook:TRACE",
    "02_export_attention": "weftlib.attention.notebook:ATTENTION",
    "03_sparse_conv_memory": "weftlib.sparse.notebook:SPARSE",
    "04_export_dit_block": "weftlib.dit.notebook:DIT",
    "05_gate_pairing": "weftlib.gate.notebooks:GATE",
    "06_device_cut": "weftlib.gate.notebooks:CUT",
}


def model_of(notebook: str) -> NotebookModel | None:
    """The model of a notebook of the suite; None for a name the suite has no notebook of."""
    where = WHERE.get(notebook)
    if where is None:
        return None
    module, _, attribute = where.partition(":")
    model = getattr(importlib.import_module(module), attribute)
    if not isinstance(model, NotebookModel) or model.notebook != notebook:
        raise TypeError(f"{where} is not the model of {notebook}")
    return model
