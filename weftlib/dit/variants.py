"""The device layout and the exact changes for one DiT block, and what each variant leaves outside DEVICE_OPS.

A variant is offered beside the faithful graph, never instead of it: each exact change removes one op family
(RFD 1129's procedure: an exact rewrite is an alternative, not a substitution), and each is checked against
the original model's output before it is exported.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from weftlib.onnx_core import export as onnx_export

from .model import CPU_BACKEND, INPUT_NAMES, OUTPUT_NAMES, FlatInputs, attention_backend, flat, max_abs_diff, real_rope


class DeviceLayout(nn.Module):
    """The flow model with every graph input image-shaped (rank 4, NCHW), the parser's expectation:
    x [B, C, R, R*R] (the grid's last two axes merged), t [B, 1, 1, 1] (or the host's timestep embedding
    [B, F, 1, 1]), global [B, Cg, 1, L], proj [B, Cp, R, R*R]; the output [B, C, R, R*R]. Only reshapes and
    transposes are added, so the arithmetic is the model's own."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.resolution, self.out_channels = int(model.resolution), int(model.out_channels)

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond_global: torch.Tensor, cond_proj: torch.Tensor
    ) -> torch.Tensor:
        r, batch = self.resolution, x.shape[0]
        volume = x.reshape(batch, x.shape[1], r, r, r)
        steps = t.reshape(batch) if t.shape[1] == 1 else t.reshape(batch, -1)  # t [B], or its embedding [B, F]
        tokens = tuple(c.flatten(2).transpose(1, 2) for c in (cond_global, cond_proj))
        return self.model(volume, steps, tokens).reshape(batch, self.out_channels, r, r * r)


def to_device_layout(inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """The model's inputs rearranged for `DeviceLayout` (no values change)."""
    x, t, (c_global, c_proj) = inputs
    batch, r = x.shape[0], x.shape[-1]
    return (
        x.reshape(batch, x.shape[1], r, r * r),
        t.reshape(batch, -1, 1, 1),
        c_global.transpose(1, 2).unsqueeze(2),
        c_proj.transpose(1, 2).reshape(batch, -1, r, r * r),
    )


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
    layout = (
        [("device_layout", ())]
        + [(f"device_layout+{c}", (c,)) for c in CHANGES]
        + [("device_layout+all", tuple(CHANGES))]
    )
    return [_variant(model, inputs, "faithful", (), False)] + [
        _variant(model, inputs, name, changes, True) for name, changes in layout
    ]


def export_variant(
    variant: Variant, folder: str | Path, *, prefix: str = "dit", opset: int = 17, atol: float = 1e-4
) -> onnx_export.ExportReport:
    """Export one variant under real RoPE with `weftlib.onnx_export` to `<folder>/<prefix>_<name>.onnx`."""
    path = Path(folder) / f"{prefix}_{variant.name.replace('+', '__')}.onnx"
    with real_rope(variant.flow), attention_backend(variant.flow, variant.backend):
        return onnx_export.export(
            variant.module,
            variant.args,
            path,
            input_names=list(INPUT_NAMES),
            output_names=list(OUTPUT_NAMES),
            opset=opset,
            atol=atol,
        )


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
    names = sorted({op for inv in inventories.values() for op in inv}, key=lambda op: (op in allowed, op))
    return [
        {"op": op, "in DEVICE_OPS": op in allowed, **{g: inv.get(op, 0) for g, inv in inventories.items()}}
        for op in names
    ]


# ------------------------------------------------------------------------------------------ the pipeline

# Published figures for the same instance (2 blocks x 384 channels, random weights, real-valued RoPE):
# weftspun/request-for-discussion, RFD 1154 details, "The export, measured" and "Real-valued RoPE".
RFD_1154 = {
    "parameters": "8.44 M",
    "nodes": 544,
    "distinct_ops": 28,
    "outside_device_ops": ["Cos", "ReduceL2", "Sin"],
    "torchscript": "aten::view_as_complex is not supported",
    "dynamo": "DispatchError on aten.unsqueeze: no decomposition for complex-valued input",
}


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


def evaluate(
    variants: Sequence[Variant],
    folder: str | Path,
    reference: torch.Tensor,
    ops: Any,
    *,
    opset: int = 17,
    atol: float = 1e-4,
) -> list[VariantResult]:
    """Export each variant into `folder`, compare its torch output with `reference`, run the device gate
    (`ops`: a `weftlib.gate.DeviceOps`) and read its input ranks."""
    from weftlib import gate

    results = []
    for variant in variants:
        diff = max_abs_diff(variant.output(), reference)
        report = export_variant(variant, folder, opset=opset, atol=atol)
        results.append(
            VariantResult(
                variant.name,
                variant.changes,
                diff,
                report,
                gate.device_gate(report.path, ops),
                input_ranks(report.path),
            )
        )
    return results


def outside_table(result: VariantResult, ops: Any) -> list[dict[str, Any]]:
    """Each op of the graph outside DEVICE_OPS: count, listing (unlisted or known blocker, with its reason),
    the evidence recorded for it, and the torch modules its nodes come from."""
    from weftlib import gate

    evidence = {row["op"]: row for row in gate.evidence_table(ops)}
    origins = op_origins(result.report.path, result.outside)
    return [
        {
            "op": op,
            "count": use.count,
            "listed": ops.status(op),
            "reason": use.blocker,
            "evidence": evidence.get(op, {}).get("sources", "") or "none recorded",
            "from": ", ".join(origins[op]),
        }
        for op, use in sorted(result.verdict.outside.items())
    ]
