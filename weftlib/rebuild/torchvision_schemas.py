"""The two torchvision operator schemas declared before torchvision is imported, so it imports beside CPU torch.

The PyPI torchvision 0.28.0 built for torch 2.13 is a CUDA build: its `_C.so` needs `libc10_cuda.so`, fails to
load beside the CPU torch, and `import torchvision` then stops at registering the Python fallback of
`torchvision::nms` ("operator torchvision::nms does not exist"). Declaring the schemas of `nms` and `qnms`
(without kernels) lets the import finish. No export calls them (detectors are cut before their NMS), and a
call would raise for want of a kernel, never compute something wrong. `declare()` is idempotent and does
nothing where the compiled extension loaded.
"""

from __future__ import annotations

import functools

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


@functools.cache
def declare() -> None:
    """Declare `torchvision::nms` and `torchvision::qnms` unless torchvision's own library is already loaded."""
    import torch

    if _defined("torchvision::nms"):
        return
    library = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        library.define(schema)
    _LIBRARIES.append(library)


_LIBRARIES: list[object] = []  # a Library unregisters its definitions when collected


def _defined(qualified: str) -> bool:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(qualified, "")
    except RuntimeError:
        return False
    return True
