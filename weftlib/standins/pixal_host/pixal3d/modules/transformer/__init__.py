"""STAND-IN for Pixal3D's dense transformer blocks."""

from .modulated import FeedForwardNet, ModulatedTransformerCrossBlock, ProjectAttention

__all__ = ["FeedForwardNet", "ModulatedTransformerCrossBlock", "ProjectAttention"]
