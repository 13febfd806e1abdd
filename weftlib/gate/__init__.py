"""The two gates that decide whether a device-half ONNX graph can go on the Hailo accelerator, as a pair.

The device gate (`device_gate`) checks every op against DEVICE_OPS, a hand-kept claim about the compiler
(`params/device_ops.yaml`); the DFC gate (`run_dfc`, or `read_dfc_log` on its output) is the compiler
itself. `pair` puts them side by side and compares their causes: their disagreement says which allowlist entry to
move, and a DFC failure before any operator leaves the ops unjudged. `write_probes` and `evidence_diff` turn
one DFC session into evidence for `params/device_ops.yaml`.
"""

from .compiler.dfc_log import DfcError, DfcResult, load_dfc_result, read_dfc_log
from .compiler.dfc_runner import DfcUnavailable, check_arch, dfc_available
from .compiler.dfc_target import cli_docker_command, docker_command, run_dfc
from .compiler.pack import DfcPack, write_dfc_pack
from .compiler.pairing import PAIR_VERDICTS, Edit, Pairing, pair
from .compiler.probe_evidence import evidence_diff
from .compiler.probes import ProbePack, write_probes
from .compiler.results import collect_dfc
from .pages.gate_sentences import conclusion
from .pages.gate_tables import (
    backtest_counts,
    edits_table,
    findings_table,
    gate_table,
    op_matrix,
    pairing_table,
    standing_table,
)
from .pages.plots import plot_backtest, plot_op_matrix
from .predict.backtest import backtest, held
from .predict.device import EXIT_CODES, GateResult, OpUse, device_gate
from .predict.explain import blocking, prediction_rows, prediction_sentence, reasons
from .predict.nodes import Finding, GraphPrediction
from .record.allowlist import DeviceOps, DeviceOpsError, load_device_ops, parse_device_ops
from .record.evidence import contradictions, evidence_table, unjudged
from .run.gating import gate_all, pack_models
from .run_graphs import find_models, graph_sources, missing_outputs, notebook_folders
from .vocabulary import (
    Agreement,
    DfcVerdict,
    EditAction,
    FailureCause,
    FolderKind,
    GateVerdict,
    Listing,
    Outcome,
    PairVerdict,
    Prediction,
    Reach,
    Seen,
    Side,
    Stage,
    Subject,
)

__all__ = [
    "EXIT_CODES",
    "PAIR_VERDICTS",
    "Agreement",
    "DeviceOps",
    "DeviceOpsError",
    "DfcError",
    "DfcPack",
    "DfcResult",
    "DfcUnavailable",
    "DfcVerdict",
    "Edit",
    "EditAction",
    "FailureCause",
    "Finding",
    "FolderKind",
    "GateResult",
    "GateVerdict",
    "GraphPrediction",
    "Listing",
    "OpUse",
    "Outcome",
    "PairVerdict",
    "Pairing",
    "Prediction",
    "ProbePack",
    "Reach",
    "Seen",
    "Side",
    "Stage",
    "Subject",
    "backtest",
    "backtest_counts",
    "blocking",
    "check_arch",
    "cli_docker_command",
    "collect_dfc",
    "conclusion",
    "contradictions",
    "device_gate",
    "dfc_available",
    "docker_command",
    "edits_table",
    "evidence_diff",
    "evidence_table",
    "find_models",
    "findings_table",
    "gate_all",
    "gate_table",
    "graph_sources",
    "held",
    "load_device_ops",
    "load_dfc_result",
    "missing_outputs",
    "notebook_folders",
    "op_matrix",
    "pack_models",
    "pair",
    "pairing_table",
    "parse_device_ops",
    "plot_backtest",
    "plot_op_matrix",
    "prediction_rows",
    "prediction_sentence",
    "read_dfc_log",
    "reasons",
    "run_dfc",
    "standing_table",
    "unjudged",
    "write_dfc_pack",
    "write_probes",
]
