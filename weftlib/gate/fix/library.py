"""The library of exact rewrites `gate fix` applies, in the order it tries them, and what each answers.

Folding constants comes first (a folded table can make a later pattern's input constant), the shuffles
next, the ops' own rewrites last. A rewrite not listed here is never applied: the negative control
(`shuffles.WrongOrderBatchFold`) is built by the tests only.
"""

from __future__ import annotations

from .base import ExactRewrite
from .constants import CastLikeOfConstant, RangeOfConstants, TrigOfConstant
from .expand import expand_rewrites
from .gathers import NearestGatherByResize, PixelMapByOneHot
from .groupnorm import GroupNormByReductions
from .heads import (
    DecomposedLayerHeadNormAcrossSplit,
    HeadNormAcrossSplit,
    LayerHeadNormAcrossSplit,
    RmsHeadNormAcrossSplit,
)
from .inputs import InputReshapedAtStart
from .rope import InterleavedRopeByTables, RotateHalfBySignedPermutation
from .shuffles import BatchFoldAroundTranspose, ReshapeChain, ReshapeChainThroughScalar


def default_library() -> list[ExactRewrite]:
    """A fresh instance of every rewrite (each holds the nodes the loop aims it at, so none is shared)."""
    return [
        TrigOfConstant("Cos"),
        TrigOfConstant("Sin"),
        RangeOfConstants(),
        CastLikeOfConstant(),
        *expand_rewrites(),
        InterleavedRopeByTables(),
        RotateHalfBySignedPermutation(),
        BatchFoldAroundTranspose(),
        HeadNormAcrossSplit(),
        RmsHeadNormAcrossSplit(),
        LayerHeadNormAcrossSplit(),
        DecomposedLayerHeadNormAcrossSplit(),
        ReshapeChain(),
        *(ReshapeChainThroughScalar(op) for op in ("Add", "Sub", "Mul", "Div")),
        GroupNormByReductions(),
        NearestGatherByResize(),
        PixelMapByOneHot(),
        InputReshapedAtStart(),
    ]


def answered_keys(library: list[ExactRewrite]) -> dict[str, list[str]]:
    """Gate key -> the rewrites that answer it, for naming why a refusal stays unanswered."""
    out: dict[str, list[str]] = {}
    for rewrite in library:
        for key in rewrite.answers:
            out.setdefault(key, []).append(rewrite.name)
    return out
