"""The NAF upsampler as one exportable graph, and natten's own answer for the same call on CPU.

NAF's forward takes `output_size` as a Python tuple, so the export wraps it with the size fixed (the
accelerator compiles one geometry anyway). natten cannot run NAF's call on CPU as written (it asks for
`backend="cutlass-fna"` and a value head dim different from the query's), so `natten_output` answers it
with real natten through `attention.natten_reference` (Flex backend, v in chunks): the export is compared
with natten itself, not with another formulation of ours.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator
from unittest import mock

import torch
from torch import nn

from . import neighborhood as attention


class FixedSize(nn.Module):
    """`model(image, lr_feats, output_size)` with `output_size` frozen, so the graph takes tensors only."""

    def __init__(self, model: nn.Module, output_size: tuple[int, int]) -> None:
        super().__init__()
        if len(output_size) != 2 or not all(isinstance(s, int) and s > 0 for s in output_size):
            raise ValueError(f"output_size must be two positive ints, got {output_size!r}")
        self.model, self.output_size = model, tuple(output_size)

    def forward(self, image: torch.Tensor, lr_feats: torch.Tensor) -> torch.Tensor:
        return self.model(image, lr_feats, self.output_size)


def _natten_via_reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kernel_size: Any,
    stride: Any = 1,
    dilation: Any = 1,
    is_causal: Any = False,
    scale: Any = None,
    **performance_knobs: Any,
) -> torch.Tensor:
    """natten.na2d's signature, answered by real natten's Flex backend (backend/tile knobs dropped)."""
    if stride not in (1, (1, 1)) or is_causal not in (False, None, (False, False)):
        raise ValueError(f"natten reference: stride {stride!r} / is_causal {is_causal!r} are not supported")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Flex warns on every uncompiled call
        return attention.natten_reference(query, key, value, kernel_size, dilation, scale)


@contextlib.contextmanager
def natten_on_cpu() -> Iterator[None]:
    """Inside the block `natten.na2d` runs real natten on CPU for any head dims. Covers callers that look
    `natten.na2d` up at call time, as the stand-in and NAF do; `natten.functional.na2d` stays the real
    function, which the reference itself calls."""
    import natten

    with mock.patch.object(natten, "na2d", _natten_via_reference):
        yield


def natten_output(model: nn.Module, *args: torch.Tensor) -> torch.Tensor:
    """`model(*args)` with its natten calls answered by real natten (no grad)."""
    with natten_on_cpu(), torch.no_grad():
        return model(*args)


def reference_output(model: nn.Module, *args: torch.Tensor, reference: str = "natten") -> torch.Tensor:
    """The answer the export is checked against: real natten, or (where natten's dense CPU path cannot
    hold the scores, e.g. 512^2 queries) one of our formulations already proven equal to natten."""
    if reference == "natten":
        return natten_output(model, *args)
    if reference not in attention.METHODS:
        raise ValueError(f"reference must be 'natten' or one of {attention.METHODS}, got {reference!r}")
    with attention.swap_natten(reference), torch.no_grad():
        return model(*args)
