"""natten's 2-D neighborhood attention computed entirely in the image layout, with no Reshape anywhere.

q `[B, heads*D, H, W]`, k `[B, heads*D, h, w]`, v `[B, heads*Dv, h, w]` (channel = head * D + d, as
`device_layout.to_image` lays them out) -> `[B, heads*Dv, H, W]`. The heads are never split off an axis:

- per kernel offset, k and v are shifted along the image's H and W axes (2, 3) by the same static Slices +
  Concat of clamped-window runs the `shift` formulation uses (`index_math.shift_runs`);
- each head's score is a constant 1x1 Conv of q * k_shift (a block of `scale` over that head's D channels);
- the softmax over the offsets runs without Softmax (that op is judged by the layout it runs in, and here
  the offsets are not a last axis): each head's maximum over the offsets is a ReduceMax over the channel
  axis (keepdims) of that head's scores, picked out of the offset-major score image by a constant 1x1
  Conv; then Exp of the difference, a sum over the offsets by Add, and Div;
- the output is the sum over offsets of (the probabilities spread to each head's Dv channels by a constant
  1x1 Conv) * v_shift.

NAF's case, k/v on a grid `dilation` times coarser, is natten on their nearest upsampling: it is done the
same way, the upsampling inside the graph as one nearest Resize of k and of v.

Why this layout (the public record, `params/device_ops.yaml`): DFC 5.3.0 parsed rank-4 images through
Conv, Slice, Concat of tracked inputs on a non-batch axis, and reductions over the channel axis with
keepdims; it refused the head split of an image's channel axis (the tokens-as-width attention block,
`image_channel_split`), and a Reshape from rank 5 to rank 4 was refused too (`reshape_5d_to_4d`). Each
head's maximum is its own (not one maximum over every head) so that no head's exponentials can all
underflow to 0 when the heads' scores lie far apart.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from weftlib.gate.run_graphs import GraphIdentity
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import export as onnx_export
from weftlib.onnx_core.layout import IMAGE_RANK, LayoutExport

from . import formulations, index_math
from . import neighborhood as attention
from .formulations import Pair
from .geometry import make_inputs
from .reference import natten_reference

__all__ = [
    "NA2dImageShift",
    "equality",
    "export_image",
    "export_image_all",
    "export_rows",
    "image_inputs",
    "na2d_image",
]
FORMULATION = "image_shift"


# ---------------------------------------------------------------------------------------------- checks


def _check_image(name: str, t: Any, heads: int) -> None:
    """One argument's refusals: not a tensor, not an image, or channels that do not split into `heads`."""
    if not isinstance(t, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(t).__name__}.")
    if t.dim() != IMAGE_RANK:
        raise ValueError(f"`{name}` must be an image [B, heads*D, H, W], got shape {tuple(t.shape)}.")
    if t.shape[1] % heads:
        raise ValueError(f"`{name}` has {t.shape[1]} channels, not a multiple of heads={heads}.")


