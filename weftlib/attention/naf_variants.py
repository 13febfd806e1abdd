"""NAF's upsampler and its attention layer, faithful and with the exact rewrites of `naf_rewrites`: proven
equal to real natten on the module itself, exported, and described for the device gate.

The same code runs on the stand-in and on a valeoai/NAF checkout: everything it needs is found in the
model by behaviour (`naf.find_attention_layer`, `naf_rewrites.module_inputs`), nothing by a stand-in's
internals. Two geometries are involved: natten's own CPU path (Flex, dense scores) holds only small grids,
so equality with natten is shown at a small one (`natten_equality`); the export runs at NAF's geometry and
is compared there with a formulation section 1 proved equal to natten (`export_variants`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from weftlib import console
from weftlib.gate.run_graphs import GraphIdentity
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import compare, origins
from weftlib.onnx_core import export as onnx_export

from . import naf, naf_records
from . import naf_rewrites as rewrites
from .swap import swap_natten

UPSAMPLER = "upsampler"
LAYER = "attention layer"
# Each variant is its changes (`naf_rewrites.CHANGES`); `device` computes the attention on images as well
UPSAMPLER_VARIANTS: dict[str, tuple[str, ...]] = {
    "faithful": (),
    "groupnorm": ("groupnorm",),
    "rope": ("rope",),
    "resize": ("resize",),
    "all": ("groupnorm", "rope", "resize"),
    "device": ("groupnorm", "rope", "image"),
}
LAYER_VARIANTS: dict[str, tuple[str, ...]] = {"faithful": (), "resize": ("resize",), "image": ("image",)}
# The op families NAF brings beside its attention (measured on valeoai/NAF, tests/fixtures/naf_real_ops.json),
# by the rewrite that removes them
FAMILIES: dict[str, tuple[str, ...]] = {
    "groupnorm": ("InstanceNormalization", "CastLike"),
    "rope": ("Cos", "Sin", "Tile", "Neg"),
    "resize": ("GatherND",),
}
ON_IMAGES = ("device", "image")  # the variants computing the attention on images, in no formulation of natten's
CONTROL_METHOD = "shift"  # a control's k/v are no longer nearest-upsampled, which 'lowres' itself refuses
PREPARED_WITH = "lowres"  # natten's call in `prepare`'s one forward pass (exact for NAF's call, and cheap)


@dataclass
class Prepared:
    """One NAF model at one geometry, with what the variants need, found in one forward pass."""

    fixed: naf.FixedSize
    image: torch.Tensor
    features: torch.Tensor
    layer: naf.AttentionLayer
    rope_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    ran: dict[str, torch.Tensor] = field(default_factory=dict)
    """The faithful upsampler's and attention layer's outputs (by graph) from that pass, natten as `PREPARED_WITH`:
    `export_variants` takes each once instead of running the graph again (seconds at NAF's 512²)."""

    @property
    def size(self) -> tuple[int, int]:
        return self.fixed.output_size

    def upsampler(self, changes: Sequence[str] = (), control: str | None = None) -> nn.Module:
        """The whole upsampler with `changes` (a copy; the loaded model is never modified)."""
        if not changes:
            return self.fixed
        return rewrites.rewritten(
            self.fixed,
            changes,
            layer=self.layer.name,
            heads=self.layer.heads,
            kernel_size=self.layer.kernel_size,
            scale=self.layer.call.get("scale"),
            rope_sizes=self.rope_sizes,
            control=control,
        ).eval()

    def attention_layer(self, changes: Sequence[str] = (), control: str | None = None) -> nn.Module:
        """The attention layer alone, called on (q, k, v), with `changes` ('resize' or 'image')."""
        if set(changes) - {"resize", "image"}:
            raise ValueError(f"changes: the attention layer takes 'resize' or 'image', got {list(changes)}")
        if "image" in changes:
            call = self.layer.call
            module: nn.Module = rewrites.ImageLayoutAttention(
                self.layer.heads, self.layer.kernel_size, call.get("scale"), control=control == "image"
            )
        elif "resize" in changes:
            module = rewrites.NearestAsResize(self.layer.module, control=control == "resize")
        else:
            module = self.layer.module
        return naf.Layer(module, self.layer.name).eval()

    @property
    def layer_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.layer.args[:3]


def prepare(model: nn.Module, output_size: tuple[int, int], image: torch.Tensor, features: torch.Tensor) -> Prepared:
    """`model` (a hub entry) at `output_size`: its attention layer, its RoPE modules' input shapes and the two
    faithful graphs' outputs, all from one forward pass with natten swapped for `PREPARED_WITH`."""
    fixed = naf.FixedSize(model, tuple(output_size)).eval()
    outputs: dict[str, Any] = {}
    with rewrites.inputs_seen(fixed, rewrites.is_rope) as sizes:
        layer = naf.find_attention_layer(fixed, image, features, method=PREPARED_WITH, outputs=outputs)
    ran = {
        g: outputs[k] for g, k in ((UPSAMPLER, "model"), (LAYER, "layer")) if isinstance(outputs.get(k), torch.Tensor)
    }
    return Prepared(fixed, image, features, layer, dict(sizes), ran)


def prepare_at(model: nn.Module, low: int, ratio: int, channels: int, *, seed: int = 0) -> Prepared:
    """`prepare` on seeded random inputs: an image at `low * ratio` squared (uniform in [0, 1)) and
    `channels` features on a `low` x `low` grid (standard normal), NAF's dilation being `ratio`."""
    size = (low * ratio, low * ratio)
    image = torch.rand(1, 3, *size, generator=torch.Generator().manual_seed(seed))
    features = torch.randn(1, channels, low, low, generator=torch.Generator().manual_seed(seed + 1))
    return prepare(model, size, image, features)


def reduced(prepared: Prepared, *, seed: int = 7) -> Prepared | None:
    """The same model on the smallest grid whose graph has the same nodes (low = the kernel size + 1: at the
    kernel size itself every clamped window is the whole grid and the Slices differ), the ratio and the channels
    kept, where a fix of the faithful graphs is proven on random sets (`naf_records`); None where the grid is not
    square or not larger. The gate still compares the two graphs' ops before it uses it (`fix.recorded`)."""
    low, ratio = prepared.features.shape[-1], prepared.size[0] // prepared.features.shape[-1]
    small = max(prepared.layer.kernel_size) + 1
    if prepared.features.shape[-2] != low or prepared.size != (low * ratio, low * ratio) or small >= low:
        return None
    try:
        return prepare_at(prepared.fixed.model, small, ratio, prepared.features.shape[1], seed=seed)
    except (ValueError, RuntimeError) as exc:  # a checkout that refuses the size: 05 proves its fixes in full
        warnings.warn(f"NAF at low {small}: no reduced graph for the fix's proof ({exc})", stacklevel=2)
        return None


def families_left(changes: Sequence[str], ops: Iterable[str]) -> list[str]:
    """The ops of the families `changes` remove (`FAMILIES`) still in a graph's `ops`: empty when each rewrite
    did what it is for."""
    ops = set(ops)
    return sorted(op for c in changes for op in FAMILIES.get(c, ()) if op in ops)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return compare.max_abs_diff([a], [b])


def _run(module: nn.Module, args: Sequence[torch.Tensor], method: str) -> torch.Tensor:
    with swap_natten(method), torch.no_grad():
        return module(*args)


def _wanted(variants: dict[str, tuple[str, ...]], names: Iterable[str] | None) -> dict[str, tuple[str, ...]]:
    """The named variants (all when `names` is None), refusing a name that is none of them."""
    if names is None:
        return dict(variants)
    names = list(names)
    unknown = [n for n in names if n not in variants]
    if unknown:
        raise ValueError(f"variants: {unknown} are not among {list(variants)}")
    return {n: variants[n] for n in names}


def natten_equality(
    prepared: Prepared,
    *,
    method: str,
    upsampler_variants: Iterable[str] | None = None,
    layer_variants: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Per graph and variant, max |variant - real natten| on the module itself (natten through
    `naf.natten_output`, Flex on CPU, v in chunks); natten's call in the variants runs as `method`. Then each
    change of each variant again as its negative control (`naf_rewrites`), which must differ."""
    rows: list[dict[str, Any]] = []
    plans = [
        (
            UPSAMPLER,
            prepared.upsampler,
            (prepared.image, prepared.features),
            _wanted(UPSAMPLER_VARIANTS, upsampler_variants),
        ),
        (LAYER, prepared.attention_layer, prepared.layer_inputs, _wanted(LAYER_VARIANTS, layer_variants)),
    ]
    for graph, build, args, variants in plans:
        reference = naf.natten_output(build(), *args)
        for name, changes in variants.items():
            rows.append(
                {
                    "graph": graph,
                    "variant": name,
                    "changes": ", ".join(changes) or "none",
                    "control": "",
                    "vs natten": _max_diff(_run(build(changes), args, method), reference),
                }
            )
            for change in changes:
                out = _run(build(changes, control=change), args, CONTROL_METHOD)
                rows.append(
                    {
                        "graph": graph,
                        "variant": name,
                        "changes": ", ".join(changes),
                        "control": change,
                        "vs natten": _max_diff(out, reference),
                    }
                )
    return rows


@dataclass(frozen=True)
class VariantExport:
    """One exported NAF graph: which graph and variant, its export report, and its torch output against the
    faithful model run with the reference formulation, at the export's geometry."""

    graph: str
    variant: str
    changes: tuple[str, ...]
    report: Any  # onnx_export.ExportReport
    vs_reference: float

    @property
    def path(self) -> Path:
        return Path(self.report.path)

    @property
    def name(self) -> str:
        return f"NAF {self.graph}, {self.variant}"


def stem(graph: str, variant: str, method: str) -> str:
    """File stem of a NAF graph: `naf_<method>` is the upsampler as it is (the name notebook 06 knows),
    `naf_attention_<method>` its attention layer; `__<variant>` marks an exact rewrite; the variants that
    compute the attention on images carry no formulation name."""
    base = "naf" if graph == UPSAMPLER else "naf_attention"
    if variant in ON_IMAGES:
        return f"{base}_{variant}"
    return f"{base}_{method}" + ("" if variant == "faithful" else f"__{variant}")


def identity(graph: str, variant: str, method: str, geometry: str) -> GraphIdentity:
    """What a NAF graph is: the faithful graph with natten swapped for `method`, or a variant of it (the ones on
    images compute the attention in a layout of their own, so with no formulation of natten's)."""
    if variant == "faithful":
        return GraphIdentity(GraphNotebook.ATTENTION, GraphKind.FAITHFUL, method, geometry)
    formulation = "" if variant in ON_IMAGES else method
    of = stem(graph, "faithful", method)
    return GraphIdentity(GraphNotebook.ATTENTION, GraphKind.VARIANT, formulation, geometry, variant_of=of)


def export_variants(
    prepared: Prepared,
    folder: str | os.PathLike,
    *,
    method: str,
    reference: str,
    atol: float,
    upsampler_variants: Iterable[str] | None = None,
    layer_variants: Iterable[str] | None = None,
    references: dict[tuple, torch.Tensor] | None = None,
    workers: int | None = None,
    record_from: int = naf_records.RECORD_FROM,
    keep_from: int = naf_records.KEEP_RUN_FROM,
) -> dict[str, VariantExport]:
    """Each variant of the upsampler and of the attention layer exported at the prepared geometry (natten
    swapped for `method`), keyed by file stem. Before each export its torch output is compared with the
    faithful module run with `reference` (a formulation proven equal to natten, or natten itself).
    `references`, if given, keeps those reference outputs across calls (at NAF's full geometry each one is
    minutes of work), keyed by graph, reference and input shapes. The references are computed here, then the
    variants run `workers` at a time (`onnx_export.in_forks`; default: one per CPU), each export being
    mostly single-threaded tracing. Notebook 02 passes 1 at NAF's full geometry: one such graph's onnxruntime
    run holds gigabytes, and two at once would not fit the appendix machine's memory. A faithful graph whose
    output has `record_from` elements or more records its run and the reduced graph beside it (`naf_records`), the
    reduced graphs exported once every graph is, two at a time (small: `workers` bounds the full geometry's
    memory); any graph whose output has `keep_from` elements or more keeps its run, for 06's proof of its cut."""
    if reference == method:
        raise ValueError(f"reference: {reference!r} is the exported formulation itself; the check would be vacuous")
    todo = _jobs(prepared, upsampler_variants, layer_variants)
    references = _references(prepared, todo, reference, {} if references is None else references)
    elements = prepared.features.shape[1] * prepared.size[0] * prepared.size[1]
    small = reduced(prepared) if elements >= record_from and any(job[4] == "faithful" for job in todo) else None
    twins = {job[0]: job for job in _jobs(small, ["faithful"], ["faithful"])} if small is not None else {}
    kept = _take_runs(prepared, {job[0] for job in todo if job[4] == "faithful"}, method)
    one = functools.partial(
        _export_one,
        folder=Path(folder),
        method=method,
        reference=reference,
        atol=atol,
        references=references,
        geometry="x".join(map(str, prepared.size)),
        kept=kept,
        keep=elements >= keep_from,
    )
    todo = [(*job, twins.get(job[0]) if job[4] == "faithful" else None) for job in todo]
    # the attention on images (half as many nodes again) starts first, so the last job to end is a short one
    heavy_first = sorted(todo, key=lambda job: job[4] not in ON_IMAGES)
    bar = console.progress(None, total=len(todo), desc="NAF graphs", unit="graph")
    done = {
        stem(e.graph, e.variant, method): e
        for e in onnx_export.in_forks(one, heavy_first, workers, lambda _: bar.update(1))
    }
    bar.close()
    geometry = "x".join(map(str, small.size)) if small is not None else ""
    twin_jobs = [(job[6], done[stem(job[0], job[4], method)].path, method, atol, geometry) for job in todo if job[6]]
    for messages in onnx_export.in_forks(_export_twin, twin_jobs):
        naf_records.warn_again(messages)
    return {stem(g, v, method): done[stem(g, v, method)] for g, _, _, _, v, *_ in todo}


def _references(
    prepared: Prepared, todo: list[tuple[Any, ...]], reference: str, references: dict[tuple, torch.Tensor]
) -> dict[tuple, torch.Tensor]:
    """`references` with each job's reference output added where it is not there yet (`_reference_key`)."""
    for graph, build, args, _, _, _ in console.progress(todo, desc="NAF references", unit="graph"):
        key = _reference_key(graph, reference, args)
        if key in references:
            continue
        # the upsampler's run gives the layer's own reference too, where the layer ran on its own inputs
        watch: contextlib.AbstractContextManager[list[torch.Tensor]] = (
            _layer_output(prepared) if graph == UPSAMPLER else contextlib.nullcontext([])
        )
        with watch as seen:
            references[key] = naf.reference_output(build(), *args, reference=reference)
        if seen:
            references[_reference_key(LAYER, reference, prepared.layer_inputs)] = seen[0]
    return references


def _take_runs(prepared: Prepared, faithful: set[str], method: str) -> dict[str, torch.Tensor]:
    """The `faithful` graphs' outputs `prepare` made with `method` (`Prepared.ran`), taken out of `prepared`: used
    once, then let go (a gigabyte each at NAF's 512²); none for another formulation."""
    wanted = faithful if method == PREPARED_WITH else set()
    return {g: prepared.ran.pop(g) for g in list(prepared.ran) if g in wanted}


@contextlib.contextmanager
def _layer_output(prepared: Prepared) -> Iterator[list[torch.Tensor]]:
    """While the block runs the upsampler: its attention layer's output, kept when the layer was called exactly
    once and on exactly the inputs the layer's own graph is checked on (`Prepared.layer_inputs`, compared by
    value), so that output is the layer's reference too and the same 512² attention is not run twice."""
    calls: list[tuple[tuple[Any, ...], Any]] = []
    handle = prepared.layer.module.register_forward_hook(
        lambda _m, args, out: calls.append((args, out.clone() if isinstance(out, torch.Tensor) else out))
    )
    seen: list[torch.Tensor] = []
    try:
        yield seen
    finally:
        handle.remove()
    if len(calls) == 1 and isinstance(calls[0][1], torch.Tensor):
        (args, out), mine = calls[0], prepared.layer_inputs
        if len(args) >= len(mine) and all(torch.equal(a, b) for a, b in zip(args, mine, strict=False)):
            seen.append(out)


def _jobs(
    prepared: Prepared, upsampler_variants: Iterable[str] | None, layer_variants: Iterable[str] | None
) -> list[tuple[Any, ...]]:
    """One (graph, builder, inputs, input names, variant, changes) per wanted variant of the two graphs."""
    plans = [
        (
            UPSAMPLER,
            prepared.upsampler,
            (prepared.image, prepared.features),
            ["image", "lr_feats"],
            _wanted(UPSAMPLER_VARIANTS, upsampler_variants),
        ),
        (
            LAYER,
            prepared.attention_layer,
            prepared.layer_inputs,
            ["q", "k", "v"],
            _wanted(LAYER_VARIANTS, layer_variants),
        ),
    ]
    return [(g, b, a, n, v, c) for g, b, a, n, vs in plans for v, c in vs.items()]


def _reference_key(graph: str, reference: str, args: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """What a reference output depends on: the graph, the reference formulation and the input shapes."""
    return (graph, reference, *(tuple(a.shape) for a in args))


def _export_one(
    job: tuple[Any, ...],
    *,
    folder: Path,
    method: str,
    reference: str,
    atol: float,
    references: dict[tuple, torch.Tensor],
    geometry: str,
    kept: dict[str, torch.Tensor] | None = None,
    keep: bool = False,
) -> VariantExport:
    """One variant built, compared with its reference output, and exported (natten swapped for `method`), its
    identity written beside it; the export check's run kept beside it (`naf_records.keeper`) for a faithful graph
    with its `twin` job at the reduced geometry (whose graph `_export_twin` adds to the record) or where `keep`.
    `kept`: the faithful graphs' outputs with `method` already computed (`Prepared.ran`)."""
    graph, build, args, names, variant, changes, twin = job
    proof = folder / f"{stem(graph, variant, method)}{naf_records.recorded.FOLDER}"
    shutil.rmtree(proof, ignore_errors=True)  # an earlier run's record never stands for this export
    module = build(changes).eval()
    ran = (kept or {}).get(graph) if variant == "faithful" else None
    ran = _run(module, args, method) if ran is None else ran
    vs = _max_diff(ran, references[_reference_key(graph, reference, args)])
    with swap_natten(method):
        report = onnx_export.export(
            module,
            tuple(args),
            folder / f"{stem(graph, variant, method)}.onnx",
            input_names=names,
            output_names=[_output_name(graph)],
            atol=atol,
            outputs=ran,  # the forward just compared with the reference: the export's own check reuses it
            identity=identity(graph, variant, method, geometry).as_json(),
            keep_run=naf_records.keeper(proof) if twin or keep else None,
        )
    return VariantExport(graph, variant, tuple(changes), report, vs)


def _output_name(graph: str) -> str:
    return "upsampled" if graph == UPSAMPLER else "out"


def _export_twin(job: tuple[Any, ...]) -> list[str]:
    """A faithful graph's `twin` (its `_jobs` entry at the reduced geometry) exported into the record beside the
    graph at `path` (`naf_records.write_reduced`), after the graph itself: an `onnx_export.in_forks` job, whose warnings
    (a twin that cannot be exported: the record goes) come back as messages."""
    (graph, build_small, args_small, names, *_), path, method, atol, size = job
    with naf_records.warnings_kept() as messages:
        naf_records.write_reduced(
            build_small(()).eval(),
            args_small,
            naf_records.recorded.folder_for(path),
            method=method,
            input_names=names,
            output_names=[_output_name(graph)],
            builder=f"naf_variants.export_variants (NAF's {graph}, the same model at the smallest grid)",
            atol=atol,
            identity=identity(graph, "faithful", method, size).as_json(),
        )
    return messages


def outside_rows(exports: dict[str, VariantExport], allowed: Iterable[str]) -> list[dict[str, Any]]:
    """Per exported graph, each op outside DEVICE_OPS (`allowed`): its count and the modules its nodes were
    traced from (the exporter's name scopes, `onnx_core.origins`)."""
    allowed = set(allowed)
    rows = []
    for key, e in exports.items():
        outside = sorted(set(e.report.ops) - allowed)
        where = origins.op_origins(e.path, outside)
        rows += [
            {"graph": key, "variant": e.variant, "op": op, "count": e.report.ops[op], "from": ", ".join(where[op])}
            for op in outside
        ]
    return rows


def export_rows(exports: dict[str, VariantExport], results: dict[Any, Any], allowed: Iterable[str]) -> list[dict]:
    """Per exported graph: its changes, size, ops outside DEVICE_OPS, the device gate's prediction
    (`results` keyed by path) and its two checks (onnxruntime vs torch, torch vs the reference)."""
    allowed = set(allowed)
    rows = []
    for key, e in exports.items():
        r = results[e.path] if e.path in results else results[str(e.path)]
        rows.append(
            {
                "graph": key,
                "module": e.graph,
                "variant": e.variant,
                "changes": ", ".join(e.changes) or "none",
                "inputs": ", ".join(f"{n} {list(v)}" for n, v in e.report.input_shapes.items()),
                "nodes": e.report.node_count,
                "outside DEVICE_OPS": ", ".join(f"{op} {n}" for op, n in e.report.ops.items() if op not in allowed)
                or "-",
                "prediction": r.verdict,
                "onnxruntime vs torch": e.report.max_abs_diff,
                "vs reference": e.vs_reference,
            }
        )
    return rows
