"""One DiT block of Pixal3D's sparse-structure flow model, as RFD 1129 asks: the smallest graph that carries
the question of which operators the device half needs.

- `load_flow_model` builds `SparseStructureFlowModel` from a Pixal3D checkout (its own class, its own config
  file, only width and depth overridden) or from the stand-in laid out like one (`standins.HOST_ROOT`).
  The package's `__init__` is never run: upstream it imports pipelines, renderers and the image feature
  extractor (transformers, PIL, CUDA-only code). The attention backend is set to one that runs on CPU.
- `try_exports` runs torch's two exporters on the model as written and keeps each refusal as data.
- `real_rope` patches the model's own RoPE to real arithmetic; `exact_variants` builds the device layout
  (every input rank 4) and the exact changes that remove one op family each; `export_variant` exports one.

Random weights: operator coverage does not depend on weight values, but zero-initialised layers (upstream's
'scaled' init zeroes the output layer and the modulation) would make every output 0 and every equality check
vacuous, so every parameter is redrawn from a seeded normal distribution.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from . import onnx_export, standins

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


class FlowLoadError(RuntimeError):
    """The checkout does not hold the flow model the way this module expects; the message says what."""


@dataclass(frozen=True)
class FlowSource:
    """Where a loaded flow model came from, and the pieces of its own code the patches below act on."""

    root: Path
    stand_in: bool
    config_file: Path
    args: dict[str, Any]
    rope_class: type
    set_backend: Callable[[str], None]
    backend_globals: dict[str, Any] = field(repr=False)

    def __deepcopy__(self, memo: dict) -> FlowSource:
        return self  # a copied model keeps pointing at the same loaded code

    @property
    def backend(self) -> str:
        return str(self.backend_globals["BACKEND"])

    @property
    def label(self) -> str:
        return "stand-in" if self.stand_in else "real checkout"


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
            return tuple(importlib.import_module(m) for m in (FLOW_MODULE, ROPE_MODULE, ATTENTION_CONFIG_MODULE))
    except ImportError as exc:
        raise FlowLoadError(f"host_root {root}: importing {FLOW_MODULE} failed: {type(exc).__name__}: {exc}") \
            from exc


def _read_config(path: Path) -> dict[str, Any]:
    try:
        model = json.loads(path.read_text())["models"]["denoiser"]
        name, args = model["name"], dict(model["args"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FlowLoadError(f"{path}: no models.denoiser.{{name, args}} entry ({type(exc).__name__}: {exc})") \
            from exc
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


def load_flow_model(host_root: str | Path | None = None, *, blocks: int = 2, channels: int = 384,
                    seed: int = 0) -> nn.Module:
    """Pixal3D's sparse-structure flow model, `blocks` deep and `channels` wide, random weights, eval mode.

    `host_root`: a Pixal3D checkout (its own class and its own config file are used, overriding only
    `model_channels` and `num_blocks`); None or "" builds the stand-in laid out like one. The model's
    attention backend is set to `sdpa` (upstream's default, flash_attn, needs a GPU). `model.weft_source`
    says where it came from.
    """
    for name, value in (("blocks", blocks), ("channels", channels)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    root = Path(host_root) if host_root else standins.HOST_ROOT
    if not (root / PACKAGE / "models" / "sparse_structure_flow.py").is_file():
        raise FileNotFoundError(f"host_root: {root} holds no {PACKAGE}/models/sparse_structure_flow.py")
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
    model.weft_source = FlowSource(root, stand_in, config_file, args, rope.RotaryPositionEmbedder,
                                   attention_config.set_backend, attention_config.set_backend.__globals__)
    return model


def source_of(model: nn.Module) -> FlowSource:
    """The `FlowSource` `load_flow_model` attached (a TypeError for any other module)."""
    src = getattr(model, "weft_source", None)
    if not isinstance(src, FlowSource):
        raise TypeError(f"model: expected a flow model from load_flow_model, got {type(model).__name__}")
    return src


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _first_block(model: nn.Module) -> nn.Module:
    return model.blocks[0]


def condition_channels(model: nn.Module) -> tuple[int, int]:
    """(global, proj) conditioning widths, read from the first block's own layers."""
    cross = _first_block(model).cross_attn
    return cross.cross_attn_block.to_kv.in_features, cross.proj_linear.in_features


def example_inputs(model: nn.Module, *, batch: int = 1, global_tokens: int = GLOBAL_TOKENS,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Seeded inputs in the forward's own signature: (x [B, C, R, R, R], t [B], (global [B, L, Cg],
    proj [B, R^3, Cp])), t drawn in [0, 1000) as the flow-matching sampler passes it."""
    if batch < 1 or global_tokens < 1:
        raise ValueError(f"batch and global_tokens must be positive, got {batch}, {global_tokens}")
    generator = torch.Generator().manual_seed(seed)
    res, cin = int(model.resolution), int(model.in_channels)
    c_global, c_proj = condition_channels(model)
    x = torch.randn(batch, cin, res, res, res, generator=generator)
    t = torch.rand(batch, generator=generator) * TIMESTEP_SCALE
    cond = (torch.randn(batch, global_tokens, c_global, generator=generator),
            torch.randn(batch, res ** 3, c_proj, generator=generator))
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

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor,
                cond_proj: torch.Tensor) -> torch.Tensor:
        return self.model(x, t, (cond_global, cond_proj))


# ---------------------------------------------------------------------------------------- as written


@dataclass(frozen=True)
class ExportAttempt:
    exporter: str
    ok: bool
    error: str
    seconds: float


EXPORTERS = {"dynamo": True, "torchscript": False}


def try_exports(model: nn.Module, inputs: Sequence[Any], *, opset: int = 17) -> dict[str, ExportAttempt]:
    """Each exporter torch offers (dynamo, TorchScript) on the model exactly as written; a refusal is kept as
    its first error line (of the innermost cause), never raised."""
    module, args = FlatInputs(model).eval(), flat(inputs)
    attempts = {}
    for name, dynamo in EXPORTERS.items():
        ok, error, seconds = onnx_export.attempt(module, args, dynamo=dynamo, opset=opset)
        attempts[name] = ExportAttempt(name, ok, error, seconds)
    return attempts


# --------------------------------------------------------------------------------------------- real RoPE


def _rotate_real(x: torch.Tensor, phases: torch.Tensor, flip_sign: bool = False) -> torch.Tensor:
    """(a + ib)(cos t + i sin t) = (a cos t - b sin t) + i(a sin t + b cos t), on channel pairs, in reals.
    The phase table is read as its (cos, sin) pairs (the same numbers the complex version multiplies by)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    table = torch.view_as_real(phases) if phases.is_complex() else phases
    cos, sin = table[..., 0].unsqueeze(-2), table[..., 1].unsqueeze(-2)
    imag = a * sin - b * cos if flip_sign else a * sin + b * cos
    return torch.stack([a * cos - b * sin, imag], dim=-1).reshape(x.shape).to(x.dtype)


