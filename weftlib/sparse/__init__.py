"""03: submanifold sparse convolution at the 1024 grid: densify or scatter, and at what memory.

`submanifold_conv3d` (in `conv`) is the one public entry; `method` picks the formulation (`auto` by default,
the fastest exact path for the shapes; `rulebook` turns a neighbour table into the pair form `pairs.Rulebook`
that lets it multiply only the taps that have a neighbour). Around it: `voxels` (the voxel sets and counts),
`footprint` (the byte formulas), `memory` (the peak model and peaks measured against it), `workloads` (what a
measuring child process runs), `benchmark` (time per method, one layer against the machine's limit, spconv),
`summary` (the benchmark's text and the conclusion sentence) and `device_layout` (the two device-half routes
with rank-4 inputs).
"""

from .conv import (
    METHODS,
    SPARSE_METHODS,
    AUTO,
    DEFAULT_DENSE_BUDGET,
    DenseBudgetError,
    kernel_map,
    kernel_map_bytes,
    dense_bytes,
    submanifold_conv3d,
    rulebook,
    SMALL_ROWS,
    CHUNK_L2_MULTIPLE,
    l2_cache_bytes,
    choose_method,
    auto_chunk_rows,
    SubmanifoldConv3d,
    DenseConv3d,
    densify,
    reference_conv3d,
    equality_errors,
    export_methods,
    inventory_table,
    export_dense,
)
from .pairs import Rulebook

__all__ = [
    "AUTO",
    "CHUNK_L2_MULTIPLE",
    "DEFAULT_DENSE_BUDGET",
    "METHODS",
    "SMALL_ROWS",
    "SPARSE_METHODS",
    "DenseBudgetError",
    "DenseConv3d",
    "Rulebook",
    "SubmanifoldConv3d",
    "auto_chunk_rows",
    "choose_method",
    "dense_bytes",
    "densify",
    "equality_errors",
    "export_dense",
    "export_methods",
    "inventory_table",
    "kernel_map",
    "kernel_map_bytes",
    "l2_cache_bytes",
    "reference_conv3d",
    "rulebook",
    "submanifold_conv3d",
]
