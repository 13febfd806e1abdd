"""Pixal3D's sparse-structure flow model loaded and described: the model itself (from a checkout or the
stand-in), its example inputs in the forward's own signature, and its sizes. One DiT block of it is the
smallest graph that carries RFD 1129's question of which operators the device half needs; every other module
of `weftlib.dit` starts from what `load_flow_model` returns.

`load_flow_model` builds `SparseStructureFlowModel` from a Pixal3D checkout (its own class, its own config
file, only width and depth overridden) or from the stand-in laid out like one (`standins.HOST_ROOT`). The
package's `__init__` is never run: upstream it imports pipelines, renderers and the image feature extractor
(transformers, PIL, CUDA-only code). The attention backend is set to one that runs on CPU.

Random weights: operator coverage does not depend on weight values, but zero-initialised layers (upstream's
'scaled' init zeroes the output layer and the modulation) would make every output 0 and every equality check
vacuous, so every parameter is redrawn from a seeded normal distribution.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from weftlib import standins

PACKAGE = "pixal3d"
FLOW_MODULE = "pixal3d.models.sparse_structure_flow"
ROPE_MODULE = "pixal3d.modules.attention.rope"
ATTENTION_CONFIG_MODULE = "pixal3d.modules.attention.config"
FLOW_CONFIG = Path("configs/gen/ss_flow_img_dit_1_3B_32_bf16_proj_finetune.json")
FLOW_CLASS = "SparseStructureFlowModel"
CPU_BACKEND = "sdpa"
GLOBAL_TOKENS = 5  # the global conditioning: DINOv3's CLS token + its 4 register tokens
TIMESTEP_SCALE = 1000.0  # flow-matching t in [0, 1], passed to the model times 1000
INPUT_NAMES = ("x", "t", "cond_global", "cond_proj")
OUTPUT_NAMES = ("velocity",)

# A module of the checkout's own classes (the flow model, its blocks, attentions, norms): its attributes are the
# checkout's, read by name, and no stub describes them (mypy reads any nn.Module attribute as `Tensor | Module`).
Host = Any


class FlowLoadError(RuntimeError):
    """The checkout does not hold the flow model the way this module expects; the message says what."""


@dataclass(frozen=True)
class FlowSource:
    """Where a loaded flow model came from, and the pieces of its own code `patches` and `rewrites` act on."""

    root: Path
    stand_in: bool
    config_file: Path
    args: dict[str, Any]
    rope_class: type
    set_backend: Callable[[str], None]
    backend_globals: dict[str, Any] = field(repr=False)
    attention_class: type  # the model's own MultiHeadAttention (what `rewrites.glued_heads` patches)

    def __deepcopy__(self, memo: dict) -> FlowSource:
        return self  # a copied model keeps pointing at the same loaded code

    @property
    def backend(self) -> str:
        return str(self.backend_globals["BACKEND"])

    @property
    def label(self) -> str:
        return "stand-in" if self.stand_in else "real checkout"


_LOADED_ROPE: list[type] = []  # every RoPE class a load_flow_model call used, stand-in or checkout


def loaded_rope_classes() -> list[type]:
    """Every RoPE class a `load_flow_model` call has used so far (what `patches.real_rope` patches without a model)."""
    return list(_LOADED_ROPE)


# ------------------------------------------------------------------------------------------------ loading


def _package_path(root: Path) -> str:
    return str((root / PACKAGE).resolve())


def _import_flow_package(root: Path) -> tuple[ModuleType, ModuleType, ModuleType]:
    """Import the flow model, RoPE and attention-config modules of the checkout at `root`, without running
    `pixal3d/__init__.py`: a bare package module whose `__path__` points at the checkout stands in for it.
    A `pixal3d` loaded earlier from another root is dropped from sys.modules first (its objects live on)."""
    current = sys.modules.get(PACKAGE)
    if current is not None and list(getattr(current, "__path__", [])) != [_package_path(root)]:
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        current = None
    if current is None:
        package = ModuleType(PACKAGE, f"{PACKAGE} from {root} (its __init__ not run)")
        package.__path__ = [_package_path(root)]
        package.__package__ = PACKAGE
        sys.modules[PACKAGE] = package
    try:
        with standins.on_sys_path(root), contextlib.redirect_stdout(io.StringIO()):  # backend banners
            flow, rope, config = (
                importlib.import_module(m) for m in (FLOW_MODULE, ROPE_MODULE, ATTENTION_CONFIG_MODULE)
            )
            return flow, rope, config
    except ImportError as exc:
        raise FlowLoadError(f"host_root {root}: importing {FLOW_MODULE} failed: {type(exc).__name__}: {exc}") from exc


def _root(host_root: str | Path | None) -> Path:
    root = Path(host_root) if host_root else standins.HOST_ROOT
    if not (root / PACKAGE / "models" / "sparse_structure_flow.py").is_file():
        raise FileNotFoundError(f"host_root: {root} holds no {PACKAGE}/models/sparse_structure_flow.py")
    return root


def _read_config(path: Path) -> dict[str, Any]:
    try:
        model = json.loads(path.read_text())["models"]["denoiser"]
        name, args = model["name"], dict(model["args"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FlowLoadError(f"{path}: no models.denoiser.{{name, args}} entry ({type(exc).__name__}: {exc})") from exc
    if name != FLOW_CLASS:
        raise FlowLoadError(f"{path}: the denoiser is {name!r}, not {FLOW_CLASS}")
    return args


def randomise(model: nn.Module, seed: int = 0) -> nn.Module:
    """Redraw every parameter from N(0, 1/fan_in) (seeded, the global RNG left alone), so that no path of the
    graph is multiplied by an initial zero and every output depends on every op."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            fan_in = param.shape[-1] if param.dim() else 1
            param.copy_(torch.randn(param.shape, generator=generator) / math.sqrt(fan_in))
    return model


