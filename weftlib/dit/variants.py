"""The device layouts and the exact variants of one DiT block, and what each leaves outside DEVICE_OPS.

The layout is chosen from the public record: **tokens**. The attention block that DFC 5.3.0 translated,
compiled and ran took tokens [1, S, C] (rank 3, MatMul linears, the head Reshape glued to its Transpose);
the same attention with tokens laid along an image axis ([1, C, 1, S], the form an all-rank-4 layout gives
the conditioning) was refused on its head reshape and its softmax, and RFD 1154's "every input rank 4"
attempt at this very model crashed further into the parse. So x enters as tokens [B, R^3, C] (the forward's
own flatten to tokens done on the host, exactly), the conditioning stays [B, L, C] as the model takes it, t
goes through the host timestep, and the output leaves as tokens [B, R^3, C_out]. The old rank-4 image layout
(`ImageLayout`) stays only as the comparison.

A variant is offered beside the faithful graph, never instead of it (RFD 1129's procedure: an exact rewrite is
an alternative, not a substitution); each is checked against the original model's output before export.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from weftlib import console
from weftlib.workers import map_forked
from weftlib.onnx_core import export as onnx_export
from weftlib.onnx_core import compare, origins

from .model import (
    Host,
    CPU_BACKEND,
    INPUT_NAMES,
    OUTPUT_NAMES,
    FlatInputs,
    LayerSize,
    attention_backend,
    config_args,
    example_inputs,
    flat,
    forward,
    layer_sizes,
    load_flow_model,
    parameter_count,
    real_rope,
)
from .rewrites import MatMulRMSNorm, glued_heads, rope_tables

LAYOUTS = ("model", "image", "tokens")  # the forward's own inputs; the old rank-4 comparison; the device layout

# ------------------------------------------------------------------------------------------------ tokens


def to_tokens(x: torch.Tensor) -> torch.Tensor:
    """x [B, C, R, R, R] -> tokens [B, R^3, C]: the forward's own first step (`view`, `permute`), on the host."""
    return x.reshape(*x.shape[:2], -1).permute(0, 2, 1).contiguous()


def from_tokens(h: torch.Tensor, resolution: int) -> torch.Tensor:
    """tokens [B, R^3, C] -> [B, C, R, R, R]: the forward's own last step, on the host."""
    return h.permute(0, 2, 1).reshape(h.shape[0], h.shape[2], *[resolution] * 3).contiguous()


class TokensLayout(nn.Module):
    """The flow model from its input layer to its output layer, on tokens: x [B, R^3, C_in] in, velocity
    [B, R^3, C_out] out. The forward's flatten to tokens and its reshape back to the grid, pure data movement,
    are the only steps moved to the host (`to_tokens`, `from_tokens`); every layer between is the model's own
    module, called in the forward's order (input layer, timestep embedder, shared adaLN modulation, the blocks
    with the RoPE phase buffer, the final layer norm, the output layer)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        for name, expected in (("pe_mode", "rope"), ("image_attn_mode", "proj")):
            if getattr(model, name, expected) != expected:
                raise ValueError(f"TokensLayout: {name} {getattr(model, name)!r}; only {expected!r} is modelled")
        self.model = model

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        m: Host = self.model
        h = m.input_layer(x)
        t_emb = m.t_embedder(t)
        if hasattr(m, "adaLN_modulation"):  # share_mod: one modulation for every block
            t_emb = m.adaLN_modulation(t_emb)
        for block in m.blocks:
            h = block(h, t_emb, (cond_global, cond_proj), m.rope_phases)
        return m.out_layer(F.layer_norm(h, h.shape[-1:]))


# ------------------------------------------------------------------------------- the old rank-4 comparison


class ImageLayout(nn.Module):
    """The flow model with every graph input image-shaped (rank 4, NCHW), the layout the gate used to ask
    for, kept as the comparison: x [B, C, R, R*R], t [B, 1, 1, 1], global [B, Cg, 1, L] (tokens along an
    image axis, the form the record shows refused), proj [B, Cp, R, R*R]; the output [B, C, R, R*R].
    Only reshapes and transposes are added, so the arithmetic is the model's own."""

    def __init__(self, model: Host) -> None:
        super().__init__()
        self.model = model
        self.resolution, self.out_channels = int(model.resolution), int(model.out_channels)

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        r, batch = self.resolution, x.shape[0]
        volume = x.reshape(batch, x.shape[1], r, r, r)
        tokens = tuple(c.flatten(2).transpose(1, 2) for c in (cond_global, cond_proj))
        return self.model(volume, t.reshape(batch), tokens).reshape(batch, self.out_channels, r, r * r)