def _check(
    q: Any, k: Any, v: Any, kernel_size: Any, dilation: Any, heads: Any, scale: Any, offsets: Any
) -> tuple[Pair, Pair, float, tuple[int, ...], bool]:
    """Every refusal before any compute (natten's rules, in the image layout); returns (kernel, dilation,
    scale, offsets, whether k/v come on the coarser grid)."""
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError(f"heads: expected a positive int, got {heads!r}")
    for name, t in (("query", q), ("key", k), ("value", v)):
        _check_image(name, t, heads)
    if not (q.dtype == k.dtype == v.dtype) or not q.is_floating_point():
        raise ValueError(f"query, key and value must share one floating dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")
    if not (q.device == k.device == v.device):
        raise ValueError(f"query, key and value must be on the same device, got {q.device}, {k.device}, {v.device}.")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(
            f"query, key and value must match in batch size, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}."
        )
    if k.shape[1] != q.shape[1]:
        raise ValueError(
            f"key must have query's {q.shape[1]} channels (heads*D), got {k.shape[1]}: expand grouped k/v "
            f"heads before (natten's rule, `attention.na2d` does it for the 5-D layout)."
        )
    if k.shape[2:] != v.shape[2:]:
        raise ValueError(f"key and value must share a grid, got {tuple(k.shape[2:])} and {tuple(v.shape[2:])}.")
    kernel = attention.as_pair(kernel_size, "kernel_size", 2)
    dil = attention.as_pair(dilation, "dilation", 1)
    attention._check_scale(scale)
    size, grid = tuple(q.shape[2:]), tuple(k.shape[2:])
    if any(kk * d > s for kk, d, s in zip(kernel, dil, size)):
        raise ValueError(
            f"The product of `kernel_size` and `dilation` cannot exceed the input size along any axis, got "
            f"input size {size}, kernel_size={kernel}, dilation={dil}."
        )
    low = grid != size
    if low and size != tuple(n * d for n, d in zip(grid, dil)):
        raise ValueError(
            f"k/v on a grid {grid} other than the query's {size} must be that grid nearest-upsampled by "
            f"`dilation` {dil} (query size = k/v size x dilation per axis)."
        )
    every = kernel[0] * kernel[1]
    chosen = tuple(range(every)) if offsets is None else tuple(offsets)
    if not chosen or len(set(chosen)) != len(chosen) or not all(isinstance(o, int) and 0 <= o < every for o in chosen):
        raise ValueError(f"offsets: expected distinct kernel offsets in [0, {every}), got {offsets!r}")
    return kernel, dil, float(scale or (q.shape[1] // heads) ** -0.5), chosen, low


# ------------------------------------------------------------------------------------------- constants


@lru_cache(maxsize=64)
def _score_weight(heads: int, d: int, scale: float) -> np.ndarray:
    """`[heads, heads*d, 1, 1]`: head h's score is `scale` times the sum of its d channels."""
    w = np.zeros((heads, heads * d, 1, 1), dtype=np.float32)
    for h in range(heads):
        w[h, h * d : (h + 1) * d] = scale
    return w


@lru_cache(maxsize=64)
def _head_select_weight(heads: int, offsets: int, head: int) -> np.ndarray:
    """`[offsets, offsets*heads, 1, 1]`: head `head`'s score at each offset, out of the offset-major image."""
    w = np.zeros((offsets, offsets * heads, 1, 1), dtype=np.float32)
    w[np.arange(offsets), np.arange(offsets) * heads + head] = 1.0
    return w


@lru_cache(maxsize=64)
def _spread_weight(heads: int, dv: int) -> np.ndarray:
    """`[heads*dv, heads, 1, 1]`: each head's probability copied to its dv channels."""
    w = np.zeros((heads * dv, heads, 1, 1), dtype=np.float32)
    for h in range(heads):
        w[h * dv : (h + 1) * dv, h] = 1.0
    return w


def _const(array: np.ndarray, like: Tensor) -> Tensor:
    return torch.from_numpy(array).to(device=like.device, dtype=like.dtype)


# ------------------------------------------------------------------------------------------------ compute


def _shifted(x: Tensor, kernel: Pair, dilation: Pair, offsets: tuple[int, ...]) -> Iterator[Tensor]:
    """`x` re-indexed by natten's clamped window for each chosen offset (row-major `a * kw + c`), along the
    image's H and W axes, by static Slices + Concat; one at a time, each row's shift made once in row order."""
    rows = index_math.shift_runs(int(x.shape[2]), kernel[0], dilation[0])
    cols = index_math.shift_runs(int(x.shape[3]), kernel[1], dilation[1])
    row, by_row = -1, x
    for o in offsets:
        a, c = divmod(o, kernel[1])
        if a != row:
            row, by_row = a, formulations.shifted(x, 2, rows[a])
        yield formulations.shifted(by_row, 3, cols[c])


def na2d_image(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    *,
    heads: int,
    scale: float | None = None,
    offsets: Sequence[int] | None = None,
) -> Tensor:
    """natten.functional.na2d (stride 1, not causal) on images, without Reshape or Softmax (module docstring).

    `offsets` limits the sum to those kernel offsets (row-major): any proper subset is no longer natten,
    which is what the equality's negative control uses. Default: all of them, and the default scale D**-0.5.
    """
    kernel, dil, scale_, chosen, low = _check(q, k, v, kernel_size, dilation, heads, scale, offsets)
    if low:  # NAF's case: natten sees the nearest upsampling of the coarse k/v
        k, v = (torch.nn.functional.interpolate(t, size=tuple(q.shape[2:]), mode="nearest") for t in (k, v))
    d, dv, n = q.shape[1] // heads, v.shape[1] // heads, len(chosen)
    score_w = _const(_score_weight(heads, d, scale_), q)
    scores = [torch.nn.functional.conv2d(q * k_o, score_w) for k_o in _shifted(k, kernel, dil, chosen)]
    every = torch.cat(scores, 1) if n > 1 else scores[0]  # [B, n*heads, H, W], channel o * heads + h
    top = torch.cat(
        [
            torch.amax(torch.nn.functional.conv2d(every, _const(_head_select_weight(heads, n, h), q)), 1, keepdim=True)
            for h in range(heads)
        ],
        1,
    )  # [B, heads, H, W]: each head's maximum over the offsets
    exps = [torch.exp(s - top) for s in scores]
    total = exps[0]
    for e in exps[1:]:
        total = total + e
    spread_w = _const(_spread_weight(heads, dv), q)
    out = None
    for e, v_o in zip(exps, _shifted(v, kernel, dil, chosen)):
        term = torch.nn.functional.conv2d(e / total, spread_w) * v_o
        out = term if out is None else out + term
    assert out is not None
    return out


class NA2dImageShift(nn.Module):
    """`na2d_image` with fixed arguments, to export on its own (inputs q, k, v as images)."""

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        dilation: int | Sequence[int] = 1,
        *,
        heads: int,
        scale: float | None = None,
        offsets: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        attention.as_pair(kernel_size, "kernel_size", 2)
        attention.as_pair(dilation, "dilation", 1)
        attention._check_scale(scale)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads: expected a positive int, got {heads!r}")
        self.kernel_size, self.dilation, self.heads, self.scale = kernel_size, dilation, heads, scale
        self.offsets = None if offsets is None else tuple(offsets)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return na2d_image(
            q, k, v, self.kernel_size, self.dilation, heads=self.heads, scale=self.scale, offsets=self.offsets
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, heads={self.heads}"


# ------------------------------------------------------------------------------- against natten, exported


def image_inputs(geom: Any, inputs: dict[str, Tensor], low: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v of a `geometry.Geometry` as images; `low` (default: whenever the geometry has a coarse
    grid) takes k/v on that grid, to be upsampled inside the graph."""
    from .device_layout import to_image

    low = geom.low is not None if low is None else low
    if low and geom.low is None:
        raise ValueError(f"geometry {geom.name!r} has no low-resolution k/v grid")
    k, v = (inputs["k_low"], inputs["v_low"]) if low else (inputs["k"], inputs["v"])
    return to_image(inputs["q"]), to_image(k), to_image(v)


def equality(
    geom: Any, *, low: bool | None = None, offsets: Sequence[int] | None = None, seed: int = 0
) -> dict[str, Any]:
    """Max |na2d_image - real natten| on one `geometry.Geometry` (its random inputs; natten through
    `attention.natten_reference` on the full-resolution k/v)."""
    from .device_layout import from_image

    inputs = make_inputs(geom, seed)
    images = image_inputs(geom, inputs, low)
    with torch.no_grad():
        ref = natten_reference(inputs["q"], inputs["k"], inputs["v"], geom.kernel, geom.dilation)
        out = from_image(na2d_image(*images, geom.kernel, geom.dilation, heads=geom.heads, offsets=offsets), geom.heads)
    kk = geom.kernel**2
    return {
        "geometry": geom.name,
        "formulation": FORMULATION,
        "size": list(geom.size),
        "kv grid": list(images[1].shape[2:]),
        "kernel": geom.kernel,
        "dilation": geom.dilation,
        "dim": geom.dim,
        "v_dim": geom.v_dim,
        "offsets": f"all {kk}" if offsets is None else f"{len(tuple(offsets))} of {kk}",
        "max_abs_diff": float((out - ref).abs().max()),
    }


def export_image(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int,
    dilation: int,
    heads: int,
    path: str | os.PathLike,
    *,
    atol: float = 1e-4,
    identity: GraphIdentity | None = None,
) -> LayoutExport:
    """Export `na2d_image` (images in, image out); before that, compare it in torch with the `shift`
    formulation on the same inputs (itself proven equal to natten), recorded as `vs_faithful`. `identity`: what
    the graph is, kept in its parity file (`export_image_all` names it; None: of unknown identity)."""
    from .device_layout import from_image

    module = NA2dImageShift(kernel_size, dilation, heads=heads).eval()
    as_5d = [from_image(t, heads) for t in (q, k, v)]
    if k.shape[2:] != q.shape[2:]:
        as_5d[1:] = [attention.upsample_nearest(t, dilation) for t in as_5d[1:]]
    with torch.no_grad():
        q5, k5, v5 = as_5d
        faithful = attention.na2d(q5, k5, v5, kernel_size, dilation, method="shift")
        image = from_image(module(q, k, v), heads)
    report = onnx_export.export(
        module,
        (q, k, v),
        path,
        input_names=["q", "k", "v"],
        output_names=["out"],
        atol=atol,
        identity=identity.as_json() if identity is not None else None,
    )
    inputs = {n: tuple(t.shape) for n, t in zip("qkv", (q, k, v))}
    return LayoutExport(Path(path).stem, report, inputs, float((image - faithful).abs().max()))


def export_image_all(
    geometries: Sequence[Any], folder: str | os.PathLike, *, atol: float = 1e-4, workers: int | None = None
) -> dict[str, LayoutExport]:
    """`export_image` at each `geometry.Geometry` (k/v on its coarse grid where it has one, NAF's case),
    written to `folder/image_<geometry>.onnx`, each a variant of the sweep's `shift` graph at its geometry (what
    it is compared with); keyed by geometry name. The geometries run `workers` at a
    time (`onnx_export.in_forks`; default: one per CPU): each export is mostly single-threaded tracing."""
    names = [g.name for g in geometries]
    if len(set(names)) != len(names):
        raise ValueError(f"geometries: names must be distinct, got {names}")

    def one(geom: Any) -> LayoutExport:
        images = image_inputs(geom, make_inputs(geom))
        path = Path(folder) / f"image_{geom.stem}.onnx"
        of = geom.graph_stem("shift")
        identity = GraphIdentity(GraphNotebook.ATTENTION, GraphKind.VARIANT, geometry=geom.name, variant_of=of)
        return export_image(*images, geom.kernel, geom.dilation, geom.heads, path, atol=atol, identity=identity)

    return dict(zip(names, onnx_export.in_forks(one, geometries, workers)))


def export_rows(exports: dict[str, LayoutExport], results: dict[Any, Any]) -> list[dict[str, Any]]:
    """Per exported graph: its inputs, size, op set, the device gate's prediction (`results` keyed by path)
    and its two checks (onnxruntime against torch, torch against the `shift` formulation)."""
    rows = []
    for name, e in exports.items():
        r = results[e.path] if e.path in results else results[str(e.path)]
        rows.append(
            {
                "geometry": name,
                "graph": e.path.name,
                "inputs": ", ".join(f"{n} {list(s)}" for n, s in e.inputs.items()),
                "nodes": e.report.node_count,
                "ops": ", ".join(f"{op} {n}" for op, n in sorted(e.report.ops.items())),
                "prediction": r.verdict,
                "findings": len(r.findings),
                "onnxruntime vs torch": e.report.max_abs_diff,
                "vs shift": e.vs_faithful,
            }
        )
    return rows
