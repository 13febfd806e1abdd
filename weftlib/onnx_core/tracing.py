"""Whether a call is being traced: the one check every exportable formulation asks.

While torch.onnx, torch.jit or torch.compile trace a call, its values are symbolic, so a formulation must take
its static-shape form (no chunking, no data-dependent checks); in eager mode it may do either."""

from __future__ import annotations

import torch


def is_tracing(x: torch.Tensor | None = None) -> bool:
    """True under torch.onnx export, torch.jit tracing or torch.compile, or when `x` is a fake tensor (the
    exporter's symbolic values)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return bool(
        torch.onnx.is_in_onnx_export()
        or torch.jit.is_tracing()
        or torch.compiler.is_compiling()
        or isinstance(x, FakeTensor)
    )
