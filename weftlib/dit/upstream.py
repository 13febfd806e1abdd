"""One block at the width the checkout's config file gives (upstream 1536 channels, 12 heads of 128): the
compiler places layers one by one, so the size limits a device half meets are those of the real width, not of
the small instance the rest of notebook 04 exports. Its size, its largest layers, and only the faithful graph
and tokens+all exported at that width.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .evaluation import VariantResult, evaluate
from .model import Host, LayerSize, config_args, example_inputs, forward, layer_sizes, load_flow_model, parameter_count
from .variants import exact_variants

UPSTREAM_VARIANTS = ("faithful", "tokens+all")  # only these two at 1536 channels: each export is slow


@dataclass
class UpstreamBlock:
    """One block at the width the checkout's config file gives (upstream 1536 channels, 12 heads of 128):
    its size, its largest layers and the two graphs exported at that width."""

    channels: int
    heads: int
    head_dim: int
    mlp_hidden: int
    parameters: int
    layers: list[LayerSize]
    results: list[VariantResult]

    @property
    def largest(self) -> LayerSize:
        """The layer with the most parameters (ties: the one with more multiply-accumulates)."""
        return self.layers[0]

    @property
    def busiest(self) -> LayerSize:
        """The layer with the most multiply-accumulates per forward."""
        return max(self.layers, key=lambda s: (s.macs, s.parameters))


def upstream_block(
    host_root: str | Path | None,
    folder: str | Path,
    ops: Any,
    *,
    seed: int = 0,
    global_tokens: int = 5,
    timestep_rank: int = 2,
    opset: int = 17,
    atol: float = 1e-4,
    prefix: str = "dit_upstream",
) -> UpstreamBlock:
    """Build one block at the config file's own `model_channels` (heads and MLP ratio from the same file),
    size its layers and export `UPSTREAM_VARIANTS` into `folder` (files `onnx_name(name, prefix)`)."""
    channels = int(config_args(host_root)["model_channels"])
    model = load_flow_model(host_root, blocks=1, channels=channels, seed=seed)
    inputs = example_inputs(model, global_tokens=global_tokens, seed=seed)
    reference = forward(model, inputs)
    variants = exact_variants(model, inputs, names=UPSTREAM_VARIANTS, timestep_rank=timestep_rank)
    results = evaluate(variants, folder, reference, ops, opset=opset, atol=atol, prefix=prefix)
    host: Host = model
    heads = int(host.num_heads)
    return UpstreamBlock(
        channels,
        heads,
        channels // heads,
        int(host.blocks[0].mlp.mlp[0].out_features),
        parameter_count(model),
        layer_sizes(model, inputs),
        results,
    )
