"""natten's 2-D neighborhood attention, reformulated exactly in plain, exportable torch.

ONNX has no neighborhood-attention operator and natten has no ONNX export, so `na2d` re-expresses
`natten.functional.na2d` (stride 1, not causal) in several ways selectable by `method`, each using only
static-shape ops with constant indices (see `weftlib.attention.formulations`). `natten_reference` runs real natten for
the equality proof, and `swap_natten` routes an unmodified model's natten calls to a formulation.

Argument checks mirror natten's own refusals (same exception types, the argument named) and are kept
apart from the compute; where natten refuses, so does `na2d`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Sequence
from typing import Any
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from weftlib.onnx_core.tracing import is_tracing

from . import formulations
from .formulations import Pair

METHODS = ("masked", "gather", "matmul", "shift", "lowres")


# ---------------------------------------------------------------------------------------------- checks


def _pair(value: Any, name: str, minimum: int) -> Pair:
    """natten's int-or-per-axis rule: an int >= minimum, or a sequence of two such ints."""
    if value is None and name == "dilation":
        return (1, 1)
    if isinstance(value, int) and value >= minimum:
        return (value, value)
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == 2
        and all(isinstance(x, int) and x >= minimum for x in value)
    ):
        return (value[0], value[1])
    raise ValueError(
        f"Invalid value for `{name}`; expected an integer or a sequence of 2 integers, all "
        f">= {minimum}, got {type(value).__name__} {value!r}."
    )


def _check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(f"Invalid value for `method`; expected one of {METHODS}, got {method!r}.")
    return method


def _check_tensor(name: str, t: Any) -> None:
    """natten's refusals of one argument: not a tensor, sparse or nested, or not 5-D."""
    if not isinstance(t, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(t).__name__}.")
    if t.is_sparse or t.is_nested:
        raise NotImplementedError(f"`{name}` is a sparse or nested tensor; NATTEN does not support those.")
    if t.dim() != 5:
        raise ValueError(
            f"`{name}` must be 5-D [batch, H, W, heads, head_dim] for 2-D neighborhood "
            f"attention, got shape {tuple(t.shape)}."
        )


def _check_tensors(q: Any, k: Any, v: Any, method: str) -> None:
    """natten's tensor refusals for 2-D NA (plus the lowres grid rule), each naming the culprit."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        _check_tensor(name, t)
    if not (q.device == k.device == v.device):
        raise ValueError(f"query, key and value must be on the same device, got {q.device}, {k.device}, {v.device}.")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"query, key and value must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")
    if not q.is_floating_point():
        raise ValueError(f"query, key and value must be floating point, got {q.dtype}.")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"query and key head dims must match, got {q.shape[-1]} and {k.shape[-1]}.")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(
            f"query, key and value must match in batch size, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}."
        )
    if k.shape[1:3] != v.shape[1:3]:
        raise ValueError(
            f"key and value must share a token layout, got {tuple(k.shape[1:3])} and {tuple(v.shape[1:3])}."
        )
    if method != "lowres" and q.shape[1:3] != k.shape[1:3]:
        raise ValueError(
            f"query, key and value must match in token layout (H, W), got {tuple(q.shape[1:3])} "
            f"and {tuple(k.shape[1:3])}; only method='lowres' takes k/v on a coarser grid."
        )
    if k.shape[3] != v.shape[3]:
        raise ValueError(f"key and value must have the same number of heads, got {k.shape[3]} and {v.shape[3]}.")
    if q.shape[3] < k.shape[3] or q.shape[3] % k.shape[3]:
        raise ValueError(f"key/value heads must evenly divide query heads, got {q.shape[3]} and {k.shape[3]}.")


def _check_sizes(q: Tensor, k: Tensor, kernel: Pair, dilation: Pair, method: str) -> None:
    """natten's kernel x dilation <= size rule, and for 'lowres' the exactness condition."""
    size = tuple(q.shape[1:3])
    if any(kk * d > s for kk, d, s in zip(kernel, dilation, size)):
        raise ValueError(
            f"The product of `kernel_size` and `dilation` cannot exceed the input size along any "
            f"axis, got input size {size}, kernel_size={kernel}, dilation={dilation}."
        )
    if method == "lowres":
        low = tuple(k.shape[1:3])
        if any(s != n * d for s, n, d in zip(size, low, dilation)):
            raise ValueError(
                f"method='lowres' is exact only when k/v were nearest-resized to the query grid by an "
                f"integer ratio equal to `dilation` (query size = k/v size x dilation per axis), got query "
                f"size {size}, k/v size {low}, dilation={dilation}."
            )


def _check_scale(scale: Any) -> None:
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise ValueError(f"Invalid value for `scale`; expected a number or None, got {scale!r}.")