def to_image_layout(inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """The model's inputs rearranged for `ImageLayout` (no values change)."""
    x, t, (c_global, c_proj) = inputs
    batch, r = x.shape[0], x.shape[-1]
    return (
        x.reshape(batch, x.shape[1], r, r * r),
        t.reshape(batch, 1, 1, 1),
        c_global.transpose(1, 2).unsqueeze(2),
        c_proj.transpose(1, 2).reshape(batch, -1, r, r * r),
    )


def image_layout(model: nn.Module, inputs: Sequence[Any]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A module and its inputs, all rank 4, computing the same as `model(*inputs)` (output [B, C, R, R*R])."""
    return ImageLayout(model).eval(), to_image_layout(inputs)


def input_ranks(path: str | Path) -> dict[str, int]:
    """Graph input name -> rank, for the ONNX file at `path` (initializers are not inputs)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    return {v.name: len(v.type.tensor_type.shape.dim) for v in proto.graph.input if v.name not in inits}


# ---------------------------------------------------------------------------------------- host timestep

TIMESTEP_RANKS = (2, 3)  # [B, F] or [B, 1, F]: never rank 1, which the parser has no format for


class HostTimestep(nn.Module):
    """The timestep embedder with its sinusoid moved to the host: it receives cos/sin(t f) already computed
    (the same function of t upstream calls) and applies only the MLP, so no Cos/Sin of a run-time input runs
    on the device. The graph input is rank 2 [B, F] (the MLP's own Gemm) or rank 3 [B, 1, F] (a token row,
    flattened to [B, F] before the MLP); never the rank-1 t."""

    def __init__(self, embedder: Host, rank: int = 2) -> None:
        super().__init__()
        if rank not in TIMESTEP_RANKS:
            raise ValueError(f"rank: the host timestep's input is rank {TIMESTEP_RANKS}, got {rank!r}")
        self.mlp: nn.Module = embedder.mlp
        self.rank = rank

    def forward(self, t_freq: torch.Tensor) -> torch.Tensor:
        return self.mlp(t_freq.reshape(t_freq.shape[0], -1) if self.rank == 3 else t_freq)


def host_timestep_features(model: nn.Module, t: torch.Tensor, rank: int = 2) -> torch.Tensor:
    """What `HostTimestep` expects in place of t: the model's own sinusoidal embedding of t, [B, F] or
    [B, 1, F]."""
    if rank not in TIMESTEP_RANKS:
        raise ValueError(f"rank: the host timestep's input is rank {TIMESTEP_RANKS}, got {rank!r}")
    embedder: Host = model.t_embedder
    features = embedder.timestep_embedding(t, embedder.frequency_embedding_size)
    return features.unsqueeze(1) if rank == 3 else features


def _replace_rms_norms(model: nn.Module) -> int:
    """Swap every per-head RMS norm (a module with `gamma` and `scale` whose class ends in RMSNorm)."""
    targets = [
        (name, mod)
        for name, mod in model.named_modules()
        if type(mod).__name__.endswith("RMSNorm") and hasattr(mod, "gamma") and hasattr(mod, "scale")
    ]
    for name, mod in targets:
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, MatMulRMSNorm(mod))
    return len(targets)


# ------------------------------------------------------------------------------------------------ variants

CHANGES = {
    "host_timestep": "timestep sinusoid (Cos/Sin of t) on the host; t enters as its features, rank 2 or 3",
    "glued_heads": "q/k/v as channel Slices, per-head RMS norm and RoPE on tokens [B, L, C], then the head "
    "Reshape directly followed by its Transpose",
    "rope_tables": "RoPE as x * cos + (x @ P) * sin with constant tables and a signed pair-swap P",
    "matmul_rms_norm": "per-head RMS norm summed by MatMul instead of F.normalize (ReduceL2 + Expand)",
    "naive_attention": "attention through the model's own 'naive' backend (MatMul, Softmax) instead of sdpa",
}


@dataclass
class Variant:
    """One graph to export: a module, its example inputs, its layout, and what differs from the faithful model."""

    name: str
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    changes: tuple[str, ...]
    backend: str
    flow: Host  # the flow model inside (for its RoPE, attention class and backend switch)
    layout: str

    @contextlib.contextmanager
    def patches(self) -> Iterator[None]:
        """The patches of the model's own code this variant runs and exports under: real RoPE always (ONNX has
        no complex type), its attention backend, and the rewrites among its changes."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(real_rope(self.flow))
            stack.enter_context(attention_backend(self.flow, self.backend))
            if "rope_tables" in self.changes:
                stack.enter_context(rope_tables(self.flow))
            if "glued_heads" in self.changes:
                form = "tables" if "rope_tables" in self.changes else "pairs"
                stack.enter_context(glued_heads(self.flow, rope=form))
            yield

    def output(self) -> torch.Tensor:
        """The variant's output in the model's own layout [B, C, R, R, R], under its patches."""
        with self.patches(), torch.no_grad():
            out = self.module(*self.args)
        r = int(self.flow.resolution)
        if self.layout == "tokens":
            return from_tokens(out, r)
        return out.reshape(out.shape[0], out.shape[1], r, r, r)


def build_variant(
    model: nn.Module,
    inputs: Sequence[Any],
    layout: str,
    changes: Sequence[str] = (),
    *,
    name: str | None = None,
    timestep_rank: int = 2,
) -> Variant:
    """One variant of `model` on its example `inputs` (the forward's own signature): `layout` one of LAYOUTS,
    `changes` a subset of CHANGES (the model is copied first, so the original is never modified)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    unknown = set(changes) - set(CHANGES)
    if unknown:
        raise ValueError(f"changes: unknown {sorted(unknown)}; known: {sorted(CHANGES)}")
    if changes and layout != "tokens":
        raise ValueError(f"changes: offered on the tokens layout only, not on {layout!r}")
    name = name or variant_name(layout, changes)
    flow: Host = copy.deepcopy(model) if changes else model
    x, t, c_global, c_proj = flat(inputs)
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    if "host_timestep" in changes:
        t = host_timestep_features(model, t, timestep_rank)
        flow.t_embedder = HostTimestep(flow.t_embedder, timestep_rank)
    if "matmul_rms_norm" in changes and not _replace_rms_norms(flow):
        raise ValueError("matmul_rms_norm: the model has no per-head RMS norm to replace")
    backend = "naive" if "naive_attention" in changes else CPU_BACKEND
    if layout == "model":
        module, args = FlatInputs(flow).eval(), (x, t, c_global, c_proj)
    elif layout == "image":
        module, args = image_layout(flow, (x, t, (c_global, c_proj)))
    else:
        module, args = TokensLayout(flow).eval(), (to_tokens(x), t, c_global, c_proj)
    return Variant(name, module, args, tuple(changes), backend, flow, layout)


def variant_plan() -> list[tuple[str, tuple[str, ...]]]:
    """(layout, changes) of every variant `exact_variants` builds, in order: the faithful graph, the old image
    layout (the comparison), the tokens layout alone, with each exact change alone, and with all of them."""
    return (
        [("model", ()), ("image", ()), ("tokens", ())]
        + [("tokens", (c,)) for c in CHANGES]
        + [("tokens", tuple(CHANGES))]
    )


def variant_name(layout: str, changes: Sequence[str]) -> str:
    """faithful, image_layout, tokens, tokens+<change>, tokens+all (every change)."""
    base = {"model": "faithful", "image": "image_layout", "tokens": "tokens"}[layout]
    if tuple(changes) == tuple(CHANGES):
        return f"{base}+all"
    return "+".join([base, *changes])


def exact_variants(
    model: nn.Module, inputs: Sequence[Any], *, names: Sequence[str] | None = None, timestep_rank: int = 2
) -> list[Variant]:
    """The variants of `variant_plan`, or only those `names` (e.g. the faithful graph and tokens+all at the
    upstream width): which change removes which op, and which pattern."""
    plan = [(variant_name(layout, changes), layout, changes) for layout, changes in variant_plan()]
    if names is not None:
        unknown = set(names) - {n for n, _, _ in plan}
        if unknown:
            raise ValueError(f"names: unknown variants {sorted(unknown)}; known: {[n for n, _, _ in plan]}")
        plan = [p for p in plan if p[0] in names]
    return [
        build_variant(model, inputs, layout, changes, name=name, timestep_rank=timestep_rank)
        for name, layout, changes in plan
    ]


def onnx_name(variant_name: str, prefix: str = "dit") -> str:
    """The file a variant is exported to: `<prefix>_<name>.onnx`, '+' written '__' (tokens+all ->
    dit_tokens__all.onnx)."""
    return f"{prefix}_{variant_name.replace('+', '__')}.onnx"


def export_variant(
    variant: Variant, folder: str | Path, *, prefix: str = "dit", opset: int = 17, atol: float = 1e-4
) -> onnx_export.ExportReport:
    """Export one variant under its patches with `weftlib.onnx_core.export` to `<folder>/<onnx_name>`."""
    with variant.patches():
        return onnx_export.export(
            variant.module,
            variant.args,
            Path(folder) / onnx_name(variant.name, prefix),
            input_names=list(INPUT_NAMES),
            output_names=list(OUTPUT_NAMES),
            opset=opset,
            atol=atol,
        )


# ------------------------------------------------------------------------------------------------ tables


def _origin(node: Any) -> str:
    """The torch module a node was traced from (`onnx_core.origins.module_of`), the top level without one."""
    return origins.module_of(node) or origins.TOP_LEVEL


op_origins = origins.op_origins  # for each op, the torch modules its nodes were traced from


def head_splits(path: str | Path, heads: int, head_dim: int) -> list[dict[str, Any]]:
    """Every Reshape of the graph that splits the channel axis into [..., heads, head_dim] (the head split,
    [B, L, C] -> [B, L, H, d], or upstream's fused split [B, L, 3C] -> [B, L, 3, H, d]), with the ops that read its output and
    whether they are all Transposes (the pair DFC 5.3.0 fuses into a format conversion). A description of
    the graph for the tables; the verdict on the pattern is the device gate's."""
    import onnx

    proto = onnx.shape_inference.infer_shapes(onnx.load(str(path), load_external_data=False))
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*proto.graph.value_info, *proto.graph.input, *proto.graph.output]
    }
    readers: dict[str, list[str]] = {}
    for node in proto.graph.node:
        for name in dict.fromkeys(node.input):  # a node reading one tensor twice reads it once
            readers.setdefault(name, []).append(node.op_type)
    rows = []
    for node in proto.graph.node:
        if node.op_type != "Reshape":
            continue
        before, out = shapes.get(node.input[0], []), shapes.get(node.output[0], [])
        lead = len(before) - 1
        splits_channels = (
            0 < lead < len(out) - 1 and out[:lead] == before[:lead] and math.prod(out[lead:]) == before[-1]
        )
        if splits_channels and out[-2:] == [heads, head_dim]:
            after = readers.get(node.output[0], [])
            rows.append(
                {
                    "reshape": node.name,
                    "from": _origin(node),
                    "input": shapes.get(node.input[0], []),
                    "output": out,
                    "read by": ", ".join(sorted(after)),
                    "glued to its Transpose": bool(after) and set(after) == {"Transpose"},
                }
            )
    return rows


