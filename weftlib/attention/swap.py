"""natten swapped out of an unmodified model for export: its na2d calls routed to one exact formulation.

A model calls natten by whatever names it imported (`natten.na2d`, `from natten import na2d`), and natten
has no ONNX export, so `swap_natten` rebinds every such name to `na2d(..., method=...)` for one block,
refusing what the formulations cannot do (stride, causal masks, extra keys, the LSE) rather than ignoring
it. `rebound_na2d` is the rebinding alone (naf also uses it to answer with real natten on CPU), and
`lowres_from_full` recovers the low-res k/v grid that 'lowres' takes from the upsampled k/v natten sees.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import torch
from torch import Tensor

from weftlib.onnx_core.tracing import is_tracing

from .neighborhood import as_pair, check_method, na2d, upsample_nearest


def _check_swap_extras(stride: Any, is_causal: Any, additional_keys: Any, return_lse: Any) -> None:
    """What natten's na2d can do and these formulations do not: refused, never silently ignored."""
    if stride is not None and as_pair(stride, "stride", 1) != (1, 1):
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
    dh, dw = as_pair(dilation, "dilation", 1)
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
    check_method(method)
    import natten.functional

    original = natten.functional.na2d
    with rebound_na2d(_swapped_na2d(method, original)):
        yield


@contextlib.contextmanager
def rebound_na2d(replacement: Any) -> Iterator[None]:
    """Every module attribute holding natten's na2d as it stands now (natten.na2d, natten.functional.na2d,
    a model file's `from natten import na2d`) rebound to `replacement`; restored on exit, also on error."""
    import natten.functional

    with contextlib.ExitStack() as patches:
        for module, name in _holders(natten.functional.na2d):
            patches.enter_context(mock.patch.object(module, name, replacement))
        yield