def _check_args(
    q: Any, k: Any, v: Any, kernel_size: Any, dilation: Any, method: Any, scale: Any
) -> tuple[Pair, Pair, float]:
    """Every refusal before any compute; returns normalised (kernel, dilation, scale)."""
    _check_method(method)
    _check_tensors(q, k, v, method)
    kernel = _pair(kernel_size, "kernel_size", 2)
    dil = _pair(dilation, "dilation", 1)
    _check_scale(scale)
    _check_sizes(q, k, kernel, dil, method)
    # natten: `scale or head_dim ** -0.5` (a zero scale also means the default)
    return kernel, dil, float(scale or q.shape[-1] ** -0.5)


# ----------------------------------------------------------------------------------------------- public


def _expand_heads(x: Tensor, heads: int) -> Tensor:
    """GQA/MQA as natten's Flex backend does it: query head `i` uses key/value head `i // (heads / kv)`."""
    groups = heads // x.shape[3]
    if groups == 1:
        return x
    b, h, w, kv, d = x.shape
    return x.unsqueeze(4).expand(b, h, w, kv, groups, d).reshape(b, h, w, heads, d)


def na2d(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    *,
    method: str = "shift",
    scale: float | None = None,
) -> Tensor:
    """natten.functional.na2d (stride 1, not causal) by the named exact formulation.

    q `[B, H, W, heads, D]`, k likewise (`[B, h, w, heads_kv, D]` for 'lowres', with `H = h * dilation`),
    v likewise with its own head dim. Returns `[B, H, W, heads, Dv]`. Default scale `D ** -0.5`.
    """
    kernel, dil, scale_ = _check_args(q, k, v, kernel_size, dilation, method, scale)
    heads = q.shape[3]
    return formulations.FORMULATIONS[method](q, _expand_heads(k, heads), _expand_heads(v, heads), kernel, dil, scale_)


class NA2d(nn.Module):
    """`na2d` with fixed arguments as a module, to export one formulation on its own."""

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        dilation: int | Sequence[int] = 1,
        method: str = "shift",
        scale: float | None = None,
    ) -> None:
        super().__init__()
        _pair(kernel_size, "kernel_size", 2)
        _pair(dilation, "dilation", 1)
        _check_method(method)
        _check_scale(scale)
        self.kernel_size, self.dilation, self.method, self.scale = kernel_size, dilation, method, scale

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return na2d(q, k, v, self.kernel_size, self.dilation, method=self.method, scale=self.scale)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, method={self.method!r}"


def upsample_nearest(x: Tensor, factor: int | Sequence[int]) -> Tensor:
    """`[B, h, w, heads, D]` -> `[B, h*fh, w*fw, heads, D]`, nearest (what F.interpolate does for an integer
    ratio): the full-resolution k/v natten sees in NAF, to check 'lowres' against `natten_reference`."""
    fh, fw = _pair(factor, "factor", 1)
    return x.repeat_interleave(fh, dim=1).repeat_interleave(fw, dim=2)


# ------------------------------------------------------------------------------------------- reference


def _real_natten_na2d() -> Any:
    """natten.functional.na2d as installed, even inside `swap_natten` (the swap keeps the original)."""
    import natten.functional

    fn = natten.functional.na2d
    while hasattr(fn, "_weftlib_original"):
        fn = fn._weftlib_original
    return fn


def _pad_last(x: Tensor, size: int) -> Tensor:
    return x if x.shape[-1] == size else torch.nn.functional.pad(x, (0, size - x.shape[-1]))


