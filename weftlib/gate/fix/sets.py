"""The input sets a fix is proven on: random values of each input's type and shape, the caller's own example
inputs (held to the graph's inputs first), and varied sets tried only where the random ones leave an output
unproven or a rewritten node unreached.

Random normal inputs rarely drive a branch condition such as "every element above zero" or keep a Log finite,
so where the first sets leave something unproven the proof tries inputs pushed one way: every float input
positive, negative, zero, a thousand times larger or smaller, integers at the ends of their range, booleans
all true or all false, then further seeds. Each is an input set like any other: both graphs run it and it is
judged as the others are.

Each set says where it came from (`SetOrigin`): the geometry it ran at, where its inputs came from and what
its outputs were held to. A graph whose exporter recorded a run beside it (`recorded`) is proven by `Plan.RECORDED`:
that run at full geometry, and random sets on the same builder's graph at a reduced geometry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...onnx_core import runtime

SYMBOLIC = 2  # the size a symbolic dimension takes in the random sets
INDEX_RANGE = 3  # integer inputs are drawn from [0, 3): most int inputs index something small
MORE_SEEDS = (3, 4, 5)  # the plain random sets tried after the varied ones
THE_ORIGINAL = "the original graph in onnxruntime"  # what a set's outputs are held to, unless recorded


class Plan(StrEnum):
    """How a fix was proven: which sets, at which geometry (`fix.json`'s `proof.plan`)."""

    FULL = "every set at the graph's own geometry"  # random (and varied) sets, the original run on each
    RECORDED = (
        "the exporter's own run at full geometry, its outputs the reference, and random sets on the same "
        "builder's graph at a reduced geometry"
    )


class Geometry(StrEnum):
    """The geometry a set ran at."""

    FULL = "full"  # the graph being fixed, as exported
    REDUCED = "reduced"  # the same builder's graph at a smaller size (`recorded`), fixed by the same rewrites


@dataclass(frozen=True)
class SetOrigin:
    """Where one input set came from: its geometry (with its input shapes), its inputs, its reference."""

    geometry: Geometry
    shapes: str  # "name [d, ...], ..." of the inputs it fed
    inputs: str  # "random seed 0", "recorded by the exporter (02)", ...
    reference: str = THE_ORIGINAL

    def as_json(self) -> dict[str, str]:
        return {"geometry": f"{self.geometry} ({self.shapes})", "inputs_from": self.inputs, "reference": self.reference}


def shapes_text(feeds: Mapping[str, Any]) -> str:
    """The inputs' shapes in words: "x [1, 4, 8], y [2]"."""
    return ", ".join(f"{name} {list(np.shape(a))}" for name, a in feeds.items())


def _push(floats: Callable[[np.ndarray], np.ndarray], ints: int | None, flag: bool | None) -> Callable[..., Any]:
    """A variation: floats mapped by `floats`, integers set to `ints` (None: kept), booleans to `flag`."""

    def vary(a: np.ndarray) -> np.ndarray:
        if a.dtype == np.bool_:
            return a if flag is None else np.full_like(a, flag)
        if a.dtype.kind in "iu":
            return a if ints is None else np.full_like(a, ints)
        return floats(a).astype(a.dtype)

    return vary


VARIATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "every input positive": _push(np.abs, INDEX_RANGE - 1, True),
    "every input negative": _push(lambda a: -np.abs(a), 0, False),
    "every input zero": _push(np.zeros_like, 0, False),
    "inputs x 1000": _push(lambda a: a * 1000, None, None),
    "inputs x 0.001": _push(lambda a: a * 0.001, None, None),
}


def random_sets(session: Any, seeds: tuple[int, ...] | list[int]) -> dict[str, dict[str, np.ndarray]]:
    """One set of random inputs per seed (`runtime.random_feeds`), labelled by its seed."""
    return {
        f"random seed {s}": runtime.random_feeds(session, s, symbolic=SYMBOLIC, index_range=INDEX_RANGE) for s in seeds
    }


def varied_sets(session: Any) -> dict[str, dict[str, np.ndarray]]:
    """The sets tried where the first leave something unproven: seed 0's inputs pushed one way each
    (`VARIATIONS`), then the random sets of `MORE_SEEDS`."""
    base = runtime.random_feeds(session, 0, symbolic=SYMBOLIC, index_range=INDEX_RANGE)
    pushed = {
        f"random seed 0, {label}": {name: vary(a) for name, a in base.items()} for label, vary in VARIATIONS.items()
    }
    return pushed | random_sets(session, MORE_SEEDS)


def _misfit(name: str, array: np.ndarray, kind: onnx.TypeProto.Tensor) -> str | None:
    """Why `array` cannot be the graph's input `name` of type `kind`, None when it can."""
    if not kind.elem_type:
        return f"the graph's input {name!r} is not a tensor"
    want = np.dtype(helper.tensor_dtype_to_np_dtype(kind.elem_type))
    if array.dtype != want:
        return f"input {name!r} is {array.dtype}, the graph's is {want}"
    dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
    if kind.HasField("shape") and (
        array.ndim != len(dims) or any(d is not None and d != n for d, n in zip(dims, array.shape, strict=True))
    ):
        return f"input {name!r} has shape {list(array.shape)}, the graph's is {[d if d is not None else '?' for d in dims]}"
    if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
        return f"input {name!r} holds values that are not finite (NaN or inf)"
    return None


def mismatch(examples: Mapping[str, Mapping[str, Any]], model: onnx.ModelProto) -> str | None:
    """Why an example set does not fit the graph's inputs (a name missing or unknown, another dtype, another
    shape, a value that is not finite), in one line naming the set and the input; None when every set fits."""
    weights = {t.name for t in model.graph.initializer}
    declared = {v.name: v.type.tensor_type for v in model.graph.input if v.name not in weights}
    listed = ", ".join(repr(n) for n in declared)
    for label, arrays in examples.items():
        unknown = [name for name in arrays if name not in declared]
        missing = [name for name in declared if name not in arrays]
        why = (
            f"the graph has no input {unknown[0]!r} (its inputs: {listed})"
            if unknown
            else f"no value for the graph's input {missing[0]!r} (its inputs: {listed})"
            if missing
            else next((w for n, k in declared.items() if (w := _misfit(n, np.asarray(arrays[n]), k))), None)
        )
        if why:
            return f"example inputs {label!r}: {why}"
    return None
