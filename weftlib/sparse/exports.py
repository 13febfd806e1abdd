"""The exportable forms of the convolution: each sparse method and the densify route's device half as an
`nn.Module`, exported to ONNX, and the op inventory of those graphs against the device allowlist.

Apart from `conv` because exporting pulls in the ONNX core and the gate's evidence, which the host entry never
needs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from .conv import SPARSE_METHODS, submanifold_conv3d

if TYPE_CHECKING:
    import pandas as pd

    from weftlib.gate.run_graphs import GraphIdentity

ROWS_METHOD = "im2col"  # the sparse method that gathers each voxel's neighbour rows: what the other routes rewrite


def conv_stem(method: str) -> str:
    """The stem of a method's exported graph: `conv_<method>` (`dense` the densify route's device half)."""
    return f"conv_{method}"


def identity(method: str, geometry: str) -> GraphIdentity:
    """What a graph of 03 is: a sparse method's graph is the faithful layer with the sparse convolution swapped for
    that method; the densify route's (`dense`) a variant of it, taking the dense grid for the voxels."""
    from weftlib.gate.run_graphs import GraphIdentity
    from weftlib.gate.vocabulary import GraphKind, GraphNotebook

    if method in SPARSE_METHODS:
        return GraphIdentity(GraphNotebook.SPARSE, GraphKind.FAITHFUL, method, geometry)
    of = conv_stem(ROWS_METHOD)
    return GraphIdentity(GraphNotebook.SPARSE, GraphKind.VARIANT, method, geometry, variant_of=of)


class SubmanifoldConv3d(nn.Module):
    """One sparse method as a module taking (feats, nbr), so it exports with the kernel map as a graph input.

    The loops over offsets unroll at export (k^3 gathers for "accumulate"/"scatter", one for "im2col").
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, method: str = "accumulate") -> None:
        super().__init__()
        if method not in SPARSE_METHODS:
            raise ValueError(f"method must be one of {SPARSE_METHODS} (dense exports as DenseConv3d), got {method!r}")
        self.method = method
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    def forward(self, feats: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
        return submanifold_conv3d(feats, nbr, self.weight, self.bias, method=self.method)


class DenseConv3d(nn.Module):
    """The densify route's device half: a plain Conv on the dense grid [1, Cin, res, res, res]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    def forward(self, grid: torch.Tensor) -> torch.Tensor:
        return F.conv3d(grid, self.weight, self.bias, padding=self.weight.shape[2] // 2)


def export_methods(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    feats: torch.Tensor,
    nbr: torch.Tensor,
    folder: os.PathLike | str,
    methods: tuple[str, ...] = SPARSE_METHODS,
    atol: float = 1e-4,
) -> dict[str, Any]:
    """Export each sparse method (inputs `feats`, `nbr`) to `folder/conv_<method>.onnx`; the export reports."""
    from weftlib.onnx_core import export as onnx_export

    bad = [m for m in methods if m not in SPARSE_METHODS]
    if bad:
        raise ValueError(f"methods must be among {SPARSE_METHODS}, got {bad}")
    return {
        m: onnx_export.export(
            SubmanifoldConv3d(weight, bias, m),
            (feats, nbr),
            Path(folder) / f"{conv_stem(m)}.onnx",
            input_names=["feats", "nbr"],
            output_names=["out"],
            atol=atol,
            identity=identity(m, f"{feats.shape[0]} voxels").as_json(),
        )
        for m in methods
    }


def inventory_table(reports: dict[str, Any], device_ops: Any) -> pd.DataFrame:
    """Op counts per exported graph, with each op's listing in the device allowlist (`gate.DeviceOps`):
    allowed / blocker / unlisted, what its own entry predicts ("by pattern": its nodes are judged by the
    graph rules), and how many Gathers read a data-dependent index."""
    import pandas as pd

    from weftlib.gate.record.evidence import evidence_table
    from weftlib.gate.vocabulary import Prediction, Subject

    predicted = {row["name"]: row["prediction"] for row in evidence_table(device_ops) if row["kind"] == Subject.OP}
    ops = sorted({op for r in reports.values() for op in r.ops})
    rows = []
    for op in ops:
        row: dict[str, Any] = {
            "op": op,
            "standing": device_ops.status(op),
            "predicted": predicted.get(op, Prediction.UNJUDGED),
        }
        row.update({name: r.ops.get(op, 0) for name, r in reports.items()})
        rows.append(row)
    gathers: dict[str, Any] = {
        "op": "(Gather, data-dependent index)",
        "standing": "rule gather_computed_index",
        "predicted": Prediction.UNJUDGED,
    }
    gathers.update({name: len(r.dynamic_gathers) for name, r in reports.items()})
    return pd.DataFrame([*rows, gathers])


def export_dense(
    weight: torch.Tensor, bias: torch.Tensor | None, grid: torch.Tensor, folder: os.PathLike | str, atol: float = 1e-4
) -> Any:
    """Export the densify route's device half (a Conv on `grid`) to `folder/conv_dense.onnx`; its report."""
    from weftlib.onnx_core import export as onnx_export

    if grid.ndim != 5 or grid.shape[1] != weight.shape[1]:
        raise ValueError(f"grid must be [1, Cin={weight.shape[1]}, res, res, res], got {tuple(grid.shape)}")
    return onnx_export.export(
        DenseConv3d(weight, bias),
        (grid,),
        Path(folder) / f"{conv_stem('dense')}.onnx",
        input_names=["grid"],
        output_names=["out"],
        atol=atol,
        identity=identity("dense", "x".join(map(str, grid.shape[2:]))).as_json(),
    )
