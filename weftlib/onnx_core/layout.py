"""The device layout every exported graph is offered in: all inputs rank 4 (NCHW), as the Hailo DFC's parser
reads them.

The parser stops in `_add_input_layers` before reading any operator when an input is not image-shaped
(weftspun/request-for-discussion RFD 1154 details: a rank-5 latent, a rank-1 timestep and a rank-3
conditioning). Each topic wraps its faithful graph so the inputs are images (`weftlib.attention.device_layout`,
`weftlib.sparse.device_layout`); this module holds what they share: the export record and its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

IMAGE_RANK = 4


@dataclass(frozen=True)
class LayoutExport:
    """One device-layout export: its report, and the layout's output against the faithful formulation's."""

    name: str
    report: Any  # onnx_export.ExportReport
    inputs: dict[str, tuple[int, ...]]
    vs_faithful: float  # max |device layout (torch) - faithful formulation (torch)|

    @property
    def path(self) -> Path:
        return Path(self.report.path)


def layout_table(exports: dict[Any, LayoutExport], gate_results: dict[Any, Any]) -> pd.DataFrame:
    """Per device-layout graph: inputs, parity, equality with the faithful form, and the device gate's word
    (`gate_results` keyed like `exports`, or by the layout's path)."""
    import pandas as pd

    rows = []
    for key, e in exports.items():
        g = gate_results[key] if key in gate_results else gate_results[e.path]
        rows.append(
            {
                "graph": e.path.name,
                "inputs": ", ".join(f"{n} {list(s)}" for n, s in e.inputs.items()),
                "readable": "yes" if g.readable else "no",
                "device gate": "PASS" if g.passed else "FAIL",
                "ops outside DEVICE_OPS": ", ".join(g.failing_ops),
                "onnxruntime vs torch": e.report.max_abs_diff,
                "layout vs faithful": e.vs_faithful,
            }
        )
    return pd.DataFrame(rows)
