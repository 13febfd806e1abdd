"""02: natten's 2-D neighborhood attention exported exactly, with standard ONNX ops only.

`na2d` is the one public entry (as `natten.functional.na2d`, in `neighborhood`); `method` picks the
formulation (`formulations`, built on the index math in `index_math`). `reference` runs real natten, the
reference every formulation is proven against, and `swap` routes an unmodified model's natten calls to a
formulation for export. Around them: `naf` (NAF's upsampler with natten swapped out, and real natten as
the reference), `geometry` (one call's shape and its inputs), `calls` (each backend's call on a geometry),
`equality` (every formulation against natten), `benchmark` (time and peak memory per formulation and
backend), `device_layout` (images in and out of the 5-D layout) and `image_shift` (the formulation computed
entirely in the image layout, no Reshape: the device layout chosen from the public record).
"""

from .neighborhood import METHODS, NA2d, Pair, na2d, upsample_nearest
from .reference import natten_reference
from .swap import lowres_from_full, rebound_na2d, swap_natten

__all__ = [
    "METHODS",
    "NA2d",
    "Pair",
    "lowres_from_full",
    "na2d",
    "natten_reference",
    "rebound_na2d",
    "swap_natten",
    "upsample_nearest",
]
