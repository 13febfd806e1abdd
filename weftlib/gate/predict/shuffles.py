"""What a Reshape does to the axes of its input: the DFC turns each into a layer by kind (a format
conversion, a shortcut) or refuses it as a shuffle it cannot type, so the kind is what the rules read.

`axis_groups` pairs the input's axes with the output's in the smallest runs of equal product; a run of one
input axis onto several output axes is a split, the reverse a merge, one onto one with equal size kept.

The ops that move data and compute nothing are named here once, by what each does, and the three sets the
gate reads are made of them, each for its own question:

- `SHUFFLES` (the prediction, `nodes`): a refused one loses the format the parser tracked, where a refused op
  that computes leaves it unknown. A pick (Gather) is not among them: refused, it leaves the format unknown.
- `SLICING` (a head split's path to its Transpose, `rules`): the ops a split may pass through and still be
  "sliced", not "interrupted": the cuts and picks of a tensor and the views that only drop or add a unit axis.
  A Reshape or Transpose on the way is not slicing, and a copy (Expand, Tile, Concat) is not either.
- `ABSORBED_AT_END` (the cut, `partition`): the views, permutes and the pass-through the parser may fold into
  the layer before, so an end node of that kind may be missing in the HN (InvalidHNError).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

Shape = tuple[int, ...]

VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})  # a new shape, the data in its order
UNIT_VIEWS = frozenset({"Squeeze", "Unsqueeze"})  # the views that only drop or add an axis of size 1
PERMUTES = frozenset({"Transpose"})
CUTS = frozenset({"Split", "Slice"})  # parts of the data, each in its order
PICKS = frozenset({"Gather"})  # elements chosen by index
COPIES = frozenset({"Expand", "Tile", "Concat"})  # the data repeated or joined
PASS_THROUGH = frozenset({"Identity"})

SHUFFLES = VIEWS | PERMUTES | CUTS | COPIES
SLICING = CUTS | PICKS | UNIT_VIEWS | PASS_THROUGH
ABSORBED_AT_END = VIEWS | PERMUTES | PASS_THROUGH


@dataclass(frozen=True)
class Group:
    """Input axes `src` become output axes `dst` (their products are equal)."""

    src: tuple[int, ...]
    dst: tuple[int, ...]


def axis_groups(before: Sequence[int], after: Sequence[int]) -> tuple[Group, ...] | None:
    """The runs of axes with equal product, in order; None when the sizes do not match up (or are unknown)."""
    a, b = list(before), list(after)
    if any(not isinstance(d, int) or d < 1 for d in a + b) or prod(a) != prod(b):
        return None
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        src, dst = [], []
        pa = pb = 1
        if i < len(a):
            src.append(i)
            pa = a[i]
        if j < len(b):
            dst.append(j)
            pb = b[j]
        while pa != pb:
            if pa < pb and i + 1 < len(a):
                i += 1
                src.append(i)
                pa *= a[i]
            elif j + 1 < len(b):
                j += 1
                dst.append(j)
                pb *= b[j]
            else:
                return None
        groups.append(Group(tuple(src), tuple(dst)))
        i, j = i + 1, j + 1
    return tuple(groups)


def _real(axes: tuple[int, ...], shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(ax for ax in axes if shape[ax] != 1)


def split_last(before: Sequence[int], after: Sequence[int]) -> bool:
    """The last axis is factored into two or more (each > 1); every other axis is kept as it was.

    [B, S, C] -> [B, S, H, d] (a head split), [S, C] -> [S, H, d], [B, S, 3C] -> [B, S, 3, H, d]."""
    groups = axis_groups(before, after)
    if not groups or len(after) <= len(before):
        return False
    *kept, last = groups
    return (
        last.src == (len(before) - 1,)
        and len(_real(last.dst, after)) >= 2
        and all(len(g.src) == len(g.dst) == 1 and before[g.src[0]] == after[g.dst[0]] for g in kept)
    )


def merge_last(before: Sequence[int], after: Sequence[int]) -> bool:
    """The last two or more axes are merged into one; every other axis is kept ([B, S, H, d] -> [B, S, H*d])."""
    return split_last(after, before)


def splits_axis(before: Sequence[int], after: Sequence[int], axis: int) -> bool:
    """Input axis `axis` (size > 1) is factored into two or more output axes of size > 1, alone or with
    size-1 neighbours: [1, C, 1, S] -> [1, H, d, S] splits axis 1."""
    groups = axis_groups(before, after)
    if not groups:
        return False
    for g in groups:
        if axis in g.src:
            return _real(g.src, before) == (axis,) and len(_real(g.dst, after)) >= 2
    return False


def batch_changed(before: Sequence[int], after: Sequence[int]) -> bool:
    """The leading (batch) axis is not carried through unchanged: something moved into or out of it."""
    groups = axis_groups(before, after)
    if not before or not after:
        return False
    if groups is None:
        return before[0] != after[0]
    first = groups[0]
    return before[0] != after[0] or len(first.src) != 1 or len(first.dst) != 1
