"""Notebooks 05's and 06's models: the names their `parameters` cells take and the keys they record
(`notebook_model`). The verdict table (`suite.verdicts`) reads 05's `graph_standing` and 06's cut by these fields."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..notebook_model import Metric, NotebookModel, Parameter, ParameterModel, RecordModel
from ..parameter_kinds import NOTEBOOKS, Directory, File, OneOf


def _archs() -> tuple[str, ...]:
    from .compiler.dfc_runner import DFC5_ARCHS

    return ("", *DFC5_ARCHS)  # "": the target arch of params/device_ops.yaml


ARCH = OneOf(_archs)


class GateParameters(ParameterModel):
    """05's `parameters` cell."""

    dfc_results_dir = Parameter(Directory)
    device_ops_file = Parameter(File)
    arch = Parameter(ARCH)
    probe_results_dir = Parameter(Directory)
    graph_notebooks = Parameter(NOTEBOOKS)
    fix_skip = Parameter()
    fix_variants = Parameter()


class GateRecord(RecordModel):
    """What 05 records."""

    public_record_held = Metric(list)
    public_record = Metric(dict, "the gate against the public record (cases agreed / unjudged / disagreed)")
    public_record_cases = Metric(list)
    public_record_not_rebuilt = Metric(dict)
    public_record_held_out = Metric(dict)
    public_record_held_out_cases = Metric(list)
    public_record_in_sample_agreement = Metric(
        float, "the gate's agreement with its own record, in sample (share of the judged cases)"
    )
    public_record_loso_agreement = Metric(
        float, "the gate's agreement, leave one source out (share of the judged cases)"
    )
    public_record_held_out_by_origin = Metric(dict)
    public_record_origins = Metric(dict)
    public_record_independent_origins = Metric(
        int, "independent origins (authors or organisations) of the public record's cases"
    )
    public_record_looo_agreement = Metric(
        float, "the gate's agreement, leave one origin out (share of the judged cases)"
    )
    public_record_looo_coverage = Metric(float, "the share of cases the gate judges at all, leave one origin out")
    exported_backtest_by_origin = Metric(dict)
    exported_backtest_in_sample = Metric(dict)
    exported_backtest_kinds = Metric(dict)
    exported_backtest_cases = Metric(list)
    exported_backtest_held_out_cases = Metric(list)
    exported_backtest_targets = Metric(list)
    exported_backtest_unjudged_causes = Metric(dict)
    exported_in_sample_agreement = Metric(
        float,
        "the gate with the exporters' graphs, the zoo one origin: in sample, agreement (share of the judged cases)",
        nullable=True,
    )
    exported_in_sample_coverage = Metric(
        float,
        "the gate with the exporters' graphs, the zoo one origin: in sample, coverage (share of the cases judged)",
    )
    exported_looo_agreement = Metric(
        float,
        "the gate with the exporters' graphs, the zoo one origin: each origin held out, agreement (share of the judged cases)",
        nullable=True,
    )
    exported_looo_coverage = Metric(
        float,
        "the gate with the exporters' graphs, the zoo one origin: each origin held out, coverage (share of the cases judged)",
    )
    narrowing_changes = Metric(list)
    narrowing_verdicts_changed = Metric(dict, "graphs whose verdict the narrowing of the rules changed (before -> now)")
    limits_on_public_parses = Metric(list)
    refusals_on_nearest_parses = Metric(list)
    allowlist_size = Metric(int)
    known_blockers = Metric(int)
    graph_rules = Metric(int)
    prediction_counts = Metric(dict)
    contradicted_entries = Metric(list)
    unjudged_entries = Metric(dict)
    missing_notebook_outputs = Metric(list)
    graphs_found = Metric(int)
    device_gate_table = Metric(list)
    predictions = Metric(dict)
    refused_rules = Metric(list)
    dfc_source = Metric(str)
    dfc_results = Metric(int)
    dfc_script = Metric(str)
    pairing_table = Metric(list)
    standing = Metric(list)
    pairing_verdicts = Metric(dict)
    graphs_unjudged = Metric(int)
    op_types_seen = Metric(int)
    ops_refused = Metric(list)
    suggested_edits = Metric(list)
    probes = Metric(int)
    probe_script = Metric(str)
    not_probed = Metric(dict)
    probe_findings = Metric(list)
    fix_graphs_absent = Metric(list)
    fix_graphs = Metric(list)
    fix_table = Metric(list)
    fix_unproven = Metric(dict)
    fix_verdicts = Metric(dict)  # once `gate fix` runs: faithful stem -> verdict of its fixed graph
    fix_vs_variants = Metric(list)
    graph_standing = Metric(dict)  # stem -> verdict, basis, refused_by, unjudged_by, probes (the verdict table)


class CutParameters(ParameterModel):
    """06's `parameters` cell."""

    graph_notebooks = Parameter(NOTEBOOKS)
    answer_graphs = Parameter()
    tolerance = Parameter(Annotated[float, Field(ge=0, allow_inf_nan=False)])  # 0: bit-identical
    dfc_results_dir = Parameter(Directory)
    arch = Parameter(ARCH)


class CutRecord(RecordModel):
    """What 06 records."""

    missing_notebook_outputs = Metric(list)
    graphs_cut = Metric(int)
    coverage = Metric(list)
    device_segments = Metric(list)
    chain_vs_graph_worst = Metric(float, "worst |chain of segments - whole graph| over every graph")
    merge_totals = Metric(dict)
    merge = Metric(list)
    merge_findings = Metric(dict)
    answer_graphs = Metric(dict)
    pictures = Metric(int)
    cut_pack_script = Metric(str)
    cuts_to_parse = Metric(int)
    cut_verdicts = Metric(list)
    compile_risks = Metric(list)
    coverage_fixed = Metric(list)
    device_time_fits = Metric(list)
    device_time_held_out = Metric(dict, "device-time fit, each model family held out: |log(predicted / published FPS)|")
    device_time = Metric(list)
    device_payoff = Metric(dict)  # stem -> does the device pay off (`vocabulary.PaysOff`), an estimate
    deployable_cut = Metric(list)
    device_share = Metric(dict, "share of the MACs on the device, per answer graph")


GATE = NotebookModel("05_gate_pairing", GateParameters, GateRecord, __name__)
CUT = NotebookModel("06_device_cut", CutParameters, CutRecord, __name__)
