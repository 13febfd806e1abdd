"""STAND-IN for Pixal3D's model registry (upstream: lazy attribute imports, nothing heavy)."""