def natten_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    scale: float | None = None,
) -> Tensor:
    """Real natten (its Flex backend on CPU) for any q/k and v head dims, by exact rewrites.

    Flex needs equal q/k/v head dims that are powers of two in [8, 512]. Zero-padding q and k to such a dim
    leaves every dot product unchanged (the scale is passed explicitly), and v is zero-padded and cut into
    chunks of that dim, stacked along the batch: attention weights do not depend on v, so each chunk's
    output is the matching slice of the full output.
    """
    _check_args(q, k, v, kernel_size, dilation, "shift", scale)
    d = q.shape[-1]
    dp = 1 << max(3, math.ceil(math.log2(d)))
    if dp > 512:
        raise ValueError(f"natten's Flex backend takes head dims up to 512, got query head dim {d}.")
    scale_ = float(scale or d**-0.5)
    dv = v.shape[-1]
    chunks = -(-dv // dp)
    qp, kp = _pad_last(q, dp), _pad_last(k, dp)
    vp = _pad_last(v, chunks * dp)
    b, h, w, heads_kv, _ = v.shape
    v_stack = (
        vp.reshape(b, h, w, heads_kv, chunks, dp).permute(4, 0, 1, 2, 3, 5).reshape(chunks * b, h, w, heads_kv, dp)
    )
    q_stack, k_stack = (t.repeat(chunks, 1, 1, 1, 1) for t in (qp, kp))
    out = _real_natten_na2d()(q_stack, k_stack, v_stack, kernel_size=kernel_size, dilation=dilation, scale=scale_)
    out = out.reshape(chunks, b, h, w, q.shape[3], dp).permute(1, 2, 3, 4, 0, 5)
    return out.reshape(b, h, w, q.shape[3], chunks * dp)[..., :dv]


# ------------------------------------------------------------------------------------------------ swap


def _check_swap_extras(stride: Any, is_causal: Any, additional_keys: Any, return_lse: Any) -> None:
    """What natten's na2d can do and these formulations do not: refused, never silently ignored."""
    if stride is not None and _pair(stride, "stride", 1) != (1, 1):
        raise ValueError(f"swap_natten: `stride` must be 1 (the formulations are stride-1 only), got {stride!r}.")
    causal = is_causal if isinstance(is_causal, Sequence) else (is_causal,)
    if any(c is not None and c is not False for c in causal):
        raise ValueError(
            f"swap_natten: `is_causal` must be False (the formulations are not causal), got {is_causal!r}."
        )
    if additional_keys is not None:
        raise ValueError("swap_natten: `additional_keys`/`additional_values` are not supported.")
    if return_lse:
        raise ValueError("swap_natten: `return_lse=True` is not supported (the formulations return the output only).")


def lowres_from_full(x: Tensor, dilation: int | Sequence[int], *, verify: bool = True) -> Tensor:
    """The low-res grid of a nearest-upsampled k/v: every `dilation`-th token (strided Slice).

    With `verify` (skipped while tracing), refuse when `x` is not exactly the nearest upsampling of that
    grid, because then 'lowres' would not equal natten.
    """
    dh, dw = _pair(dilation, "dilation", 1)
    if x.shape[1] % dh or x.shape[2] % dw:
        raise ValueError(
            f"method='lowres' needs the k/v grid {tuple(x.shape[1:3])} to be a multiple of `dilation` {(dh, dw)}."
        )
    low = x[:, ::dh, ::dw]
    if verify and not is_tracing(x) and not torch.equal(upsample_nearest(low, (dh, dw)), x):
        raise ValueError(
            "method='lowres' needs k and v to be nearest-upsampled by `dilation` (constant on each "
            "dilation x dilation cell); these are not, so 'lowres' would differ from natten."
        )
    return low


def _swapped_na2d(method: str, original: Any) -> Any:
    """A drop-in for natten's na2d signature that routes to `na2d(..., method=method)`."""

    def na2d_swapped(
        query: Tensor,
        key: Tensor,
        value: Tensor,
        kernel_size: Any,
        stride: Any = 1,
        dilation: Any = 1,
        is_causal: Any = False,
        scale: float | None = None,
        additional_keys: Tensor | None = None,
        additional_values: Tensor | None = None,
        attention_kwargs: dict | None = None,
        backend: str | None = None,
        q_tile_shape: Any = None,
        kv_tile_shape: Any = None,
        backward_q_tile_shape: Any = None,
        backward_kv_tile_shape: Any = None,
        backward_kv_splits: Any = None,
        backward_use_pt_reduction: bool = False,
        run_persistent_kernel: bool = True,
        kernel_schedule: Any = None,
        torch_compile: bool = False,
        return_lse: bool = False,
    ) -> Tensor:
        _check_swap_extras(
            stride, is_causal, additional_keys if additional_keys is not None else additional_values, return_lse
        )
        if method == "lowres":
            key, value = (lowres_from_full(t, dilation if dilation is not None else 1) for t in (key, value))
        return na2d(query, key, value, kernel_size, dilation, method=method, scale=scale)

    functools.update_wrapper(na2d_swapped, original, assigned=("__name__", "__qualname__", "__doc__"))
    na2d_swapped._weftlib_original = original  # type: ignore[attr-defined]
    na2d_swapped._weftlib_method = method  # type: ignore[attr-defined]
    return na2d_swapped


def _holders(target: Any) -> list[tuple[Any, str]]:
    """Every (module, attribute) in sys.modules bound to `target`, e.g. after `from natten import na2d`."""
    found: list[tuple[Any, str]] = []
    for module in list(sys.modules.values()):
        try:
            names = [name for name, value in vars(module).items() if value is target]
        except TypeError:  # objects without a __dict__ that sit in sys.modules
            continue
        found.extend((module, name) for name in names)
    return found


@contextlib.contextmanager
def swap_natten(method: str = "shift") -> Iterator[None]:
    """Inside the block, every call to natten's `na2d` runs `na2d(..., method=method)` instead.

    Rebinds natten.na2d, natten.functional.na2d and every module attribute that holds the same function
    (modules that did `from natten import na2d` before the swap, natten.modules included); all are
    restored on exit, also on error. natten's performance knobs (backend, tile shapes, torch_compile) are
    accepted and ignored; stride != 1, causal masks, additional keys and return_lse are refused.
    """
    _check_method(method)
    import natten.functional

    original = natten.functional.na2d
    with rebound_na2d(_swapped_na2d(method, original)):
        yield


@contextlib.contextmanager
def rebound_na2d(replacement: Any) -> Iterator[None]:
    """Every module attribute holding natten's na2d as it stands now (natten.na2d, natten.functional.na2d,
    a model file's `from natten import na2d`) rebound to `replacement`; restored on exit, also on error."""
    import natten.functional

    current = natten.functional.na2d
    holders = _holders(current)
    try:
        for module, name in holders:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name in holders:
            setattr(module, name, current)
