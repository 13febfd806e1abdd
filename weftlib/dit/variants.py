"""The exact variants of one DiT block: which graphs are built beside the faithful one (`variant_plan`), how
each is built from the model (`build_variant`: a layout from `layouts`, a subset of CHANGES), the patches it
runs under, and its export to a named file.

A variant is offered beside the faithful graph, never instead of it (RFD 1129's procedure: an exact rewrite is
an alternative, not a substitution); each is checked against the original model's output before export
(`evaluation`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from weftlib.gate.run_graphs import GraphIdentity
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import export as onnx_export

from .layouts import LAYOUTS, HostTimestep, TokensLayout, from_tokens, host_timestep_features, image_layout, to_tokens
from .model import CPU_BACKEND, INPUT_NAMES, OUTPUT_NAMES, FlatInputs, Host, flat
from .patches import attention_backend, real_rope
from .rewrites import MatMulRMSNorm, glued_heads, rope_tables


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


def identity(variant: Variant, prefix: str = "dit") -> GraphIdentity:
    """What a DiT graph is: the faithful model (`variant_plan`'s first, the model's own layout, no change), or an
    exact variant of the faithful graph exported with the same `prefix`."""
    geometry = f"{int(variant.flow.resolution)}^3"
    if variant.layout == "model" and not variant.changes:
        return GraphIdentity(GraphNotebook.DIT, GraphKind.FAITHFUL, geometry=geometry)
    of = Path(onnx_name(variant_name("model", ()), prefix)).stem
    return GraphIdentity(GraphNotebook.DIT, GraphKind.VARIANT, geometry=geometry, variant_of=of)


def export_variant(
    variant: Variant, folder: str | Path, *, prefix: str = "dit", opset: int = 17, atol: float = 1e-4
) -> onnx_export.ExportReport:
    """Export one variant under its patches with `weftlib.onnx_core.export` to `<folder>/<onnx_name>`, its
    identity (`identity`) kept in its parity file."""
    with variant.patches():
        return onnx_export.export(
            variant.module,
            variant.args,
            Path(folder) / onnx_name(variant.name, prefix),
            input_names=list(INPUT_NAMES),
            output_names=list(OUTPUT_NAMES),
            opset=opset,
            atol=atol,
            identity=identity(variant, prefix).as_json(),
        )
