"""GroupNorm as the exporter writes it (Reshape to [B, G, -1], InstanceNormalization, Reshape back) rewritten
on images, with ops the record lists: the same statistics over the same elements (`naf_rewrites.groupnorm`
in torch; here on any ONNX graph).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxscript import ir

from .base import ExactRewrite, const, ints, static_shape

BLOCK = 16  # the most elements one pooling level sums along an axis (`pool_levels`)


def pool_levels(n: int, most: int | None = BLOCK) -> list[int]:
    """Factors of `n` in order, each at most `most` where `n` allows (a prime factor above it stays whole),
    their product `n`; `most=None`: `[n]`, one level. A mean of equal blocks' means is the mean, exactly in
    real arithmetic; in float32 a sum over a block of b elements rounds by about b*eps at worst, so levels
    of at most 16 keep the rounding near that of a pairwise sum: onnxruntime's AveragePool sums its kernel
    in one running total, and one kernel over a 512 x 512 image rounded by 6e-5 of the mean (measured)."""
    if most is None or n <= most:
        return [n]
    out, rest = [], n
    while rest > most:
        factor = next((d for d in range(most, 1, -1) if rest % d == 0), rest)
        out.append(factor)
        rest //= factor
    return out + ([rest] if rest > 1 else [])


def _groups(x: ir.Value, grouped: ir.Value, back: ir.Value, scale: ir.Value, bias: ir.Value) -> int | str:
    """The group count when the chain is a GroupNorm without its own affine, else why not."""
    shape, s1, s2, gamma, beta = static_shape(x), ints(grouped), ints(back), const(scale), const(bias)
    if shape is None or len(shape) != 4 or s1 is None or s2 is None or len(s1) != 3:
        return "not an image [B, C, H, W] grouped to rank 3 with static shapes"
    b, c, h, w = shape
    g = s1[1]
    if g <= 0 or c % g or s1[0] not in (b, 0) or s1[2] not in (-1, c // g * h * w):
        return "the Reshape does not group the channels of each image"
    if [d if d > 0 else shape[i] for i, d in enumerate(s2)] != list(shape):
        return "the second Reshape does not restore the image"
    if gamma is None or beta is None or not (np.all(gamma == 1) and np.all(beta == 0)):
        return "InstanceNormalization carries a scale or bias of its own"
    return g


class GroupNormByReductions(ExactRewrite):
    """Fires on Reshape([B, C, H, W] -> [B, G, C/G*H*W]), InstanceNormalization (scale 1, bias 0),
    Reshape back. Each channel's mean over the image is an AveragePool over the whole image, the group's
    mean a constant 1x1 Conv (1/(C/G) on the group's channels) of those; the variance the same on the
    centred square; then x - mean over Sqrt(var + eps). The same biased statistics of the same elements,
    summed in another order: the proof's float32 tolerance covers that rounding, nothing else. The image
    mean is taken in levels (`pool_levels`: AveragePools of at most `BLOCK` x `BLOCK`, each stride its
    kernel), so its rounding stays within that tolerance at any image size."""

    answers = ("op:InstanceNormalization",)

    def __init__(self, block: int | None = BLOCK) -> None:
        super().__init__()
        self.block = block  # None: one AveragePool over the whole image (the tests show its rounding)

    def pattern(self, op: Any, x: ir.Value, grouped: ir.Value, back: ir.Value, scale: ir.Value, bias: ir.Value) -> Any:
        norm = op.InstanceNormalization(op.Reshape(x, grouped), scale, bias, _outputs=["norm"])
        return op.Reshape(norm, back)

    def holds(
        self, x: ir.Value, grouped: ir.Value, back: ir.Value, scale: ir.Value, bias: ir.Value, **_: Any
    ) -> str | None:
        found = _groups(x, grouped, back, scale, bias)
        return found if isinstance(found, str) else None

    def rewrite(
        self, op: Any, x: ir.Value, grouped: ir.Value, back: ir.Value, scale: ir.Value, bias: ir.Value, norm: ir.Value
    ) -> Any:
        groups = _groups(x, grouped, back, scale, bias)
        shape = static_shape(x)
        assert isinstance(groups, int) and shape is not None
        _, c, h, w = shape
        k = c // groups
        dtype = np.dtype(x.dtype.numpy()) if x.dtype is not None else np.dtype(np.float32)
        average = np.kron(np.eye(groups), np.full((k, k), 1.0 / k)).astype(dtype).reshape(c, c, 1, 1)
        weight = self.constant(op, average)

        rows, cols = pool_levels(h, self.block), pool_levels(w, self.block)
        levels = max(len(rows), len(cols))
        kernels = [[(rows + [1] * levels)[i], (cols + [1] * levels)[i]] for i in range(levels)]

        def group_mean(t: Any) -> Any:
            for kernel in kernels:
                t = op.AveragePool(t, kernel_shape=kernel, strides=kernel)
            return op.Conv(t, weight)

        centred = op.Sub(x, group_mean(x))
        variance = group_mean(op.Mul(centred, centred))
        node = norm.producer()
        eps = node.attributes.get("epsilon") if node is not None else None
        epsilon = self.constant(op, np.array(eps.as_float() if eps is not None else 1e-5, dtype=dtype))
        return op.Div(centred, op.Sqrt(op.Add(variance, epsilon)))
