"""STAND-IN for Pixal3D's DinoV3ProjFeatureExtractor: backbone features, optionally upsampled by NAF.

The backbone is one random patch-embedding convolution in place of DINOv3. With `use_naf_upsample` the
features are the plain upsampled ones concatenated with the NAF-upsampled ones, hence twice as wide.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

DEFAULT_NAF_REPO = str(Path(__file__).resolve().parents[2] / "naf_hub")


class DinoV3ProjFeatureExtractor(nn.Module):
    """Image -> conditioning tokens [B, grid_resolution**2, proj_channels]."""

    def __init__(self, model_name: str, image_size: int, grid_resolution: int, use_naf_upsample: bool = False,
                 naf_target_size: int = 512, embed_dim: int = 1024, patch_size: int = 16,
                 naf_repo: str = DEFAULT_NAF_REPO, naf_kwargs: dict | None = None, seed: int = 0) -> None:
        super().__init__()
        self.model_name, self.image_size, self.grid_resolution = model_name, image_size, grid_resolution
        self.use_naf_upsample, self.naf_target_size = use_naf_upsample, naf_target_size
        self.embed_dim = embed_dim
        self.proj_channels = embed_dim * 2 if use_naf_upsample else embed_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.backbone = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.naf_model = None
        if use_naf_upsample:
            self.naf_model = torch.hub.load(naf_repo, "naf", source="local", trust_repo=True,
                                            seed=seed, **(naf_kwargs or {}))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        image = F.interpolate(image, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        feats = self.backbone(image)
        if self.naf_model is not None:
            size = (self.naf_target_size, self.naf_target_size)
            upsampled = self.naf_model(image, feats, size)
            feats = torch.cat([F.interpolate(feats, size=size, mode="bilinear", align_corners=False), upsampled], 1)
        grid = F.adaptive_avg_pool2d(feats, self.grid_resolution)
        return grid.flatten(2).transpose(1, 2)
