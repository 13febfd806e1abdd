"""01: where natten comes from. Pixal3D never imports it; NAF, loaded over `torch.hub`, calls it.

- `scan`: what a reader of the host's source finds (static);
- `calls`: what runs: every call chain into the target package and the imports executed on the way;
- `cost`: what tracing a call costs against the plain call;
- `dependencies`: the audit, declared vs. found vs. imported;
- `backends`: each backend's own word on whether it can run here;
- `drawing`: the chains as one tree (`plot_call_chains`, notebook 01's figure); `checkpoint`: why NAF cannot
  be switched off (its weights' shapes); `findings`: the config rows and the answer notebook 01 shows.
"""

from .backends import Verdict, verdicts
from .calls import CallChain, CallTrace, Frame, ImportEvent, TargetEntry, TensorSpec, trace_calls
from .cost import tracing_cost, tracing_overhead
from .dependencies import AuditRow, audit
from .drawing import chain_tree, draw_chains, plot_call_chains
from .findings import config_rows, natten_answer, natten_short
from .scan import ScanHit, declared_dependencies, find_assignments, normalize, requirement_name, static_scan

__all__ = [
    "AuditRow",
    "CallChain",
    "CallTrace",
    "Frame",
    "ImportEvent",
    "ScanHit",
    "TargetEntry",
    "TensorSpec",
    "Verdict",
    "audit",
    "chain_tree",
    "config_rows",
    "declared_dependencies",
    "draw_chains",
    "find_assignments",
    "natten_answer",
    "natten_short",
    "normalize",
    "plot_call_chains",
    "requirement_name",
    "static_scan",
    "trace_calls",
    "tracing_cost",
    "tracing_overhead",
    "verdicts",
]
