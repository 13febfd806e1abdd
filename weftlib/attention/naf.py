"""NAF's upsampler and its attention layer as exportable graphs, and natten's own answer for the same calls.

NAF's forward takes `output_size` as a Python tuple, so the export wraps it with the size fixed (the
accelerator compiles one geometry anyway). natten cannot run NAF's call on CPU as written (it asks for
`backend="cutlass-fna"` and a value head dim different from the query's), so `natten_output` answers it
with real natten through `attention.natten_reference` (Flex backend, v in chunks): the export is compared
with natten itself, not with another formulation of ours.

The same cells run on the stand-in or on a real valeoai/NAF checkout (`load_hub`). The attention layer is
found by behaviour, not by name (`find_attention_layer`): the innermost module whose forward is running
when natten's na2d is called, with the arguments its forward received.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import neighborhood as attention
from .reference import natten_reference
from .swap import rebound_na2d, swap_natten


class FixedSize(nn.Module):
    """`model(image, lr_feats, output_size)` with `output_size` frozen, so the graph takes tensors only."""

    def __init__(self, model: nn.Module, output_size: Sequence[int]) -> None:
        super().__init__()
        if len(output_size) != 2 or not all(isinstance(s, int) and s > 0 for s in output_size):
            raise ValueError(f"output_size must be two positive ints, got {output_size!r}")
        self.model = model
        self.output_size: tuple[int, int] = (output_size[0], output_size[1])  # two, checked above

    def forward(self, image: torch.Tensor, lr_feats: torch.Tensor) -> torch.Tensor:
        return self.model(image, lr_feats, self.output_size)


def load_hub(hub_dir: str | Path, entry: str = "naf", **kwargs: Any) -> nn.Module:
    """A hub entry of a local checkout (never fetched: `source="local"`), in eval mode. The entry's code
    runs with the caller's rights; `trust_repo` only silences torch's prompt for a local folder."""
    root = Path(hub_dir)
    if not (root / "hubconf.py").is_file():
        raise FileNotFoundError(f"hub_dir: {str(root)!r} has no hubconf.py, so it is no torch.hub repository")
    return torch.hub.load(str(root), entry or "naf", source="local", trust_repo=True, **kwargs).eval()


# ------------------------------------------------------------------------------------- natten on the CPU


def _via_reference(original: Callable[..., Any]) -> Callable[..., torch.Tensor]:
    """natten.na2d's signature, answered by real natten's Flex backend (backend/tile knobs dropped). It
    keeps `original` where `attention.natten_reference` looks for natten's own function."""

    def na2d_by_flex(
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
        if stride not in (1, (1, 1)) or is_causal not in (False, None, (False, False)):
            raise ValueError(f"natten reference: stride {stride!r} / is_causal {is_causal!r} are not supported")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Flex warns on every uncompiled call
            return natten_reference(query, key, value, kernel_size, dilation, scale)

    na2d_by_flex._weftlib_original = original  # type: ignore[attr-defined]
    return na2d_by_flex


@contextlib.contextmanager
def natten_on_cpu() -> Iterator[None]:
    """Inside the block, natten's na2d runs real natten on CPU for any head dims: through every name a
    caller may hold it by (the stand-in looks `natten.na2d` up at call time, NAF's attentions.py imported
    `na2d` from natten). The reference itself reaches the original through `_real_natten_na2d`."""
    import natten.functional

    with rebound_na2d(_via_reference(natten.functional.na2d)):
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
    with swap_natten(reference), torch.no_grad():
        return model(*args)


# ------------------------------------------------------------------------------------ the attention layer


@dataclass
class AttentionLayer:
    """The module whose forward calls natten's na2d, found in one forward pass of the upsampler.

    `args` are the tensors its forward received, in order (NAF's CrossAttention takes q, k, v and the image,
    which it does not use); `call` the arguments natten's na2d received (kernel_size, dilation, ...), with
    q/k/v replaced by their shapes.
    """

    name: str
    module: nn.Module
    args: tuple[torch.Tensor, ...]
    call: dict[str, Any] = field(default_factory=dict)

    @property
    def parameters(self) -> int:
        """Its own weights (NAF's CrossAttention has none: q and k come from the encoders)."""
        return sum(p.numel() for p in self.module.parameters())

    @property
    def kernel_size(self) -> tuple[int, int]:
        return attention.as_pair(self.call["kernel_size"], "kernel_size", 2)

    @property
    def dilation(self) -> tuple[int, int]:
        return attention.as_pair(self.call.get("dilation", 1), "dilation", 1)

    @property
    def heads(self) -> int:
        return int(self.call["query"][3])

    def describe(self) -> dict[str, Any]:
        """What a table or the record shows: where it sits, its class, its inputs and natten's call."""
        return {
            "module": self.name,
            "class": f"{type(self.module).__module__}.{type(self.module).__qualname__}",
            "parameters": self.parameters,
            "inputs": [list(t.shape) for t in self.args],
            **{k: (list(v) if isinstance(v, torch.Size) else v) for k, v in self.call.items()},
        }


_NA2D_ARGS = ("query", "key", "value", "kernel_size", "stride", "dilation", "is_causal", "scale")


def find_attention_layer(
    model: nn.Module, *inputs: Any, method: str = "lowres", outputs: dict[str, Any] | None = None
) -> AttentionLayer:
    """Run `model(*inputs)` once with natten swapped for `method` and return the innermost module whose
    forward was running when na2d was called (exactly one call is expected), with its forward's inputs.

    `outputs`, when given, receives what that pass computed: `"model"` the model's output and `"layer"` a copy of
    the layer's (the model may change it in place afterwards), both with natten as `method`: at NAF's 512² a pass
    is seconds, and a caller exporting those graphs with `method` need not run them again."""
    root = model.model if isinstance(model, FixedSize) else model  # names as the hub model spells them
    names = {m: n for n, m in root.named_modules()}
    stack: list[tuple[nn.Module, tuple[Any, ...]]] = []
    seen: list[tuple[nn.Module, tuple[Any, ...], dict[str, Any]]] = []

    def enter(module: nn.Module, args: tuple[Any, ...]) -> None:
        stack.append((module, args))

    def leave(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        stack.pop()
        if outputs is not None and seen and module is seen[-1][0] and isinstance(output, torch.Tensor):
            outputs.setdefault("layer", output.clone())  # the forward that called na2d, as it returned

    modules = list(model.modules())
    handles = [m.register_forward_pre_hook(enter) for m in modules] + [m.register_forward_hook(leave) for m in modules]
    with swap_natten(method):
        import natten.functional

        swapped = natten.functional.na2d

        def watched(*args: Any, **kwargs: Any) -> torch.Tensor:
            bound = dict(zip(_NA2D_ARGS, args), **kwargs)
            call = {k: (v.shape if isinstance(v, torch.Tensor) else v) for k, v in bound.items()}
            seen.append((*stack[-1], call) if stack else (model, inputs, call))
            return swapped(*args, **kwargs)

        watched._weftlib_original = swapped  # type: ignore[attr-defined]
        try:
            with rebound_na2d(watched), torch.no_grad():
                result = model(*inputs)
        finally:
            for h in handles:
                h.remove()
    if len(seen) != 1:
        raise ValueError(f"expected one call of natten's na2d in the forward pass, saw {len(seen)}")
    if outputs is not None:
        outputs["model"] = result
    module, args, call = seen[0]
    tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
    return AttentionLayer(names.get(module, "") or "(the model itself)", module, tensors, call)


class Layer(nn.Module):
    """An attention layer called on its first `arity` inputs (q, k, v): the graph of the layer alone. The
    layer sits under its own name (`upsampler` in NAF), so its nodes' origins read as in the whole model."""

    def __init__(self, module: nn.Module, name: str = "layer", arity: int = 3) -> None:
        super().__init__()
        self.key = name.rsplit(".", 1)[-1] or "layer"
        self.add_module(self.key, module)
        self.arity = arity

    @property
    def module(self) -> nn.Module:
        return getattr(self, self.key)

    def forward(self, *qkv: torch.Tensor) -> torch.Tensor:
        return self.module(*qkv[: self.arity])
