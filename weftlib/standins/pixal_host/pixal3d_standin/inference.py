"""STAND-IN for Pixal3D's inference.py: the conditioning-model table and its builder."""

from __future__ import annotations

from pixal3d_standin.image_conditioned_proj import DinoV3ProjFeatureExtractor

# Image Cond Model configs (same keys and flags as the upstream table; the backbone name is a stand-in)
IMAGE_COND_CONFIGS = {
    "ss": {
        "model_name": "standin/dinov3-vitl16",
        "image_size": 512,
        "grid_resolution": 16,
    },
    "shape_512": {
        "model_name": "standin/dinov3-vitl16",
        "image_size": 512,
        "grid_resolution": 32,
        "use_naf_upsample": True,
        "naf_target_size": 512,
    },
    "shape_1024": {
        "model_name": "standin/dinov3-vitl16",
        "image_size": 1024,
        "grid_resolution": 64,
        "use_naf_upsample": True,
        "naf_target_size": 512,
    },
    "tex_1024": {
        "model_name": "standin/dinov3-vitl16",
        "image_size": 1024,
        "grid_resolution": 64,
        "use_naf_upsample": True,
        "naf_target_size": 512,
    },
}


def build_image_cond_model(config: dict, **overrides) -> DinoV3ProjFeatureExtractor:
    """One conditioning model from a table entry; `overrides` shrink it for CPU runs."""
    return DinoV3ProjFeatureExtractor(**{**config, **overrides})
