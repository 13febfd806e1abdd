"""STAND-IN for Pixal3D's dense attention modules."""

from .full_attn import scaled_dot_product_attention
from .modules import MultiHeadAttention, MultiHeadRMSNorm
from .rope import RotaryPositionEmbedder

__all__ = ["MultiHeadAttention", "MultiHeadRMSNorm", "RotaryPositionEmbedder", "scaled_dot_product_attention"]
