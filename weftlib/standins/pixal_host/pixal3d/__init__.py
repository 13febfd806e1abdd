"""STAND-IN for Pixal3D's package root (random weights; see ../README.md).

Like the real one, importing the package runs its pipelines (which need transformers, PIL and CUDA-only
renderers upstream): a loader that wants only the flow model must import
`pixal3d.models.sparse_structure_flow` without executing this file.
"""

from . import pipelines  # noqa: F401