def load_flow_model(
    host_root: str | Path | None = None, *, blocks: int = 2, channels: int = 384, seed: int = 0
) -> nn.Module:
    """Pixal3D's sparse-structure flow model, `blocks` deep and `channels` wide, random weights, eval mode.

    `host_root`: a Pixal3D checkout (its own class and its own config file are used, overriding only
    `model_channels` and `num_blocks`); None or "" builds the stand-in laid out like one. The model's
    attention backend is set to `sdpa` (upstream's default, flash_attn, needs a GPU). `model.weft_source`
    says where it came from.
    """
    for name, value in (("blocks", blocks), ("channels", channels)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    root = _root(host_root)
    config_file = root / FLOW_CONFIG
    args = {**_read_config(config_file), "model_channels": channels, "num_blocks": blocks}
    heads = int(args.get("num_heads") or channels // int(args.get("num_head_channels", 64)))
    if channels % heads or (channels // heads) % 2:
        raise ValueError(f"channels: {channels} must split over {heads} heads into an even head dim")
    flow, rope, attention_config = _import_flow_package(root)
    attention_config.set_backend(CPU_BACKEND)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            model = getattr(flow, FLOW_CLASS)(**args)
    model = randomise(model.float().eval(), seed)
    stand_in = root.resolve() == standins.HOST_ROOT.resolve()
    if rope.RotaryPositionEmbedder not in _LOADED_ROPE:
        _LOADED_ROPE.append(rope.RotaryPositionEmbedder)
    host: Host = model
    host.weft_source = FlowSource(
        root,
        stand_in,
        config_file,
        args,
        rope.RotaryPositionEmbedder,
        attention_config.set_backend,
        attention_config.set_backend.__globals__,
        type(_first_block(model).self_attn),
    )
    return model


def config_args(host_root: str | Path | None = None) -> dict[str, Any]:
    """The flow model's constructor arguments as the checkout's (or stand-in's) config file writes them:
    the upstream width and depth (`model_channels`, `num_blocks`, `num_heads`, `mlp_ratio`) read, not typed."""
    return _read_config(_root(host_root) / FLOW_CONFIG)


def source_of(model: nn.Module) -> FlowSource:
    """The `FlowSource` `load_flow_model` attached (a TypeError for any other module)."""
    src = getattr(model, "weft_source", None)
    if not isinstance(src, FlowSource):
        raise TypeError(f"model: expected a flow model from load_flow_model, got {type(model).__name__}")
    return src


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@dataclass(frozen=True)
class LayerSize:
    """One linear layer of the model as the forward uses it: its weight shape [out, in], its parameters
    (weight and bias), the rows it multiplies (tokens x batch) and its multiply-accumulates per forward."""

    name: str
    weight_shape: tuple[int, int]
    parameters: int
    rows: int
    macs: int


def layer_sizes(model: nn.Module, inputs: Sequence[Any]) -> list[LayerSize]:
    """Every nn.Linear of `model` with the rows it saw in one forward on `inputs` (hooks record the input
    shapes; a layer the forward never calls is left out), largest parameter count first. The compiler
    places layers one by one, so the largest is the first size limit a device half meets."""
    seen: dict[str, int] = {}
    hooks = [
        mod.register_forward_hook(
            lambda m, args, out, name=name: seen.__setitem__(name, args[0].numel() // m.in_features)
        )
        for name, mod in model.named_modules()
        if isinstance(mod, nn.Linear)
    ]
    try:
        forward(model, inputs)
    finally:
        for hook in hooks:
            hook.remove()
    layers = dict(model.named_modules())
    rows = [
        LayerSize(
            name,
            (layers[name].out_features, layers[name].in_features),
            sum(p.numel() for p in layers[name].parameters()),
            count,
            count * layers[name].in_features * layers[name].out_features,
        )
        for name, count in seen.items()
    ]
    return sorted(rows, key=lambda r: (-r.parameters, -r.macs, r.name))


def _first_block(model: Host) -> nn.Module:
    return model.blocks[0]


def condition_channels(model: nn.Module) -> tuple[int, int]:
    """(global, proj) conditioning widths, read from the first block's own layers."""
    cross: Host = _first_block(model).cross_attn
    return cross.cross_attn_block.to_kv.in_features, cross.proj_linear.in_features


def example_inputs(
    model: Host, *, batch: int = 1, global_tokens: int = GLOBAL_TOKENS, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Seeded inputs in the forward's own signature: (x [B, C, R, R, R], t [B], (global [B, L, Cg],
    proj [B, R^3, Cp])), t drawn in [0, 1000) as the flow-matching sampler passes it."""
    if batch < 1 or global_tokens < 1:
        raise ValueError(f"batch and global_tokens must be positive, got {batch}, {global_tokens}")
    generator = torch.Generator().manual_seed(seed)
    res, cin = int(model.resolution), int(model.in_channels)
    c_global, c_proj = condition_channels(model)
    x = torch.randn(batch, cin, res, res, res, generator=generator)
    t = torch.rand(batch, generator=generator) * TIMESTEP_SCALE
    cond = (
        torch.randn(batch, global_tokens, c_global, generator=generator),
        torch.randn(batch, res**3, c_proj, generator=generator),
    )
    return x, t, cond


def flat(inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """(x, t, (global, proj)) -> (x, t, global, proj): the graph takes tensors only."""
    x, t, (c_global, c_proj) = inputs
    return x, t, c_global, c_proj


class FlatInputs(nn.Module):
    """`model(x, t, (global, proj))` with the conditioning pair as two tensor arguments."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        return self.model(x, t, (cond_global, cond_proj))


def forward(model: nn.Module, inputs: Sequence[Any]) -> torch.Tensor:
    with torch.no_grad():
        return model(*inputs)
