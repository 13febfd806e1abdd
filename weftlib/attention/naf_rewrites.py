"""Exact rewrites of what NAF adds around its attention, each removing ops the device record refuses or
does not know, applied to an unmodified model (stand-in or real checkout) by replacing its submodules.

- `groupnorm`: every `nn.GroupNorm` as reductions. The exporter writes GroupNorm as a Reshape to
  `[B, G, C/G * H * W]`, InstanceNormalization and CastLike. Here each channel's mean over the image is an
  AveragePool over the whole image (the vendor lists it; a ReduceMean over [2, 3] has no verdict), the mean over the group's channels a constant 1x1 Conv on that `[B, C, 1, 1]`
  image (a block of 1/(C/G) per group), the variance the same on the centred square, then Sqrt and Div:
  the same biased statistics over the same elements, on images throughout.
- `rope`: NAF's rotary embedding (image in, image out, each head's pairs `(i, i + D/2)` turned) as two
  constant tables. The tables are read off the module itself: fed a constant image that is 1 on each
  head's first half and 0 elsewhere, it returns `[cos, sin]` per head, and fed the complement
  `[-sin, cos]`, so `x * cos + swap(x) * signed_sin` (swap: each head's halves exchanged by channel Slices
  and one Concat) is the module's own arithmetic, bit for bit, with no Cos, Sin, Tile, Neg or Reshape.
- `resize`: `F.interpolate(mode="nearest-exact")` at an integer ratio (the exporter writes it as index
  math and GatherND) run as `mode="nearest"`, which it writes as one Resize: at an integer ratio both pick
  source index `i // ratio`, so the copy is exact.
- `image`: the attention layer replaced by `image_shift.na2d_image` on its q, k, v images (k/v on the
  coarse grid, upsampled inside by one nearest Resize), natten's na2d with no head split and no Reshape.

Each rewrite has a negative control (`control=True`): the same rewrite with one deliberate mistake
(groups of one channel, the rotation's sign dropped, bilinear instead of nearest, one kernel offset left
out), which must differ from the model, so an equality test that cannot fail is caught.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .image_shift import na2d_image
from .naf import FixedSize

CHANGES = ("groupnorm", "rope", "resize", "image")


def _check_changes(changes: Sequence[str]) -> tuple[str, ...]:
    unknown = [c for c in changes if c not in CHANGES]
    if unknown or len(set(changes)) != len(changes):
        raise ValueError(f"changes: expected distinct names among {CHANGES}, got {list(changes)!r}")
    return tuple(changes)


# ------------------------------------------------------------------------------------------- GroupNorm


class PooledGroupNorm(nn.Module):
    """`nn.GroupNorm` on `[B, C, H, W]` without Reshape or InstanceNormalization (module docstring)."""

    group_mean: Tensor  # buffer

    def __init__(self, norm: nn.GroupNorm, *, control: bool = False) -> None:
        super().__init__()
        c, g = norm.num_channels, norm.num_groups
        groups = c if control else g  # the control normalises each channel alone: InstanceNorm, not GroupNorm
        size = c // groups
        block = torch.zeros(c, c, 1, 1)
        for start in range(0, c, size):
            block[start : start + size, start : start + size] = 1.0 / size
        self.register_buffer("group_mean", block)
        self.eps = norm.eps
        affine = norm.affine
        self.weight = nn.Parameter(norm.weight.detach().clone()) if affine else None
        self.bias = nn.Parameter(norm.bias.detach().clone()) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4:
            raise ValueError(f"PooledGroupNorm takes images [B, C, H, W], got shape {tuple(x.shape)}")
        size = tuple(x.shape[2:])
        mean = F.conv2d(F.avg_pool2d(x, size), self.group_mean)
        centred = x - mean
        var = F.conv2d(F.avg_pool2d(centred * centred, size), self.group_mean)
        y = centred / torch.sqrt(var + self.eps)
        if self.weight is not None and self.bias is not None:  # both set when the norm is affine
            y = y * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)
        return y


# ------------------------------------------------------------------------------------------------ RoPE


def is_rope(module: nn.Module) -> bool:
    """NAF's rotary embedding (upstream `src/layers/rope.py` and the stand-in): a `RoPE` module with
    `num_heads` heads of `D_head` channels, taking and returning images."""
    return type(module).__name__ == "RoPE" and hasattr(module, "D_head") and hasattr(module, "num_heads")


def _first_halves(heads: int, d: int, size: tuple[int, ...], like: Tensor) -> Tensor:
    """`[1, heads*d, H, W]`: 1 on each head's first d/2 channels, 0 on its second half."""
    mask = (torch.arange(heads * d) % d < d // 2).to(like.dtype)
    return mask.view(1, -1, 1, 1).expand(1, heads * d, *size).contiguous()


class ImageRopeTables(nn.Module):
    """NAF's rotary embedding at one image size as `x * cos + swap(x) * signed_sin` (module docstring)."""

    cos: Tensor  # buffers
    signed_sin: Tensor

    def __init__(self, rope: nn.Module, size: tuple[int, int], *, control: bool = False) -> None:
        super().__init__()
        if not is_rope(rope):
            raise TypeError(f"rope: expected NAF's RoPE module, got {type(rope).__name__}")
        outside: Any = rope  # NAF's own class: its sizes are plain attributes torch's typing does not know
        self.heads, self.d, self.size = int(outside.num_heads), int(outside.D_head), tuple(size)
        if self.d % 2:
            raise ValueError(f"rope: head dim {self.d} is odd, so there are no halves to pair")
        ref = next(iter(rope.buffers()), torch.zeros(()))
        first = _first_halves(self.heads, self.d, self.size, ref)
        with torch.no_grad():
            on_first, on_second = rope(first.clone()), rope(1 - first)  # [cos, sin] and [-sin, cos] per head
        cos = torch.where(first > 0, on_first, on_second)
        # the control drops the rotation's sign (+sin on the first half), as if the Neg were simply removed
        signed_sin = torch.where(first > 0, -on_second if control else on_second, on_first)
        self.register_buffer("cos", cos)
        self.register_buffer("signed_sin", signed_sin)

    def swap(self, x: Tensor) -> Tensor:
        """Each head's two halves exchanged, by channel Slices and one Concat."""
        h = self.d // 2
        parts = []
        for n in range(self.heads):
            parts += [x[:, n * self.d + h : (n + 1) * self.d], x[:, n * self.d : n * self.d + h]]
        return torch.cat(parts, 1)

    def forward(self, x: Tensor, *rest: Any, **kwargs: Any) -> Tensor:
        if tuple(x.shape[2:]) != self.size or x.shape[1] != self.heads * self.d:
            raise ValueError(
                f"ImageRopeTables was built for [B, {self.heads * self.d}, {self.size[0]}, {self.size[1]}] images, "
                f"got shape {tuple(x.shape)}"
            )
        return x * self.cos + self.swap(x) * self.signed_sin


# -------------------------------------------------------------------------------------------- upsampling


@contextlib.contextmanager
def nearest_as_resize(*, control: bool = False) -> Iterator[None]:
    """Inside the block, `F.interpolate(mode="nearest-exact")` at an integer ratio runs as `mode="nearest"`
    (or, as the control, `"bilinear"`); any other call runs unchanged. Restored on exit."""
    original = F.interpolate

    def interpolate(x: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest", **kw: Any):
        if mode == "nearest-exact" and size is not None and scale_factor is None:
            target = (size, size) if isinstance(size, int) else tuple(size)
            if all(int(t) % int(s) == 0 for t, s in zip(target, x.shape[2:])):
                if control:
                    return original(x, size=target, mode="bilinear", align_corners=False)
                return original(x, size=target, mode="nearest")
        return original(x, size=size, scale_factor=scale_factor, mode=mode, **kw)

    F.interpolate = interpolate  # type: ignore[assignment]  # the same call, narrowed to one mode; restored below
    try:
        yield
    finally:
        F.interpolate = original


class NearestAsResize(nn.Module):
    """A module run under `nearest_as_resize`, so its export holds Resize where it held GatherND."""

    def __init__(self, module: nn.Module, *, control: bool = False) -> None:
        super().__init__()
        self.module, self.control = module, control

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with nearest_as_resize(control=self.control):
            return self.module(*args, **kwargs)


# ------------------------------------------------------------------------------------ attention on images


class ImageLayoutAttention(nn.Module):
    """NAF's attention layer as `image_shift.na2d_image`: forward(q, k, v, *ignored) on images, k/v on the
    coarse grid (the dilation is the ratio of the grids, as NAF computes it), natten's default scale."""

    def __init__(
        self, heads: int, kernel_size: tuple[int, int], scale: float | None = None, *, control: bool = False
    ) -> None:
        super().__init__()
        self.heads, self.kernel_size, self.scale = heads, tuple(kernel_size), scale
        every = self.kernel_size[0] * self.kernel_size[1]
        self.offsets = [o for o in range(every) if o != every // 2] if control else None  # control: centre dropped

    def forward(self, q: Tensor, k: Tensor, v: Tensor, *rest: Any, **kwargs: Any) -> Tensor:
        dilation = (q.shape[2] // k.shape[2], q.shape[3] // k.shape[3])
        return na2d_image(q, k, v, self.kernel_size, dilation, heads=self.heads, scale=self.scale, offsets=self.offsets)


# --------------------------------------------------------------------------------------- whole model


def _root(model: nn.Module) -> nn.Module:
    """The hub model inside a `FixedSize` wrapper: submodules are named as the hub model names them."""
    return model.model if isinstance(model, FixedSize) else model


def module_inputs(model: nn.Module, inputs: Sequence[Any], keep: Callable[[nn.Module], bool]) -> dict[str, tuple]:
    """{module name (as the hub model names it): shape of its first input} for the modules `keep` selects, from one forward pass (the
    RoPE's image size, which its tables need). natten must be swapped out or answerable by the caller."""
    with inputs_seen(model, keep) as shapes, torch.no_grad():
        model(*inputs)
    return shapes


@contextlib.contextmanager
def inputs_seen(model: nn.Module, keep: Callable[[nn.Module], bool]) -> Iterator[dict[str, tuple]]:
    """`module_inputs` of whatever forward passes of `model` run inside the block (a pass the caller makes anyway)."""
    shapes: dict[str, tuple] = {}

    def seen(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple) -> None:  # returns None: the inputs pass unchanged
            shapes.setdefault(name, tuple(args[0].shape))

        return hook

    handles = [m.register_forward_pre_hook(seen(n)) for n, m in _root(model).named_modules() if keep(m)]
    try:
        yield shapes
    finally:
        for h in handles:
            h.remove()


def rewritten(
    model: nn.Module,
    changes: Sequence[str],
    *,
    layer: str,
    heads: int,
    kernel_size: tuple[int, int],
    scale: float | None = None,
    rope_sizes: dict[str, tuple] | None = None,
    control: str | None = None,
) -> nn.Module:
    """A deep copy of `model` with `changes` applied (the original is left as it was).

    `layer` names the attention layer as `naf.find_attention_layer` found it (names are the hub model's,
    also when `model` is its `FixedSize` wrapper);
    `heads`/`kernel_size`/`scale` are natten's call there; `rope_sizes` the RoPE modules' input shapes
    (`module_inputs`), needed by `rope`. `control` names one change to apply as its negative control.
    """
    changes = _check_changes(changes)
    if control is not None and control not in changes:
        raise ValueError(f"control: {control!r} is not among the changes {changes}")
    if "image" in changes and "resize" in changes:
        raise ValueError("changes: 'image' replaces the attention layer, whose resize then no longer exists")
    out = copy.deepcopy(model)
    root = _root(out)
    if "groupnorm" in changes:
        norms = [(n, m) for n, m in root.named_modules() if isinstance(m, nn.GroupNorm)]
        if not norms:
            raise ValueError("groupnorm: the model has no nn.GroupNorm")
        for name, norm in norms:
            root.set_submodule(name, PooledGroupNorm(norm, control=control == "groupnorm"))
    if "rope" in changes:
        ropes = [n for n, m in root.named_modules() if is_rope(m)]
        sizes = rope_sizes or {}
        missing = [n for n in ropes if n not in sizes]
        if not ropes or missing:
            raise ValueError(f"rope: the model's RoPE modules {ropes} need their input shapes, missing {missing}")
        for name in ropes:
            size = tuple(sizes[name][2:])
            root.set_submodule(name, ImageRopeTables(root.get_submodule(name), size, control=control == "rope"))
    if "resize" in changes:
        root.set_submodule(layer, NearestAsResize(root.get_submodule(layer), control=control == "resize"))
    if "image" in changes:
        root.set_submodule(layer, ImageLayoutAttention(heads, kernel_size, scale, control=control == "image"))
    return out