@contextlib.contextmanager
def real_rope(model: nn.Module | None = None, *, flip_sign: bool = False) -> Iterator[None]:
    """Within the block, the model's own RoPE (`RotaryPositionEmbedder.apply_rotary_embedding`, stand-in or
    checkout) rotates in real arithmetic; restored on exit. `model` None: every RoPE class loaded so far.
    `flip_sign` is the negative control: one sign wrong, so the output must change.

    Bit-identical to torch's complex product where its CPU kernel runs vectorised (it rounds ac, bd, ad, bc
    and then adds, as here): head dims of 16 or more (8+ channel pairs fill a vector). Below that its scalar
    path may fuse a multiply-add (FMA) and the last bit can move (measured: 2.4e-7 at head dim 8)."""
    classes = [source_of(model).rope_class] if model is not None else _loaded_rope_classes()
    if not classes:
        raise RuntimeError("real_rope: no flow model has been loaded, so there is no RoPE to patch")
    originals = [(cls, cls.__dict__["apply_rotary_embedding"]) for cls in classes]

    def rotate(x: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
        return _rotate_real(x, phases, flip_sign)

    try:
        for cls, _ in originals:
            cls.apply_rotary_embedding = staticmethod(rotate)
        yield
    finally:
        for cls, original in originals:
            cls.apply_rotary_embedding = original


_LOADED_ROPE: list[type] = []  # every RoPE class a load_flow_model call used, stand-in or checkout


def _loaded_rope_classes() -> list[type]:
    return list(_LOADED_ROPE)


@contextlib.contextmanager
def attention_backend(model: nn.Module, backend: str) -> Iterator[None]:
    """The model's own attention backend switch, set for the block and put back."""
    src = source_of(model)
    before = src.backend
    src.set_backend(backend)
    try:
        yield
    finally:
        src.set_backend(before)


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    return float((a.double() - b.double()).abs().max())


def forward(model: nn.Module, inputs: Sequence[Any]) -> torch.Tensor:
    with torch.no_grad():
        return model(*inputs)


# ---------------------------------------------------------------------------------- device layout + exact


class DeviceLayout(nn.Module):
    """The flow model with every graph input image-shaped (rank 4, NCHW), the parser's expectation:
    x [B, C, R, R*R] (the grid's last two axes merged), t [B, 1, 1, 1] (or the host's timestep embedding
    [B, F, 1, 1]), global [B, Cg, 1, L], proj [B, Cp, R, R*R]; the output [B, C, R, R*R]. Only reshapes and
    transposes are added, so the arithmetic is the model's own."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.resolution, self.out_channels = int(model.resolution), int(model.out_channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor,
                cond_proj: torch.Tensor) -> torch.Tensor:
        r, batch = self.resolution, x.shape[0]
        volume = x.reshape(batch, x.shape[1], r, r, r)
        steps = t.reshape(batch) if t.shape[1] == 1 else t.reshape(batch, -1)  # t [B], or its embedding [B, F]
        tokens = tuple(c.flatten(2).transpose(1, 2) for c in (cond_global, cond_proj))
        return self.model(volume, steps, tokens).reshape(batch, self.out_channels, r, r * r)


def to_device_layout(inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """The model's inputs rearranged for `DeviceLayout` (no values change)."""
    x, t, (c_global, c_proj) = inputs
    batch, r = x.shape[0], x.shape[-1]
    return (x.reshape(batch, x.shape[1], r, r * r), t.reshape(batch, -1, 1, 1),
            c_global.transpose(1, 2).unsqueeze(2), c_proj.transpose(1, 2).reshape(batch, -1, r, r * r))


def device_layout(model: nn.Module, inputs: Sequence[Any]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A module and its inputs, all rank 4, computing the same as `model(*inputs)` (output [B, C, R, R*R])."""
    return DeviceLayout(model).eval(), to_device_layout(inputs)


def input_ranks(path: str | Path) -> dict[str, int]:
    """Graph input name -> rank, for the ONNX file at `path` (initializers are not inputs)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    return {v.name: len(v.type.tensor_type.shape.dim) for v in proto.graph.input if v.name not in inits}


class HostTimestep(nn.Module):
    """The timestep embedder with its sinusoid moved to the host: it receives cos/sin(t f) already computed
    (the same function of t upstream calls) and applies only the MLP, so no Cos/Sin runs on the device."""

    def __init__(self, embedder: nn.Module) -> None:
        super().__init__()
        self.mlp = embedder.mlp

    def forward(self, t_freq: torch.Tensor) -> torch.Tensor:
        return self.mlp(t_freq)


def host_timestep_features(model: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """What `HostTimestep` expects in place of t: the model's own sinusoidal embedding of t."""
    embedder = model.t_embedder
    return embedder.timestep_embedding(t, embedder.frequency_embedding_size)


class MatMulRMSNorm(nn.Module):
    """The qk RMS norm x / max(||x||, eps) * gamma * sqrt(d) with ||x||^2 summed by a MatMul against ones
    instead of `F.normalize` (ReduceL2 + Expand in ONNX): the same arithmetic, only the summation order of
    the float additions may differ."""

    EPS = 1e-12  # F.normalize's default

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.gamma, self.scale = norm.gamma, norm.scale
        self.register_buffer("ones", torch.ones(norm.gamma.shape[-1], 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        norm = torch.sqrt((xf * xf) @ self.ones).clamp_min(self.EPS)
        return (xf / norm * self.gamma * self.scale).to(x.dtype)


def _replace_rms_norms(model: nn.Module) -> int:
    """Swap every per-head RMS norm (a module with `gamma` and `scale` whose class ends in RMSNorm)."""
    targets = [(name, mod) for name, mod in model.named_modules()
               if type(mod).__name__.endswith("RMSNorm") and hasattr(mod, "gamma") and hasattr(mod, "scale")]
    for name, mod in targets:
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, MatMulRMSNorm(mod))
    return len(targets)


CHANGES = {
    "host_timestep": "timestep embedding (cos/sin of t) computed on the host",
    "matmul_rms_norm": "qk RMS norm summed by MatMul instead of F.normalize",
    "naive_attention": "attention through the model's own 'naive' backend instead of sdpa",
}


@dataclass
class Variant:
    """One graph to export: a module, its example inputs, and what differs from the faithful model."""

    name: str
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    changes: tuple[str, ...]
    backend: str
    flow: nn.Module  # the flow model inside (for its RoPE and backend switch)
    rank4: bool

    def output(self) -> torch.Tensor:
        """The variant's output in the model's own layout [B, C, R, R, R], under real RoPE."""
        with real_rope(self.flow), attention_backend(self.flow, self.backend), torch.no_grad():
            out = self.module(*self.args)
        r = int(self.flow.resolution)
        return out.reshape(out.shape[0], out.shape[1], r, r, r)


def _variant(model: nn.Module, inputs: Sequence[Any], name: str, changes: Sequence[str], rank4: bool) -> Variant:
    unknown = set(changes) - set(CHANGES)
    if unknown:
        raise ValueError(f"changes: unknown {sorted(unknown)}; known: {sorted(CHANGES)}")
    flow = copy.deepcopy(model) if changes else model
    args = list(flat(inputs))
    if "host_timestep" in changes:
        args[1] = host_timestep_features(model, args[1])
        flow.t_embedder = HostTimestep(flow.t_embedder)
    if "matmul_rms_norm" in changes and not _replace_rms_norms(flow):
        raise ValueError("matmul_rms_norm: the model has no per-head RMS norm to replace")
    backend = "naive" if "naive_attention" in changes else CPU_BACKEND
    if rank4:
        x, t, c_global, c_proj = args
        module, laid = device_layout(flow, (x, t, (c_global, c_proj)))
        return Variant(name, module, laid, tuple(changes), backend, flow, True)
    return Variant(name, FlatInputs(flow).eval(), tuple(args), tuple(changes), backend, flow, False)


def exact_variants(model: nn.Module, inputs: Sequence[Any]) -> list[Variant]:
    """The faithful graph (inputs as the model takes them), the device layout (all inputs rank 4), then the
    device layout with each exact change alone and with all of them: which change removes which op."""
    layout = [("device_layout", ())] + [(f"device_layout+{c}", (c,)) for c in CHANGES] + \
        [("device_layout+all", tuple(CHANGES))]
    return [_variant(model, inputs, "faithful", (), False)] + \
        [_variant(model, inputs, name, changes, True) for name, changes in layout]


def export_variant(variant: Variant, folder: str | Path, *, prefix: str = "dit", opset: int = 17,
                   atol: float = 1e-4) -> onnx_export.ExportReport:
    """Export one variant under real RoPE with `weftlib.onnx_export` to `<folder>/<prefix>_<name>.onnx`."""
    path = Path(folder) / f"{prefix}_{variant.name.replace('+', '__')}.onnx"
    with real_rope(variant.flow), attention_backend(variant.flow, variant.backend):
        return onnx_export.export(variant.module, variant.args, path, input_names=list(INPUT_NAMES),
                                  output_names=list(OUTPUT_NAMES), opset=opset, atol=atol)


# ------------------------------------------------------------------------------------------------ tables


def op_origins(path: str | Path, ops: Sequence[str]) -> dict[str, list[str]]:
    """For each op, the torch modules its nodes were traced from (the exporter's `name_scopes` metadata),
    block indices folded to `*`, so one line says e.g. 'blocks.*.self_attn.q_rms_norm'."""
    import ast
    import re

    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    found: dict[str, set[str]] = {op: set() for op in ops}
    for node in proto.graph.node:
        if node.op_type not in found:
            continue
        meta = {p.key: p.value for p in node.metadata_props}
        try:
            scopes = ast.literal_eval(meta.get("pkg.torch.onnx.name_scopes", "[]"))
        except (ValueError, SyntaxError):
            scopes = []
        modules = [s for s in scopes[:-1] if s]
        where = modules[-1] if modules else "(top level)"
        where = re.sub(r"^(model\.)+", "", where)
        found[node.op_type].add(re.sub(r"\.\d+(?=\.|$)", ".*", where))
    return {op: sorted(s) for op, s in found.items()}


def op_table(inventories: dict[str, dict[str, int]], allowed: Sequence[str] | frozenset[str]) -> list[dict[str, Any]]:
    """op -> count per graph, with whether DEVICE_OPS lists it; ops outside DEVICE_OPS first."""
    names = sorted({op for inv in inventories.values() for op in inv},
                   key=lambda op: (op in allowed, op))
    return [{"op": op, "in DEVICE_OPS": op in allowed, **{g: inv.get(op, 0) for g, inv in inventories.items()}}
            for op in names]


# ------------------------------------------------------------------------------------------ the pipeline

# Published figures for the same instance (2 blocks x 384 channels, random weights, real-valued RoPE):
# weftspun/request-for-discussion, RFD 1154 details, "The export, measured" and "Real-valued RoPE".
RFD_1154 = {"parameters": "8.44 M", "nodes": 544, "distinct_ops": 28, "outside_device_ops": ["Cos", "ReduceL2", "Sin"],
            "torchscript": "aten::view_as_complex is not supported",
            "dynamo": "DispatchError on aten.unsqueeze: no decomposition for complex-valued input"}


@dataclass
class VariantResult:
    """One exported variant: its equality with the model as written, the export, the gate, the input ranks."""

    name: str
    changes: tuple[str, ...]
    max_abs_diff: float  # against the unpatched model's output (complex RoPE, sdpa), in torch
    report: onnx_export.ExportReport
    verdict: Any  # weftlib.gate.GateResult
    ranks: dict[str, int]

    @property
    def outside(self) -> list[str]:
        return sorted(self.verdict.outside)


def evaluate(variants: Sequence[Variant], folder: str | Path, reference: torch.Tensor, ops: Any, *,
             opset: int = 17, atol: float = 1e-4) -> list[VariantResult]:
    """Export each variant into `folder`, compare its torch output with `reference`, run the device gate
    (`ops`: a `weftlib.gate.DeviceOps`) and read its input ranks."""
    from . import gate

    results = []
    for variant in variants:
        diff = max_abs_diff(variant.output(), reference)
        report = export_variant(variant, folder, opset=opset, atol=atol)
        results.append(VariantResult(variant.name, variant.changes, diff, report,
                                     gate.device_gate(report.path, ops), input_ranks(report.path)))
    return results


def outside_table(result: VariantResult, ops: Any) -> list[dict[str, Any]]:
    """Each op of the graph outside DEVICE_OPS: count, listing (unlisted or known blocker, with its reason),
    the evidence recorded for it, and the torch modules its nodes come from."""
    from . import gate

    evidence = {row["op"]: row for row in gate.evidence_table(ops)}
    origins = op_origins(result.report.path, result.outside)
    return [{"op": op, "count": use.count, "listed": ops.status(op),
             "reason": use.blocker, "evidence": evidence.get(op, {}).get("sources", "") or "none recorded",
             "from": ", ".join(origins[op])}
            for op, use in sorted(result.verdict.outside.items())]
