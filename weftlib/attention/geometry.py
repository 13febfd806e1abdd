"""One neighborhood-attention call's shape (`Geometry`), the grids swept, and the inputs each formulation takes.

The benchmark (`benchmark`), the equality proof (`equality`) and the image layout (`image_shift`) all describe
their calls this way, so a geometry and its random inputs are one fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from . import neighborhood as attention


@dataclass(frozen=True)
class Geometry:
    """One attention call: q `[batch, H, W, heads, dim]`; k/v on `low` (nearest-upsampled by `dilation`
    to H x W, NAF's case) or random at full size when `low` is None."""

    name: str
    size: tuple[int, int]
    heads: int = 4
    dim: int = 32
    v_dim: int = 32
    kernel: int = 7
    dilation: int = 1
    batch: int = 1
    low: tuple[int, int] | None = None
    methods: tuple[str, ...] | None = None  # None: every formulation that applies
    export_methods: tuple[str, ...] | None = None  # exported to ONNX here (None: all); the others torch only
    repeats: int | None = None  # timed calls per entry here (None: the sweep's); each row records its count

    def __post_init__(self) -> None:
        if self.low is not None and tuple(n * self.dilation for n in self.low) != tuple(self.size):
            raise ValueError(
                f"geometry {self.name!r}: size {self.size} must be low {self.low} x dilation "
                f"{self.dilation} (k/v nearest-upsampled by the dilation)"
            )
        if any(self.kernel * self.dilation > s for s in self.size):
            raise ValueError(f"geometry {self.name!r}: kernel x dilation exceeds size {self.size}")

    @property
    def stem(self) -> str:
        """The geometry's name as file names carry it ('^' written 'p': 16^2 -> 16p2)."""
        return self.name.replace("^", "p")

    def graph_stem(self, method: str) -> str:
        """The stem of the sweep's faithful graph of `method` at this geometry (`benchmark`): `<stem>_<method>`."""
        return f"{self.stem}_{method}"

    @property
    def tokens(self) -> int:
        return self.size[0] * self.size[1]

    def no_reuse_bytes(self) -> int:
        """fp32 bytes of every query's kh*kw keys and values read once per query, with no reuse between
        queries: what 'gather' materialises. No bound: a formulation that reuses what it read moves less."""
        return 4 * self.batch * self.tokens * self.kernel**2 * self.heads * (self.dim + self.v_dim)

    def compulsory_bytes(self, method: str) -> int:
        """fp32 bytes any call must move: q, k and v as `method` takes them (the low-res grid for 'lowres'),
        each read once, and the output written once. With `attention_flops`, what bounds a time from below."""
        kv_tokens = self.low[0] * self.low[1] if method == "lowres" and self.low else self.tokens
        inputs = self.tokens * self.dim + kv_tokens * (self.dim + self.v_dim)
        return 4 * self.batch * self.heads * (inputs + self.tokens * self.v_dim)

    def attention_flops(self) -> int:
        """FLOPs of the scores and the weighted sum over each query's kh*kw neighbours."""
        return 2 * self.batch * self.tokens * self.kernel**2 * self.heads * (self.dim + self.v_dim)

    def natten_dense_bytes(self) -> int:
        """fp32 bytes of the dense [B, heads, HW, HW] score matrix natten's Flex path forms on CPU."""
        chunks = -(-self.v_dim // self.dim)
        return 4 * self.batch * chunks * self.heads * self.tokens**2


def grid(sizes: Iterable[int] = (32, 64, 128), kernel: int = 7, heads: int = 4, dim: int = 32) -> list[Geometry]:
    """The acceptance grid: square maps, k 7, 4 heads, dim 32 (v dim = q dim), dilation 1."""
    return [Geometry(f"{s}^2", (s, s), heads, dim, dim, kernel) for s in sizes]


def naf_geometry(
    size: int = 512,
    low: int = 32,
    heads: int = 4,
    dim: int = 64,
    v_dim: int = 256,
    kernel: int = 9,
    methods: Iterable[str] | None = None,
    repeats: int | None = None,
) -> Geometry:
    """NAF's call: queries at `size`^2, k/v nearest-resized from `low`^2, dilation = size / low.

    `methods` limits the formulations timed there (default: all). Full-resolution ones run in torch only,
    in bounded query bands; only 'lowres' is exported at this size. `repeats` (default: the sweep's) is the
    number of timed calls after the call that gives the output (seconds each there for the slowest, shift);
    every row records how many calls its median is of."""
    if size % low:
        raise ValueError(f"size {size} must be a multiple of low {low}")
    chosen = tuple(methods) if methods else None
    unknown = set(chosen or ()) - set(attention.METHODS)
    if unknown:
        raise ValueError(f"methods: unknown formulation(s) {sorted(unknown)}; known: {attention.METHODS}")
    # the graphs stay exported at their small geometry: at NAF's size only 'lowres' (small constants) is
    return Geometry(
        f"naf_{size}", (size, size), heads, dim, v_dim, kernel, size // low, 1, (low, low), chosen, ("lowres",), repeats
    )


def methods_for(geom: Geometry) -> tuple[str, ...]:
    """Formulations that apply: 'lowres' needs a low-res k/v grid."""
    return tuple(m for m in attention.METHODS if m != "lowres" or geom.low is not None)


def make_inputs(geom: Geometry, seed: int = 0) -> dict[str, torch.Tensor]:
    """Unit-scale random q, full-size k/v and, for NAF geometries, the low-res k/v they came from."""
    gen = torch.Generator().manual_seed(seed)
    b, (h, w) = geom.batch, geom.size
    q = torch.randn(b, h, w, geom.heads, geom.dim, generator=gen)
    kv_size = geom.low or geom.size
    k = torch.randn(b, *kv_size, geom.heads, geom.dim, generator=gen)
    v = torch.randn(b, *kv_size, geom.heads, geom.v_dim, generator=gen)
    out = {"q": q, "k_low": k, "v_low": v} if geom.low else {"q": q}
    if geom.low:
        k, v = (attention.upsample_nearest(t, geom.dilation) for t in (k, v))
    out.update(k=k, v=v)
    return out


def method_args(geom: Geometry, method: str, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """(q, k, v) as the formulation takes them: the low-res grid for 'lowres'."""
    if method == "lowres":
        return inputs["q"], inputs["k_low"], inputs["v_low"]
    return inputs["q"], inputs["k"], inputs["v"]


def tiny(geom: Geometry) -> Geometry:
    """The smallest map of the same call (kernel, dilation, heads, dims, low grid or not): a warm-up."""
    k, d = geom.kernel, geom.dilation
    low = (k, k) if geom.low else None
    return Geometry("warm-up", (k * d, k * d), geom.heads, geom.dim, geom.v_dim, k, d, geom.batch, low)
