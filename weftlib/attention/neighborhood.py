"""natten's 2-D neighborhood attention, reformulated exactly in plain, exportable torch: the one entry.

ONNX has no neighborhood-attention operator and natten has no ONNX export, so `na2d` re-expresses
`natten.functional.na2d` (stride 1, not causal) in several ways selectable by `method`, each using only
static-shape ops with constant indices (see `weftlib.attention.formulations`). Real natten, the reference
it is proven against, is in `reference`; routing an unmodified model's natten calls here is in `swap`.

Argument checks mirror natten's own refusals (same exception types, the argument named) and are kept
apart from the compute; where natten refuses, so does `na2d`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from . import formulations
from .formulations import Pair

METHODS = tuple(formulations.FORMULATIONS)  # the formulations' names, defined once with them


# ---------------------------------------------------------------------------------------------- checks


def as_pair(value: Any, name: str, minimum: int) -> Pair:
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


def check_method(method: Any) -> str:
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


def check_args(
    q: Any, k: Any, v: Any, kernel_size: Any, dilation: Any, method: Any, scale: Any
) -> tuple[Pair, Pair, float]:
    """Every refusal before any compute; returns normalised (kernel, dilation, scale)."""
    check_method(method)
    _check_tensors(q, k, v, method)
    kernel = as_pair(kernel_size, "kernel_size", 2)
    dil = as_pair(dilation, "dilation", 1)
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
    kernel, dil, scale_ = check_args(q, k, v, kernel_size, dilation, method, scale)
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
        as_pair(kernel_size, "kernel_size", 2)
        as_pair(dilation, "dilation", 1)
        check_method(method)
        _check_scale(scale)
        self.kernel_size, self.dilation, self.method, self.scale = kernel_size, dilation, method, scale

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return na2d(q, k, v, self.kernel_size, self.dilation, method=self.method, scale=self.scale)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, method={self.method!r}"


def upsample_nearest(x: Tensor, factor: int | Sequence[int]) -> Tensor:
    """`[B, h, w, heads, D]` -> `[B, h*fh, w*fw, heads, D]`, nearest (what F.interpolate does for an integer
    ratio): the full-resolution k/v natten sees in NAF, to check 'lowres' against `natten_reference`."""
    fh, fw = as_pair(factor, "factor", 1)
    return x.repeat_interleave(fh, dim=1).repeat_interleave(fw, dim=2)
