"""The rules before issue 42 narrowed them, as data, so the RFD's graphs can be judged before and after.

The narrowing (12ae275) split forms off three refusal rules: the forms the real exporters' graphs showed parsed
(YOLO11's flattened head split, onnxsim's unit batch around a Gemm) or that no run shows (NAF's rank-5 head split,
windows stacked as a batch, the NCHW Transpose around timm's LayerNorm2d) became rules of their own, with their own
evidence. `SPLIT_FROM` names each split-off rule and the rule it was split from; `rules_before` folds them back:
while it is open, each split-off rule judges under its parent's name (so with the parent's evidence), on the op
types the parent judged. That is "before": the same detectors and today's evidence, the narrowing undone. The
narrowing's other changes (head splits read across a unit batch, new parse evidence) are not undone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import onnx

from . import rules as R
from .formats import Context

SPLIT_FROM: dict[str, str] = {
    "image_heads_flattened": "image_channel_split",  # [1, C, H, W] -> [1, h, c', H*W]: YOLO11's C2PSA, parsed
    "image_channel_split_other": "image_channel_split",  # into rank 5 (NAF's head split) or other: unjudged
    "batch_axis_windows": "batch_axis",  # windows stacked as a batch, rank 3 or more: unjudged
    "leading_unit_axis": "batch_axis",  # [1, S, C] <-> [S, C] around a Gemm: parsed in the zoo's ViTs
    "channels_last_transpose_nchw": "channels_last_transpose",  # NCHW graphs' LayerNorm2d Transposes: unjudged
}


def _as_parent(child: R.Rule, parent: R.Rule) -> R.Rule:
    """`child`'s detector under `parent`'s name, on the op types both judge."""

    class AsParent(R.Rule):
        name = parent.name
        judges = tuple(op for op in child.judges if op in parent.judges)
        downstream = child.downstream

        def match(self, ctx: Context, subject: onnx.NodeProto | str | None) -> str | None:
            return child.match(ctx, subject)

        def example(self) -> onnx.ModelProto:
            return child.example()

    return AsParent()


@contextmanager
def rules_before() -> Iterator[dict[str, str]]:
    """Within the block, the gate judges with the split-off rules folded back into their parents (the module
    docstring); yields `SPLIT_FROM`. The rule table is restored on leaving, whatever happens inside."""
    saved = dict(R.RULES)
    try:
        for child, parent in SPLIT_FROM.items():
            rule = R.RULES.pop(child)
            R.RULES[f"{child} as {parent}"] = _as_parent(rule, saved[parent])
        yield dict(SPLIT_FROM)
    finally:
        R.RULES.clear()
        R.RULES.update(saved)
