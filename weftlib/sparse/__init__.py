"""03: submanifold sparse convolution at the 1024 grid: densify or scatter, and at what memory.

`submanifold_conv3d` (in `conv`, with its checks and its five methods) is the one public entry; `method` picks
the formulation (`auto` by default: `method_choice` picks the fastest exact path for the shapes and sizes its
chunks from the L2 cache; `rulebook` turns a neighbour table into the pair form `pairs.Rulebook` that lets it
multiply only the taps that have a neighbour). Around it: `neighbours` (the kernel map, the table every method
reads), `exports` (the methods as exportable modules, their ONNX exports and op inventory), `reference` (the
fp64 dense conv3d and each method's error against it), `voxels` (the voxel sets and counts), `footprint` (the
byte formulas), `memory` (the peak model and peaks measured against it), `workloads` (what a measuring child
process runs), `benchmark` (time per method, one layer against the machine's limit, spconv), `summary` (the
benchmark's text and the conclusion sentence) and `device_layout` (the two device-half routes with rank-4
inputs). Every name notebook 03 calls is importable from here.
"""

from .conv import (
    AUTO,
    DEFAULT_DENSE_BUDGET,
    METHODS,
    SPARSE_METHODS,
    DenseBudgetError,
    dense_bytes,
    densify,
    rulebook,
    submanifold_conv3d,
)
from .exports import DenseConv3d, SubmanifoldConv3d, export_dense, export_methods, inventory_table
from .method_choice import CHUNK_L2_MULTIPLE, SMALL_ROWS, auto_chunk_rows, choose_method, l2_cache_bytes
from .neighbours import kernel_map, kernel_map_bytes
from .pairs import Rulebook
from .reference import equality_errors, reference_conv3d

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
