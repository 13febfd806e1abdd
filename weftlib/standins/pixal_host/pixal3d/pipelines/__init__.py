"""STAND-IN for Pixal3D's pipelines: upstream they import transformers, PIL and CUDA-only renderers."""

raise ImportError("stand-in pixal3d.pipelines: the real package imports transformers, PIL and CUDA-only "
                  "renderers here; load pixal3d.models.sparse_structure_flow without running pixal3d/__init__.py")
