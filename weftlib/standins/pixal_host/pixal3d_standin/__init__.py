"""STAND-IN for Pixal3D's image-conditioning code (random weights; see README.md)."""