# ------------------------------------------------------------------------------------------ the pipeline


@dataclass
class VariantResult:
    """One exported variant: its equality with the model as written, the export, the gate, the input ranks."""

    name: str
    changes: tuple[str, ...]
    layout: str
    max_abs_diff: float  # against the unpatched model's output (complex RoPE, sdpa), in torch
    report: onnx_export.ExportReport
    verdict: Any  # weftlib.gate.GateResult
    ranks: dict[str, int]

    @property
    def outside(self) -> list[str]:
        return sorted(self.verdict.outside)


def evaluate(
    variants: Sequence[Variant],
    folder: str | Path,
    reference: torch.Tensor,
    ops: Any,
    *,
    opset: int = 17,
    atol: float = 1e-4,
    prefix: str = "dit",
    workers: int | None = None,
) -> list[VariantResult]:
    """Export each variant into `folder` (files `onnx_name(variant.name, prefix)`), compare its torch output
    with `reference`, run the device gate (`ops`: a `weftlib.gate.DeviceOps`) and read its input ranks; the
    variants run `workers` at a time (`weftlib.workers.map_forked`; default: one per CPU), each export being
    mostly single-threaded tracing."""
    from weftlib import gate

    # here, on the reference's threads: a variant that only moves values must equal it bit for bit, and a
    # worker's single thread would sum the same products in another order
    diffs = {v.name: compare.max_abs_diff([v.output()], [reference], strict=True) for v in variants}

    def one(variant: Variant) -> VariantResult:
        report = export_variant(variant, folder, prefix=prefix, opset=opset, atol=atol)
        return VariantResult(
            variant.name,
            variant.changes,
            variant.layout,
            diffs[variant.name],
            report,
            gate.device_gate(report.path, ops),
            input_ranks(report.path),
        )

    bar = console.progress(None, total=len(variants), desc="DiT variants", unit="graph")
    results = map_forked(one, list(variants), workers, progress=lambda _: bar.update(1))
    bar.close()
    return results


# ------------------------------------------------------------------------------------- upstream width

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
